"""Run a program that Linux stops when its starter goes: ``python -I -S deathsig.py PARENT_PID PROGRAM ARGS...``.

``pcm serve`` must not leave an orphan engine holding the store's lock, so the engine asks for
``PR_SET_PDEATHSIG``. That used to be a ``preexec_fn``, and a ``preexec_fn`` makes :mod:`subprocess` fork the whole
server: by the watchdog's first restart the server has LanceDB loaded, whose fork handler warns of a possible
deadlock in the child (its async runtime). Without a ``preexec_fn``, :mod:`subprocess` starts this script with
vfork and exec, which run no fork handlers; the fresh interpreter (stdlib only, nothing of pcm's) asks for the
signal in its own process and then becomes the program with ``exec``, which keeps it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    """Ask for SIGTERM at the starter's death, then exec the program; returns only if the starter is already gone."""
    parent, program = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the starter died before the signal was asked for: no one to serve
        return 1
    os.execv(program[0], program)  # becomes the program: does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
