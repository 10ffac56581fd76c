"""Checking a recording: every call rebuilt and its hash compared, the commit log consistent.

One pass over the records, in the order they were written. A call's hash is checked as the
writer took it: each message stands for its content hash, which is the id of the blob it is
stored under once that blob is checked, and the hash over a window's messages is extended
from the call before's (the windows of a run share their beginnings), so the time is linear
in the file, not in calls x window. A call that names anything this pass has not seen as
checked (a blob stored later or that does not hash to its id, a list that is not one) is
rebuilt from the file as a reader would, so its verdict is the same either way.
"""

from __future__ import annotations

import binascii
import gc
import hashlib
import sys
from dataclasses import dataclass, field
from typing import Any, cast, overload

from afcore.recording._hashing import Scheme, request_digest, unseal
from afcore.recording._reader import (
    SEAL_LINE,
    CallCheck,
    CheckedBlob,
    CheckedTool,
    Problem,
    Recording,
    TornTail,
    expand_list,
)
from afcore.recording._structs import (
    ArgsInvalid,
    Call,
    CallTool,
    Commit,
    ContextEvicted,
    Header,
    ObserverError,
    Pause,
    Reply,
    Resume,
    RunEnd,
    Seal,
    Segment,
    ToolProgress,
    ToolStart,
    UnknownRecord,
    Write,
)
from afcore.recording._typed import typed
from afcore.recording._window_check import WindowReplay, _number

__all__ = ["VerifyReport", "verify"]


@dataclass
class VerifyReport:
    calls: int = 0
    verified: int = 0
    problems: list[Problem] = field(default_factory=list)
    torn_tail: TornTail | None = None
    unknown_records: int = 0
    checks: list[CallCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.verified == self.calls and not self.problems and self.torn_tail is None

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "calls": self.calls,
            "verified": self.verified,
            "problems": [p.to_json() for p in self.problems],
            "torn_tail": self.torn_tail.to_json() if self.torn_tail else None,
            "unknown_records": self.unknown_records,
        }


def verify(rec: Recording) -> VerifyReport:
    """Rebuild every call and check its hash; check sequence numbers, reads, refs and blobs,
    and that each call's window is the one the folds before it left. ``rec`` may be opened
    with ``index=False``: the check is then the one walk that indexes it."""
    # The walk makes a few objects per line that never form cycles and keeps many of them
    # (the keys each seq wrote, the blobs seen): the cycle collector would walk them again
    # and again, an eighth of the time on a big file.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _verify(rec)
    finally:
        if collecting:
            gc.enable()


def _verify(rec: Recording) -> VerifyReport:
    report = VerifyReport()
    values = _Values(rec)
    blob = values.blob
    hashes = _CallHashes(rec, values)
    message = hashes.message
    good, bad = hashes.good, hashes.bad
    window = WindowReplay(values.value, hashes.ref)
    problems = report.problems
    written: dict[int, tuple[str, ...]] = {}
    """seq -> the keys that commit wrote, and "messages" when one of them was a message or a
    fold (a read of messages is of any of those)"""
    blobs: set[str] = set()
    lists_ok: set[str] = set()
    """slot lists whose every ref was stored before a call that named them"""
    messages = 0
    due = "message:1"
    """the key of the next message, as af writes them"""
    refs = hashes.refs
    calls = 0
    later: list[tuple[int, int, int]] = []
    """calls whose hash is checked after the walk: their place in the checks, line, number"""
    last_seq = 0
    end_line: int | None = None
    paused = False
    """the run_end at end_line says paused: a resume record may follow it"""

    def check_ref(line: int, ref: str | None, what: str) -> None:
        if ref is not None and ref not in blobs:
            problems.append(
                Problem(line, f"{what} refers to blob {ref[:12]}, not stored before it")
            )

    def check_reads(line: int, seq: int, reads: list[Any]) -> None:
        for key, version in reads:
            keys = written.get(version)
            if keys is None or version >= seq:
                problems.append(
                    Problem(line, f"reads {key} at seq {version}, not an earlier commit")
                )
            elif key not in keys:
                problems.append(
                    Problem(line, f"reads {key} at seq {version}, which did not write it")
                )

    def check_list(line: int, ref: str, model: type[Segment] | type[CallTool]) -> None:
        """The refs in a slot list were stored before the call naming it. Of a delta whose
        base checked, only the entries it adds are checked."""
        value = blob(ref)
        entries: Any = None
        if isinstance(value, dict) and isinstance(value.get("base"), str):
            check_ref(line, value["base"], "the list a delta extends")
            if value["base"] in lists_ok:
                expand_list(value, blob)  # its shape, as a reader takes it
                entries = value["then"]
        for raw in expand_list(value, blob) if entries is None else entries:
            entry = values.entry(raw, model)
            what = "a system segment" if isinstance(entry, Segment) else f"tool {entry.name}"
            check_ref(line, entry.ref, what)

    def check_seq(line: int, seq: int) -> None:
        nonlocal last_seq
        if seq != last_seq + 1:
            problems.append(Problem(line, f"seq {seq} follows seq {last_seq}"))
        last_seq = seq

    def note_writes(
        line: int, seq: int, writes: list[Any], extra: tuple[str, ...] = ()
    ) -> list[int]:
        """Check a record's writes and take them in; the numbers of the messages it wrote
        (as the window check reads their keys)."""
        nonlocal messages
        keys = [*extra]
        numbers: list[int] = []
        history = False
        for w in writes:
            key = w.key
            keys.append(key)
            if w.ref is not None and w.ref not in blobs:
                check_ref(line, w.ref, f"write of {key}")
            if key.startswith("message:"):
                history = True
                messages += 1
                if key == f"message:{messages}":  # as af writes them: the number is the count
                    numbers.append(messages)
                    message(messages, w)
                    continue
                problems.append(Problem(line, f"writes {key} where message:{messages} was due"))
                digits = key[8:]
                if digits.isdecimal():
                    n = int(digits)
                    numbers.append(n)
                    message(n, w)
                elif (other := _number(key)) is not None:  # "+5", " 5": the window's
                    numbers.append(other)
            elif key.startswith("fold:"):
                history = True
        if history:
            keys.append("messages")
        written[seq] = tuple(keys)
        return numbers

    # The types are compared by identity (every record is an instance of its model, never of
    # a subclass), most frequent first: this loop runs once per line of the file.
    for line, record in rec.records(blobs="checked", seals=False, tool_lines=True):
        kind = type(record)
        # Seals are checked on the bytes after the walk (a malformed one comes here too).
        if end_line is not None and kind is not Seal:
            # A paused run goes on in the same file: its run_end, then a resume record.
            if not (paused and kind is Resume):
                t = (
                    "blob" if kind is CheckedBlob else "commit" if kind is CheckedTool else record.t  # type: ignore[union-attr]
                )
                problems.append(Problem(line, f"a {t} record follows run_end (line {end_line})"))
            end_line = None
        elif kind is Resume:
            problems.append(Problem(line, "a resume record that follows no paused run_end"))
        if kind is CheckedBlob:
            ref, intact = record  # type: ignore[misc]
            blobs.add(ref)
            if intact:
                good.add(ref)
            else:
                problems.append(Problem(line, f"blob {ref[:12]} does not hash to its id"))
                bad.add(ref)
        elif kind is CheckedTool:
            # A tool's commit in af's common shape: what the Commit branch below does with
            # it, its one write a message by ref and its stage a tool's (which joins).
            seq, reads, n, ref = record  # type: ignore[misc]
            if seq != last_seq + 1:
                problems.append(Problem(line, f"seq {seq} follows seq {last_seq}"))
            last_seq = seq
            if reads:
                check_reads(line, seq, reads)
            if n == messages + 1:  # the key is due's (the number is written plain)
                if ref not in blobs:
                    check_ref(line, ref, f"write of {due}")
                messages = n
                if messages == len(refs):
                    refs.append(ref)
                else:
                    message(messages, Write(key=due, ref=ref))
                written[seq] = (due, "messages")
                numbers = [messages]
            else:
                numbers = note_writes(line, seq, [Write(key=f"message:{n}", ref=ref)])
            due = f"message:{messages + 1}"
            window.join(numbers)
        elif kind is Commit:
            assert isinstance(record, Commit)
            seq = record.seq
            if seq != last_seq + 1:  # check_seq's, inline: a big file holds a commit a line
                problems.append(Problem(line, f"seq {seq} follows seq {last_seq}"))
            last_seq = seq
            if record.reads:
                check_reads(line, seq, record.reads)
            writes = record.writes
            if len(writes) == 1 and (w := writes[0]).key == due:
                # note_writes's, inline: most commits write the next message (a tool result)
                written_as = w.ref
                if written_as is not None and written_as not in blobs:
                    check_ref(line, written_as, f"write of {due}")
                messages += 1
                if messages == len(refs) and type(written_as) is str:
                    refs.append(written_as)  # message()'s, for the next message written by ref
                else:
                    message(messages, w)
                written[seq] = (due, "messages")
                numbers = [messages]
            else:
                numbers = note_writes(line, seq, writes)
            due = f"message:{messages + 1}"
            if wrongs := window.commit(record, numbers):
                problems.extend(Problem(line, p) for p in wrongs)
        elif kind is ContextEvicted:
            assert isinstance(record, ContextEvicted)
            wrong = window.evicted(record)
            if wrong is not None:
                problems.append(Problem(line, wrong))
        elif kind in _UNCHECKED:
            continue  # nothing to check beyond their fields (seals: below, on the bytes)
        elif kind is Call:
            assert isinstance(record, Call)
            check_seq(line, record.seq)
            check_reads(line, record.seq, record.reads)
            calls += 1
            if record.call != calls:
                problems.append(Problem(line, f"call {record.call} where call {calls} was due"))
            check_ref(line, record.system, "the system segments")
            check_ref(line, record.tools, "the tool list")
            lists = (record.system, record.tools)
            if record.system in blobs and record.tools in blobs and not lists_ok.issuperset(lists):
                found = len(problems)
                try:
                    for listed, model in ((record.system, Segment), (record.tools, CallTool)):
                        if listed not in lists_ok:
                            check_list(line, listed, model)
                except (KeyError, ValueError, TypeError):
                    problems.append(Problem(line, "the segment or tool list it names is malformed"))
                if len(problems) == found:
                    # Blobs once stored stay stored: a list checks the same for every call
                    # that names it.
                    if len(lists_ok) > 4096:
                        lists_ok.clear()
                    lists_ok.update(lists)
            for a, b in record.window:
                if not 1 <= a <= b <= messages:
                    problems.append(
                        Problem(line, f"window range [{a}, {b}] is outside messages 1..{messages}")
                    )
            written[record.seq] = (f"call:{record.call}",)
            differs = window.call(record)
            if differs is not None:
                problems.append(Problem(line, f"call {record.call}: {differs}"))
            check = hashes.check(record)
            if check is None:
                # Rebuilt as a reader would, once the whole file is indexed.
                later.append((len(report.checks), line, record.call))
                report.checks.append(CallCheck(record.call, False, record.hash, None))
            else:
                report.checks.append(check)
                if check.ok:
                    report.verified += 1
                else:
                    problems.append(Problem(line, f"call {record.call}: {check.problem}"))
        elif kind is Reply:
            assert isinstance(record, Reply)
            check_seq(line, record.seq)
            numbers = note_writes(line, record.seq, record.writes, (f"reply:{record.call}",))
            due = f"message:{messages + 1}"
            window.reply(record, numbers)
            if record.call != calls:
                problems.append(
                    Problem(line, f"reply to call {record.call} while call {calls} is open")
                )
        elif kind is RunEnd:
            assert isinstance(record, RunEnd)
            end_line = line
            paused = record.status == "paused"
            if record.answer is not None:
                check_ref(line, record.answer.ref, "the answer")
        elif kind is Header:
            if line != 1:
                problems.append(Problem(line, "a second header"))
        elif kind is UnknownRecord:
            pass  # kept as it is; counted in unknown_records
    if rec.header.hash != "sha256":
        problems.extend(_check_seals(rec))
    for at, line, n in later:
        check = rec.check_call(n)
        report.checks[at] = check
        if check.ok:
            report.verified += 1
        else:
            problems.append(Problem(line, f"call {n}: {check.problem}"))
    report.calls = calls
    report.torn_tail, report.unknown_records = rec.torn_tail, rec.unknown_records
    problems.extend(Problem(0, p) for p in window.unaccounted())
    if rec.end is None and rec.torn_tail is None:
        problems.append(
            Problem(0, "no run_end record: the run did not finish, or is still running")
        )
    problems.extend(p for p in rec.problems if p not in problems)
    problems.sort(key=lambda p: p.line)
    return report


class _Values:
    """The blob values the pass read last, by id. A call's slot lists are read by the check
    of the refs in them and again by the call's hash, and a walk that checks blobs hands
    each value it passed to the first read only, uncached (most are read once)."""

    _KEEP = 64

    def __init__(self, rec: Recording) -> None:
        self._read = rec.read_blob
        self._last: dict[str, Any] = {}
        self._entries: dict[tuple[int, type], tuple[Any, Any]] = {}
        """(id of a list entry as read, model) -> (the entry as read, validated): a list
        entry is validated once for its refs' check and the call's hash"""

    def blob(self, ref: str) -> Any:
        last = self._last
        if type(ref) is str and ref in last:
            return last[ref]
        value = self._read(ref)
        if len(last) >= self._KEEP:
            last.clear()
        last[ref] = value
        return value

    @overload
    def entry(self, raw: Any, model: type[Segment]) -> Segment: ...
    @overload
    def entry(self, raw: Any, model: type[CallTool]) -> CallTool: ...
    @overload
    def entry(self, raw: Any, model: type[Segment] | type[CallTool]) -> Segment | CallTool: ...

    def entry(self, raw: Any, model: type[Segment] | type[CallTool]) -> Segment | CallTool:
        """An entry of a slot list validated as ``model``."""
        entries = self._entries
        key = (id(raw), model)
        hit = entries.get(key)
        if hit is not None and hit[0] is raw:  # the entry it holds keeps the id its own
            return cast("Segment | CallTool", hit[1])
        entry = typed(model, raw)
        if len(entries) >= 4 * self._KEEP:
            entries.clear()
        entries[key] = (raw, entry)
        return entry

    def value(self, write: Any) -> Any:
        """A write's value, its ref resolved (as :meth:`Recording.value`)."""
        ref = write.get("ref") if isinstance(write, dict) else getattr(write, "ref", None)
        if ref:
            return self.blob(ref)
        return write.get("value") if isinstance(write, dict) else getattr(write, "value", None)


_URLSAFE = bytes.maketrans(b"+/", b"-_")

_UNCHECKED = frozenset({ToolStart, ToolProgress, ArgsInvalid, Pause, Resume, ObserverError, Seal})


class _CallHashes:
    """Each call's hash, taken again from what the pass has seen, as the writer took it."""

    _LISTS = 256
    """Slot lists remembered (calls with the same segments or tools share one)."""

    def __init__(self, rec: Recording, values: _Values) -> None:
        self._blob = values.blob
        self._entry = values.entry
        self._texts: dict[str, str] = {}
        """the ids of inline segments' texts, by text (most are the same from call to call)"""
        self._scheme: Scheme = rec.scheme
        self.good: set[str] = set()
        """ids of the blobs seen so far whose value hashes to their id (the pass adds them)"""
        self.bad: set[str] = set()
        """ids under which a blob that does not hash to it was stored"""
        self.refs: list[str | None] = [None]
        """message n -> the hash it was written under (None: not seen)"""
        self._lists: dict[str, list[str] | None] = {}
        self._marks: list[tuple[list[tuple[int, int]], Any]] = []
        """up to two (window, running sha256 over its messages' hashes): the last call's
        whole window, and the same without its last range (injected messages come last)"""

    def message(self, n: int, write: Any) -> None:
        """Message ``n`` was written (``write``): the id it stands for, from its first write."""
        refs = self.refs
        if n == len(refs) and n:  # the next message, as af writes them
            refs.append(None)
        elif n >= len(refs):
            if n > len(refs) + 1_000_000:
                return  # a hostile number: the slow path rebuilds what names it
            refs.extend([None] * (n + 1 - len(refs)))
        if refs[n] is not None:
            return  # the first write of a message is the one read
        if isinstance(write.ref, str):
            refs[n] = write.ref
        elif write.value is not None:
            # Written inline (1.1): its id is that of its canonical JSON, checked here.
            ref = self._scheme.content(write.value)
            self.good.add(ref)
            refs[n] = ref

    def ref(self, n: int) -> str | None:
        """The id message ``n`` was written under, as far as the pass has seen."""
        refs = self.refs
        return refs[n] if 0 < n < len(refs) else None

    def check(self, call: Call) -> CallCheck | None:
        """The call's check, or None when it must be rebuilt from the file as a reader
        would (something it names has not been seen checked)."""
        fast = self._fast(call)
        if fast is None:
            return None
        if fast != call.hash:
            return CallCheck(
                call.call, False, call.hash, fast, "the rebuilt request's hash differs"
            )
        return CallCheck(call.call, True, call.hash, fast)

    def _fast(self, call: Call) -> str | None:
        """The call's hash from what has been seen, or None when something it names has not
        been seen checked (the file is then read as a reader would)."""
        system = self._listed(call.system, "system")
        tools = self._listed(call.tools, "tools")
        if system is None or tools is None:
            return None
        messages = self._messages(call.window)
        if messages is None:
            return None
        digest = request_digest(
            model=call.model,
            system=system,
            messages=messages,
            tools=tools,
            params=call.params,
            cache=call.cache,
        )
        return self._scheme.request(digest)

    def _listed(self, ref: str, slot: str) -> list[str] | None:
        """The hashes of a slot list's entries, in order."""
        if ref in self._lists:
            return self._lists[ref]
        out: list[str] | None = None
        if ref in self.good and ref not in self.bad:
            try:
                value = self._blob(ref)
                base = self._base(value, slot)
                if base is not None:
                    # A delta of a list already hashed: only its new entries are hashed.
                    out = base[: value["keep"]] + [self._entry_hash(e, slot) for e in value["then"]]
                else:
                    entries = expand_list(value, self._checked_blob)
                    out = [self._entry_hash(e, slot) for e in entries]
            except (KeyError, ValueError, TypeError):  # InvalidRecord is a ValueError
                out = None
        if len(self._lists) >= self._LISTS:
            self._lists.clear()
        self._lists[ref] = out
        return out

    def _base(self, value: Any, slot: str) -> list[str] | None:
        """For a delta that :func:`expand_list` takes, the hashes of its base's entries."""
        if not isinstance(value, dict) or set(value) != {"base", "keep", "then"}:
            return None
        base, keep = value["base"], value["keep"]
        if not isinstance(base, str) or not isinstance(value["then"], list):
            return None
        if not isinstance(self._checked_blob(base), list):
            return None  # a delta of a delta: expand_list says what is wrong
        hashes = self._listed(base, slot)
        if hashes is None or not isinstance(keep, int) or isinstance(keep, bool):
            return None
        return hashes if 0 <= keep <= len(hashes) else None

    def _checked_blob(self, ref: str) -> Any:
        if ref not in self.good or ref in self.bad:
            raise KeyError(ref)
        return self._blob(ref)

    def _entry_hash(self, entry: Any, slot: str) -> str:
        """An entry's hash as the reader's request() takes it (see Recording.request)."""
        if slot == "system":
            segment = self._entry(entry, Segment)
            if segment.ref is None:
                text = segment.text
                if text is None:
                    return self._scheme.content({"text": None})
                texts = self._texts
                ref = texts.get(text)
                if ref is None:
                    if len(texts) >= self._LISTS:
                        texts.clear()
                    ref = texts[text] = self._scheme.content({"text": text})
                return ref
            ref = segment.ref
        else:
            ref = self._entry(entry, CallTool).ref
        if ref not in self.good or ref in self.bad:
            raise KeyError(ref)
        return ref

    def _messages(self, window: list[tuple[int, int]]) -> str | None:
        refs = self.refs
        count = len(refs) - 1
        for a, b in window:
            if not 1 <= a <= b <= count:
                return None
        start, h = self._resume(window)
        marks: list[tuple[list[tuple[int, int]], Any]] = []
        good, bad = self.good, self.bad
        for k in range(len(window)):
            a, b = window[k]
            if k < len(start):
                a = start[k]
            if a <= b:
                # Checked and hashed in C: a window may hold thousands of messages (a
                # message not seen, None, is in neither set).
                chunk = refs[a : b + 1]
                if not good.issuperset(chunk) or (bad and not bad.isdisjoint(chunk)):
                    return None
                h.update("".join(cast("list[str]", chunk)).encode())
            if k == len(window) - 2:
                head = list(window[: k + 1])
                if k + 1 < len(start):
                    # Resumed past this range: the hash of the ranges up to it is an old
                    # mark's, if one holds them.
                    marks.extend((m, mh) for m, mh in self._marks if m == head)
                else:
                    marks.append((head, h.copy()))
        marks.insert(0, (list(window), h.copy()))
        self._marks = marks
        return self._scheme.finish(h)

    def _resume(self, window: list[tuple[int, int]]) -> tuple[list[int], Any]:
        """Where to start hashing ``window``: for each of its first ranges, the first message
        not yet hashed, and the running hash to extend (from a window that began the same)."""
        for mark, h in self._marks:
            k = len(mark) - 1
            if len(window) <= k or list(window[:k]) != mark[:k]:
                continue
            (a, b), (wa, wb) = mark[k], window[k]
            if a == wa and b <= wb:
                return [sys.maxsize] * k + [b + 1], h.copy()
        return [], hashlib.sha256()


def _check_seals(rec: Recording) -> list[Problem]:
    """The hash chain of a 1.1 file: each seal is the hash of the seal before and of every
    byte after it, up to the seal. Any record changed, added, removed or moved breaks the
    seal of its write; lines after the last seal (other than a torn tail) were added."""
    problems: list[Problem] = []
    chain = b""
    first = 1
    sha256, b64, urlsafe, seal_line = hashlib.sha256, binascii.b2a_base64, _URLSAFE, SEAL_LINE
    for line, covered, text in rec.sealed_writes():
        h = sha256(chain)
        h.update(covered)
        digest = h.digest()[:16]
        # As short_id gives it: b2a_base64's newline and padding fall after the 22 kept.
        made = b64(digest)[:22].translate(urlsafe)
        if text == b'{"t":"seal","h":"' + made + b'"}':  # as af writes it: what SEAL_LINE
            chain = digest  # takes, its hash the one made
        else:
            taken = seal_line.fullmatch(text) if len(text) == 41 else None
            sealed = taken[1].decode() if taken is not None else rec.raw(line).get("h")
            if made.decode() != sealed:
                problems.append(
                    Problem(
                        line,
                        f"lines {first} to {line - 1} do not match their seal: a record in "
                        "them was changed, added, removed or moved",
                    )
                )
                # Go on from the seal as written: each write is checked on its own.
                try:
                    digest = unseal(sealed)
                except ValueError:
                    pass
            chain = digest
        first = line + 1
    last = rec.line_count
    if first <= last:
        problems.append(
            Problem(
                first,
                f"lines {first} to {last} come after the last seal: nothing covers them "
                "(added to the file, or their seal removed)",
            )
        )
    return problems
