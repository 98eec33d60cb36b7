"""A memory's files are its owner's alone: directories 0700, files 0600, whatever the umask (docs/DESIGN.md §1).

Why the umask rather than a chmod of what pcm writes: most files of a memory are written by libraries whose
create calls pcm never sees: RocksDB under Oxigraph (tables, logs and its lock, some created by background
compaction threads at any moment) and LanceDB (fragments, manifests, versions). The process umask is the one rule
every create honours, in this process and in the children it starts (``pcm serve``'s engine, the query worker).
So while a memory is open (:func:`hold`), the process umask is the one it had with the group and other bits added
(``| 0o077``); when the last memory of the process closes, the umask it had before is put back.

Library use: the umask is process-wide. While a :class:`pcm.Memory` is open, what the host application creates
elsewhere is created owner-only too (never wider than it asked for); the previous umask returns at the last close.
An application that needs wider modes meanwhile sets them with ``chmod`` or keeps its memories in another process.

Repair: a memory made by an older pcm, or copied under a default umask, has directories 0755 and files 0644. An
open (and ``pcm init`` over an existing directory) takes the group and other bits off the whole directory tree and
logs one warning line saying how many paths it tightened. To keep every open fast, the tree is walked only when the
memory directory or one of its direct entries is open to others: everything inside was created under the umask.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: Bits a memory's files and directories never have: read, write and search for the group and for others.
OPEN_BITS = 0o077

_lock = threading.Lock()
_holders = 0
_previous_umask: int | None = None


@dataclass
class Hold:
    """One open memory's share of the owner-only umask; :meth:`release` once, when the memory closes."""

    directory: Path
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Give the share back; the last one restores the umask the process had. A second call does nothing."""
        global _holders, _previous_umask
        with _lock:
            if self._released:
                return
            self._released = True
            _holders -= 1
            if _holders == 0 and _previous_umask is not None:
                os.umask(_previous_umask)
                _previous_umask = None


def hold(directory: Path) -> Hold:
    """Make what this process creates owner-only until the returned hold is released, and tighten ``directory``'s
    tree if it is open to others (one warning line when it was)."""
    global _holders, _previous_umask
    with _lock:
        if _holders == 0:
            previous = os.umask(OPEN_BITS)
            os.umask(previous | OPEN_BITS)
            _previous_umask = previous
        _holders += 1
    try:
        tighten(directory)
    except BaseException:
        Hold(directory).release()
        raise
    return Hold(directory)


def tighten(directory: Path) -> int:
    """Take the group and other bits off ``directory``'s tree when it or a direct entry has them; the number of
    paths changed (0 when the tree was private, or ``directory`` does not exist yet)."""
    if not _open_at_top(directory):
        return 0
    changed = refused = 0
    for top, dirs, files in os.walk(directory):
        for name in (top, *(os.path.join(top, d) for d in dirs), *(os.path.join(top, f) for f in files)):
            outcome = _make_private(name)
            changed += outcome is True
            refused += outcome is None
    if changed:
        log.warning("pcm: warning: memory %s was open to other users: made %d paths owner-only "
                    "(directories 0700, files 0600)", directory, changed)
    if refused:
        log.warning("pcm: warning: memory %s: %d paths are open to other users and not yours to change "
                    "(chmod -R go-rwx as their owner)", directory, refused)
    return changed


def _open_at_top(directory: Path) -> bool:
    try:
        if _is_open(directory.lstat()):
            return True
        with os.scandir(directory) as entries:
            return any(_is_open(entry.stat(follow_symlinks=False)) for entry in entries if not entry.is_symlink())
    except FileNotFoundError:
        return False


def _is_open(info: os.stat_result) -> bool:
    return bool(info.st_mode & OPEN_BITS) and not stat.S_ISLNK(info.st_mode)


def _make_private(path: str) -> bool | None:
    """True when ``path`` was open and is now private, False when there was nothing to do, None when not allowed.
    Symbolic links are left alone (a chmod would change their target, which may lie outside the memory)."""
    try:
        info = os.lstat(path)
        if not _is_open(info):
            return False
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~OPEN_BITS)
        return True
    except FileNotFoundError:  # removed meanwhile (a compaction's temporary file)
        return False
    except PermissionError:
        return None
