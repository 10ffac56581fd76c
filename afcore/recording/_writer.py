"""Writing a run as one JSONL file: one writer, append-only, every line whole.

Every line is a record of ``_models`` (the loop hands the writer typed records and the values
they hold; the writer makes the rest), serialized once. The records of an iteration go out
together with one ``os.write`` on a file opened for appending, before the loop waits on
something outside it, ending with a ``seal``: a hash chain over every byte written, so that
the file is tamper-evident as a whole. A run killed at any point leaves only complete lines
(and at worst a torn last one, which readers report). The file is synced at iteration
boundaries, and closed, by one background thread of the process, so the loop never waits on
the disk; the process waits for it at exit.
"""

from __future__ import annotations

import atexit
import binascii
import errno
import fcntl
import functools
import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from pydantic import BaseModel

from afcore._signals import (
    leave_sigint_to_the_main_thread,
    yield_to_the_threads_that_wake_this_one,
)
from afcore.errors import ProviderError, RecordingWriteError, UsageError
from afcore.messages import (
    AssistantMessage,
    CacheBreakpoint,
    Message,
    Source,
    SystemSegment,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
)
from afcore.recording._format import CALL_FRAME
from afcore.recording._hashing import V11, canonical, request_digest, short_id, unseal
from afcore.recording._lossless import lossless
from afcore.recording._models import (
    KNOWN_TYPES,
    AttemptDecision,
    AttemptInfo,
    Call,
    CallTool,
    ErrorInfo,
    Header,
    InjectionDecisions,
    Line,
    ObserverError,
    Record,
    Segment,
    SlotDelta,
    SourceInfo,
    UsageInfo,
    Write,
    as_json,
    line,
    trusted,
)
from afcore.recording._redaction import Redactor
from afcore.recording._typed import record as _as_record
from afcore.recording._typed import unknown as _as_unknown

if TYPE_CHECKING:
    from afcore.recording._flows import FlowHeader, FlowRecord

__all__ = [
    "Frames",
    "NullRecorder",
    "RecordObserver",
    "Recorder",
    "Watcher",
    "Watchers",
    "error_info",
    "joins_history",
    "ranges",
    "round_ms",
    "usage_info",
    "usage_line",
    "wait_for_syncs",
]

RecordObserver = Callable[[dict[str, Any]], None]
"""Sees each record as it is written: its line, parsed."""
Watcher = Callable[[Any], None]
"""Sees each record as it is written, as the typed record the reader would give for it."""


class Watchers:
    """The observers attached to an agent. A run reads them at each record, so an observer
    attached while it runs sees the rest of it, and one detached sees no more."""

    def __init__(self, observers: Sequence[Watcher] = ()) -> None:
        self.observers: tuple[Watcher, ...] = tuple(observers)

    def attach(self, observer: Watcher) -> Callable[[], None]:
        """Attach ``observer``; returns the function that detaches it."""
        self.observers = (*self.observers, observer)

        def detach() -> None:
            kept = list(self.observers)
            if observer in kept:
                kept.remove(observer)
            self.observers = tuple(kept)

        return detach

    def copy(self) -> Watchers:
        return Watchers(self.observers)


_NO_WATCHERS = Watchers()


def watcher_name(observer: Any) -> str:
    name = getattr(observer, "name", None)
    if isinstance(name, str) and name:
        return name
    return str(getattr(observer, "__qualname__", None) or type(observer).__qualname__)


def joins_history(record: Any) -> bool:
    """Whether the messages a commit or reply writes join the run's history (and so its
    live window): the conversation continued, the user's message, the agent's replies that
    were kept, tool results, an output schema's correction. An injected message, a fold's
    summary, a summarizer's transcript and answer, and a reply a reliability rule refused
    are sent or stored, not remembered."""
    if record.t == "reply":
        kept = record.decision is None or record.decision.verb == "ok"
        return bool(kept and record.rsid.startswith("call-llm#"))
    stage = record.stage
    return stage in ("history", "seed", "output") or stage.startswith("tool:")


_SORTED = orjson.OPT_SORT_KEYS
_M = TypeVar("_M", bound=BaseModel)
_sha256 = hashlib.sha256
_dumps = orjson.dumps
_Fragment = orjson.Fragment
_id = V11.of
_ID_SIZE = V11.size
_SEAL_LINE = b'{"t":"seal","h":"'
_SEAL_END = b'"}\n'
_BLOB_OPEN = b'{"t":"blob","id":"'
_BLOB_ID = slice(len(_BLOB_OPEN), len(_BLOB_OPEN) + 22)
"""Where a blob line (as :meth:`Recorder._store_raw` makes it) holds its id."""
_b64 = binascii.b2a_base64
_URLSAFE = bytes.maketrans(b"+/", b"-_")
_monotonic = time.monotonic
_CALL_READS = ("system", "tools", "messages")
"""What an agent's call is composed from (a summarizer's call reads its transcript)."""
_FOLD_KEY = "fold:"

# The records of every iteration are made as lines of plain JSON, what they hold included:
# orjson writes them without calling back into Python.
_call: Any = line(Call, plain=True)
_write: Any = line(Write, plain=True)
_usage_line = line(UsageInfo)
_observer_error = line(ObserverError)
_delta = trusted(SlotDelta)
_error_info = trusted(ErrorInfo)
_segment = trusted(Segment)
_tool = trusted(CallTool)
_usage = trusted(UsageInfo)

INLINE_LIMIT = 256
"""Values whose JSON is longer than this many bytes are stored once as blobs and referred to."""
HOLD = 0.005
"""Seconds: records made within this long of the last write may wait for the next one
rather than go out before a sync tool runs (see :meth:`Recorder.before_tool`)."""
MESSAGE_INLINE = 2048
"""Messages whose canonical JSON is at most this long are written in the record that writes
them (a message is named by its number, so a blob would only add its framing); longer ones
are blobs, so that a reader indexing the file skips them unparsed."""
DELTA_MIN = 16
"""A slot list sharing at least this many first entries with the last full one is stored
as a delta of it."""
_NO_MESSAGES = "-" * 22
"""Stands for a call's messages' hash where a digest is cut around it (its length is all
that counts)."""
_Parts = tuple[str, str, dict[str, Any], int, bytes, bytes, list[dict[str, Any]]]
"""What frames a call: its system and tools refs, its params as written and the values
redacting them replaced, its request digest before and after the messages' hash, and its
cache breakpoints as written."""


class Frames:
    """What frames an agent's calls (its system and tools lists, its tool specs), as one run
    stored them: the ids and the blob lines, made once and written again by each run of the
    agent whose redactor replaces the same (:attr:`Redactor.shape`), with the same number
    of replacements counted. Held by the agent; its runs go one at a time."""

    LIMIT = 64

    def __init__(self) -> None:
        self.slots: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        """(slot key, redactor shape, the slot's base list) -> (items, hashes, ref, the base
        it stored, blob lines, blobs it needs stored before, count)"""
        self.specs: dict[tuple[Any, ...], tuple[ToolSpec, str, bytes, int]] = {}
        """(id of a spec, redactor shape) -> (the spec, its id, its blob line, count)"""
        self.decisions: dict[tuple[Any, ...], tuple[InjectionDecisions, str, bytes]] = {}
        """(id of an iteration's decisions, redactor shape) -> (them, their id, blob line)"""
        self.calls: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        """(model, ids of the first call's system, tools, params and cache, redactor shape)
        -> (those objects, the blobs stored before it, the blob lines it wrote, the values
        it replaced, what it added to the recorder's tables, its frame): the first call a
        run writes in full (see :meth:`Recorder._first_frame`)"""
        self.header: dict[tuple[Any, ...], tuple[dict[str, Any], int]] = {}
        """(redactor shape, watchers, name, model) -> the header's fields that are the
        agent's, screened and serialized, and how many values screening them replaced"""

    def keep(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        if len(table) >= self.LIMIT:
            table.clear()
        table[key] = value


class Recorder:
    """Appends the records of one run to ``path``. Used by the loop's thread only (tools in
    other threads report through the loop).

    Records are held until the loop is about to wait on something outside it (a model call,
    tools it awaits, a delay, a turn of the event loop) and then written together, with their
    seal, in one ``os.write``: one write per iteration for a loop whose tools run inline.
    """

    enabled = True
    # Slots: the loop reads these fields at every record. CPython keeps an instance's
    # attributes in a compact shared-key layout only up to 30 of them; past that each
    # instance has a dict of its own, grown as __init__ fills it, and read by hashing.
    __slots__ = (
        "_blobs",
        "_boundary",
        "_broken",
        "_chain",
        "_decision_refs",
        "_digests",
        "_entries",
        "_extra",
        "_extras",
        "_failed",
        "_fd",
        "_folder",
        "_frame",
        "_frames",
        "_history_digest",
        "_history_end",
        "_history_ranges",
        "_history_start",
        "_ids",
        "_last_slots",
        "_last_usage",
        "_list_bases",
        "_locked",
        "_messages",
        "_origin",
        "_params",
        "_pending",
        "_routes",
        "_same",
        "_slot_cache",
        "_slot_last",
        "_sources",
        "_spec_refs",
        "_stage_counter",
        "_sync_interval",
        "_synced",
        "_target",
        "_trusted",
        "_unnamed",
        "_watch",
        "_watched_frame",
        "_window",
        "_written",
        "clock",
        "observers",
        "path",
        "redactor",
        "run_id",
        "seq",
        "versions",
    )

    def __init__(
        self,
        path: Path | None,
        *,
        run_id: str,
        redactor: Redactor,
        clock: Callable[[], float] = time.perf_counter,
        observers: Sequence[RecordObserver] = (),
        sync_interval: float = 0.02,
        watchers: Watchers | None = None,
        fd: int | None = None,
        frames: Frames | None = None,
        origin: float | None = None,
        fresh: bool = False,
        split: tuple[str, str] | None = None,
    ) -> None:
        """``path`` None: records go to the observers only (an agent that does not record
        but is watched). ``fd``: the file opened already (see :meth:`continuing`).
        ``frames``: the agent's, shared by its runs. ``origin``: a reading of ``clock``
        from which each call's ``at`` is counted (a flow's agents' runs); None writes none.
        ``fresh``: the run id was made for this run (:func:`new_run_id`), so no file is
        looked for at ``path`` first; a name chosen by the caller is refused here when a
        recording has it. Either way the file is named without replacing another (a link),
        and a name taken meanwhile is refused then. ``split``: ``path``'s folder and file
        name as strings, when the caller has them (a Path's string is worked out from its
        parts when first asked for: ~30 us of a short run, cold)."""
        self.path = path
        self._origin = origin
        self._frames = frames
        self.run_id = run_id
        self.redactor = redactor
        self.clock = clock
        self.observers = tuple(observers)
        self._watch = watchers or _NO_WATCHERS
        self._failed: set[int] = set()
        """ids of the watchers that raised: they see no more records of this run"""
        self._watched_frame: dict[str, Any] = {}
        """The frame of the last call that wrote one (watchers see every call whole)."""
        self._locked = fd is not None
        """The file is locked (a continued run's): unlocked when the recorder closes."""
        self._folder: str | None = None
        """The folder the next run's file is made ahead in when this one closes."""
        self._unnamed: str | Path | None = None
        """The file's passing name until its first lines are written (see :meth:`flush`);
        :data:`_SPARE` for a file made ahead, which has no name until then."""
        self._target = ""
        """``path`` as a string: the name the file is given."""
        if fd is not None:
            self._fd = fd
        elif path is None:
            self._fd = -1
        else:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
            try:
                if not fresh and path.exists():
                    raise FileExistsError(path)
                # Worked on as strings: pathlib's parent and with_name cost ~5 us each.
                where, name = split if split is not None else os.path.split(path)
                self._target = os.path.join(where, name)
                folder = _absolute(where)
                self._fd = _SPARES.take(folder)
                if self._fd >= 0:
                    self._unnamed = _SPARE
                else:
                    # Made under a passing name and given its own once its header is in it:
                    # a run killed in between leaves no empty recording behind.
                    unnamed = os.path.join(where, f".{name}.part")
                    try:
                        self._fd = os.open(unnamed, flags, 0o644)
                    except FileNotFoundError:  # the folder first, then the file
                        path.parent.mkdir(parents=True, exist_ok=True)
                        self._fd = os.open(unnamed, flags, 0o644)
                    self._unnamed = unnamed
                self._folder = folder
            except FileExistsError:
                raise UsageError(
                    f"a recording already exists at {path}; choose another run id"
                ) from None
            except OSError as e:
                raise UsageError(f"cannot write a recording at {path}: {e.strerror}") from None
        self._broken = self._fd < 0
        """Nothing is written: there is no file (the run is watched, not recorded), or a
        write failed (a line after a torn one would be lost)."""
        self.seq = 0
        self._stage_counter = -1
        self.versions: dict[str, int] = {}
        """For each key, the seq of the commit that last wrote it."""
        self._pending: list[bytes] = []
        self._chain = b""
        """The last seal's 16 bytes (none before the first)."""
        self._blobs: set[str] = set()
        self._ids = bytearray()
        """The messages' ids, joined: message ``n``'s are at ``(n - 1) * 22``. A window's
        digest is one slice per range and one sha256, however many messages it holds."""
        self._messages = 0
        """How many messages are stored."""
        self._history_digest = _sha256()
        """sha256 over the ids of the history's messages: extended as they are appended, so
        the digest of a window that is the whole history costs nothing per call."""
        self._history_ranges: list[tuple[int, int]] = []
        """The history's message numbers as ranges (injected messages leave gaps)."""
        self._history_start = self._history_end = -1
        """The first and last message numbers of the history's last range (-1: none)."""
        self._window: tuple[list[tuple[int, int]], Any] = ([], None)
        """The last window a call named message by message, and the sha256 over its ids."""
        self._entries: dict[tuple[str, Source], tuple[str, Segment]] = {}
        """(system text, source) -> the text's id and its entry in a segment list (inline
        text, or a ref), made once."""
        self._spec_refs: dict[int, tuple[ToolSpec, str]] = {}
        self._sources: dict[Source, tuple[SourceInfo, dict[str, Any]]] = {}
        self._extra: tuple[Sequence[int] | None, bytes, list[tuple[int, int]]] = (None, b"", [])
        """The last call's extra messages, their ids joined, and their ranges."""
        self._extras: dict[int, tuple[Sequence[int], bytes, list[tuple[int, int]]]] = {}
        """The same for recent calls' lists, by id (each list kept, so its id stays its)."""
        self._list_bases: dict[str, tuple[str, list[Segment] | list[CallTool]]] = {}
        """Slot -> the last list stored in full (deltas name it)."""
        self._slot_last: dict[tuple[str, int], tuple[Sequence[Any], list[str], str]] = {}
        """(slot, id of a list) -> the list, its part hashes and its blob: the lists of the
        last calls (a rule flipping back and forth composes the same two lists)."""
        self._decision_refs: dict[int, tuple[InjectionDecisions, str]] = {}
        """The decisions an inject stage wrote, by id -> themselves and their blob."""
        self._slot_cache: dict[
            tuple[str, tuple[int, ...]], tuple[tuple[Any, ...], list[str], str]
        ] = {}
        self._last_slots: tuple[str, str] = ("", "")
        self._trusted: dict[tuple[str, str], Line] = {}
        self._routes: dict[str, Line] = {}
        """Where the loop went from a reply -> its write, made once."""
        self._params: dict[int, tuple[Mapping[str, Any], dict[str, Any], int]] = {}
        """Parameters as given (by id) -> themselves, as written (redacted), and how many
        values redacting them replaced (counted again at each call that writes them)."""
        self._digests: dict[tuple[Any, ...], tuple[bytes, bytes, tuple[Any, ...]]] = {}
        """What a request digest is made of but the messages (ids) -> its canonical JSON
        before and after the messages' hash."""
        self._frame: tuple[Any, ...] | None = None
        """What the last call line said of its model, slots, params and cache: a call that
        says the same leaves them out."""
        self._last_usage: tuple[Usage, Line] | None = None
        self._same: tuple[Any, ...] | None = None
        """The last call's system, tools, params and cache (the objects), model, the
        replacements its params had, and its digest around the messages' hash."""
        self._sync_interval = sync_interval
        self._synced = self._written = time.monotonic()
        self._boundary = False
        """An iteration ended since the last write: the next one asks for a sync."""

    # -- low level -----------------------------------------------------------------------

    def _emit(self, record: Mapping[str, Any] | Record) -> None:
        """Queue a record made of af's own values (nothing in it to screen)."""
        raw = _dumps(record, default=as_json)
        self._pending.append(raw)
        if self.observers or self._watch.observers:
            self._observe(raw)

    def _observe(self, raw: bytes) -> None:
        parsed = orjson.loads(raw)
        for observe in self.observers:
            observe(parsed)
        watchers = self._watch.observers
        if not watchers:
            return
        t = parsed.get("t")
        if t == "commit" and "stage" not in parsed:
            # What the reader derives, so that a watcher sees the record it would read.
            parsed = {**parsed, "stage": parsed["rsid"].partition("#")[0]}
        elif t == "call":
            if "system" in parsed:
                self._watched_frame = {k: parsed[k] for k in CALL_FRAME if k in parsed}
            else:
                parsed = {**self._watched_frame, **parsed}
        # As the reader gives it: its Struct.
        typed = _as_record(parsed) if t in KNOWN_TYPES else _as_unknown(parsed)
        for watcher in watchers:
            if id(watcher) in self._failed:
                continue
            try:
                watcher(typed)
            except Exception as e:  # the run goes on; the file says which observer failed
                self._failed.add(id(watcher))
                self.event(
                    _observer_error(
                        observer=watcher_name(watcher),
                        record=str(parsed.get("t")),
                        error=error_info(e),
                    ),
                    flush=False,
                )

    def flush(self) -> None:
        """Write what is pending, whole lines and their seal in one write; after an
        iteration boundary, have it made durable."""
        pending = self._pending
        if pending:
            if self._broken:  # watched, not recorded; or a write failed
                pending.clear()
                return
            pending.append(b"")
            batch = b"\n".join(pending)  # every line, each ending with its newline
            pending.clear()
            # = seal(chain, batch)
            chain = self._chain = _sha256(self._chain + batch).digest()[:16]
            seal = _b64(chain).translate(_URLSAFE, b"=\n")
            sealed = b"".join((batch, _SEAL_LINE, seal, _SEAL_END))
            try:
                done = os.write(self._fd, sealed)
                if done < len(sealed):  # a short write (a disk filling up): on where it stopped
                    data = memoryview(sealed)[done:]
                    while data:
                        data = data[os.write(self._fd, data) :]
            except OSError as e:
                self._broken = True  # a line after a torn one would be lost: none is written
                self._name()
                raise self._write_failed(e) from None
            now = self._written = _monotonic()
            if self._unnamed is not None:
                self._name(written=True)
        elif self._boundary:
            now = _monotonic()
        else:
            return
        if self._boundary:
            self._boundary = False
            # A real model call takes far longer than the interval, so a real run is synced
            # at every iteration boundary; a scripted loop that runs hundreds of iterations
            # a second is synced every interval instead of paying a sync per iteration.
            if now - self._synced >= self._sync_interval:
                self._synced = now
                _SYNCER.put(self._fd, close=False)

    def before_tool(self) -> None:
        """A sync tool is about to run on the loop's thread: what is pending goes out first,
        unless the last write is less than :data:`HOLD` old. A real model's reply took far
        longer than that, so it is on disk before the tools it asked for run (a process
        killed inside one leaves it); the iterations of a scripted loop, microseconds each,
        share one write."""
        if self._pending and _monotonic() - self._written >= HOLD:
            self.flush()

    def _store(self, value: Any, *, screened: bool = False) -> str:
        """Store a value (not yet redacted) once; return the id it is stored under.
        ``screened``: every part of the value went through redaction already (a slot's list,
        made of stored segments and sources), so its bytes are not scanned again."""
        try:
            raw = _dumps(value, default=as_json, option=_SORTED)
        except TypeError:  # a big integer, a lone surrogate: held in their lossless form
            raw = _dumps(lossless(value), option=_SORTED)
        return self._store_raw(raw, screened)

    def _store_raw(self, raw: bytes, screened: bool = False) -> str:
        ref = _id(raw)
        if ref in self._blobs:
            return ref  # type: ignore[no-any-return] # stored before, so screened before
        if not screened and self.redactor.screen(raw):
            raw = _dumps(self.redactor.redact(orjson.loads(raw)), option=_SORTED)
            ref = _id(raw)
            if ref in self._blobs:
                return ref  # type: ignore[no-any-return]
        self._blobs.add(ref)
        # The blob's value is written in its canonical form: the bytes that were hashed.
        line = b'{"t":"blob","id":"' + ref.encode() + b'","value":' + raw + b"}"
        self._pending.append(line)
        if self.observers or self._watch.observers:
            self._observe(line)
        return ref  # type: ignore[no-any-return]

    def _screened(self, model: _M) -> _M:
        """``model`` with what the redaction policy replaces replaced (itself when nothing
        is: nearly always)."""
        raw = _dumps(model, default=as_json)
        if not self.redactor.screen(raw):
            return model
        return type(model).model_validate(self.redactor.redact(orjson.loads(raw)))

    def next_rsid(self, stage: str) -> str:
        self._stage_counter += 1
        return f"{stage}#{self._stage_counter}"

    def _versions(self, keys: Iterable[str]) -> list[tuple[str, int]]:
        versions = self.versions
        return [(k, versions[k]) for k in keys if k in versions]

    # -- records -------------------------------------------------------------------------

    def header(self, header: Line | Header | FlowHeader, *, screened: bool = False) -> None:
        """The first line, screened whole: the agent's name, the provider's URL, the params.
        ``screened``: every value in it went through the redactor already."""
        self.event(header, flush=False, trusted=screened)

    def tool_ref(self, spec: ToolSpec) -> str:
        cached = self._spec_refs.get(id(spec))
        if cached is not None:
            return cached[1]
        frames = self._frames
        if frames is None:
            ref = self._store(spec.to_json())
        else:
            key = (id(spec), self.redactor.shape)
            hit = frames.specs.get(key)
            if hit is not None and hit[0] is spec:
                ref = hit[1]
                self._put_blob(ref, hit[2])
                self.redactor.count += hit[3]
            else:
                mark, count = len(self._pending), self.redactor.count
                ref = self._store(spec.to_json())
                # Stored now (its line is the last), by a redactor that learned nothing on
                # the way (one that did would not be of the shape the next run looks for).
                if len(self._pending) == mark + 1 and self.redactor.shape == key[1]:
                    line = self._pending[-1]
                    frames.keep(frames.specs, key, (spec, ref, line, self.redactor.count - count))
        self._spec_refs[id(spec)] = (spec, ref)
        return ref

    @property
    def frames(self) -> Frames | None:
        """The agent's frames this recorder shares (None: its own alone)."""
        return self._frames

    def _put_blob(self, ref: str, line: bytes) -> None:
        """A blob line made before (by another run of the agent), written unless stored."""
        if ref in self._blobs:
            return
        self._blobs.add(ref)
        self._pending.append(line)
        if self.observers or self._watch.observers:
            self._observe(line)

    def message(
        self, message: Message, *, history: bool = True, source: Source | None = None
    ) -> tuple[int, Line]:
        """Store a message; return its number and the write naming it. ``history``: it joins
        the conversation (an injected message does not: it is sent, not remembered). A short
        message is written in the write itself, a long one as a blob it refers to; either
        way its id is that of its canonical JSON."""
        try:
            # = to_json() with its keys in sorted order, for the messages of every iteration:
            # a tool's result (nothing nested to sort), and a reply that asks for one tool
            # (its arguments sorted by orjson)
            if (
                type(message) is ToolResultMessage
                and type(message.content) is str
                and not message.is_error
            ):
                raw = _dumps(
                    {
                        "content": message.content,
                        "name": message.name,
                        "role": "tool",
                        "tool_call_id": message.tool_call_id,
                    }
                )
            elif (
                type(message) is AssistantMessage
                and len(content := message.content) == 1
                and type(block := content[0]) is ToolCall
                and not block.id_synthesized
            ):
                raw = _dumps(
                    {
                        "content": [
                            {
                                "args": block.args,
                                "id": block.id,
                                "name": block.name,
                                "type": "tool_call",
                            }
                        ],
                        "role": "assistant",
                    },
                    option=_SORTED,
                )
            else:
                raw = _dumps(message.to_json(), option=_SORTED)
        except TypeError:  # a big integer, a lone surrogate: held in their lossless form
            raw = _dumps(lossless(message.to_json()), option=_SORTED)
        if self.redactor.screen(raw):
            raw = _dumps(self.redactor.redact(orjson.loads(raw)), option=_SORTED)
        if len(raw) > MESSAGE_INLINE:
            ref = self._store_raw(raw, screened=True)
            hashed = ref.encode()
            value = None
        else:  # = _id(raw), kept as bytes: the digests take it so
            hashed = _b64(_sha256(raw).digest()[:16]).translate(_URLSAFE, b"=\n")
            value = _Fragment(raw)
        self._ids += hashed
        n = self._messages = self._messages + 1
        if history:
            self._history_digest.update(hashed)
            if self._history_end == n - 1:  # the history's last range goes on
                self._history_ranges[-1] = (self._history_start, n)
            else:
                self._history_start = n
                self._history_ranges.append((n, n))
            self._history_end = n
        if source is None and value is not None:
            # = _write(key=..., value=value): a literal, for the messages of every iteration
            return n, {"key": f"message:{n}", "value": value}  # type: ignore[return-value]
        key = f"message:{n}"
        src = None if source is None else self._source_line(source)
        if value is None:
            return n, _write(key=key, ref=ref, source=src)
        return n, _write(key=key, value=value, source=src)

    def injected(self, message: Message, source: Source) -> tuple[int, Line]:
        """An injected message (sent after the history, not joining it), written as
        :meth:`message` writes it. An agent's injections send the same texts in every run:
        one the policy found clean is taken from its store, not serialized, screened and
        hashed again."""
        clean = self.redactor.clean
        key = ("injected", message, source)
        known = clean.get(key) if clean is not None else None
        if known is not None:
            hashed, value, src = known
            self._ids += hashed
            n = self._messages = self._messages + 1
            return n, _write(key=f"message:{n}", value=value, source=src)
        count = self.redactor.count
        n, write = self.message(message, history=False, source=source)
        if clean is not None and self.redactor.count == count and "value" in write:
            # Written inline (a long one is a blob, which each file holds for itself).
            clean[key] = (bytes(self._ids[-_ID_SIZE:]), write["value"], write.get("source"))
        return n, write

    def message_hash(self, n: int) -> str:
        """The id message ``n`` is stored under."""
        if not 0 < n <= self._messages:
            raise IndexError(n)
        return self._ids[(n - 1) * _ID_SIZE : n * _ID_SIZE].decode()

    def history_ranges(self) -> list[tuple[int, int]]:
        """The history's message numbers, as ranges."""
        return list(self._history_ranges)

    def write(self, key: str, value: Any, *, trusted: bool = False) -> Line:
        """A write of ``value`` (plain JSON, or a model such as a Fold) under ``key`` for a
        commit: inline when short, else a ref. ``trusted``: a short string of af's own
        making (a route), which needs no screening; its write is made once."""
        if trusted and isinstance(value, str):
            known = self._trusted.get((key, value))
            if known is None:
                known = self._trusted[(key, value)] = _write(key=key, value=value)
            return known
        if isinstance(value, BaseModel):
            value = as_json(value)  # plain JSON: written, and maybe stored, without callbacks
        value, raw = self._dumped(value)
        if len(raw) <= INLINE_LIMIT:
            return Line(_write(key=key, value=value))
        return Line(_write(key=key, ref=self._store(value, screened=True)))

    def _dumped(self, value: Any) -> tuple[Any, bytes]:
        """``value`` as it is written, and its bytes: held in its lossless form where JSON
        cannot say it (a big integer, a lone surrogate), redacted where the screen finds a
        secret."""
        try:
            raw = _dumps(value, default=as_json)
        except TypeError:
            value = lossless(value)
            raw = _dumps(value)
        if self.redactor.screen(raw):
            value = self.redactor.redact(orjson.loads(raw))
            raw = _dumps(value)
        return value, raw

    def commit(
        self,
        rsid: str,
        stage: str,
        iteration: int,
        *,
        reads: Iterable[str] = (),
        writes: list[Line] | None = None,
        tool: Line | None = None,
    ) -> int:
        """A stage's commit. ``stage`` is not written (it is the rsid up to its ``#``)."""
        seq = self.seq = self.seq + 1
        versions = self.versions
        read = []  # = [(k, versions[k]) for k in reads if k in versions], without its frame
        for k in reads:
            if k in versions:
                read.append((k, versions[k]))
        if writes:
            for w in writes:
                key = w["key"]
                versions[key] = seq
                if key.startswith(("message:", "fold:")):
                    versions["messages"] = seq
        else:
            writes = []
        # = _commit(...) (``stage`` is not written): a literal, for a tool's every commit
        record = {
            "t": "commit",
            "seq": seq,
            "rsid": rsid,
            "iter": iteration,
            "reads": read,
            "writes": writes,
        }
        if tool is not None:
            record["tool"] = tool
        raw = _dumps(record, default=as_json)  # = self._emit(record), for every iteration's
        self._pending.append(raw)
        if self.observers or self._watch.observers:
            self._observe(raw)
        return seq

    def fold(
        self,
        rsid: str,
        iteration: int,
        fold: int,
        value: Line,
        *,
        reads: list[str],
        writes: list[Line],
        left: Sequence[int],
    ) -> None:
        """A window stage: its commit, writing ``fold:<fold>`` (``value``, a Fold as plain
        JSON) before ``writes``, then a ``context_evicted`` event for each message number in
        ``left``, with its hash. The lines :meth:`write`, :meth:`commit` and :meth:`event`
        would make, the fold's value dumped once (a fold at every iteration of a long
        window is common) and the events, af's own values, made as literals."""
        key = _FOLD_KEY + str(fold)
        value, raw = self._dumped(value)
        if len(raw) <= INLINE_LIMIT:
            # = write(key, value): the bytes just dumped, not dumped again with the commit
            write: Line = {"key": key, "value": _Fragment(raw)}  # type: ignore[assignment]
        else:
            write = Line(_write(key=key, ref=self._store(value, screened=True)))
        self.commit(rsid, "window", iteration, reads=reads, writes=[write, *writes])
        pending, observed = self._pending, self.observers or self._watch.observers
        ids, size = self._ids, _ID_SIZE
        for n in left:
            # = event(line(ContextEvicted)(...), flush=False, trusted=True): a literal
            raw = _dumps(
                {
                    "t": "context_evicted",
                    "rsid": rsid,
                    "iter": iteration,
                    "fold": fold,
                    "message": n,
                    "hash": ids[(n - 1) * size : n * size].decode(),
                }
            )
            pending.append(raw)
            if observed:
                self._observe(raw)

    def _segment(self, seg: SystemSegment) -> tuple[str, Segment]:
        """A segment's id and its entry in a system list. Worked out once per redaction
        policy: the next runs of the agent take both from the policy's store of clean values
        (a long segment's blob is still written in each file)."""
        key = (seg.text, seg.source)
        done = self._entries.get(key)
        if done is not None:
            return done
        clean = self.redactor.clean
        known: tuple[str, Segment, bytes | None] | None = (
            clean.get(key) if clean is not None else None
        )
        if known is None:
            count = self.redactor.count
            h, text, raw = self._screened_text(seg.text)
            source = self._source(seg.source)
            entry = (
                _segment(text=text, source=source)
                if raw is None
                else _segment(ref=h, source=source)
            )
            known = (h, entry, raw)
            if clean is not None and self.redactor.count == count:
                clean[key] = known  # the same policy finds nothing in it next time
        h, entry, raw = known
        if raw is not None:
            self._store_raw(raw, screened=True)
        done = self._entries[key] = (h, entry)
        return done

    def _screened_text(self, text: str) -> tuple[str, str | None, bytes | None]:
        """A segment's text as written: its id, and the text inline, or for a long one the
        canonical JSON of its blob (whose id is its id)."""
        body = self.redactor.redact({"text": text})
        if len(body["text"]) <= INLINE_LIMIT:
            return V11.content(body), body["text"], None
        try:
            raw = _dumps(body, option=_SORTED)
        except TypeError:  # a lone surrogate: held in its lossless form
            raw = _dumps(lossless(body), option=_SORTED)
        return _id(raw), None, raw

    def _system_slot(self, system: Sequence[SystemSegment]) -> tuple[list[str], str]:
        hashes: list[str] = []
        entries: list[Segment] = []
        for seg in system:
            h, entry = self._segment(seg)
            hashes.append(h)
            entries.append(entry)
        return hashes, self._store_list("system", entries)

    def _tools_slot(self, tools: Sequence[ToolSpec]) -> tuple[list[str], str]:
        hashes = [self.tool_ref(spec) for spec in tools]
        entries = [
            _tool(name=self.redactor.redact(spec.name), ref=h, source=self._source(spec.source))
            for spec, h in zip(tools, hashes, strict=True)
        ]
        return hashes, self._store_list("tools", entries)

    def _store_list(self, slot: str, entries: list[Segment] | list[CallTool]) -> str:
        """Store a slot's list. A list that starts like the last one stored in full is
        stored as a delta (its first entries named, the rest listed), so a rule that adds
        one segment to a long prompt does not restate the prompt."""
        base = self._list_bases.get(slot)
        if base is not None:
            keep = _common_prefix(base[1], entries)
            if keep == len(entries) == len(base[1]):
                return base[0]
            if keep >= DELTA_MIN:
                return self._store(
                    _delta(base=base[0], keep=keep, then=entries[keep:]), screened=True
                )
        ref = self._store(entries, screened=True)
        self._list_bases[slot] = (ref, entries)
        return ref

    def _source(self, source: Source) -> SourceInfo:
        """A source as the file holds it, redacted once."""
        return self._sources_of(source)[0]

    def _source_line(self, source: Source) -> dict[str, Any]:
        """The same, as the JSON it is written as."""
        return self._sources_of(source)[1]

    def _sources_of(self, source: Source) -> tuple[SourceInfo, dict[str, Any]]:
        out = self._sources.get(source)
        if out is None:
            clean = self.redactor.clean
            key = ("source", source)
            out = clean.get(key) if clean is not None else None
            if out is None:
                count = self.redactor.count
                info = SourceInfo.model_validate(self.redactor.redact(source.to_json()))
                out = (info, as_json(info))
                if clean is not None and self.redactor.count == count:
                    clean[key] = out  # the same policy finds nothing in it next time
            self._sources[source] = out
        return out

    def _slot(
        self, items: Sequence[Any], build: Callable[[Any], tuple[list[str], str]]
    ) -> tuple[list[str], str]:
        """The part hashes and the list blob of a slot, worked out once for the same items:
        an agent whose system prompt or tools did not change pays nothing per call."""
        recent = (build.__name__, id(items))
        last = self._slot_last.get(recent)
        if last is not None and last[0] is items:  # the very list of a recent call
            return last[1], last[2]
        key = (build.__name__, tuple(map(id, items)))
        cached = self._slot_cache.get(key)
        if cached is None:
            cached = self._slot_cache[key] = self._built(key, items, build)
        if len(self._slot_last) >= 16:
            self._slot_last.clear()
        # The list is kept so that its id cannot be reused by another object.
        self._slot_last[recent] = (items, cached[1], cached[2])
        return cached[1], cached[2]

    def _built(
        self,
        key: tuple[Any, ...],
        items: Sequence[Any],
        build: Callable[[Any], tuple[list[str], str]],
    ) -> tuple[tuple[Any, ...], list[str], str]:
        """A slot's list built, or taken from another run of the agent that built the same
        list on the same base (the list its slot last stored in full: none for the first,
        which is stored in full), with the blobs it wrote then. A rule that changes the
        system prompt at some iteration stores the same delta in every run."""
        frames = self._frames
        if frames is None:
            hashes, ref = build(items)
            # The items are kept so their ids cannot be reused by other objects.
            return (tuple(items), hashes, ref)
        slot = "system" if build.__name__ == "_system_slot" else "tools"
        base = self._list_bases.get(slot)
        shared = (key, self.redactor.shape, None if base is None else base[0])
        hit = frames.slots.get(shared)
        blobs = self._blobs
        if hit is not None and all(blob in blobs for blob in hit[5]):
            kept, hashes, ref, stored, lines, _, count = hit
            if slot == "tools":
                for spec in kept:
                    self.tool_ref(spec)
            for blob, line in lines:
                self._put_blob(blob, line)
            self.redactor.count += count
            if stored is not None:
                self._list_bases[slot] = stored
            return (kept, hashes, ref)
        mark, count = len(self._pending), self.redactor.count
        hashes, ref = build(items)
        kept = tuple(items)
        made = self._pending[mark:]
        if self.redactor.shape != shared[1] or not all(
            line.startswith(_BLOB_OPEN) for line in made
        ):
            return (kept, hashes, ref)  # a secret learned, an observer's error: not shared
        lines = tuple((line[_BLOB_ID].decode(), line) for line in made)
        refers = {ref}
        if slot == "system":
            refers.update(self._entries[(seg.text, seg.source)][1].ref or ref for seg in items)
        # What it refers to that was stored before it: a run taking it must hold those too.
        before = tuple(refers.difference(blob for blob, _ in lines))
        after = self._list_bases.get(slot)
        stored = None if after is base else after
        entry = (kept, hashes, ref, stored, lines, before, self.redactor.count - count)
        frames.keep(frames.slots, shared, entry)
        return (kept, hashes, ref)

    def call(
        self,
        rsid: str,
        iteration: int,
        call: int,
        *,
        model: str,
        system: Sequence[SystemSegment],
        window: Sequence[tuple[int, int]] | None,
        tools: Sequence[ToolSpec],
        params: Mapping[str, Any],
        cache: Sequence[CacheBreakpoint],
        extra: Sequence[int] = (),
        reads: Sequence[str] = _CALL_READS,
        attempt: AttemptInfo | None = None,
    ) -> str:
        """Record a model call as it is sent, and write it out; return the request's hash.
        ``window`` None: the whole history, then ``extra``. ``reads``: the keys the call
        was composed from (a summarizer's call reads its transcript, not the agent's slots).
        ``attempt``: which attempt at the call this is (agents with reliability rules)."""
        if window is None:
            # The whole history, then the extra (injected) messages: the same list object
            # from call to call while the injected messages do not change.
            known_extra = self._extra
            if (extra or known_extra[1]) and known_extra[0] is not extra:
                # A rule flipping back and forth sends two lists of injected messages in
                # turn: each is joined and ranged once.
                recent = self._extras.get(id(extra))
                if recent is None or recent[0] is not extra:
                    ids, size = self._ids, _ID_SIZE
                    joined = b"".join(ids[(n - 1) * size : n * size] for n in extra)
                    if len(self._extras) >= 16:
                        self._extras.clear()
                    recent = self._extras[id(extra)] = (extra, joined, ranges(extra))
                known_extra = self._extra = recent
            digest = self._history_digest.copy()
            if known_extra[1]:
                digest.update(known_extra[1])
                window = [*self._history_ranges, *known_extra[2]]
            else:  # serialized at once, so the live list may be given as it is
                window = self._history_ranges
            messages_hash = _b64(digest.digest()[:16]).translate(_URLSAFE, b"=\n")
        else:
            window = list(window)
            size = _ID_SIZE
            last = self._window
            # A window that is the last one hashed with messages added at its end (the calls
            # after a fold, until the next): that hash's state, fed only what was added.
            # Otherwise (a fold changed it) hashed whole.
            k = len(last[0]) - 1
            if (
                0 <= k < len(window)
                and window[k][0] == last[0][k][0]
                and window[k][1] >= last[0][k][1]
                and window[:k] == last[0][:k]
            ):
                digest = last[1].copy()
                todo = [(last[0][k][1] + 1, window[k][1]), *window[k + 1 :]]
            else:
                digest = _sha256()
                todo = window
            # Hashed where they lie, not copied out first (a 2,000-message window is 44 KB);
            # the view is let go before the ids grow again.
            with memoryview(self._ids) as view:
                for a, b in todo:
                    digest.update(view[(a - 1) * size : b * size])
            self._window = (window, digest)
            # = V11.messages(...), kept as bytes: the call's digest takes it so
            messages_hash = _b64(digest.digest()[:16]).translate(_URLSAFE, b"=\n")
        origin = self._origin
        at = None if origin is None else round_ms((self.clock() - origin) * 1000)
        same = self._same
        if (
            same is not None
            and same[0] is system
            and same[1] is tools
            and same[2] is params
            and same[3] is cache
            and same[4] == model
            and attempt is None
        ):
            # The very objects of the call before: the same frame (left out), the same
            # digest around the messages' hash, the same replacements in the params.
            if same[5]:
                self.redactor.count += same[5]
            # = short_id(...), inline
            digest_hash = (
                _b64(_sha256(same[6] + messages_hash + same[7]).digest()[:16])
                .translate(_URLSAFE, b"=\n")
                .decode()
            )
            seq = self.seq = self.seq + 1
            versions = self.versions
            # = _call(seq=..., hash=..., at=at): a literal, for the call of every iteration
            # (tests check each line against its model's own dump).
            read = []  # = [(k, versions[k]) for k in reads if k in versions], without its frame
            for name in reads:
                if name in versions:
                    read.append((name, versions[name]))
            record = {
                "t": "call",
                "seq": seq,
                "rsid": rsid,
                "iter": iteration,
                "call": call,
                "reads": read,
                "window": window,
                "hash": digest_hash,
            }
            if at is not None:
                record["at"] = at
            self._pending.append(_dumps(record))  # = self._emit(record): plain JSON
            if self.observers or self._watch.observers:
                self._observe(self._pending[-1])
            versions[f"call:{call}"] = seq
            self.flush()
            return digest_hash
        frame = self._frame
        if frame is None and self._frames is not None and attempt is None:
            parts = self._first_frame(self._frames, model, system, tools, params, cache)
        else:
            parts = self._frame_parts(model, system, tools, params, cache)
        system_ref, tools_ref, written, replaced, before, after, cache_json = parts
        digest_hash = short_id(_sha256(before + messages_hash + after).digest())
        self._same = (system, tools, params, cache, model, replaced, before, after)
        self.seq += 1
        if frame is not None and frame[4] is cache:
            cache_json = frame[5]
        if (
            frame is not None
            and frame[1] == system_ref
            and frame[2] == tools_ref
            and frame[0] == model
            and (frame[3] is written or frame[3] == written)
            and frame[5] == cache_json
        ):
            # The same as the call before: left out, the reader takes them from there.
            record = _call(
                seq=self.seq,
                rsid=rsid,
                iter=iteration,
                call=call,
                reads=self._versions(reads),
                window=window,
                hash=digest_hash,
                attempt=None if attempt is None else as_json(self._screened(attempt)),
                at=at,
            )
        else:
            self._frame = (model, system_ref, tools_ref, written, cache, cache_json)
            record = _call(
                seq=self.seq,
                rsid=rsid,
                iter=iteration,
                call=call,
                reads=self._versions(reads),
                model=model,
                system=system_ref,
                window=window,
                tools=tools_ref,
                params=written,
                cache=cache_json,
                hash=digest_hash,
                attempt=None if attempt is None else as_json(self._screened(attempt)),
                at=at,
            )
        self._emit(record)
        self.versions[f"call:{call}"] = self.seq
        self.flush()
        return digest_hash

    def _frame_parts(
        self,
        model: str,
        system: Sequence[SystemSegment],
        tools: Sequence[ToolSpec],
        params: Mapping[str, Any],
        cache: Sequence[CacheBreakpoint],
    ) -> _Parts:
        """What frames a call (its slots stored, its params redacted, its request digest
        around the messages' hash, its cache breakpoints as written), worked out."""
        segment_hashes, system_ref = self._slot(system, self._system_slot)
        tool_hashes, tools_ref = self._slot(tools, self._tools_slot)
        known = self._params.get(id(params))
        if known is None or known[0] is not params:
            count = self.redactor.count
            written = self.redactor.redact(dict(params))
            if len(self._params) >= 8:
                self._params.clear()
            known = self._params[id(params)] = (params, written, self.redactor.count - count)
        else:
            self.redactor.count += known[2]  # the same replacements, in this line too
        cache_json = [c.to_json() for c in cache]
        before, after = self._digest_parts(
            model, segment_hashes, _NO_MESSAGES, tool_hashes, known[1], cache
        )
        return (system_ref, tools_ref, known[1], known[2], before, after, cache_json)

    def _first_frame(
        self,
        frames: Frames,
        model: str,
        system: Sequence[SystemSegment],
        tools: Sequence[ToolSpec],
        params: Mapping[str, Any],
        cache: Sequence[CacheBreakpoint],
    ) -> _Parts:
        """:meth:`_frame_parts` for the first call a run writes in full: taken from the
        agent's frames when an earlier run sent the very same slot and params objects with
        a redactor of the same shape, from a recorder in the same state (every blob that
        run had stored before its first call stored in this one too). What working it out
        did to the recorder is done again: its blob lines written (unless stored), its
        replacements counted, the slot lists, spec refs, params and digests it made known
        to the recorder's own tables."""
        shape = self.redactor.shape
        key = (model, id(system), id(tools), id(params), id(cache), shape)
        hit = frames.calls.get(key)
        fresh = self._same is None and not self._list_bases and not self._slot_cache
        if (
            hit is not None
            and fresh
            and hit[0][0] is system
            and hit[0][1] is tools
            and hit[0][2] is params
            and hit[0][3] is cache
            and hit[1] <= self._blobs
        ):
            _, _, lines, count, tables, parts = hit
            for ref, line in lines:
                self._put_blob(ref, line)
            self.redactor.count += count
            for own, table in zip(tables, self._frame_tables(), strict=True):
                table.update(own)
            taken: _Parts = parts
            return taken
        if not fresh:
            return self._frame_parts(model, system, tools, params, cache)
        stored = frozenset(self._blobs)
        mark, count = len(self._pending), self.redactor.count
        mine = self._frame_tables()
        known = [set(table) for table in mine]
        parts = self._frame_parts(model, system, tools, params, cache)
        made = self._pending[mark:]
        if self.redactor.shape == shape and all(line.startswith(_BLOB_OPEN) for line in made):
            lines = tuple((line[_BLOB_ID].decode(), line) for line in made)
            tables = tuple(
                {k: v for k, v in table.items() if k not in had}
                for table, had in zip(mine, known, strict=True)
            )
            entry = (
                (system, tools, params, cache),  # kept: their ids stay theirs
                stored,
                lines,
                self.redactor.count - count,
                tables,
                parts,
            )
            frames.keep(frames.calls, key, entry)
        return parts

    def _frame_tables(self) -> tuple[dict[Any, Any], ...]:
        """The recorder's own tables that working out a call's frame adds to."""
        return (
            self._slot_cache,
            self._slot_last,
            self._list_bases,
            self._spec_refs,
            self._params,
            self._digests,
        )

    def _digest_parts(
        self,
        model: str,
        system: list[str],
        messages: str,
        tools: list[str],
        params: dict[str, Any],
        cache: Sequence[CacheBreakpoint],
    ) -> tuple[bytes, bytes]:
        """A call's request digest (see ``_hashing``) as the canonical JSON before and after
        the messages' hash, which is all that changes from one call of an agent to the next
        while the rest are the very same objects (kept for the agent's calls and a
        summarizer's, which alternate)."""
        key = (model, id(system), id(tools), id(params), id(cache))
        known = self._digests.get(key)
        if known is None:
            raw = canonical(
                request_digest(
                    model=model,
                    system=system,
                    messages=messages,
                    tools=tools,
                    params=params,
                    cache=[c.to_json() for c in cache],
                )
            )
            at = raw.index(b'"messages":"') + len(b'"messages":"')
            if len(self._digests) >= 8:
                self._digests.clear()
            # The parts are kept so that their ids cannot be reused by other objects.
            known = (raw[:at], raw[at + len(messages) :], (system, tools, params, cache))
            self._digests[key] = known
        return known[0], known[1]

    def inject(
        self,
        iteration: int,
        *,
        system: Sequence[SystemSegment],
        tools: Sequence[ToolSpec],
        decisions: InjectionDecisions | None,
        message_writes: list[Line],
        reads: Sequence[str],
    ) -> int | None:
        """Commit an iteration's injection decisions (None: none changed) and the slots they
        composed, as an ``inject#k`` stage; return its seq. Only what changed is written, and
        an iteration at which nothing changed writes no commit (None): its call reads the
        versions last written, and the decisions last written still hold."""
        _, system_ref = self._slot(system, self._system_slot)
        _, tools_ref = self._slot(tools, self._tools_slot)
        writes = []
        if decisions is not None:
            writes.append(_write(key="injections", ref=self._decisions_ref(decisions)))
        if system_ref != self._last_slots[0]:
            writes.append(_write(key="system", ref=system_ref))
        if tools_ref != self._last_slots[1]:
            writes.append(_write(key="tools", ref=tools_ref))
        self._last_slots = (system_ref, tools_ref)
        writes += message_writes
        if not writes:
            return None
        return self.commit(
            self.next_rsid("inject"), "inject", iteration, reads=reads, writes=writes
        )

    def _decisions_ref(self, decisions: InjectionDecisions) -> str:
        """Where an iteration's decisions are stored. A rule flipping back and forth writes
        the same decisions objects again, and the next runs of the agent those the runs
        before wrote (the engine keeps them): their blob is known, and its line is taken
        from the agent's frames (unless redaction replaced something: then it is stored
        and counted each time)."""
        known = self._decision_refs.get(id(decisions))
        if known is not None and known[0] is decisions:
            return known[1]
        frames = self._frames
        shared = (id(decisions), self.redactor.shape)
        hit = frames.decisions.get(shared) if frames is not None else None
        if hit is not None and hit[0] is decisions:
            ref: str = hit[1]
            self._put_blob(ref, hit[2])
        else:
            mark, count = len(self._pending), self.redactor.count
            ref = self._store(decisions)
            if self.redactor.count != count:
                return ref
            made = self._pending[mark:]
            if (
                frames is not None
                and len(made) == 1
                and made[0].startswith(_BLOB_OPEN)
                and self.redactor.shape == shared[1]
            ):
                frames.keep(frames.decisions, shared, (decisions, ref, made[0]))
        if len(self._decision_refs) >= 16:
            self._decision_refs.clear()
        self._decision_refs[id(decisions)] = (decisions, ref)
        return ref

    def reply(
        self,
        rsid: str,
        iteration: int,
        call: int,
        *,
        message_write: Line,
        stop_reason: str,
        tool_calls: list[Line],
        usage: Usage | None,
        model: str | None,
        ms: float,
        decision: AttemptDecision | None = None,
        response_id: str | None = None,
        unsent_params: Sequence[str] = (),
        route: str | None = None,
    ) -> int:
        """Record a model's answer. ``decision``: what a reliability rule decided about it,
        when one did or the answer was refused; ``response_id``, the vendor's id for it;
        ``unsent_params``, params the provider could not send; ``route``, where the loop
        goes from it (``tools``, ``answer``, ``continue``), written under the key ``route``."""
        seq = self.seq = self.seq + 1
        versions = self.versions
        key = message_write["key"]
        versions[key] = versions[f"reply:{call}"] = seq
        if key.startswith(("message:", "fold:")):
            versions["messages"] = seq
        if route is None:
            writes = [message_write]
        else:
            known = self._routes.get(route)
            if known is None:
                known = self._routes[route] = _write(key="route", value=route)
            writes = [message_write, known]
            versions["route"] = seq
        # = _reply(...): a literal, for the reply of every iteration (its sparse fields
        # written when they hold something, in the model's order)
        record = {
            "t": "reply",
            "seq": seq,
            "rsid": rsid,
            "iter": iteration,
            "call": call,
            "writes": writes,
            "stop_reason": stop_reason,
            "tool_calls": tool_calls,
        }
        if usage is not None:
            last = self._last_usage  # = self._usage_line(usage), inline
            if last is None or (last[0] is not usage and last[0] != usage):
                last = self._last_usage = (usage, usage_line(usage))
            record["usage"] = last[1]
        if model is not None:
            record["model"] = model
        if response_id is not None:
            record["response_id"] = self.redactor.redact(response_id)
        if unsent_params:
            record["unsent_params"] = list(unsent_params)
        record["ms"] = round(ms * 1000) / 1000  # = round_ms(ms)
        if decision is not None:
            record["decision"] = as_json(self._screened(decision))
        raw = _dumps(record, default=as_json)  # = self._emit(record)
        self._pending.append(raw)
        if self.observers or self._watch.observers:
            self._observe(raw)
        return seq

    def _usage_line(self, usage: Usage) -> Line:
        """``usage_line(usage)``, made once while the replies report the same usage."""
        last = self._last_usage
        if last is None or (last[0] is not usage and last[0] != usage):
            last = self._last_usage = (usage, usage_line(usage))
        return last[1]

    def event(
        self, record: Line | Record | FlowRecord, *, flush: bool = True, trusted: bool = False
    ) -> bytes:
        """An event (what the loop saw: an error, a tool starting, a message leaving the
        window), screened by the redaction policy as a whole. ``trusted``: made of af's own
        values only (stage ids, numbers, hashes), as a commit's framing is: not screened.
        Returns the line as written (a replay compares it with the recorded one)."""
        raw = _dumps(record, default=as_json)
        if not trusted and self.redactor.screen(raw):
            raw = _dumps(self.redactor.redact(orjson.loads(raw)))
        self._pending.append(raw)
        if self.observers or self._watch.observers:
            self._observe(raw)
        if flush:
            self.flush()
        return raw

    def embed(self, record: Line | Record | FlowRecord, body: bytes) -> None:
        """``record``, then ``body`` (a file's bytes, as they are: never screened) with one
        space before each of its lines, and their seal, in one write: the file stays one
        JSON value a line, and no line of ``body`` reads as one of this file's seals."""
        self.event(record, flush=False)
        if body:
            self._pending.append(b" " + body.removesuffix(b"\n").replace(b"\n", b"\n "))
        self.flush()

    def sync(self) -> None:
        """An iteration boundary: what is pending goes out with the next write, which comes
        before the loop waits on anything (the next call, a delay, a turn of the event
        loop), and is made durable soon after, without the loop waiting on the disk. One
        write per iteration fewer than writing it now."""
        self._boundary = True

    def _name(self, *, written: bool = False) -> None:
        """Give the file its own name (never over another's): once its header is in it.
        ``written``: lines were just written whole (no need to ask the file whether it
        holds any)."""
        unnamed, self._unnamed = self._unnamed, None
        if unnamed is None or self.path is None:
            return
        if unnamed is _SPARE:
            self._name_spare(self.path, written)
            return
        try:
            if written or os.fstat(self._fd).st_size > 0:
                os.link(unnamed, self._target)
        except FileExistsError:
            raise UsageError(
                f"a recording already exists at {self.path}; choose another run id"
            ) from None
        finally:
            try:
                os.unlink(unnamed)
            except FileNotFoundError:
                pass

    def _name_spare(self, path: Path, written: bool) -> None:
        """Name a file made ahead (it has none: a run killed before leaves nothing). Where
        the system cannot link it (no /proc), its lines are copied into a file made now."""
        fd = self._fd
        if not written and not os.fstat(fd).st_size:
            return
        try:
            try:
                _SPARES.link(fd, self._target)
            except FileNotFoundError:  # the folder went since the file was made: made again
                path.parent.mkdir(parents=True, exist_ok=True)
                _SPARES.link(fd, self._target)
            return
        except FileExistsError:
            raise UsageError(
                f"a recording already exists at {path}; choose another run id"
            ) from None
        except OSError:
            _SPARES.usable = False
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
        try:
            named = os.open(path, flags, 0o644)
        except FileExistsError:
            raise UsageError(
                f"a recording already exists at {path}; choose another run id"
            ) from None
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        while data:
            data = data[os.write(named, data) :]
        os.close(fd)
        self._fd = named

    def _write_failed(self, e: OSError) -> RecordingWriteError:
        where = self.path if self.path is not None else "its file"
        why = "the disk is full" if e.errno in (errno.ENOSPC, errno.EDQUOT) else e.strerror
        return RecordingWriteError(
            f"the recording could not be written on ({why}): {where} ends at the last line "
            f"that fitted, and every call it holds whole is intact (af verify {where})",
            path=self.path,
        )

    def close(self, *, then: Callable[[], None] | None = None) -> None:
        """Write what is left; the file is then complete. Making it durable (fsync) and
        closing it is the sync thread's, off the caller's clock; the process waits for it
        at exit (:func:`wait_for_syncs`). ``then`` is called on that thread once the file
        is durable (not if its sync failed), after every sync and close asked for before."""
        self._boundary = False  # the fsync makes it all durable
        if self._fd < 0:
            self.flush()
            return
        try:
            self.flush()
        finally:
            try:
                self._name()  # nothing was ever written: no file is left
            finally:
                if self._locked:  # the next process may continue the run as soon as this returns
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
                # The next run's file is asked for with the close: one job, one wake of the
                # sync thread (each wake makes the loop's thread wait on it for the GIL).
                _SYNCER.put(self._fd, close=True, then=then, spare=self._folder)

    @classmethod
    def continuing(
        cls,
        path: Path,
        *,
        run_id: str,
        redactor: Redactor,
        clock: Callable[[], float] = time.perf_counter,
        observers: Sequence[RecordObserver] = (),
        watchers: Watchers | None = None,
    ) -> Recorder:
        """A recorder that appends to the recording at ``path``, which a paused run left:
        its commit log, stage counter, key versions, stored blobs and message hashes taken
        up from the file, so that what it writes next continues the run as one. The file is
        locked while the recorder holds it: a second process continuing the same run is
        refused (:class:`NotPausedError`)."""
        from afcore.errors import NotPausedError
        from afcore.recording._reader import open_recording

        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            raise UsageError(f"cannot continue the recording at {path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise NotPausedError(
                f"the run in {path.name} is being continued by another process"
            ) from None
        try:
            self = cls(
                path,
                run_id=run_id,
                redactor=redactor,
                clock=clock,
                observers=observers,
                watchers=watchers,
                fd=fd,
            )
            rec = open_recording(path)
            try:
                self._take_up_file(rec, path)
                end = rec.end
            finally:
                rec.close()
            if end is None or end.status != "paused":
                status = "unfinished" if end is None else end.status
                raise NotPausedError(f"the run in {path.name} is not paused (it is {status})")
            self.redactor.count = end.redactions
        except BaseException:
            os.close(fd)
            raise
        return self

    def _take_up_file(self, rec: Any, path: Path) -> None:
        """The state of the recording ``rec`` (a reader's Recording) a continuing recorder
        appends to: what it stored, its commit log, its messages, and its hash chain, which
        the next write extends."""
        from afcore.recording import _structs as read
        from afcore.recording._reader import CheckedBlob

        if rec.scheme is not V11:
            raise UsageError(
                f"the run in {path.name} was recorded in format {rec.header.version}, which "
                "this af reads but does not continue: continue it with the af that paused it"
            )
        seals = rec.seal_lines
        if not seals or seals[-1] != rec.line_count or rec.partial:
            raise UsageError(
                f"the recording {path.name} does not end with a seal: it was changed after "
                "the run paused (af verify says where), so it is not continued"
            )
        self._chain = unseal(rec.raw(seals[-1]).get("h"))
        for _, record in rec.records(blobs="checked"):
            if isinstance(record, CheckedBlob):
                self._blobs.add(record.id)
            elif isinstance(record, read.Commit | read.Reply | read.Call):
                self._take_up(rec, record)

    def _take_up(self, rec: Any, record: Any) -> None:
        """One record of the file a continuing recorder appends to, taken into its state."""
        self.seq = seq = record.seq
        counter = record.rsid.rpartition("#")[2]
        if counter.isdecimal():
            self._stage_counter = max(self._stage_counter, int(counter))
        versions = self.versions
        if record.t == "call":
            versions[f"call:{record.call}"] = seq
            return
        if record.t == "reply":
            versions[f"reply:{record.call}"] = seq
        history = joins_history(record)
        for w in record.writes:
            key = w.key
            versions[key] = seq
            if key.startswith(("message:", "fold:")):
                versions["messages"] = seq
            if not key.startswith("message:"):
                continue
            ref = rec.message_ref(int(key.partition(":")[2]))
            self._ids += ref.encode()
            n = self._messages = self._messages + 1
            if history:
                self._history_digest.update(ref.encode())
                if self._history_end == n - 1:
                    self._history_ranges[-1] = (self._history_start, n)
                else:
                    self._history_start = n
                    self._history_ranges.append((n, n))
                self._history_end = n


def error_info(
    error: BaseException,
    *,
    reason: str | None = None,
    status: int | None = None,
    mid_stream: bool = False,
) -> ErrorInfo:
    """An error as the file names it: its class and message, for a provider's error what the
    vendor said beyond them, and what rules decide on when they do (``reason``...)."""
    if not isinstance(error, ProviderError):
        return _error_info(kind=type(error).__name__, message=str(error), reason=reason)
    return _error_info(
        kind=type(error).__name__,
        message=str(error),
        reason=reason,
        status=status,
        mid_stream=mid_stream,
        error_type=error.error_type,
        request_id=error.request_id,
        details=error.details or None,
        retry_after=error.retry_after,
    )


def usage_line(usage: Usage) -> Line:
    """A provider's usage as the file writes it."""
    return _usage_line(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        estimated=usage.estimated,
    )


def usage_info(usage: Usage) -> UsageInfo:
    """A provider's usage as the file holds it."""
    return _usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        estimated=usage.estimated,
    )


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y and x != y:  # entries are made once: mostly the very same objects
            break
        n += 1
    return n


def round_ms(ms: float) -> float:
    """Milliseconds to three decimals, as the file writes durations: what ``round(ms, 3)``
    gives (the nearest double to a whole number of microseconds), a fifth of its cost
    (CPython rounds to a number of digits through a decimal string)."""
    return round(ms * 1000) / 1000


def ranges(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive numbers as inclusive ranges: [5, 6, 7, 9] -> [(5, 7), (9, 9)]."""
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


_NOTHING = Line(_write(key=""))
"""What the null recorder writes: nothing."""


class NullRecorder(Recorder):
    """What the loop writes to when recording is off: nothing, at no cost."""

    enabled = False

    def __init__(self) -> None:  # noqa: D107 - nothing to open
        self.path = None
        self._stage_counter = -1
        self.versions = {}
        self.seq = 0
        self.redactor = None  # type: ignore[assignment]
        self._frames = None

    def _emit(self, record: Mapping[str, Any] | Record) -> None:
        pass

    def header(self, header: Line | Header | FlowHeader, *, screened: bool = False) -> None:
        pass

    def message(
        self, message: Message, *, history: bool = True, source: Source | None = None
    ) -> tuple[int, Line]:
        return 0, _NOTHING

    def injected(self, message: Message, source: Source) -> tuple[int, Line]:
        return 0, _NOTHING

    def inject(self, iteration: int, **_: Any) -> int | None:
        return None

    def write(self, key: str, value: Any, *, trusted: bool = False) -> Line:
        return _NOTHING

    def commit(self, rsid: str, stage: str, iteration: int, **_: Any) -> int:
        return 0

    def fold(self, rsid: str, iteration: int, fold: int, value: Line, **_: Any) -> None:
        pass

    def call(self, rsid: str, iteration: int, call: int, **_: Any) -> str:
        return ""

    def message_hash(self, n: int) -> str:
        return ""

    def reply(self, rsid: str, iteration: int, call: int, **_: Any) -> int:
        return 0

    def event(
        self, record: Line | Record | FlowRecord, *, flush: bool = True, trusted: bool = False
    ) -> bytes:
        return b""

    def flush(self) -> None:
        pass

    def before_tool(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def close(self, *, then: Callable[[], None] | None = None) -> None:
        if then is not None:
            then()


_normal: Callable[[str], str] = functools.lru_cache(maxsize=64)(os.path.normpath)
"""A folder's normal form (absolute, as joined), worked out once: see :func:`_absolute`."""


def _absolute(where: str) -> str:
    """``os.path.abspath(where)``: the working directory is asked at each run (it may have
    changed), the path's normal form worked out once."""
    return _normal(where if os.path.isabs(where) else os.path.join(os.getcwd(), where))


_SPARE = Path(".af-spare")
"""What a recorder's passing name is for a file made ahead (it has no name)."""
_TMPFILE = getattr(os, "O_TMPFILE", 0)


class _Spares:
    """Files made ahead for the next recordings, one per folder: an unnamed file (Linux's
    O_TMPFILE), opened on the sync thread while a run goes on, which the next run in that
    folder takes and names (linkat) once its header is in it, as it names a file it made.
    Making a file costs the filesystem far more than naming one (0.01 ms on a quiet disk,
    0.4 ms measured on a busy one, where writing costs no more): a run of an agent whose
    runs follow each other no longer waits for it. Where the system has no O_TMPFILE or the
    folder's filesystem refuses it, runs make their own files as before."""

    LIMIT = 4
    """Folders with a file made ahead (the least recently asked for gives its own up)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[int, int]] = {}
        """folder -> (an unnamed file there, the process that made it)"""
        self._refused: set[str] = set()
        self._proc: tuple[int, int] | None = None
        """(process, its /proc/self/fd opened): what a file with no name is linked from."""
        self.usable = bool(_TMPFILE) and os.path.isdir("/proc/self/fd")

    def take(self, folder: str) -> int:
        """The file made ahead in ``folder`` (-1: none); it is this caller's from now on."""
        if not self._files:
            return -1
        with self._lock:
            made = self._files.pop(folder, None)
        if made is None:
            return -1
        fd, pid = made
        if pid != os.getpid():  # a forked child's copy of its parent's: never shared
            os.close(fd)
            return -1
        return fd

    def wanted(self, folder: str) -> bool:
        return self.usable and folder not in self._refused and folder not in self._files

    def make(self, folder: str) -> None:
        """On the sync thread: an unnamed file in ``folder`` for the next run there."""
        if not self.wanted(folder):
            return
        try:
            fd = os.open(folder, os.O_RDWR | os.O_APPEND | _TMPFILE | os.O_CLOEXEC, 0o644)
        except OSError:  # the filesystem cannot (or the folder is gone): runs make their own
            self._refused.add(folder)
            return
        with self._lock:
            files = self._files
            if len(files) >= self.LIMIT:
                oldest = next(iter(files))
                os.close(files.pop(oldest)[0])
            old = files.pop(folder, None)
            files[folder] = (fd, os.getpid())
        if old is not None:
            os.close(old[0])

    def forget(self, folder: str) -> None:
        """The file made ahead in ``folder`` is given up (the folder is going away)."""
        with self._lock:
            made = self._files.pop(folder, None)
        if made is not None and made[1] == os.getpid():
            os.close(made[0])

    def link(self, fd: int, path: str | Path) -> None:
        """Name the unnamed file ``fd`` (its first link, never over another file)."""
        pid = os.getpid()
        proc = self._proc
        if proc is None or proc[0] != pid:
            proc = self._proc = (pid, os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY))
        os.link(str(fd), path, src_dir_fd=proc[1], follow_symlinks=True)


_SPARES = _Spares()


_Job = tuple[int, bool, Callable[[], None] | None, str | None]
"""A file to sync (and close), what to call once it is durable, and the folder to make the
next run's file in first (None: none)."""


class _Syncer:
    """One thread of the process that makes recordings durable and closes them: fdatasync
    at iteration boundaries, and when a run ends, fsync and close, in the order asked; and
    makes the files next runs will write to (:class:`_Spares`). A run never waits on the
    disk; the process waits for what is queued when it exits, so a finished run's file is
    durable by the time the process is gone.

    A killed process loses nothing either way: written lines are in the OS already; the
    sync only guards against the machine itself going down."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._queued = 0
        self._idle = threading.Condition(self._lock)
        self._held = threading.local()
        """Per thread: the closing jobs a sync door holds until its run is over (see
        :meth:`hold`), or none."""

    def put(
        self,
        fd: int,
        *,
        close: bool,
        then: Callable[[], None] | None = None,
        spare: str | None = None,
    ) -> None:
        """Sync ``fd`` (and close it); ``spare``: first make a file in that folder for the
        next run there, unless one is."""
        job = (fd, close, then, spare if spare is not None and _SPARES.wanted(spare) else None)
        held: list[_Job] | None = getattr(self._held, "jobs", None)
        if held is not None and close:
            held.append(job)
            return
        self._put(job)

    def hold(self) -> list[_Job] | None:
        """From now until :meth:`release`, the files this thread's runs close are handed
        to the sync thread at the release, not as they close. For a sync door: waking the
        thread as a run closes its file makes the run's last steps wait for it, whenever
        the loop lets the GIL go (its selector, a write); woken as the door returns, it
        does its work while the caller goes on. Returns the list of held jobs (None: this
        thread holds already, and the outer hold releases them)."""
        if getattr(self._held, "jobs", None) is not None:
            return None
        jobs: list[_Job] = []
        self._held.jobs = jobs
        return jobs

    def release(self, jobs: list[_Job] | None) -> None:
        """Hand the jobs held since :meth:`hold` to the sync thread, in the order asked."""
        if jobs is None:
            return
        self._held.jobs = None
        for job in jobs:
            self._put(job)

    def _put(self, job: _Job) -> None:
        with self._lock:
            self._queued += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="af-recording-sync", daemon=True
                )
                self._thread.start()
        self._jobs.put(job)

    def _run(self) -> None:
        leave_sigint_to_the_main_thread()
        yield_to_the_threads_that_wake_this_one()  # a run's thread wakes it as it ends
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                fd, close, then, spare = job
                if spare is not None:
                    _SPARES.make(spare)
                self._sync(fd, close, then)
            finally:
                with self._lock:
                    self._queued -= 1
                    if not self._queued:
                        self._idle.notify_all()

    @staticmethod
    def _sync(fd: int, close: bool, then: Callable[[], None] | None) -> None:
        durable = True
        try:
            if close:
                os.fsync(fd)
            else:
                os.fdatasync(fd)
        except OSError:
            durable = False  # closed or gone underneath: nothing left to make durable
        if close:
            try:
                os.close(fd)
            except OSError:
                pass
        if then is not None and durable:
            then()

    def wait(self, timeout: float | None = None) -> bool:
        """Until every sync and close asked for is done; False if ``timeout`` came first.
        Jobs this thread holds are handed over first (it waits for them too)."""
        held: list[_Job] | None = getattr(self._held, "jobs", None)
        if held:
            jobs = held[:]
            held.clear()
            for job in jobs:
                self._put(job)
        with self._lock:
            return self._idle.wait_for(lambda: not self._queued, timeout)


_SYNCER = _Syncer()


def _forked() -> None:
    # A child starts with no jobs and no thread of its parent's: its parent's files are
    # the parent's to sync and close, and a count of jobs in flight copied from the parent
    # (which no thread of the child would ever finish) kept the child's exit waiting on
    # them for good, as a lock a parent's thread held at the fork would keep its next put.
    # Nor does it hold jobs for a door it did not enter: its runs hand theirs over as they
    # close, unless a door of its own holds them.
    _SYNCER.__init__()  # type: ignore[misc]


os.register_at_fork(after_in_child=_forked)


def forget_folder(folder: Path) -> None:
    """The runs' folder ``folder`` was removed: the file made ahead there is given up."""
    _SPARES.forget(os.path.abspath(folder))


def hold_syncs() -> list[_Job] | None:
    """See :meth:`_Syncer.hold` (for the sync doors)."""
    return _SYNCER.hold()


def release_syncs(jobs: list[_Job] | None) -> None:
    """See :meth:`_Syncer.release`."""
    _SYNCER.release(jobs)


def wait_for_syncs(timeout: float | None = None) -> bool:
    """Wait until every finished run's recording is durable and closed (done for you when
    the process exits). False if ``timeout`` seconds passed first."""
    return _SYNCER.wait(timeout)


atexit.register(wait_for_syncs)
