"""Reading a recording: one pass builds an index of line offsets, lines are parsed on demand.

The reader never runs code from the file (JSON only), never loads a line longer than
``max_line`` bytes, and keeps going past bad lines: each becomes a :class:`Problem` with its
line number. A torn last line (a run killed mid-write) is reported, not fatal. Only a file
that is not a recording at all, or one written by a newer major version of the format,
refuses to open.
"""

from __future__ import annotations

import bisect
import gc
import hashlib
import mmap
import os
import re
import threading
from array import array
from binascii import b2a_base64
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple, TypeVar, overload

import msgspec
import orjson

from afcore.errors import RecordingFormatError, UnsupportedVersionError
from afcore.recording._format import CALL_FRAME, FORMAT, FORMAT_VERSION
from afcore.recording._hashing import SCHEMES, V10, V11, Scheme, request_digest
from afcore.recording._structs import (
    KNOWN_TYPES,
    Blob,
    Call,
    CallTool,
    Commit,
    ContextEvicted,
    Header,
    Record,
    Reply,
    RunEnd,
    Segment,
    UnknownRecord,
)
from afcore.recording._typed import AGENT_TYPES, InvalidRecord, judged, record, typed, unknown

"""The fields of a call that a 1.1 call line leaves out when they are the call before's."""

__all__ = [
    "MAX_LINE",
    "CallCheck",
    "CheckedBlob",
    "CheckedTool",
    "Problem",
    "Recording",
    "ToolLine",
    "TornTail",
    "open_recording",
]

_R = TypeVar("_R", Call, Commit, Reply, RunEnd)

MAX_LINE = 32 * 1024 * 1024
"""Lines longer than this are reported and skipped, so one huge line cannot exhaust memory."""

CACHE_BYTES = 32 * 1024 * 1024
"""Parsed values are cached while the lines they were parsed from add up to at most this
many bytes: a cache counted in entries would hold 4,096 tool results of 48 KB each."""

RECENT_BYTES = 8 * 1024 * 1024
"""A walk keeps the last blob lines it passed, up to this many bytes, by id: a record names
the blobs written just before it, and a reader that resolves them (``af show``) takes them
from here rather than finding each in the file again."""

RELEASE_EVERY = 32 * 1024 * 1024
"""Bytes read through the map between two releases of its pages (see
:meth:`Recording.release_pages`) when :meth:`Recording.records` walks the file."""

SUPPORTED_MAJOR = int(FORMAT_VERSION.split(".")[0])


class Problem(msgspec.Struct, frozen=True):
    line: int
    """The 1-based line number the problem is on (0: the file as a whole)."""
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "message": self.message}


class TornTail(msgspec.Struct, frozen=True):
    line: int
    """The line number of the incomplete last line."""
    size: int
    """How many bytes of it made it to the file."""

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "bytes": self.size}


class CheckedBlob(NamedTuple):
    """A blob line as a checking walk gives it (``records(blobs="checked")``): its id, and
    whether its value hashes to it. The value stays on disk (:meth:`Recording.blob`).
    A named tuple: a big file's walk makes one per blob line."""

    id: str
    intact: bool
    """True when the value's canonical JSON hashes to the id."""


_checked = tuple.__new__
"""``_checked(CheckedBlob, (id, intact))``: a CheckedBlob made in C."""


class CallCheck(msgspec.Struct, frozen=True):
    call: int
    ok: bool
    recorded: str
    """The hash the file holds, taken when the call was sent."""
    rebuilt: str | None
    """The hash of the request rebuilt from the file (None when it could not be rebuilt)."""
    problem: str | None = None


_KIND_CODES = {
    "header": ord("h"),
    "blob": ord("b"),
    "commit": ord("c"),
    "call": ord("C"),
    "reply": ord("r"),
    "run_end": ord("e"),
    "seal": ord("s"),
}
_OTHER, _BAD, _BLANK = ord("o"), ord("!"), ord(" ")
_UNINDEXED = KNOWN_TYPES - _KIND_CODES.keys()
"""Records the index keeps only the kind of (context_evicted, args_invalid, ...)."""
_SEALED = ord("S")
"""A seal as af writes it, taken by its bytes (a malformed one is indexed as "seal")."""
_EVICTED = ord("E")
"""A context_evicted record as af writes it, taken by its bytes (any other is parsed)."""
_COMMIT = _KIND_CODES["commit"]
_KIND_NAMES = {code: name for name, code in _KIND_CODES.items()} | {_SEALED: "seal"}
_BY_BYTES = {"seal": _SEALED, "context_evicted": _EVICTED}
"""The records a walk may leave unparsed when they are af's own shape (see ``only``)."""
_BLOB_PREFIX = b'{"t":"blob","id":"'
_REPLY_HEAD = re.compile(
    rb'\{"t":"reply","seq":\d+,"rsid":"[^"\\]*","iter":-?\d+,"call":(\d{1,18}),'
    rb'"writes":\[\{"key":"message:(\d{1,18})","ref":"[0-9a-f]{64}"\}\],'
)
"""The head of a call or a reply as af 1.0 writes them: the few numbers the index needs, read
without parsing the line (the rest is parsed when the record is read). 1.1 lines are short
(their messages inline, when short) and are parsed: a call may take fields from the one
before, and a reply writes the route too."""
_CALL_HEAD = re.compile(rb'\{"t":"call","seq":\d+,"rsid":"[^"\\]*","iter":-?\d+,"call":(\d{1,18}),')
_FAST = {
    b'{"t":"blob",': ord("b"),
    b'{"t":"call",': ord("C"),
    b'{"t":"reply"': ord("r"),
    b'{"t":"contex': _EVICTED,
    b'{"t":"commit': ord("c"),
}
_FAST_11 = {head: code for head, code in _FAST.items() if code not in (ord("C"), ord("r"))}
"""The lines of a 1.1 file taken by their first bytes: calls and replies are parsed."""
_TYPED_11 = _FAST_11 | {b'{"t":"call",': ord("C")}
"""The lines of a 1.1 file a walk that gives records tells apart by their first bytes: a
call that says its frame is typed in one decode (see :meth:`Recording._typed_call`)."""
_NUMBER = rb"(-?(?:0|[1-9]\d{0,17}))"
_TEXT = rb'"([\x20\x21\x23-\x5b\x5d-\x7e]*+)"'
"""(``*+``, possessive: the class holds no quote, so the string's characters are never given
back, and the engine keeps no marks to give them back by: a tenth of a line's match.)"""
EVICTED_LINE = re.compile(
    rb'\{"t":"context_evicted","rsid":%s,"iter":%s,"fold":%s,"message":%s,"hash":%s\}'
    % (_TEXT, _NUMBER, _NUMBER, _NUMBER, _TEXT)
)
"""A context_evicted record as af writes it (a fold writes one per message that left): of
printable ASCII strings without escapes and integers within 64 bits, so that a line it
matches is valid JSON and a valid record whole, whose fields are its groups. A line it does
not match is parsed."""
_OUTCOME_STATUS = rb"ok|error|rejected|unknown_tool|interrupted|denied|withheld"
_RESULT_STATUS = rb"success|failure|denied|invalid|partial|pending|absent|interrupted"
_INT = rb"-?(?:0|[1-9]\d{0,17})"
_READ_PAIR = rb'\["[\x20\x21\x23-\x5b\x5d-\x7e]*+",%s\]' % _INT
TOOL_COMMIT = re.compile(
    rb'\{"t":"commit","seq":(%s),"rsid":"tool:[\x20\x21\x23-\x5b\x5d-\x7e]*+","iter":(%s),'
    rb'"reads":(\[(?:%s(?:,%s)*)?\]),'
    rb'"writes":\[\{"key":"message:(0|[1-9]\d{0,17})","ref":"([A-Za-z0-9_-]{1,64})"\}\],'
    rb'"tool":\{"name":%s,"k":(%s),"call_id":%s,"status":"(%s)",'
    rb'"ms":(-?(?:0|[1-9]\d{0,15})\.\d{1,17}),"result_status":"(%s)"\}\}'
    % (_INT, _INT, _READ_PAIR, _READ_PAIR, _TEXT, _INT, _TEXT, _OUTCOME_STATUS, _RESULT_STATUS)
)
"""A 1.1 commit of a tool's outcome as af writes it for most calls: the tool's message
written by ref, the outcome's plain fields (no source, cut, effects, ...), printable ASCII
strings without escapes, integers within 64 bits, ``ms`` with a decimal point; so that a line
it matches is valid JSON and a valid record whole. Its groups: seq, iter, reads (the JSON
array), the message's number and ref, the tool's name, k, call_id, status, ms and
result_status. A walk indexes such a line from its groups; a run's view reads it as a
:class:`ToolLine`, a checking walk as a :class:`CheckedTool` (see ``records``); any other
commit is parsed."""


class ToolLine(NamedTuple):
    """A commit of a tool's outcome in af's common shape (see :data:`TOOL_COMMIT`), as a
    run's view reads it: the same values its record holds, the record left unbuilt."""

    iter: int
    ref: str
    """The ref of the tool's message (the commit's one write)."""
    name: str
    k: int
    call_id: str
    status: str
    ms: float
    result_status: str


def _tool_line(idx: _Index, i: int, groups: tuple[str, ...]) -> ToolLine:
    """A tool's commit taken by its text (:func:`_as_text` of :data:`TOOL_COMMIT`'s groups)
    indexed (:func:`_index_tool`) and read as a run's view reads it."""
    _, it, _, n, ref, name, k, call_id, status, ms, result = groups
    k_ = int(k)
    _index_tool(idx, i, int(n), f"{name}#{k_}")  # (k as int() writes it: -0 as 0)
    return _new(ToolLine, (int(it), ref, name, k_, call_id, status, float(ms), result))


_new = tuple.__new__
"""``_new(ToolLine, values)``: a named tuple made in C, without its ``__new__``'s frame."""


def _as_text(pattern: re.Pattern[bytes]) -> re.Pattern[str]:
    """``pattern`` for the text latin-1 decodes its bytes to, matching where it matches: each
    byte is the code point of its value, and ``\\d`` is ``[0-9]`` (ASCII) in both. (re keeps
    the compiled pattern.)"""
    return re.compile(pattern.pattern.decode("latin-1"), re.ASCII)


class CheckedTool(NamedTuple):
    """A commit of a tool's outcome in af's common 1.1 shape (see :data:`TOOL_COMMIT`), as a
    checking walk gives it (``records(blobs="checked", tool_lines=True)``): the values a
    check of the commit log reads, the record left unbuilt. The line is a valid commit
    whose stage is a tool's (``tool:<name>``) and whose one write is ``message:<message>``
    by ``ref``. A named tuple: a big file's walk makes one per tool call."""

    seq: int
    reads: list[list[Any]]
    """As parsed: ``[key, seq]`` pairs of a string and an integer."""
    message: int
    ref: str


SEAL_LINE = re.compile(rb'\{"t":"seal","h":"([A-Za-z0-9_-]{22})"\}')
"""A seal as af writes it: taken by its bytes, unparsed (a file holds one per write)."""


_decode_evicted = msgspec.json.Decoder(ContextEvicted).decode
_decode_commit = msgspec.json.Decoder(Commit).decode
_decode_call = msgspec.json.Decoder(Call).decode
_TYPED_SIZE = 2000
"""A commit line shorter than this, plain ASCII without escapes and its numbers within 64
bits and without exponents, is decoded straight to its Struct (see
:meth:`Recording._typed_commit`): for such a line msgspec and orjson agree on every value,
and it cannot nest deeper than orjson parses. Any other is parsed, then converted."""
_DIGITS = bytes.maketrans(b"123456789+-E", b"00000000000e")
"""Digits and signs to 0, E to e: an exponent is then ``0e0`` (or a string that holds a
digit, an e and a digit or a sign: parsed, as any line)."""
_LONG = b"0" * 19
"""19 digits in a row: a number past 64 bits (or part of a string)."""
_force_setattr = msgspec.structs.force_setattr


def _decodable(raw: bytes) -> bool:
    """Whether a line may be decoded straight to its Struct (see :data:`_TYPED_SIZE`): plain
    ASCII without escapes (strings with escapes orjson and msgspec may judge apart), and no
    number past 64 bits or with an exponent (orjson: not JSON)."""
    # (find, not in: ``bytes in bytes`` raises and clears an error inside, 2,000 steps)
    if not raw.isascii() or raw.find(b"\\") >= 0:
        return False
    digits = raw.translate(_DIGITS)
    return digits.find(b"0e0") < 0 and digits.find(_LONG) < 0


_Match = re.Match


_SMALL_BLOB = 4096
_SMALL_KEPT = 256
"""A checking walk keeps up to this many of the last blob lines it passed that are at most
_SMALL_BLOB bytes long (see Recording.read_blob)."""
_PIECE = 1024 * 1024
"""A line longer than this is read in pieces of this size."""
_LINE_BITS = 27
"""A blob is found by a 36-bit key made from its id (see :func:`_prefix`) packed with its line
index (up to 2**27 lines) into one sortable integer."""
_KEY_BITS = (1 << 36) - 1


def _prefix(ref: bytes | str, size: int) -> int:
    """36 bits of an id, to find its blob by: its first 9 hex digits, or (a base64url id) its
    hash, which a walk takes from the id's bytes in C where three lookups of its digits took
    four times as long (a big file has a blob line for every tool result). The keys live as
    long as the process (the index is never stored), so the hash's seed does not matter. A
    base64url id whose first six characters are not all digits is not an id (ValueError)."""
    if size == 64:
        return int(ref[:9], 16)
    if isinstance(ref, str):
        ref = ref.encode("utf-8", "surrogatepass")
    elif not isinstance(ref, bytes):
        ref = bytes(ref[:6])  # (only whether it is an id counts: it is found by no ref)
    if ref[:6].translate(None, _B64_DIGITS):
        raise ValueError(ref)
    return hash(ref) & _KEY_BITS


_B64_DIGITS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


_URLSAFE = bytes.maketrans(b"+/", b"-_")


class _Index:
    """Where everything is, in flat arrays, so that memory grows by a few bytes per line
    (not by Python objects per record) and a 300 MB file stays cheap to hold open. Offsets
    and line indices are unsigned ("Q"): CPython appends those without its argument parser,
    in half the time of signed ones (a walk appends a few per line)."""

    def __init__(self) -> None:
        self.starts = array("Q")
        """line index -> its first byte (a line ends where the next starts, less its newline)"""
        self.kinds = bytearray()
        """a code per line: h b c C r e (the record types), o (another type), ! (a line that
        is not a record), space (blank)"""
        self.blob_keys = array("q")
        """(id prefix << _LINE_BITS) | line index, sorted once the file is read"""
        self.messages = _Numbered()
        """message n -> line index of the commit or reply that wrote it"""
        self.calls = _Numbered()
        """call n -> line index; by number, so a lost line renumbers nothing"""
        self.replies = _Numbered()
        """call n -> line index of its reply"""
        self.frames = _Numbered()
        """call n -> line index of the call line that says its model, slots, params and
        cache (1.1: itself, or the last one before it that says them)"""
        self.seals = array("Q")
        """line indices of the seals (1.1), in order"""
        self.commits = array("Q")
        """seq-1 -> line index (commits, calls and replies all hold a seq)"""
        self.tool_commits = array("Q")
        self.tools: dict[str, int] = {}
        """`name#k` of a tool call -> line index of its tool stage"""
        self.keys: dict[str, array[int]] = {}
        """key -> line indices of the commits that wrote it, in order (every key but the
        numbered ones, message:<n>, call:<n> and reply:<n>, which have their own maps)"""
        self.run_end: int | None = None
        self.unknown = 0


class _Numbered:
    """n -> a line index, for the numbers a file gives its messages, calls and replies: in an
    array while they run on as af writes them, any other in a dict, so that memory follows
    the file and never a number written in it (``"call": 99999999``)."""

    __slots__ = ("dense", "sparse")

    def __init__(self) -> None:
        self.dense = array("q")
        self.sparse: dict[int, int] = {}

    def numbers(self) -> list[int]:
        """The numbers set, in order."""
        found = [n for n, i in enumerate(self.dense) if i >= 0]
        return found + sorted(self.sparse) if self.sparse else found

    def count(self) -> int:
        return sum(1 for i in self.dense if i >= 0) + len(self.sparse)

    def top(self) -> int:
        """The highest number set (0: none)."""
        return max(len(self.dense) - 1, max(self.sparse, default=0), 0)


_DENSE_GAP = 4096
"""A number this far past the array's end goes in the dict rather than growing the array."""


def _index_writes(idx: _Index, keys: list[str], i: int) -> None:
    """Line ``i`` wrote ``keys``: where each key's versions are found."""
    index, dense = idx.keys, idx.messages.dense
    for key in keys:
        if key.startswith("message:"):
            n = int(key[8:])
            if n == len(dense):  # the next message, as af writes them
                dense.append(i)
            else:
                _put(idx.messages, n, i)
        elif key in index:
            index[key].append(i)
        else:
            index[key] = array("Q", (i,))


def _put(numbers: _Numbered, n: int, value: int) -> None:
    """``numbers[n] = value`` unless already set."""
    if n < 0:
        raise ValueError(n)
    dense = numbers.dense
    if n >= len(dense):
        if n - len(dense) > _DENSE_GAP:
            numbers.sparse.setdefault(n, value)
            return
        dense.extend([-1] * (n + 1 - len(dense)))
    if dense[n] < 0:
        dense[n] = value


def _put_next(numbers: _Numbered, n: int, value: int) -> None:
    """:func:`_put`, fast for the usual case: ``n`` is the next number."""
    if n == len(numbers.dense):
        numbers.dense.append(value)
    else:
        _put(numbers, n, value)


def _index_tool_commit(idx: _Index, i: int, groups: tuple[bytes, ...]) -> int:
    """A tool's commit taken by its bytes (:data:`TOOL_COMMIT`'s groups) indexed as
    ``_index_record`` indexes one parsed; the number of the message it writes."""
    n = int(groups[3])
    # name#k, k as int() writes it: as the digits, but -0 as 0
    k = groups[6]
    _index_tool(idx, i, n, (groups[5] + b"#" + (k if k != b"-0" else b"0")).decode())
    return n


def _index_tool(idx: _Index, i: int, n: int, name_k: str) -> None:
    """Line ``i``, a tool's commit that writes message ``n`` for the call ``name_k``, indexed
    (both walks' tool lines come here, by their bytes or their text)."""
    idx.commits.append(i)
    dense = idx.messages.dense
    if n == len(dense):
        dense.append(i)
    else:
        _put(idx.messages, n, i)
    idx.tool_commits.append(i)
    idx.tools.setdefault(name_k, i)
    idx.kinds.append(_COMMIT)


def _index_head(idx: _Index, i: int, raw: bytes, kind: int) -> int:
    """A 1.0 call or reply (``kind``) indexed from its head (see :data:`_REPLY_HEAD`): its
    kind, or -1 when the head is not as af writes it (the line is then parsed)."""
    if kind == _KIND_CODES["reply"]:
        head = _REPLY_HEAD.match(raw)
        if head is None:
            return -1
        idx.commits.append(i)
        _put_next(idx.replies, int(head[1]), i)
        _put_next(idx.messages, int(head[2]), i)
    else:
        head = _CALL_HEAD.match(raw)
        if head is None:
            return -1
        idx.commits.append(i)
        _put_next(idx.calls, int(head[1]), i)
    idx.kinds.append(kind)
    return kind


def _get(numbers: _Numbered, n: int) -> int | None:
    dense = numbers.dense
    if 0 <= n < len(dense):
        return dense[n] if dense[n] >= 0 else None
    return numbers.sparse.get(n) if numbers.sparse else None


def open_recording(
    path: str | os.PathLike[str],
    *,
    max_line: int = MAX_LINE,
    upto: int | None = None,
    index: bool = True,
) -> Recording:
    """Open a recording for reading. Raises :class:`RecordingFormatError` when the file is not
    an af recording and :class:`UnsupportedVersionError` when it is from a newer major version.
    ``upto``: index only the whole lines in the file's first ``upto`` bytes (a viewer shows
    the first calls of a big file at once, then opens it whole: :meth:`Recording.reopen`).
    ``index=False``: read only the header now; the index grows as :meth:`Recording.records`
    walks the file, so that a reader going through it once (``af show``, ``af verify``) parses
    each line once, for the index and for itself alike.
    A bundle (``af export``) opens as the recording it holds."""
    from afcore.recording._bundled import recording_path

    rec = Recording(recording_path(path), max_line=max_line, upto=upto, index=index)
    rec.origin = Path(path)
    return rec


class Recording:
    """A recording opened for reading. Cheap to open; parses lines only when asked.

    Safe to read from several threads once indexed: the index does not change after, and the
    value cache takes a lock. A file that grows (a run still going) is read again whole with
    :meth:`reopen`, which gives a new Recording and leaves this one as it was. Opened with
    ``index=False``, the index is built by the first walk of :meth:`records`, and until that
    walk ends what the index answers covers the lines walked so far: such a Recording is for
    one reader going through the file once."""

    def __init__(
        self,
        path: Path,
        *,
        max_line: int = MAX_LINE,
        upto: int | None = None,
        index: bool = True,
    ) -> None:
        self.path = path
        self.origin = path
        """The path the reader was given: a bundle's, when ``path`` is the recording in it."""
        self.max_line = max_line
        self.upto = upto
        self.problems: list[Problem] = []
        self.torn_tail: TornTail | None = None
        self.size = 0
        """The file's size when it was opened."""
        try:
            # A buffer of a line piece's size: lines of a few KB come out of it whole, where
            # the default 8 KB buffer refills and copies them in parts (3x the time).
            file = path.open("rb", buffering=_PIECE)
        except FileNotFoundError:
            raise RecordingFormatError(f"no such file: {path}", path=path) from None
        except IsADirectoryError:
            raise RecordingFormatError(f"{path} is a folder, not a recording", path=path) from None
        except OSError as e:
            raise RecordingFormatError(f"cannot read {path}: {e.strerror}", path=path) from None
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            file.close()
            raise RecordingFormatError(f"{path} is empty, not an af recording", path=path)
        try:
            self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            file.close()
            raise
        self.size = len(self._map)
        # The map keeps its own handle on the file; ours is closed once the index is built,
        # so a Recording that is never closed leaks no file descriptor.
        self._file: IO[bytes] | None = file
        self._index = _Index()
        self._messages: int | None = None
        self._partial = upto is not None and upto < self.size
        """only a prefix is to be indexed: a line without its newline is left for later"""
        self._end = upto if self._partial and upto is not None else self.size
        """the lines that end by this offset are indexed (a file still being written grows
        past what was mapped)"""
        self._pos = 0
        """where the next line to index starts"""
        self._last_end = 0
        """where the last whole line indexed ends, its newline excluded"""
        self._size = 0
        """where the last line indexed ends (a whole line's newline excluded)"""
        self._blobs: dict[int, int] = {}
        """blobs indexed since :attr:`_Index.blob_keys` was last sorted: id prefix -> line
        index (the first stored under a prefix; the others wait in ``_collided``)"""
        self._collided: list[int] = []
        self._recent: dict[bytes, tuple[int, bytes]] = {}
        """a walk's last blob lines (see :data:`RECENT_BYTES`) not read yet: id -> line index,
        bytes. The walk puts them in, a read takes its own out, each by one dict operation
        (atomic: a reader on another thread needs no lock for them)."""
        self._small: dict[bytes, tuple[int, bytes]] = {}
        """a checking walk's last small blob lines (see :meth:`read_blob`): id -> line
        index, bytes"""
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self.scheme: Scheme = V10
        """How the file's ids are made (its header's ``hash``)."""
        self._v11 = False
        """Lines are 1.1's: a call may take fields from the one before, commits do not
        name their stage, messages may be inline, seals close every write."""
        self._id_end = len(_BLOB_PREFIX) + 64
        self._ref_size = 64
        """How long an id is (the scheme's size)."""
        self._frame: tuple[int, dict[str, Any]] | None = None
        """The last call frame read: its line index and its fields."""
        self._last_frame = -1
        """While indexing: the line index of the last call line that says its frame."""
        try:
            for _ in self._scan():
                break  # the header first: it says how the rest is read
            self.header = self._read_header()
            self.scheme = SCHEMES.get(self.header.hash, V10)
            self._v11 = self.scheme is not V10
            self._id_end = len(_BLOB_PREFIX) + self.scheme.size
            self._ref_size = self.scheme.size
            if index:
                self._index_all()
        except BaseException:
            self.close()
            raise

    @property
    def complete(self) -> bool:
        """True once the index covers every line it is to cover (see ``index=False``)."""
        return self._file is None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._map.close()

    def __enter__(self) -> Recording:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the index -----------------------------------------------------------------------

    def _index_all(self) -> None:
        # The index makes many small objects that never form cycles: the cycle collector
        # walking them again and again would make a big file's index quadratic in its size.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for _ in self._scan():
                pass
        finally:
            if collecting:
                gc.enable()

    def _finish(self) -> None:
        """The scan is over: sort the blobs it found, let the file go."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._blobs or self._collided:
            keys = list(self._index.blob_keys)
            keys += [(prefix << _LINE_BITS) | i for prefix, i in self._blobs.items()]
            keys += self._collided
            keys.sort()
            self._index.blob_keys = array("q", keys)
            self._blobs = {}
            self._collided = []
        self._recent.clear()

    def _scan(
        self,
        *,
        recent: bool = False,
        skip: Collection[int] = (),
        tool_lines: bool = False,
        records: bool = False,
        only: Collection[str] | None = None,
        release: int = RELEASE_EVERY,
    ) -> Iterator[Any]:
        """Index the lines not indexed yet, one at a time, giving each as it is indexed:
        ``(line index, bytes, kind code, parsed JSON or None)``. Blobs, calls and replies as
        af writes them are indexed from their first bytes, unparsed; the rest are parsed
        here, and what was parsed is handed on so that no line is parsed twice.
        ``recent``: keep the last blob lines for :meth:`blob` (a walk that resolves refs).
        ``skip``: kind codes of the lines taken by their bytes (blobs, seals, evictions) that
        the walk has no use for: indexed, not given (most lines of a big file).
        ``tool_lines``: a tool's commit in af's common shape is given as its :class:`ToolLine`
        (else as the match of :data:`TOOL_COMMIT`). ``records``: each line is given as
        :meth:`records` gives it, ``(line number, record)`` of the types in ``only`` (all:
        None), the lines in ``skip`` left out, in this one loop (a big file's walk spends its
        time per line); ``release``: the offset past which the map's pages are next handed
        back."""
        file = self._file
        if file is None:
            return
        idx, limit = self._index, self.max_line
        # Only a blob that is the first under its id may answer for it: blobs sorted into
        # the index by an earlier scan are not among those this one compares with.
        kept = self._recent if recent and not idx.blob_keys else None
        keep = RECENT_BYTES
        held = sum(len(raw) for _, raw in list(kept.values())) if kept else 0
        """the bytes of the blob lines in ``kept`` when it was last counted and of those put
        in since (see _trim_recent)"""
        starts, kinds = idx.starts, idx.kinds
        blob, blank, bad = _KIND_CODES["blob"], _BLANK, _BAD
        sealed, seals, seal_line = _SEALED, idx.seals, SEAL_LINE.fullmatch
        evicted, evicted_line = _EVICTED, EVICTED_LINE.fullmatch
        commit, tool_commit = _KIND_CODES["commit"], TOOL_COMMIT.fullmatch
        call, typed_call = _KIND_CODES["call"], self._typed_call
        # A run's view takes a tool's commit as text: its values are strs without a decode
        # each (the shape is printable ASCII, which latin-1 maps byte for byte).
        tool_text = _as_text(TOOL_COMMIT).fullmatch if tool_lines and records else None
        blobs, collided = self._blobs, self._collided
        index_record = self._index_record
        end, partial = self._end, self._partial
        pos, last_end = self._pos, self._last_end
        v11, id_end, id_size = self._v11, self._id_end, self.scheme.size
        short, digits, key_bits = self.scheme is V11, _B64_DIGITS, _KEY_BITS
        tail = self._size
        """where the last line indexed ends (a whole line's newline excluded)"""
        line = len(starts)
        readline, piece_size = file.readline, _PIECE
        small = min(piece_size - 1, limit + 1)
        """a line of at most this many bytes, its newline included, is whole and within the
        limit: most lines, which then take none of the steps for the others"""
        # 1.1 replies are parsed, and calls too unless this walk gives records (see _TYPED_11)
        heads = (_TYPED_11 if records else _FAST_11) if v11 else _FAST
        give_blobs, give_seals = blob not in skip, sealed not in skip
        give_evicted = evicted not in skip
        loads, types, convert, rejected, judge = (
            orjson.loads,
            AGENT_TYPES,
            msgspec.convert,
            msgspec.ValidationError,
            judged,
        )
        fill = self._fill if v11 else None
        problems = self.problems
        match, typed_commit = _Match, self._typed_commit
        typed = (Commit, Call)
        try:
            # Lines come from the buffered file (split in C); the map serves reads later.
            # A long line comes in pieces, and one over the limit is passed over, never held:
            # memory stays flat whatever a line's length. A line the walk gives goes out
            # with the index's size as the walk's reader may read it (only a line given is
            # read before the walk ends).
            while raw := readline(piece_size):
                size = len(raw)
                torn = False
                if size > small or raw[-1] != 10:
                    if size == piece_size and raw[-1] != 10:
                        raw, size = self._long_line(raw)
                    torn = raw[-1] != 10  # no newline: the last line, maybe cut short
                    if torn and partial:
                        break  # a prefix is wanted: this line is for a whole open
                    if pos + size > end:
                        break  # written after the file was mapped (a run still going)
                    i = line
                    line += 1
                    starts.append(pos)
                    pos += size
                    if torn:
                        length, last_end, tail = size, tail, pos
                    else:
                        length, tail = size - 1, pos - 1
                    if length > limit:
                        self._over_limit(line, length)
                        kinds.append(bad)
                        if not records:
                            self._size = tail
                            yield i, raw, bad, None
                        continue
                    # (a seal is 42 bytes with its newline: never among these lines)
                    fast = None if torn else heads.get(raw[:12])
                else:
                    if pos + size > end:
                        break  # written after the file was mapped (a run still going)
                    i = line
                    line += 1
                    starts.append(pos)
                    pos += size
                    tail = pos - 1
                    if size == 42 and seal_line(raw, 0, 41):  # by its size first: 1 line in 10
                        seals.append(i)
                        kinds.append(sealed)
                        if not give_seals:
                            continue
                        if not records:
                            self._size = tail
                            yield i, raw, sealed, None
                            continue
                        fast = sealed
                    else:
                        fast = heads.get(raw[:12])
                # The commonest lines first (a fold writes an eviction per message that
                # left; a tool's result is a blob line and a commit).
                kind = -1
                data: Any = None
                if fast is None:
                    pass
                elif fast == evicted:
                    if evicted_line(raw, 0, size - 1):
                        kinds.append(evicted)
                        if not give_evicted:
                            continue
                        kind = evicted
                elif fast == blob:
                    if size > id_end + 2 and raw[id_end] == 34 and raw[-2] == 125:
                        ref = raw[18:id_end]
                        prefix: int | None = None
                        if short:  # _prefix, inline: most lines of a big file are blobs
                            six = raw[18:24]
                            if six.isalnum() or not six.translate(None, digits):
                                prefix = hash(ref) & key_bits
                        else:
                            try:
                                prefix = _prefix(ref, id_size)
                            except ValueError:
                                pass
                        if prefix is not None:
                            if blobs.setdefault(prefix, i) != i:
                                collided.append((prefix << _LINE_BITS) | i)
                            elif kept is not None:
                                kept[ref] = (i, raw)
                                held += size
                                if held > keep:
                                    held = self._trim_recent(keep)
                            kinds.append(blob)
                            if not give_blobs:
                                continue
                            kind = blob
                elif fast == commit:
                    if raw[-2] != 125:
                        pass
                    elif tool_text is not None and v11:
                        shape = tool_text(raw.decode("latin-1"), 0, size - 1)
                        if shape is not None:
                            data = _tool_line(idx, i, shape.groups())
                            if pos > release:  # values read by ref come through the map
                                release = pos + RELEASE_EVERY
                                self.release_pages()
                            self._size = tail
                            yield line, data
                            continue
                        if records and size < _TYPED_SIZE:
                            data = typed_commit(i, raw)
                            if data is not None:
                                kinds.append(commit)
                                kind = commit
                    else:
                        found = tool_commit(raw, 0, size - 1) if v11 else None
                        if found is None and records and size < _TYPED_SIZE:
                            # Any other commit of af's shape typed in one decode, as a
                            # checking walk types it (records are what this walk gives).
                            data = typed_commit(i, raw)
                            if data is not None:
                                kinds.append(commit)
                                kind = commit
                        elif found is not None:
                            _index_tool_commit(idx, i, found.groups())
                            kind = commit
                            data = found
                elif fast == sealed:  # a seal given (the walk's reader reads them)
                    kind = sealed
                elif v11:  # a call (records are what this walk gives)
                    if raw[-2] == 125 and size < _TYPED_SIZE:
                        data = typed_call(i, raw)
                        if data is not None:
                            kinds.append(call)
                            kind = call
                elif raw[-2] == 125 and size > 20:  # a 1.0 call or reply
                    kind = _index_head(idx, i, raw, fast)
                if kind < 0:
                    try:
                        data = loads(raw)
                    except orjson.JSONDecodeError as e:
                        if torn:
                            self.torn_tail = TornTail(line, length)
                            starts.pop()
                            pos = tail = last_end
                            break
                        if raw.isspace():
                            kind = blank
                        else:
                            problems.append(Problem(line, f"not valid JSON ({_short(str(e))})"))
                            kind = bad
                    else:
                        kind = index_record(i, data)
                    kinds.append(kind)
                if not records:
                    self._size = tail
                    yield i, raw, kind, data
                    continue
                # As records() gives a line (the lines it takes from the index alike).
                if kind in skip:
                    continue
                if pos > release:  # values read by ref come through the map
                    release = pos + RELEASE_EVERY
                    self.release_pages()
                self._size = tail
                if data.__class__ in typed:  # typed already
                    if only is None or data.t in only:
                        yield line, data
                    continue
                try:
                    if data is None or data.__class__ is match:
                        data = loads(raw)
                    t = data.get("t")
                    cls = types.get(t)
                    if cls is None:
                        if only is None or t in only:
                            yield line, unknown(data)
                        continue
                    if fill is not None:
                        fill(data, i)
                    try:
                        found = convert(data, cls)
                    except rejected:
                        found = judge(cls, data)
                    if only is None or t in only:
                        yield line, found
                except orjson.JSONDecodeError as e:
                    problems.append(Problem(line, f"not valid JSON ({_short(str(e))})"))
                except InvalidRecord as e:
                    name = _KIND_NAMES.get(kind, "a")
                    problems.append(Problem(line, f"invalid {name} record: {e}"))
            # The end of the file, of what was mapped, or a torn last line.
            self._finish()
        finally:
            # The last whole line's end: the last line's, unless it was torn (it then ends
            # at ``pos``, where the next would start).
            self._pos, self._size = pos, tail
            self._last_end = last_end if tail == pos else tail

    def _long_line(self, head: bytes) -> tuple[bytes, int]:
        """A line longer than a piece, read on from its first piece: the whole line and its
        size, or (over the limit) its first bytes and its size, never held whole: memory
        stays flat whatever a line's length."""
        readline, limit = self._file.readline, self.max_line  # type: ignore[union-attr]
        size = len(head)
        pieces: list[bytes] | None = [head]
        piece = head
        while piece := readline(_PIECE):
            size += len(piece)
            if pieces is not None:
                pieces.append(piece)
                if size > limit + 1:
                    pieces = None  # over the limit: reported, not kept
            if piece[-1] == 10:
                break
        ended = b"\n" if piece and piece[-1] == 10 else b""
        return (b"".join(pieces) if pieces is not None else head[:64] + ended), size

    def _over_limit(self, line: int, length: int) -> None:
        limit = self.max_line
        self.problems.append(
            Problem(
                line, f"line is {_mb(length)}, over the {_mb(limit)} a record may take; skipped"
            )
        )

    def _trim_recent(self, keep: int) -> int:
        """The oldest blob lines a walk keeps dropped, until those left take at most half of
        ``keep`` bytes; the bytes they take. Reads took theirs out meanwhile, uncounted: the
        walk counts what it put in, and the lines left are counted here, once per ``keep``
        bytes put in (dropping down to ``keep`` would count them at every blob line)."""
        recent = self._recent
        held = sum(len(raw) for _, raw in list(recent.values()))
        for ref in list(recent):  # oldest first
            if held <= keep // 2:
                break
            dropped = recent.pop(ref, None)
            if dropped is not None:
                held -= len(dropped[1])
        return held

    def _index_record(self, i: int, data: Any) -> int:
        idx = self._index
        if not isinstance(data, dict) or not isinstance(data.get("t"), str):
            self.problems.append(Problem(i + 1, 'not a record (a JSON object with a string "t")'))
            return _BAD
        t: str = data["t"]
        if t in _UNINDEXED:
            return _OTHER
        _add = _put_next
        try:
            if t == "commit" or t == "reply":
                idx.commits.append(i)
                _index_writes(idx, [w["key"] for w in data.get("writes") or ()], i)
                if t == "reply":
                    _add(idx.replies, int(data["call"]), i)
                elif (tool := data.get("tool")) is not None:
                    idx.tool_commits.append(i)
                    idx.tools.setdefault(f"{tool['name']}#{tool['k']}", i)
            elif t == "call":
                idx.commits.append(i)
                n = int(data["call"])
                _add(idx.calls, n, i)
                if "system" in data or not self._v11:
                    self._last_frame = i
                if self._last_frame >= 0:
                    _put(idx.frames, n, self._last_frame)
            elif t == "seal":
                idx.seals.append(i)
            elif t == "blob":  # not in af's own layout: parsed here
                ref = data["id"]
                prefix = _prefix(ref, self.scheme.size)
                if self._blobs.setdefault(prefix, i) != i:
                    self._collided.append((prefix << _LINE_BITS) | i)
            elif t == "run_end":
                idx.run_end = i
            elif t not in KNOWN_TYPES:
                idx.unknown += 1
        except (KeyError, TypeError, ValueError, AttributeError):
            self.problems.append(Problem(i + 1, f"{t} record is missing or mangles a field"))
            return _BAD
        return _KIND_CODES.get(t, _OTHER)

    def _read_header(self) -> Header:
        idx = self._index
        if not idx.starts or idx.kinds[0] in (_BAD, _BLANK):
            first = self.problems[0].message if self.problems else "no complete first line"
            first = first.removesuffix("; skipped")  # nothing is read past a bad header
            raise RecordingFormatError(
                f"{self.path} is not an af recording: line 1: {first}", path=self.path, line=1
            )
        raw = self._raw(0)
        if idx.kinds[0] != _KIND_CODES["header"] or raw.get("format") != FORMAT:
            raise RecordingFormatError(
                f"{self.path} is not an af recording: line 1 is not an af.recording header",
                path=self.path,
                line=1,
            )
        version = str(raw.get("version", ""))
        try:
            major = int(version.split(".")[0])
        except ValueError:
            raise RecordingFormatError(
                f"{self.path}: the header's version {version!r} is not major.minor",
                path=self.path,
                line=1,
            ) from None
        if major > SUPPORTED_MAJOR:
            raise UnsupportedVersionError(
                f"{self.path} is format version {version}, newer than this af reads "
                f"({SUPPORTED_MAJOR}.x); upgrade af to read it",
                path=self.path,
                line=1,
            )
        try:
            return typed(Header, raw)
        except InvalidRecord as e:
            raise RecordingFormatError(
                f"{self.path}: line 1 is not a valid header ({e})",
                path=self.path,
                line=1,
            ) from None

    # -- lines and records ---------------------------------------------------------------

    @property
    def line_count(self) -> int:
        return len(self._index.starts)

    @property
    def partial(self) -> bool:
        """True when the index covers only a prefix of the file (see ``upto``)."""
        return self.upto is not None and self.upto < self.size

    @property
    def indexed_bytes(self) -> int:
        """How many bytes of the file the index covers."""
        return self.size if not self.partial else self._size

    def line_size(self, line: int) -> int:
        """How many bytes line ``line`` (from 1) takes, its newline excluded."""
        starts = self._index.starts
        i = line - 1
        end = starts[i + 1] - 1 if i + 1 < len(starts) else self._size
        return int(end - starts[i])

    def line_bytes(self, line: int, limit: int | None = None) -> bytes:
        """Line ``line`` (from 1) as stored, or its first ``limit`` bytes."""
        start = self._index.starts[line - 1]
        size = self.line_size(line)
        return self._map[start : start + (size if limit is None else min(size, limit))]

    @property
    def seal_lines(self) -> list[int]:
        """The lines (from 1) of the seals (1.1), in order."""
        return [i + 1 for i in self._index.seals]

    def sealed_writes(self) -> Iterator[tuple[int, memoryview, bytes]]:
        """Each seal (1.1) with what it covers, in order: its line (from 1), the bytes from
        the end of the seal before (or the file's start) up to its line, and its line's
        bytes. The walk hands the pages it read back as it goes."""
        starts, view = self._index.starts, memoryview(self._map)
        count, size = len(starts), self._size
        start = 0
        release = RELEASE_EVERY
        for i in self._index.seals:
            at = starts[i]
            end = starts[i + 1] - 1 if i + 1 < count else size
            yield i + 1, view[start:at], self._map[at:end]
            if at > release:  # the walk would otherwise keep every page of the file resident
                release = at + RELEASE_EVERY
                self.release_pages()
            start = end + 1

    def span(self, start: int, end: int) -> memoryview:
        """The file's bytes from ``start`` to ``end`` (offsets), as mapped."""
        return memoryview(self._map)[start:end]

    def line_start(self, line: int) -> int:
        """The offset of line ``line``'s first byte."""
        return int(self._index.starts[line - 1])

    def line_at(self, offset: int) -> int:
        """The line (from 1) the byte at ``offset`` is on."""
        return bisect.bisect_right(self._index.starts, offset)

    def release_pages(self) -> None:
        """Drop the file's pages from this process's resident memory; they stay in the
        system's cache, and a later read maps them again. A walk over a 300 MB file would
        otherwise hold all of it as resident memory."""
        if hasattr(mmap, "MADV_DONTNEED"):
            try:
                self._map.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass  # an empty or closed map: nothing to release

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of the file as it was opened, from ``offset``: from its
        mapping, so a file removed since (a flow's run, once folded into its log) reads."""
        return self._map[offset : offset + size]

    def grown(self) -> bool:
        """True when the file now holds more (or less) than this index was built from."""
        try:
            return os.stat(self.path).st_size != self.size
        except OSError:
            return False

    def reopen(self) -> Recording:
        """The file as it is now, indexed whole: for a file that grew, or that was opened
        as a prefix. This Recording stays as it was (another thread may be reading it)."""
        rec = Recording(self.path, max_line=self.max_line)
        rec.origin = self.origin
        return rec

    def _bytes(self, i: int) -> bytes:
        starts = self._index.starts
        end = starts[i + 1] - 1 if i + 1 < len(starts) else self._size
        return self._map[starts[i] : end]

    def _raw(self, i: int) -> Any:
        return orjson.loads(self._bytes(i))

    def _typed(self, i: int) -> Record | UnknownRecord:
        """The record on line index ``i``, validated against its type. Raises ValueError
        (InvalidRecord, orjson's JSONDecodeError) or RecordingFormatError."""
        raw = self._raw(i)
        if not isinstance(raw, dict):
            raise RecordingFormatError(
                f"{self.path.name}: line {i + 1} is not a record (a JSON object)",
                path=self.path,
                line=i + 1,
            )
        if raw.get("t") not in KNOWN_TYPES:
            return unknown(raw)
        if self._v11:
            self._fill(raw, i)
        return record(raw)

    def _fill(self, data: dict[str, Any], i: int) -> None:
        """Give a 1.1 line what 1.1 leaves for the reader to derive: a commit's stage (its
        rsid up to `#`), a call's frame (model, slots, params, cache) from the call line
        before that says it. Then it validates as the record it stands for."""
        t = data.get("t")
        if t == "commit":
            if "stage" not in data and isinstance(rsid := data.get("rsid"), str):
                data["stage"] = rsid.partition("#")[0]
        elif t == "call" and "system" not in data:
            n = data.get("call")
            at = _get(self._index.frames, n) if isinstance(n, int) else None
            if at is None or at == i:
                return  # no frame before it: validation says what is missing
            frame = self._frame
            if frame is None or frame[0] != at:
                raw = self._raw(at)
                frame = (at, {k: raw[k] for k in CALL_FRAME if k in raw})
                self._frame = frame
            for key, value in frame[1].items():
                data.setdefault(key, value)

    @overload
    def records(
        self,
        lines: Iterable[int] | None = None,
        *,
        blobs: bool = True,
        seals: bool = True,
        only: Collection[str] | None = None,
        tool_lines: Literal[False] = False,
    ) -> Iterator[tuple[int, Record | UnknownRecord]]: ...

    @overload
    def records(
        self,
        lines: None = None,
        *,
        blobs: Literal[False],
        seals: bool = True,
        only: Collection[str],
        tool_lines: Literal[True],
    ) -> Iterator[tuple[int, Record | UnknownRecord | ToolLine]]: ...

    @overload
    def records(
        self,
        lines: None = None,
        *,
        blobs: Literal["checked"],
        seals: bool = True,
        only: Collection[str] | None = None,
        tool_lines: bool = False,
    ) -> Iterator[tuple[int, Record | UnknownRecord | CheckedBlob | CheckedTool]]: ...

    def records(
        self,
        lines: Iterable[int] | None = None,
        *,
        blobs: bool | Literal["checked"] = True,
        seals: bool = True,
        only: Collection[str] | None = None,
        tool_lines: bool = False,
    ) -> Iterator[tuple[int, Record | UnknownRecord | CheckedBlob | ToolLine | CheckedTool]]:
        """Every readable record with its line number, or those on ``lines`` (from 1, in
        order): a reader that knows which records it needs reads only those. ``blobs=False``:
        all but the blobs (a reader that takes values by their ref reads each when it needs
        it); ``"checked"``: each blob as a :class:`CheckedBlob`, its value hashed as it lies
        in the file and parsed only when that differs from its id. ``seals=False``: all but
        the well-formed seals, which hold only the chain (checked on the bytes by
        :attr:`seal_lines`'s reader) and which a reader of the run has no use for.
        ``only``: the record types (their ``t``) to give, for a reader that has no use for the
        others; the others' lines are still checked, and a bad one reported as ever, but
        their records are not given, and those af writes in a shape known to be valid (a
        seal, an eviction) are taken by their bytes, unparsed. ``tool_lines`` (with ``only``
        naming commits): a commit of a tool's outcome in af's common 1.1 shape, met as the
        walk indexes the file, is given as a :class:`ToolLine` (its values, unparsed) rather
        than as its record; any other commit as its record. With ``blobs="checked"``, such a
        commit met as the walk indexes the file is given as a :class:`CheckedTool`.
        Lines that are not valid records were reported in :attr:`problems` when the file was
        indexed, or are reported here. A walk of the whole file hands the pages it read back
        as it goes, so memory stays flat however big the file; a walk that meets
        lines not indexed yet (``index=False``) indexes them as it goes, parsing each once."""
        if lines is not None:
            for line in lines:
                try:
                    yield line, self._typed(line - 1)
                except RecordingFormatError as e:
                    self.problems.append(Problem(line, str(e).partition(": ")[2] or str(e)))
                except orjson.JSONDecodeError as e:
                    self.problems.append(Problem(line, f"not valid JSON ({_short(str(e))})"))
                except InvalidRecord as e:
                    self.problems.append(Problem(line, f"invalid record: {e}"))
            return
        blob = _KIND_CODES["blob"]
        skip = {_BAD, _BLANK} if blobs else {_BAD, _BLANK, blob}
        if not seals:
            skip.add(_SEALED)
        if only is not None:
            skip.update(code for t, code in _BY_BYTES.items() if t not in only)
        checked = blobs == "checked"
        check = self._checked_blob
        # The hot loop of every walk (verify reads each line once): kept flat.
        idx = self._index
        kinds, starts, view, loads = idx.kinds, idx.starts, self._map, orjson.loads
        types, convert, rejected, judge = (
            AGENT_TYPES,
            msgspec.convert,
            msgspec.ValidationError,
            judged,
        )
        fill = self._fill if self._v11 else None
        problems = self.problems
        checked_tools = tool_lines
        tool_lines = tool_lines and only is not None and "commit" in only
        indexed = len(starts)
        release = RELEASE_EVERY
        for i in range(indexed):
            kind = kinds[i]
            if kind in skip:
                continue
            start = starts[i]
            if start > release:
                release = start + RELEASE_EVERY
                self.release_pages()
            end = starts[i + 1] - 1 if i + 1 < indexed else self._size
            if checked and kind == blob:
                found = check(i, view[start:end])
                if found is not None:
                    yield i + 1, found
                continue
            try:
                raw = loads(view[start:end])
                t = raw.get("t")
                cls = types.get(t)
                if cls is None:
                    if only is None or t in only:
                        yield i + 1, unknown(raw)
                    continue
                if fill is not None:
                    fill(raw, i)
                try:
                    found = convert(raw, cls)
                except rejected:
                    found = judge(cls, raw)
                if only is None or t in only:
                    yield i + 1, found
            except orjson.JSONDecodeError as e:  # a line indexed by its head
                problems.append(Problem(i + 1, f"not valid JSON ({_short(str(e))})"))
            except InvalidRecord as e:
                name = _KIND_NAMES.get(kind, "a")
                problems.append(Problem(i + 1, f"invalid {name} record: {e}"))
        if checked:
            yield from self._scan_checked(skip, release, tools=checked_tools and self._v11)
            return
        # Lines not indexed yet come from the file as the index takes them in. A walk that
        # hands out no blob values keeps the last blob lines it passed: the records after
        # them name them.
        yield from self._scan(
            recent=blobs is not True,
            skip=skip,
            tool_lines=tool_lines,
            records=True,
            only=only,
            release=release,
        )

    def _scan_checked(
        self, skip: set[int], release: int, *, tools: bool = False
    ) -> Iterator[tuple[int, Record | UnknownRecord | CheckedBlob | CheckedTool]]:
        """The lines not indexed yet, for a checking walk (``records(blobs="checked")``): each
        indexed as :meth:`_scan` indexes it and handed out as :meth:`records` hands it out,
        in one loop (the checking walk of a big file spends its time per line). No blob line
        is kept: a checking reader reads the few values it needs by their ref
        (:meth:`read_blob`), from the map. ``tools``: a commit of a tool's outcome in af's
        common 1.1 shape is given as a :class:`CheckedTool`."""
        file = self._file
        if file is None:
            return
        idx, limit = self._index, self.max_line
        starts, kinds = idx.starts, idx.kinds
        blob, call, reply = _KIND_CODES["blob"], _KIND_CODES["call"], _KIND_CODES["reply"]
        blank, bad = _BLANK, _BAD
        sealed, seals, seal_line = _SEALED, idx.seals, SEAL_LINE.fullmatch
        blobs, collided = self._blobs, self._collided
        index_record = self._index_record
        end, partial = self._end, self._partial
        pos, last_end = self._pos, self._last_end
        v11, id_end, id_size = self._v11, self._id_end, self.scheme.size
        value_at, of = id_end + 10, self.scheme.of
        check, checked = self._checked_blob, _checked
        unindexed, other = _UNINDEXED, _OTHER
        small = self._small
        evicted_code, digits, key_bits = _EVICTED, _B64_DIGITS, _KEY_BITS
        evicted_line, decode_evicted = EVICTED_LINE.fullmatch, _decode_evicted
        # 1.1 calls and replies are parsed (see _REPLY_HEAD)
        fast_heads = _FAST_11 if v11 else _FAST
        commit, commit_code = self._typed_commit, _KIND_CODES["commit"]
        tool_check = TOOL_COMMIT.fullmatch if tools else None
        short, sha256, b64, urlsafe = self.scheme is V11, hashlib.sha256, b2a_base64, _URLSAFE
        loads, types, convert, rejected, judge = (
            orjson.loads,
            AGENT_TYPES,
            msgspec.convert,
            msgspec.ValidationError,
            judged,
        )
        fill = self._fill if v11 else None
        problems = self.problems
        line = len(starts)
        readline, piece_size = file.readline, _PIECE
        try:
            while raw := readline(piece_size):
                size = len(raw)
                if size == piece_size and raw[-1] != 10:
                    raw, size = self._long_line(raw)
                if pos + size > end:
                    break  # written after the file was mapped (a run still going): not yet
                if partial and raw[-1] != 10:
                    break  # a prefix is wanted: this line is for a whole open
                line += 1
                starts.append(pos)
                if pos > release:  # values read by ref come through the map
                    release = pos + RELEASE_EVERY
                    self.release_pages()
                pos += size
                torn = raw[-1] != 10  # no newline: the last line, maybe cut short
                length = size if torn else size - 1
                if not torn:
                    last_end = pos - 1
                self._size = pos if torn else last_end
                i = line - 1
                if length > limit:
                    self._over_limit(line, length)
                    kinds.append(bad)
                    continue
                data: Any = None
                if size == 42 and raw[-1] == 10 and seal_line(raw, 0, 41):
                    seals.append(i)
                    kinds.append(sealed)
                    if sealed in skip:
                        continue
                    kind = sealed
                else:
                    fast = (
                        fast_heads.get(raw[:12])
                        if size > 20 and not torn and raw[-2] == 125
                        else None
                    )
                    kind = -1
                    if fast == blob:
                        if size > id_end + 2 and raw[id_end] == 34:
                            rid = raw[18:id_end]
                            if (
                                short
                                and raw.startswith(b'","value":', id_end)
                                and raw.startswith(_BLOB_PREFIX)
                                and blob not in skip
                            ):
                                # As af writes a blob: its value's canonical JSON, in line.
                                digest = sha256(memoryview(raw)[value_at:-2]).digest()
                                if b64(digest[:16])[:22].translate(urlsafe) == rid:
                                    # Intact: its id is the digest's (V11's short_id, made
                                    # and compared as bytes), its digits base64url ones.
                                    prefix = hash(rid) & key_bits
                                    if blobs.setdefault(prefix, i) != i:
                                        collided.append((prefix << _LINE_BITS) | i)
                                    elif size <= _SMALL_BLOB:
                                        if len(small) >= _SMALL_KEPT:
                                            small.clear()
                                        small[rid] = (i, raw)
                                    kinds.append(blob)
                                    yield line, checked(CheckedBlob, (rid.decode(), True))
                                    continue
                                # Not intact: indexed and reported below, as any blob line.
                            prefix = -1
                            if short:  # _prefix, inline: half the lines are blobs
                                six = raw[18:24]
                                if six.isalnum() or not six.translate(None, digits):
                                    prefix = hash(rid) & key_bits
                            else:
                                try:
                                    prefix = _prefix(rid, id_size)
                                except ValueError:
                                    pass
                            if prefix >= 0:
                                if blobs.setdefault(prefix, i) != i:
                                    collided.append((prefix << _LINE_BITS) | i)
                                elif size <= _SMALL_BLOB:
                                    if len(small) >= _SMALL_KEPT:
                                        small.clear()
                                    small[rid] = (i, raw)
                                kinds.append(blob)
                                if blob in skip:
                                    continue
                                # As _checked_blob takes a blob as af writes it, in line.
                                if raw[id_end:value_at] == b'","value":' and raw.startswith(
                                    _BLOB_PREFIX
                                ):
                                    value = memoryview(raw)[value_at:-2]
                                    if short:  # V11's id (short_id) made and compared as bytes
                                        made = b64(sha256(value).digest()[:16])[:22]
                                        if made.translate(urlsafe) == rid:
                                            yield line, checked(CheckedBlob, (rid.decode(), True))
                                            continue
                                    else:
                                        ref = rid.decode("ascii", "replace")
                                        if of(value) == ref:
                                            yield line, checked(CheckedBlob, (ref, True))
                                            continue
                                found = check(i, raw[:-1])
                                if found is not None:
                                    yield line, found
                                continue
                    elif fast == reply or fast == call:
                        kind = _index_head(idx, i, raw, fast)
                    elif fast == evicted_code:
                        # A fold writes one per message that left. The line ends with its
                        # newline (``fast`` says so).
                        if evicted_line(raw, 0, size - 1) is not None:
                            # As af writes it (see EVICTED_LINE): its strings plain ASCII and
                            # its numbers within 64 bits, msgspec makes of it what parsing and
                            # converting it would.
                            kinds.append(evicted_code)
                            yield line, decode_evicted(raw)
                            continue
                    elif fast == commit_code:
                        if tool_check is not None:
                            shape = tool_check(raw, 0, size - 1)
                            if shape is not None:
                                groups = shape.groups()
                                n = _index_tool_commit(idx, i, groups)
                                seq, _, reads, _, by_ref = groups[:5]
                                taken = (int(seq), loads(reads), n, by_ref.decode())
                                yield line, checked(CheckedTool, taken)
                                continue
                        typed_commit = commit(i, raw) if size < _TYPED_SIZE else None
                        if typed_commit is not None:
                            kinds.append(commit_code)
                            yield line, typed_commit
                            continue
                    if kind < 0:
                        try:
                            data = loads(raw)
                        except orjson.JSONDecodeError as e:
                            if torn:
                                self.torn_tail = TornTail(line, length)
                                starts.pop()
                                pos = last_end
                                self._size = last_end
                                break
                            if raw.isspace():
                                kinds.append(blank)
                            else:
                                problems.append(Problem(line, f"not valid JSON ({_short(str(e))})"))
                                kinds.append(bad)
                            continue
                        t = data.get("t") if type(data) is dict else None
                        if type(t) is str and t in unindexed:
                            kind = other  # as _index_record takes them, without the call
                        else:
                            kind = index_record(i, data)
                        kinds.append(kind)
                        if kind in skip:
                            continue
                        if kind == blob:
                            found = check(i, raw[:-1] if raw[-1] == 10 else raw)
                            if found is not None:
                                yield line, found
                            continue
                    elif kind in skip:
                        continue
                # As records() hands out a line of the file.
                try:
                    if data is None:
                        data = loads(raw)
                    cls = types.get(data.get("t"))
                    if cls is None:
                        yield line, unknown(data)
                        continue
                    if fill is not None and (cls is Commit or cls is Call):
                        fill(data, i)  # (it gives nothing to the other types)
                    try:
                        record = convert(data, cls)
                    except rejected:
                        record = judge(cls, data)
                    yield line, record
                except orjson.JSONDecodeError as e:
                    problems.append(Problem(line, f"not valid JSON ({_short(str(e))})"))
                except InvalidRecord as e:
                    name = _KIND_NAMES.get(kind, "a")
                    problems.append(Problem(line, f"invalid {name} record: {e}"))
            # The end of the file, of what was mapped, or a torn last line.
            self._finish()
        finally:
            self._pos, self._last_end = pos, last_end
            small.clear()

    def _typed_commit(self, i: int, raw: bytes) -> Commit | None:
        """Commit line ``i`` indexed and typed by one decode straight to the Struct, when it
        is in a shape where that gives what parsing, indexing and converting it would (see
        :data:`_TYPED_SIZE`); None when it is not (it is then parsed as any line is)."""
        if not _decodable(raw):
            return None
        try:
            found = _decode_commit(raw)
        except (msgspec.DecodeError, RecursionError):
            return None
        writes = found.writes
        for w in writes:  # as _index_record reads them, or that says what is wrong
            key = w.key
            if key.startswith("message:") and not key[8:].isdecimal():
                return None
        if self._v11 and not found.stage:
            if raw.find(b'"stage":') >= 0:
                return None  # said, and empty: as written
            _force_setattr(found, "stage", found.rsid.partition("#")[0])  # as _fill gives it
        # _index_record's, from the Struct.
        idx = self._index
        idx.commits.append(i)
        _index_writes(idx, [w.key for w in writes], i)
        tool = found.tool
        if tool is not None:
            idx.tool_commits.append(i)
            idx.tools.setdefault(f"{tool.name}#{tool.k}", i)
        return found

    def _typed_call(self, i: int, raw: bytes) -> Call | None:
        """Call line ``i`` (1.1) indexed and typed by one decode straight to the Struct, when
        it is in a shape where that gives what parsing, indexing, filling and converting it
        would (see :data:`_TYPED_SIZE`) and it says its frame (a ``system``: the rest of the
        frame is then its own, see :meth:`_fill`); None when not (it is then parsed)."""
        if not _decodable(raw):
            return None
        try:
            found = _decode_call(raw)
        except (msgspec.DecodeError, RecursionError):
            return None
        n = found.call
        if not found.system or n < 0:
            return None  # a frame from the call before, or a number the index refuses
        # _index_record's, from the Struct.
        idx = self._index
        idx.commits.append(i)
        _put_next(idx.calls, n, i)
        self._last_frame = i
        _put(idx.frames, n, i)
        return found

    def read_blob(self, ref: str) -> Any:
        """The value stored under ``ref``, read from the file now and kept nowhere: for a
        reader that keeps what it reads again itself (verify). Raises KeyError as
        :meth:`blob` does. A checking walk keeps the last small blob lines it passed (slot
        lists and folds, which the records after them name), each the first under its
        id's prefix: what :meth:`_blob_line` would find."""
        passed = (
            self._small.get(ref.encode())
            if self._small and isinstance(ref, str) and len(ref) == self.scheme.size
            else None
        )
        if passed is not None:
            found, raw = passed
        else:
            line = self._blob_line(ref)
            if line is None:
                raise KeyError(f"no blob {str(ref)[:12]} in {self.path.name}")
            found, raw = line, self._bytes(line)
        try:
            return orjson.loads(raw)["value"]
        except (ValueError, KeyError, TypeError):
            raise KeyError(f"the blob {ref[:12]} on line {found + 1} cannot be read") from None

    def raw_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every record but the blobs as parsed JSON, unchecked, with its line number: for a
        reader that walks the file once and checks the fields it uses (a replay). In 1.1 a
        record is as written: a commit without its stage, a call without the frame it shares
        with the call before. Lines that are not records are left out (and reported in
        :attr:`problems`). Opened with ``index=False``, the walk indexes as it goes, parsing
        each line once."""
        skip = (_BAD, _BLANK, _KIND_CODES["blob"])
        idx, loads = self._index, orjson.loads
        kinds, starts, view = idx.kinds, idx.starts, self._map
        indexed = len(starts)
        for i in range(indexed):
            if kinds[i] in skip:
                continue
            end = starts[i + 1] - 1 if i + 1 < indexed else self._size
            try:
                data = loads(view[starts[i] : end])
            except orjson.JSONDecodeError as e:  # a line indexed by its head
                self.problems.append(Problem(i + 1, f"not valid JSON ({_short(str(e))})"))
                continue
            yield i + 1, data
        for i, raw, kind, data in self._scan(recent=True):
            if kind in skip:
                continue
            if data is None or data.__class__ is _Match:  # unparsed: indexed by its bytes
                try:
                    data = loads(raw)
                except orjson.JSONDecodeError as e:
                    self.problems.append(Problem(i + 1, f"not valid JSON ({_short(str(e))})"))
                    continue
            yield i + 1, data

    def _checked_blob(self, i: int, raw: bytes) -> CheckedBlob | None:
        """Blob line ``i`` checked against its id; None (and a problem) when it is not a
        valid blob record."""
        end = self._id_end
        if raw[end : end + 10] == b'","value":' and raw.startswith(_BLOB_PREFIX) and raw[-1] == 125:
            # As af writes it, the value is the canonical JSON its id was taken from:
            # bytes that hash to the id are that value, whole.
            ref = raw[18:end].decode("ascii", "replace")
            if self.scheme.of(memoryview(raw)[end + 10 : -1]) == ref:
                return CheckedBlob(ref, True)
        try:
            blob = typed(Blob, orjson.loads(raw))
        except orjson.JSONDecodeError as e:
            self.problems.append(Problem(i + 1, f"not valid JSON ({_short(str(e))})"))
            return None
        except InvalidRecord as e:
            self.problems.append(Problem(i + 1, f"invalid blob record: {e}"))
            return None
        try:
            return CheckedBlob(blob.id, self.scheme.content(blob.value) == blob.id)
        except TypeError as e:  # orjson's: nested past its depth, a number past 64 bits
            self.problems.append(Problem(i + 1, f"blob value cannot be hashed ({_short(str(e))})"))
            return None

    def raw(self, line: int) -> Any:
        """Line ``line`` (from 1) as parsed JSON, unchecked: for readers that walk many
        records and check only the fields they use."""
        return self._raw(line - 1)

    def seq_line(self, seq: int) -> int | None:
        """The line (from 1) of the commit, call or reply with this seq."""
        commits = self._index.commits
        return commits[seq - 1] + 1 if 0 < seq <= len(commits) else None

    @property
    def seq_count(self) -> int:
        return len(self._index.commits)

    def writer_lines(self, key: str) -> list[int]:
        """The lines (from 1) of the commits that wrote ``key``, in order. For message:<n>,
        call:<n> and reply:<n>, the one record that did."""
        idx = self._index
        number = key.partition(":")[2]
        if key.startswith(("message:", "call:", "reply:")) and number.isdecimal():
            n = int(number)
            numbers = (
                idx.messages
                if key.startswith("message:")
                else idx.calls
                if key.startswith("call:")
                else idx.replies
            )
            found = _get(numbers, n)
            return [] if found is None else [found + 1]
        return [i + 1 for i in idx.keys.get(key, ())]

    def written_keys(self) -> list[str]:
        """The keys commits wrote, other than the numbered ones."""
        return list(self._index.keys)

    @property
    def unknown_records(self) -> int:
        return self._index.unknown

    # -- what the run did ----------------------------------------------------------------

    @property
    def call_count(self) -> int:
        return len(self.call_numbers)

    @property
    def call_numbers(self) -> list[int]:
        """The numbers of the calls the file holds, in order (1..N unless lines were lost)."""
        return self._index.calls.numbers()

    def message_line(self, n: int) -> int | None:
        """The line (from 1) of the commit or reply that wrote message ``n``."""
        i = _get(self._index.messages, n)
        return None if i is None else i + 1

    def kind(self, line: int) -> str:
        """The record type on ``line`` as the index saw it: header, blob, commit, call,
        reply, run_end, other (another type), bad (not a record) or blank."""
        code = self._index.kinds[line - 1]
        return _KIND_NAMES.get(code) or {_OTHER: "other", _EVICTED: "other", _BAD: "bad"}.get(
            code, "blank"
        )

    def tool_commit(self, line: int) -> Commit:
        """The tool stage's commit on ``line`` (from 1). Raises RecordingFormatError naming
        the line when it holds no valid commit (the index took it by its key and its tool,
        before the record was judged whole)."""
        return self._record(line - 1, Commit)

    def tool_line(self, name_k: str) -> int | None:
        """The line (from 1) of the tool stage that answered the k-th call of a tool
        (``name#k``)."""
        i = self._index.tools.get(name_k)
        return None if i is None else i + 1

    def _record(self, i: int, cls: type[_R]) -> _R:
        """The record on line index ``i``, which the index says is a ``cls``; a line that
        does not hold a valid one raises RecordingFormatError naming the line."""
        try:
            record = self._typed(i)
        except orjson.JSONDecodeError as e:
            raise RecordingFormatError(
                f"{self.path.name}: line {i + 1} is not valid JSON ({_short(str(e))})",
                path=self.path,
                line=i + 1,
            ) from None
        except InvalidRecord as e:
            raise RecordingFormatError(
                f"{self.path.name}: line {i + 1} is not a valid {cls.__name__.lower()} record "
                f"({e})",
                path=self.path,
                line=i + 1,
            ) from None
        if not isinstance(record, cls):
            raise RecordingFormatError(
                f"{self.path.name}: line {i + 1} is not a {cls.__name__.lower()} record",
                path=self.path,
                line=i + 1,
            )
        return record

    def call(self, n: int) -> Call:
        """The record of call ``n`` (from 1)."""
        return self._record(self._call_line(n), Call)

    def reply(self, n: int) -> Reply | None:
        """The reply to call ``n``, or None when the run stopped before it came."""
        i = _get(self._index.replies, n)
        return None if i is None else self._record(i, Reply)

    def tool_commits(self, iteration: int | None = None) -> list[Commit]:
        """The commits of tool stages, in the order they were written, for one iteration or all."""
        out = []
        for i in self._index.tool_commits:
            try:
                record = self._typed(i)
            except (ValueError, RecordingFormatError):
                continue  # reported as a problem by records() and verify()
            if isinstance(record, Commit) and (iteration is None or record.iter == iteration):
                out.append(record)
        return out

    @property
    def end(self) -> RunEnd | None:
        """The run_end record, or None when the run did not finish (or is still running)."""
        if self._index.run_end is None:
            return None
        try:
            return self._record(self._index.run_end, RunEnd)
        except RecordingFormatError:
            return None  # reported as a problem by records() and verify()

    @property
    def message_count(self) -> int:
        if self._messages is not None:
            return self._messages
        count = self._index.messages.count()
        if self.complete:  # counted once: the file is read as it was opened
            self._messages = count
        return count

    def _message_entry(self, n: int) -> tuple[str | None, Any, int]:
        """Message ``n``'s blob id (None when it is inline), its value when it is inline,
        and the line index of the record that wrote it."""
        i = _get(self._index.messages, n)
        if i is not None:
            try:
                raw = self._raw(i)
            except ValueError:
                raise KeyError(f"message {n}: line {i + 1} is not valid JSON") from None
            writes = raw.get("writes") if isinstance(raw, dict) else None
            for w in writes if isinstance(writes, list) else ():
                if isinstance(w, dict) and w.get("key") == f"message:{n}":
                    if "ref" in w or "value" not in w:
                        return str(w.get("ref", "")), None, i
                    return None, w["value"], i
        raise IndexError(f"message {n} is not in this recording (it has {self.message_count})")

    def message(self, n: int) -> Any:
        """Message ``n`` of the run's history (from 1), as stored: canonical JSON."""
        ref, value, _ = self._message_entry(n)
        return value if ref is None else self.blob(ref)

    def message_ref(self, n: int) -> str:
        """The id message ``n`` is stored under: its blob's, or for a message written inline
        (1.1), the id of its canonical JSON."""
        ref, value, _ = self._message_entry(n)
        return self.scheme.content(value) if ref is None else ref

    def message_writer(self, n: int) -> str:
        """The runtime stage id of the stage that wrote message ``n``."""
        try:
            raw = self._raw(self._message_entry(n)[2])
        except ValueError:
            return "?"
        return str(raw.get("rsid", "?")) if isinstance(raw, dict) else "?"

    def blob(self, ref: str) -> Any:
        """The value stored under ``ref``. Raises KeyError when the file holds no such blob.
        Values are cached up to :data:`CACHE_BYTES` of the lines they come from; callers
        must not change what they get."""
        recent = self._recent
        if recent and ref.__class__ is str and len(ref) == self._ref_size:
            # A walk's last blob lines first (most reads of a walk): a ref among them is not
            # among the cached values, since the read that would cache it takes it from here.
            passed = recent.pop(ref.encode(), None)
            if passed is not None:
                try:
                    # Named by the record the walk is on: most such values are read once (a
                    # tool result), and one read again is found in the file and cached then.
                    return orjson.loads(passed[1])["value"]
                except (ValueError, KeyError, TypeError):
                    raise KeyError(
                        f"the blob {ref[:12]} on line {passed[0] + 1} cannot be read"
                    ) from None
        with self._lock:
            hit = self._values.get(ref)
            if hit is not None:
                self._values.move_to_end(ref)
                return hit[0]
            passed = (
                self._recent.pop(ref.encode(), None)
                if self._recent and isinstance(ref, str) and len(ref) == self._ref_size
                else None
            )
        if passed is not None:
            i, raw = passed
        else:
            found = self._blob_line(ref)
            if found is None:
                raise KeyError(f"no blob {str(ref)[:12]} in {self.path.name}")
            i, raw = found, self._bytes(found)
        try:
            value = orjson.loads(raw)["value"]
        except (ValueError, KeyError, TypeError):
            raise KeyError(f"the blob {ref[:12]} on line {i + 1} cannot be read") from None
        if passed is not None:
            # Named by the record the walk is on: most such values are read once (a tool
            # result), and one read again is found in the file and cached then.
            return value
        size = self.line_size(i + 1)
        if size <= CACHE_BYTES // 8:
            with self._lock:
                if ref not in self._values:
                    self._values[ref] = (value, size)
                    self._cached += size
                while self._cached > CACHE_BYTES and self._values:
                    _, (_, dropped) = self._values.popitem(last=False)
                    self._cached -= dropped
        return value

    def _blob_line(self, ref: object) -> int | None:
        """The line index of blob ``ref``: its id's prefix finds the candidates, the id in
        the line confirms (the first blob stored under an id wins)."""
        if not isinstance(ref, str) or len(ref) != self.scheme.size:
            return None
        try:
            prefix = _prefix(ref, self.scheme.size)
        except ValueError:
            return None
        keys = self._index.blob_keys
        mask = (1 << _LINE_BITS) - 1
        at = bisect.bisect_left(keys, prefix << _LINE_BITS)
        found = []
        while at < len(keys) and keys[at] >> _LINE_BITS == prefix:
            found.append(keys[at] & mask)
            at += 1
        if self._blobs:  # indexed by a walk still going
            recent = self._blobs.get(prefix)
            if recent is not None:
                found.append(recent)
            found += [k & mask for k in self._collided if k >> _LINE_BITS == prefix]
        want = ref.encode()
        for i in sorted(found) if len(found) > 1 else found:
            start = self._index.starts[i]
            if self._map[start + 18 : start + self._id_end] == want:
                return i
            try:
                raw = self._raw(i)
            except orjson.JSONDecodeError:
                continue
            if isinstance(raw, dict) and raw.get("id") == ref:  # not in af's own layout
                return i
        return None

    def value(self, write: Any) -> Any:
        """The value of a write (or of anything holding `value` or `ref`), resolving refs."""
        ref = write.get("ref") if isinstance(write, dict) else getattr(write, "ref", None)
        if ref:
            return self.blob(ref)
        return write.get("value") if isinstance(write, dict) else getattr(write, "value", None)

    # -- rebuilding calls ----------------------------------------------------------------

    def listed(self, ref: str) -> list[Any]:
        """A slot list (a call's system segments or tools), its delta form expanded.
        Raises KeyError for a missing blob, ValueError for a value of the wrong shape."""
        return expand_list(self.blob(ref), self.blob)

    def segments(self, n: int) -> list[Segment]:
        """Call ``n``'s system segments, each with its source."""
        return [typed(Segment, s) for s in self.listed(self.call(n).system)]

    def tools(self, n: int) -> list[CallTool]:
        """The tools visible at call ``n``, each with its source."""
        return [typed(CallTool, t) for t in self.listed(self.call(n).tools)]

    def request(self, n: int) -> dict[str, Any]:
        """Call ``n``'s provider-neutral request, rebuilt from the file, in canonical form."""
        call = self.call(n)
        return {
            "model": call.model,
            "system": [
                {"text": s.text} if s.ref is None else self.blob(s.ref) for s in self.segments(n)
            ],
            "messages": [self.message(m) for m in self._window(call.window)],
            "tools": [self.blob(t.ref) for t in self.tools(n)],
            "params": call.params,
            "cache": call.cache,
        }

    def _window(self, window: list[tuple[int, int]]) -> Iterator[int]:
        """A call's message numbers; a range past the file's messages is an IndexError, not
        a walk through a billion numbers."""
        count = self._index.messages.top()
        for a, b in window:
            if not 1 <= a <= b <= count:
                raise IndexError(f"the window names messages {a} to {b}; the file has {count}")
            yield from range(a, b + 1)

    def check_call(self, n: int) -> CallCheck:
        """Rebuild call ``n`` and compare its hash with the one taken when it was sent."""
        call = self.call(n)
        try:
            request = self.request(n)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            return CallCheck(n, False, call.hash, None, f"cannot rebuild: {_short(str(e))}")
        scheme = self.scheme
        digest = request_digest(
            model=request["model"],
            system=map(scheme.content, request["system"]),
            messages=scheme.messages(map(scheme.content, request["messages"])),
            tools=map(scheme.content, request["tools"]),
            params=request["params"],
            cache=request["cache"],
        )
        rebuilt = scheme.request(digest)
        if rebuilt != call.hash:
            return CallCheck(n, False, call.hash, rebuilt, "the rebuilt request's hash differs")
        return CallCheck(n, True, call.hash, rebuilt)

    def _call_line(self, n: int) -> int:
        i = _get(self._index.calls, n)
        if i is None:
            last = max(self.call_numbers, default=0)
            raise IndexError(
                f"call {n} is not in this recording "
                + (f"(calls 1 to {last})" if last else "(it has no calls)")
            )
        return i


def _mb(n: int) -> str:
    if n < 1024 * 1024:
        return f"{n:,} bytes"
    return f"{n / 1024 / 1024:.1f} MB"


def expand_list(value: Any, blob: Callable[[str], Any]) -> list[Any]:
    """A slot list as stored: a JSON array, or a delta of a full one, ``{"base": <blob id of
    an array>, "keep": k, "then": [...]}``: the base's first k entries, then these."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict) or set(value) != {"base", "keep", "then"}:
        raise ValueError("a slot list is neither a list nor a delta of one")
    base, keep, then = value["base"], value["keep"], value["then"]
    if not isinstance(base, str):
        raise ValueError("a slot list's delta names no base")
    full = blob(base)
    if not isinstance(full, list) or not isinstance(then, list):
        raise ValueError("a slot list's delta is not based on a full list")
    if not isinstance(keep, int) or isinstance(keep, bool) or not 0 <= keep <= len(full):
        raise ValueError(f"a slot list's delta keeps {keep!r} of {len(full)} entries")
    return full[:keep] + then


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
