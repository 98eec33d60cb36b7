"""Conversations as pcm reads them, whatever file they came from.

Parsers for each source format turn a file into :class:`Conversation` objects; everything downstream (provenance,
extraction, index) sees only these. Roles are closed: ``user`` (the memory's owner), ``assistant`` (the AI),
``system``, and ``other`` (a third person speaking, e.g. LoCoMo's second speaker).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pcm.errors import BadText, BadTime, InputError, InputTooLarge, UsageError
from pcm.resources import samples_dir

ROLES = ("user", "assistant", "system", "other")


@dataclass(frozen=True)
class Utterance:
    """One turn of a conversation, before it becomes a ``sioc:Post``."""

    session: str
    """The source's own session / conversation id (stable across re-imports)."""
    position: int
    """0-based position of the turn within its session."""
    role: str
    content: str
    speaker: str | None = None
    """Display name of who spoke ("Caroline"); ``None`` lets the role decide."""
    timestamp: datetime | None = None
    """When it was said (the message time that anchors "yesterday"); naive means local time as written."""
    source_id: str | None = None
    """The source's own message id (LoCoMo ``D1:3``); kept as ``dcterms:identifier``."""


@dataclass(frozen=True)
class PostRecord:
    """One stored ``sioc:Post``: keyed by its IRI, placed by session and position.

    What the store lists and the side index holds (the index is derived from the store), so it lives below both.
    """

    iri: str
    session: str
    role: str
    speaker: str | None
    time: datetime | None
    text: str
    source_id: str | None
    position: int


@dataclass
class Conversation:
    id: str
    utterances: list[Utterance] = field(default_factory=list)
    title: str | None = None
    started: datetime | None = None
    """The session's own date when the source gives one (LoCoMo / LongMemEval session dates)."""
    source: str | None = None
    """Where it was read from (a file, ``--text``, a request body), so a refusal at ingest can name it."""


# --------------------------------------------------------------------------------------------------------------------
# Parsers. Every one is pure (reads the file, returns dataclasses) and reports bad input as one InputError line that
# names the file, the conversation or line, and the problem, so a person can fix the file without a traceback.
# --------------------------------------------------------------------------------------------------------------------

FORMATS = ("json", "jsonl", "locomo", "longmemeval")

ROLE_ALIASES = {"human": "user", "ai": "assistant", "bot": "assistant", "model": "assistant"}
"""Spellings other tools use for our roles; anything else is refused rather than guessed."""

DEFAULT_MAX_UTTERANCE_CHARS = 50_000
"""Longest utterance an ingest accepts (``PCM_MAX_UTTERANCE_CHARS``): about 12k tokens, ten times the longest turn
in the LoCoMo and LongMemEval data, while a recall of ten posts stays well under a megabyte."""
MAX_NAME_CHARS = 1_000
"""Longest id, speaker name or title: these are labels, and a pasted paragraph in one is a mistake."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_CLOCK_ON_DATE = re.compile(  # LoCoMo: "1:56 pm on 8 May, 2023"
    r"(?P<h>\d{1,2}):(?P<mi>\d{2})\s*(?P<ampm>[ap])\.?m\.?\s+on\s+(?P<d>\d{1,2})\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{4})",
    re.IGNORECASE,
)
_SLASHED = re.compile(  # LongMemEval: "2023/05/08 (Mon) 13:56"; weekday and time optional
    r"(?P<y>\d{4})/(?P<mo>\d{1,2})/(?P<d>\d{1,2})(?:\s*\([a-z]+\))?(?:\s+(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2}))?)?",
    re.IGNORECASE,
)
_DAY_MONTH_YEAR = re.compile(r"(?P<d>\d{1,2})\s+(?P<mon>[a-z]+)\.?,?\s+(?P<y>\d{4})", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(r"(?P<mon>[a-z]+)\.?\s+(?P<d>\d{1,2}),?\s+(?P<y>\d{4})", re.IGNORECASE)
_LOCOMO_SESSION = re.compile(r"session_(\d+)")


def sample_paths() -> list[Path]:
    """The bundled sample conversations (json format), in chronological order; ``questions.json`` is not one."""
    return sorted(p for p in samples_dir().glob("*.json") if p.name != "questions.json")


def parse_timestamp(value: str, what: str = "") -> datetime:
    """Read a message or session time in any shape our sources use.

    ISO 8601 (offset kept; naive stays naive = local time as written), LongMemEval's ``2023/05/08 (Mon) 13:56``,
    LoCoMo's ``1:56 pm on 8 May, 2023``, and bare dates (``2023-05-08``, ``2023/05/08``, ``8 May, 2023``,
    ``May 8, 2023``), which mean midnight. Month names are matched in English without the locale, so the result does
    not depend on the machine. The weekday in LongMemEval dates is ignored, never checked. A time without an offset
    stays naive here: the memory reads it in its own zone when it stores it (``Memory.when``, ``Memory.ingest``).
    ``what`` names the value in the one :class:`~pcm.errors.BadTime` line a time that cannot be read gives.
    """
    where = f"{what}: " if what else ""
    text = value.strip() if isinstance(value, str) else None
    if not text:
        raise BadTime(f"{where}timestamp must be a non-empty string, got {_show(value)}")
    try:
        return _parse_timestamp_text(text)
    except ValueError as err:
        raise BadTime(f"{where}unrecognised timestamp {_show(value)} ({err})") from None


def parse_text_utterance(
    text: Any,
    *,
    session: Any,
    role: Any,
    at: datetime | None,
    speaker: Any = None,
    where: str = "utterance",
) -> Utterance:
    """One utterance typed or piped in directly, outside any file.

    Without a session, notes said on the same day share a thread ``note:YYYY-MM-DD`` (``note`` when there is no
    time either), so a day's jottings read as one conversation. The position is 0: the caller, which knows how many
    posts the session already has, replaces it (``dataclasses.replace``). Values may come straight from a JSON body,
    so each is checked for its type as well; ``where`` names the source in errors (``--text``, a request body).
    """
    content = _content(text, where)
    if session is None:
        session = f"note:{at.date().isoformat()}" if at is not None else "note"
    elif not isinstance(session, str) or not session.strip():
        raise InputError(f"{where}: session id must be non-empty text, found {_show(session)}")
    else:
        session = _checked(session, "session id", where, MAX_NAME_CHARS)
    return Utterance(
        session=session,
        position=0,
        role=_role(role, where),
        content=content,
        speaker=_optional_text(speaker, "speaker", where),
        timestamp=at,
    )


def parse_messages(data: Any, *, key: str | None = None, where: str = "request body") -> Conversation:
    """A chat as assistants' APIs send it: ``{"messages": [{"role": ..., "content": ...}, ...]}``.

    ``conversation_id``, ``title`` and ``started`` are optional, as are each message's ``id``, ``speaker`` and
    ``timestamp``. Without a conversation id the session is named from ``key`` (the client's idempotency key) or
    else from a digest of the messages themselves, so sending the same body twice lands on the same posts and
    stores nothing new, while two different chats (even with a turn of the same text) are two sessions.
    """
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object with 'messages', found {_kind(data)}")
    if data.get("conversation_id") is None:
        if not isinstance(data.get("messages"), list):
            raise InputError(f"{where}: 'messages' must be a list, found {_kind(data.get('messages'))}")
        basis = key if key is not None else json.dumps(data["messages"], sort_keys=True, ensure_ascii=False)
        # surrogatepass: a lone surrogate must reach the message checks below, which name it, not fail the digest
        digest = hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        data = {**data, "conversation_id": f"chat-{digest}"}
    return _conversation(data, where, "conversation")


def detect_format(path: Path) -> str:
    """Which of :data:`FORMATS` a file is in: judged by its content, except that ``.jsonl`` always means JSON lines."""
    path = Path(path)
    return _detect(path, _read_text(path))[0]


def parse_file(path: Path, fmt: str | None = None) -> list[Conversation]:
    """Every conversation in ``path``, in file order; ``fmt`` skips detection (one of :data:`FORMATS`)."""
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown conversation format {fmt!r} (choose one of: {', '.join(FORMATS)})")
    path = Path(path)
    text = _read_text(path)
    if fmt is None:
        fmt, data = _detect(path, text)
    else:
        data = None if fmt == "jsonl" else _load_json(path, text)
    if fmt == "jsonl":
        conversations = _parse_jsonl(path, text)
    elif fmt == "json":
        conversations = _parse_json(path, data)
    elif fmt == "locomo":
        conversations = parse_locomo(path, data)
    else:
        conversations = _parse_longmemeval(path, data)
    for conversation in conversations:
        conversation.source = str(path)
    return conversations


def check_conversations(conversations: Sequence[Conversation], *, max_chars: int) -> None:
    """Refuse, before anything is written, what an ingest could not store whole.

    The parsers already refuse what a file gets wrong; this is the same check for conversations built in code (the
    Python API, a request body), plus what depends on settings (``max_chars``, the longest utterance) and on the
    batch as a whole: the same conversation given twice with different turns (from two files, say) would otherwise
    keep the first copy's turns and the second's extra ones. Raises :class:`InputError` naming the source,
    conversation and message.
    """
    said: dict[tuple[str, str], tuple[str, str]] = {}
    for conversation in conversations:
        origin = f"{conversation.source}: " if conversation.source else ""
        if not isinstance(conversation.id, str) or not conversation.id.strip():
            raise InputError(f"{origin}conversation id must be non-empty text, found {_show(conversation.id)}")
        where = f"{origin}conversation {conversation.id!r}"
        _checked(conversation.id, "conversation id", origin + "conversation", MAX_NAME_CHARS)
        if conversation.title is not None:
            _optional_text(conversation.title, "title", where)
        if conversation.started is not None and not isinstance(conversation.started, datetime):
            raise InputError(f"{where}: started must be a date and time, found {_kind(conversation.started)}")
        if not isinstance(conversation.utterances, list | tuple):
            raise InputError(f"{where}: utterances must be a list, found {_kind(conversation.utterances)}")
        for index, utterance in enumerate(conversation.utterances):
            if not isinstance(utterance, Utterance):
                raise InputError(f"{where}, message {index}: expected an utterance, found {_kind(utterance)}")
            label = f"{where}, message {index}"
            if utterance.source_id is not None:
                label = f"{where}, message {_id(utterance.source_id, 'id', label)!r}"
            if utterance.session != conversation.id:
                raise InputError(f"{label}: belongs to session {_show(utterance.session)}, not to its conversation")
            if not isinstance(utterance.position, int) or isinstance(utterance.position, bool) or utterance.position < 0:
                raise InputError(f"{label}: position must be a whole number >= 0, found {_show(utterance.position)}")
            if utterance.role not in ROLES:
                raise InputError(f"{label}: unknown role {_show(utterance.role)} (allowed: {', '.join(ROLES)})")
            content = _content(utterance.content, label)
            if len(content) > max_chars:
                raise InputTooLarge(
                    f"{label}: the utterance is {len(content):,} characters long, over the limit of {max_chars:,} "
                    "(PCM_MAX_UTTERANCE_CHARS); split it into several messages"
                )
            _optional_text(utterance.speaker, "speaker", label)
            if utterance.timestamp is not None and not isinstance(utterance.timestamp, datetime):
                raise InputError(f"{label}: timestamp must be a date and time, found {_kind(utterance.timestamp)}")
            key = (conversation.id, utterance.source_id or f"#{utterance.position}")
            turn = (utterance.role, content)
            if said.setdefault(key, turn) != turn:
                raise InputError(f"{label}: given twice in this ingest with different text or role")


# -- timestamps --------------------------------------------------------------------------------------------------------


def _parse_timestamp_text(text: str) -> datetime:
    """Try each known shape in turn; raise ValueError naming what was expected."""
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(text[:-1] + "Z" if text.endswith("z") else text)
    if m := _CLOCK_ON_DATE.fullmatch(text):
        hour = int(m["h"])
        if not 1 <= hour <= 12:
            raise ValueError(f"hour {hour} is not on a 12-hour clock")
        hour = hour % 12 + (12 if m["ampm"].lower() == "p" else 0)
        return datetime(int(m["y"]), _month(m["mon"]), int(m["d"]), hour, int(m["mi"]))
    if m := _SLASHED.fullmatch(text):
        return datetime(
            int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"] or 0), int(m["mi"] or 0), int(m["s"] or 0)
        )
    if m := _DAY_MONTH_YEAR.fullmatch(text) or _MONTH_DAY_YEAR.fullmatch(text):
        return datetime(int(m["y"]), _month(m["mon"]), int(m["d"]))
    raise ValueError(
        "expected ISO 8601, '2023/05/08 (Mon) 13:56', '1:56 pm on 8 May, 2023' or a date such as '8 May, 2023'"
    )


def _month(name: str) -> int:
    try:
        return _MONTHS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown month {name!r}") from None


# -- reading and detection ---------------------------------------------------------------------------------------------


def read_text(path: Path) -> str:
    """A UTF-8 text file given on the command line; a missing, unreadable or non-UTF-8 file is one InputError line."""
    return _read_text(Path(path))


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise InputError(
            f"{path}: not UTF-8 text: invalid byte 0x{err.object[err.start]:02X} at line {line} (byte offset {err.start})"
        ) from None
    except OSError as err:
        raise InputError(f"{path}: cannot read ({err.strerror or err})") from None


def _load_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{path}: malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None


def _detect(path: Path, text: str) -> tuple[str, Any]:
    """Return the format and, for whole-file JSON formats, the parsed data so it is not parsed twice."""
    if not text.strip():
        raise InputError(f"{path}: file is empty")
    if path.suffix.lower() == ".jsonl":
        return "jsonl", None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if _first_line_is_object(text):
            return "jsonl", None
        raise InputError(
            f"{path}: malformed JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None
    fmt = _shape(data)
    if fmt is None:
        raise InputError(
            f"{path}: unknown conversation format (expected objects with 'messages', a LoCoMo 'conversation', "
            f"LongMemEval 'haystack_sessions', or JSON lines); found {_kind(data)}"
        )
    return fmt, data


def _first_line_is_object(text: str) -> bool:
    first = next(line for line in _lines(text) if line.strip())
    try:
        return isinstance(json.loads(first), dict)
    except (json.JSONDecodeError, RecursionError):
        return False


def _lines(text: str) -> list[str]:
    """JSON lines are split at line feeds only: ``str.splitlines`` would also split at U+2028, U+0085 and other
    separators that JSON allows raw inside a string."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def _shape(data: Any) -> str | None:
    """Name the format from the keys of the first item; ``None`` when nothing fits."""
    if isinstance(data, list) and not data:
        return "json"
    first = data[0] if isinstance(data, list) else data
    if not isinstance(first, dict):
        return None
    if "haystack_sessions" in first:
        return "longmemeval"
    if isinstance(first.get("conversation"), dict):
        return "locomo"
    if "messages" in first:
        return "json"
    if isinstance(data, dict) and "role" in first and "content" in first:
        return "jsonl"  # a one-line JSON-lines file
    return None


# -- json and jsonl ----------------------------------------------------------------------------------------------------


def _parse_json(path: Path, data: Any) -> list[Conversation]:
    items = [data] if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a conversation object or a list of them, found {_kind(data)}")
    conversations = [
        _conversation(item, str(path), f"conversation #{index}") for index, item in enumerate(items)
    ]
    _check_unique_ids(path, conversations)
    return conversations


def _parse_jsonl(path: Path, text: str) -> list[Conversation]:
    """Lines are message objects (grouped by ``conversation_id``/``session``) or whole conversation objects."""
    built: dict[str, Conversation | list[tuple[str, dict[str, Any]]]] = {}
    for lineno, line in enumerate(_lines(text), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: malformed JSON at column {err.colno}: {err.msg}") from None
        except RecursionError:
            raise InputError(f"{where}: JSON nested too deeply to read") from None
        if not isinstance(obj, dict):
            raise InputError(f"{where}: expected a message or conversation object, found {_kind(obj)}")
        if "messages" in obj:
            conversation = _conversation(obj, where, "conversation")
            if conversation.id in built:
                raise InputError(f"{where}: conversation id {conversation.id!r} appears twice")
            built[conversation.id] = conversation
            continue
        session = _id(obj.get("conversation_id", obj.get("session")), "conversation_id or session", where)
        lines = built.setdefault(session, [])
        if isinstance(lines, Conversation):
            raise InputError(f"{where}: conversation id {session!r} appears twice")
        lines.append((where, obj))
    return [
        entry if isinstance(entry, Conversation) else _conversation_from_lines(path, session, entry)
        for session, entry in built.items()
    ]


def _conversation_from_lines(
    path: Path, session: str, lines: list[tuple[str, dict[str, Any]]]
) -> Conversation:
    utterances = [
        _message(obj, f"{where}: conversation {session!r}", session, position)
        for position, (where, obj) in enumerate(lines)
    ]
    _check_unique_messages(f"{path}: conversation {session!r}", utterances)
    return Conversation(id=session, utterances=utterances)


def _conversation(obj: Any, prefix: str, unnamed: str) -> Conversation:
    """A conversation object; errors read ``<prefix>: conversation 'id'`` once the id is known, else ``unnamed``."""
    if not isinstance(obj, dict):
        raise InputError(f"{prefix}: {unnamed}: expected a conversation object, found {_kind(obj)}")
    cid = _id(obj.get("conversation_id"), "conversation_id", f"{prefix}: {unnamed}")
    where = f"{prefix}: conversation {cid!r}"
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise InputError(f"{where}: 'messages' must be a list, found {_kind(messages)}")
    if not messages:
        raise InputError(f"{where}: has no messages")
    utterances = [_message(message, where, cid, position) for position, message in enumerate(messages)]
    _check_unique_messages(where, utterances)
    started = obj.get("started")
    return Conversation(
        id=cid,
        utterances=utterances,
        title=_optional_text(obj.get("title"), "title", where),
        started=None if started is None else _timestamp(started, where),
    )


def _message(obj: Any, where: str, session: str, position: int) -> Utterance:
    """One message object: ``role`` and ``content`` required; ``timestamp``, ``id``, ``speaker`` optional."""
    label = f"{where}, message {position}"
    if not isinstance(obj, dict):
        raise InputError(f"{label}: expected a message object, found {_kind(obj)}")
    source_id = None if obj.get("id") is None else _id(obj["id"], "id", label)
    if source_id is not None:
        label = f"{where}, message {source_id!r}"
    stamp = obj.get("timestamp")
    content = obj.get("content")
    if isinstance(content, list):
        content = _text_parts(content, label)
    return Utterance(
        session=session,
        position=position,
        role=_role(obj.get("role"), label),
        content=_content(content, label),
        speaker=_optional_text(obj.get("speaker"), "speaker", label),
        timestamp=None if stamp is None else _timestamp(stamp, label),
        source_id=source_id,
    )


def _text_parts(parts: list[Any], where: str) -> str:
    """OpenAI-style content parts (``[{"type": "text", "text": ...}, {"type": "image_url", ...}]``): the text
    parts joined by blank lines. Other parts are not text pcm can store; a message with no text part is refused."""
    texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)]
    if not texts:
        raise InputError(f"{where}: content has no text part (pcm stores text)")
    return "\n\n".join(t.strip() for t in texts if t.strip())


# -- LoCoMo ------------------------------------------------------------------------------------------------------------


def parse_locomo(path: Path, data: Any) -> list[Conversation]:
    """One Conversation per session, ``<sample_id>:session_N``, in session-number order.

    Public so the evaluation loader can parse one already-decoded sample (``data`` is a sample object or a list
    of them; ``path`` only labels errors) and keep its ``qa`` next to the conversations.

    Every turn carries the session's date-time unchanged: LoCoMo gives no per-turn time, and inventing seconds
    would put made-up data into ``dcterms:created``; order lives in ``position``. Sessions listed only by date
    (the file has ``session_N_date_time`` without turns) and empty sessions yield nothing.
    """
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise InputError(f"{path}: expected a list of LoCoMo samples, found {_kind(data)}")
    conversations: list[Conversation] = []
    for index, sample in enumerate(samples):
        where = f"{path}: sample #{index}"
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise InputError(
                f"{where}: expected an object with a 'conversation' object, found {_kind(sample)}"
            )
        sample_id = _id(sample.get("sample_id"), "sample_id", where)
        conversations.extend(
            _locomo_sessions(f"{path}: sample {sample_id!r}", sample_id, sample["conversation"])
        )
    _check_unique_ids(path, conversations)
    return conversations


def _locomo_sessions(where: str, sample_id: str, body: dict[str, Any]) -> list[Conversation]:
    speakers = {
        _id(body.get("speaker_a"), "speaker_a", where): "user",
        _id(body.get("speaker_b"), "speaker_b", where): "other",
    }
    numbers = sorted(int(m[1]) for key in body if (m := _LOCOMO_SESSION.fullmatch(key)))
    conversations = []
    for number in numbers:
        key = f"session_{number}"
        cid = f"{sample_id}:{key}"
        turns = body[key]
        if not isinstance(turns, list):
            raise InputError(f"{where}: {key} must be a list of turns, found {_kind(turns)}")
        if not turns:
            continue
        date = body.get(f"{key}_date_time")
        started = None if date is None else _timestamp(date, f"{where}, {key}_date_time")
        utterances = [
            _locomo_turn(turn, f"{where}, {key}, turn {position}", cid, position, started, speakers)
            for position, turn in enumerate(turns)
        ]
        _check_unique_messages(f"{where}, {key}", utterances)
        conversations.append(Conversation(id=cid, utterances=utterances, started=started))
    return conversations


def _locomo_turn(
    turn: Any, where: str, cid: str, position: int, started: datetime | None, speakers: dict[str, str]
) -> Utterance:
    if not isinstance(turn, dict):
        raise InputError(f"{where}: expected a turn object, found {_kind(turn)}")
    speaker = _id(turn.get("speaker"), "speaker", where)
    if speaker not in speakers:
        names = " or ".join(repr(name) for name in speakers)
        raise InputError(f"{where}: speaker {speaker!r} is neither of the sample's speakers ({names})")
    text = turn.get("text")
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        photo = f"[shares a photo: {caption.strip()}]"
        text = f"{text.strip()} {photo}" if isinstance(text, str) and text.strip() else photo
    dia_id = turn.get("dia_id")
    return Utterance(
        session=cid,
        position=position,
        role=speakers[speaker],
        content=_content(text, where),
        speaker=speaker,
        timestamp=started,
        source_id=None if dia_id is None else _id(dia_id, "dia_id", where),
    )


# -- LongMemEval -------------------------------------------------------------------------------------------------------


def _parse_longmemeval(path: Path, data: Any) -> list[Conversation]:
    """One Conversation per haystack session, first appearance first; a session shared by questions is kept once.

    A shared session must have the same turns wherever it appears (otherwise the file is refused); its date is
    taken from its first appearance. ``has_answer`` flags are evaluation data and are not kept.
    """
    questions = [data] if isinstance(data, dict) else data
    if not isinstance(questions, list):
        raise InputError(f"{path}: expected a list of LongMemEval questions, found {_kind(data)}")
    seen: dict[str, Conversation] = {}
    for index, question in enumerate(questions):
        if not isinstance(question, dict):
            raise InputError(f"{path}: question #{index}: expected an object, found {_kind(question)}")
        qid = question.get("question_id")
        where = f"{path}: question {qid!r}" if isinstance(qid, str) else f"{path}: question #{index}"
        for conversation in longmemeval_sessions(where, question):
            earlier = seen.setdefault(conversation.id, conversation)
            if _turns(earlier) != _turns(conversation):
                raise InputError(f"{where}: session {conversation.id!r} differs from an earlier copy of it")
    return list(seen.values())


def longmemeval_sessions(where: str, question: dict[str, Any]) -> list[Conversation]:
    """The haystack sessions of one decoded LongMemEval question, in listed order; ``where`` labels errors.

    Public so the evaluation loader builds conversations exactly as ``parse_file`` does; unlike
    ``parse_file`` it does not deduplicate sessions shared between questions.
    """
    ids = list_field(question, "haystack_session_ids", where)
    dates = list_field(question, "haystack_dates", where)
    sessions = list_field(question, "haystack_sessions", where)
    if not len(ids) == len(dates) == len(sessions):
        raise InputError(
            f"{where}: haystack_session_ids, haystack_dates and haystack_sessions differ in length "
            f"({len(ids)}, {len(dates)}, {len(sessions)})"
        )
    conversations = []
    for raw_id, date, turns in zip(ids, dates, sessions, strict=True):
        sid = _id(raw_id, "haystack session id", where)
        label = f"{where}, session {sid!r}"
        started = None if date is None else _timestamp(date, label)
        if not isinstance(turns, list):
            raise InputError(f"{label}: expected a list of turns, found {_kind(turns)}")
        utterances = [
            _longmemeval_turn(turn, f"{label}, turn {position}", sid, position, started)
            for position, turn in enumerate(turns)
        ]
        conversations.append(Conversation(id=sid, utterances=utterances, started=started))
    return conversations


def _longmemeval_turn(turn: Any, where: str, sid: str, position: int, started: datetime | None) -> Utterance:
    if not isinstance(turn, dict):
        raise InputError(f"{where}: expected a turn object, found {_kind(turn)}")
    return Utterance(
        session=sid,
        position=position,
        role=_role(turn.get("role"), where),
        content=_content(turn.get("content"), where),
        timestamp=started,
        source_id=f"{sid}:{position}",
    )


def list_field(obj: dict[str, Any], name: str, where: str) -> list[Any]:
    """``obj[name]`` as a list; some copies of the data store it as Python/JSON literal text, decoded safely.

    Raises InputError naming ``where`` and ``name`` when the field is missing or not a list.
    """
    value = obj.get(name)
    if isinstance(value, str):
        value = _literal(value, f"{where}, {name}")
    if not isinstance(value, list):
        raise InputError(f"{where}: {name} must be a list, found {_kind(value)}")
    return value


def _literal(text: str, where: str) -> Any:
    """JSON first, then ``ast.literal_eval`` (literals only, never code) for Python-style quoting."""
    with contextlib.suppress(json.JSONDecodeError):
        return json.loads(text)
    try:
        return ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise InputError(f"{where}: text is neither a JSON nor a Python literal list") from None


def _turns(conversation: Conversation) -> list[tuple[str, str]]:
    return [(u.role, u.content) for u in conversation.utterances]


# -- field checks ------------------------------------------------------------------------------------------------------


def _role(value: Any, where: str) -> str:
    role = value.strip().lower() if isinstance(value, str) else None
    role = ROLE_ALIASES.get(role, role) if role else role
    if role not in ROLES:
        aliases = ", ".join(f"{alias}={target}" for alias, target in ROLE_ALIASES.items())
        raise InputError(
            f"{where}: unknown role {_show(value)} (allowed: {', '.join(ROLES)}; also accepted: {aliases})"
        )
    return role


def _content(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: content must be text, found {_kind(value)}")
    if not value.strip():
        raise InputError(f"{where}: content is empty")
    return _checked(value.strip(), "content", where)


def _id(value: Any, name: str, where: str) -> str:
    """Ids may be written as numbers; they are compared and stored as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise InputError(f"{where}: missing or empty {name}")
    if not isinstance(value, str):
        raise InputError(f"{where}: {name} must be text or a whole number, found {_kind(value)}")
    return _checked(value.strip(), name, where, MAX_NAME_CHARS)


def _optional_text(value: Any, name: str, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: {name} must be text, found {_kind(value)}")
    return _checked(value.strip(), name, where, MAX_NAME_CHARS) or None


def check_id(value: Any, name: str, where: str) -> str:
    """An id as the parsers take it (text, or a whole number kept as text), or one InputError line."""
    return _id(value, name, where)


def check_text(text: str, name: str, where: str) -> str:
    """``text`` unchanged when it can be stored and printed; else one InputError line naming ``where`` and ``name``
    and the position of the first invalid character (a byte that is not UTF-8, or a lone surrogate)."""
    return _checked(text, name, where)


def _checked(text: str, name: str, where: str, limit: int | None = None) -> str:
    """Text that can be stored: no lone surrogate, and no longer than ``limit`` characters.

    A lone surrogate is what Python makes of an invalid byte in a command-line argument, or what a JSON file
    spells ``"\\ud800"``; neither is a character, and no store can write it as UTF-8.
    """
    if bad := _SURROGATE.search(text):
        code = ord(bad.group())
        what = (
            f"the byte 0x{code - 0xDC00:02X}, which is not UTF-8"
            if 0xDC80 <= code <= 0xDCFF
            else "a lone surrogate, which is not a character"
        )
        raise BadText(f"{where}: {name} has an invalid character at position {bad.start()} (U+{code:04X}: {what})")
    if limit is not None and len(text) > limit:
        raise InputTooLarge(f"{where}: {name} is {len(text):,} characters long, over the limit of {limit:,}")
    return text


def _timestamp(value: Any, where: str) -> datetime:
    """A string in any :func:`parse_timestamp` shape, or Unix seconds (read as UTC)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise InputError(f"{where}: timestamp {value!r} is out of range") from None
    try:
        return parse_timestamp(value)
    except InputError as err:
        raise InputError(f"{where}: {err}") from None


def _check_unique_messages(where: str, utterances: list[Utterance]) -> None:
    seen: set[str] = set()
    for utterance in utterances:
        if utterance.source_id is None:
            continue
        if utterance.source_id in seen:
            raise InputError(f"{where}: duplicate message id {utterance.source_id!r}")
        seen.add(utterance.source_id)


def _check_unique_ids(path: Path, conversations: list[Conversation]) -> None:
    seen: set[str] = set()
    for conversation in conversations:
        if conversation.id in seen:
            raise InputError(f"{path}: conversation id {conversation.id!r} appears twice")
        seen.add(conversation.id)


def _kind(value: Any) -> str:
    """Name a JSON value's type the way the file's author would ("a list", "a string"), for error messages."""
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return "nothing" if value is None else names.get(type(value), type(value).__name__)


def _show(value: Any, limit: int = 60) -> str:
    """A value quoted for a one-line message, cut short so a pasted paragraph cannot flood the terminal."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
