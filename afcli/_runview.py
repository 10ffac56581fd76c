"""A recording as plain data, for ``af show``: the JSON output, and what the human output is
drawn from, so both always say the same thing.

Values are kept whole here; only the human rendering cuts them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError
from afcli._folds import SUMMARIZER, checked, fold_number
from afcli._render import as_dict, as_text

if TYPE_CHECKING:
    from afcore.recording import AttemptInfo, Call, Commit, ErrorEvent, Recording, UsageInfo

__all__ = ["call_detail", "evidence_text", "open_run", "overview"]


def open_run(ref: str) -> Recording:
    """The recording named by a path, a run id or a unique prefix of one."""
    from afcore.errors import RecordingError, RunNotFoundError
    from afcore.recording import open as open_recording
    from afcore.recording import resolve_run

    if any(c in ref for c in "*?[") and not Path(ref).is_file():
        # The folder is searched by glob: a pattern here would match runs it does not name.
        raise CliError(f"no recording named {ref!r}: a run id holds no *, ? or [", EXIT_USAGE)
    try:
        path = resolve_run(ref)
    except RunNotFoundError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    try:
        return open_recording(path)
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None


def _usage(usage: UsageInfo | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return usage.model_dump(exclude_defaults=True) | {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


def window_numbers(window: Any, most: int) -> Iterator[int]:
    """The message numbers of a window's ranges, none past ``most`` (the file's messages):
    a file may name ranges no run wrote (``[1, 10**12]``), and reading them must not hang."""
    for r in window if isinstance(window, list | tuple) else ():
        if isinstance(r, list | tuple) and len(r) == 2:
            a, b = r
            if isinstance(a, int) and isinstance(b, int):
                yield from range(max(a, 1), min(b, most) + 1)


class _Resolver:
    """Values behind writes; a ref the file does not hold becomes a note, not a crash."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self._lists: dict[str, list[dict[str, Any]] | None] = {}
        self._chars: dict[str, int | None] = {}

    def value(self, write: Any) -> tuple[Any, str | None]:
        ref = write.get("ref") if isinstance(write, dict) else getattr(write, "ref", None)
        if ref is not None and not isinstance(ref, str):
            return None, f"{as_text(ref)[:40]} is not a blob reference"
        try:
            return self.rec.value(write), None
        except KeyError as e:
            return None, str(e.args[0]) if e.args else "a value is missing from the file"

    def listed(self, ref: str) -> list[dict[str, Any]] | None:
        """A call's segment or tool list (shared by calls that sent the same), or None."""
        if ref not in self._lists:
            try:
                value = self.rec.listed(ref)
            except (KeyError, ValueError, TypeError):
                value = None
            ok = isinstance(value, list) and all(isinstance(x, dict) for x in value)
            self._lists[ref] = value if ok else None
        return self._lists[ref]

    def system_chars(self, ref: str) -> int | None:
        """How many characters the system segments of a call's list hold (None: unknown)."""
        if ref not in self._chars:
            total: int | None = 0
            for seg in self.listed(ref) or []:
                text = seg.get("text")
                if text is None and seg.get("ref"):
                    body, _ = self.value({"ref": seg["ref"]})
                    text = body.get("text") if isinstance(body, dict) else None
                if not isinstance(text, str) or total is None:
                    total = None
                else:
                    total += len(text)
            self._chars[ref] = total
        return self._chars[ref]


_NOT_INJECTIONS = {"base", "static", "provider", "configure", "summary", "transcript", "summarizer"}
"""Source kinds that are not an injection: the builder's text and tools, tool providers,
what configure() resolved, and what the window strategy wrote (a summary, the transcript
and system text of its summarizer's call)."""


def _source_json(source: Any) -> dict[str, Any]:
    """A recorded source (`SourceInfo`) as a dict without its absent fields."""
    dumped = source.model_dump(exclude_none=True) if source is not None else {}
    return dumped if isinstance(dumped, dict) else {}


def _is_injection(source: dict[str, Any]) -> bool:
    kind, id = source.get("kind"), source.get("id")
    # A source read from a slot list is unchecked: anything but strings is no injection's.
    if not isinstance(kind, str) or not isinstance(id, str) or not id or kind in _NOT_INJECTIONS:
        return False
    # The skills' reader is af's own tool, not an injection (its source names the catalog).
    return not (kind == "skill" and id == "read_skill")


def _decision(raw: Any, iteration: int | None = None) -> dict[str, Any] | None:
    """One decision of an `injections` blob, its fields checked (the file may lie)."""
    d = as_dict(raw)
    if not isinstance(d.get("id"), str):
        return None
    out: dict[str, Any] = {
        "id": d["id"],
        "flavor": as_text(d.get("flavor")) or None,
        "trigger": as_text(d.get("trigger")) or None,
        "fired": d.get("fired") is True,
        "reason": as_text(d.get("reason")),
    }
    reads = d.get("reads")
    if isinstance(reads, list) and reads:
        # A read of the iteration is stored without its value: it is the stage's own.
        out["reads"] = {
            as_text(pair[0]): pair[1] if len(pair) == 2 else iteration
            for pair in reads
            if isinstance(pair, list | tuple) and len(pair) in (1, 2)
        }
    if d.get("error") is not None:
        out["error"] = as_text(d.get("error"))
    return out


def _worded(decision: dict[str, Any]) -> dict[str, Any]:
    """A decision whose reason says what its rule read: the record keeps the evidence as
    data (`reads`) and the reason as the verdict alone; a person reads both in words. Done
    when shown, so that a decision carried over to a later iteration says what it read
    there."""
    reads = decision.get("reads")
    reason = decision["reason"]
    if decision["trigger"] != "rule" or not reads or not reason.startswith("rule returned"):
        return decision
    return {**decision, "reason": f"{reason} reading {evidence_text(reads)}"}


def evidence_text(reads: dict[str, Any]) -> str:
    """What a rule or a content function read, in words: ``user_message = "hi", iteration = 3``."""
    return ", ".join(f"{k} = {_evidence(v)}" for k, v in reads.items())


def _evidence(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _at(decision: dict[str, Any], iteration: int) -> dict[str, Any]:
    """A decision carried over to a later iteration: a read of the iteration reads that one."""
    reads = decision.get("reads")
    if isinstance(reads, dict) and "iteration" in reads:
        return {**decision, "reads": {**reads, "iteration": iteration}}
    return decision


class _Injections:
    """What the `inject` stages committed, gathered as the records go by: each iteration's
    decisions, and the injection behind each injected message."""

    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver
        self.decisions: dict[int, list[dict[str, Any]]] = {}
        """the latest iteration -> its decisions (those recorded, and those carried over)"""
        self.messages: dict[int, dict[str, Any]] = {}
        """message n -> the source of the write that put it in the log"""
        self._last = -1

    def see(self, commit: Commit) -> None:
        if commit.stage != "inject":
            return
        # Each inject stage lists the decisions that changed since the one before; the
        # others carry over.
        carried = {d["id"]: _at(d, commit.iter) for d in self.decisions.get(self._last, [])}
        decisions: list[dict[str, Any]] = list(carried.values())
        for w in commit.writes:
            if w.key == "injections":
                value, _ = self.resolver.value(w)
                listed = as_dict(value).get("decisions")
                if isinstance(listed, list):
                    for d in (_decision(x, commit.iter) for x in listed):
                        if d is not None:
                            carried[d["id"]] = d
                    decisions = list(carried.values())
            elif w.key.startswith("message:") and w.source is not None:
                try:
                    self.messages[int(w.key[8:])] = _source_json(w.source)
                except ValueError:
                    continue
        # Only the latest iteration's are kept: memory stays flat however long the run.
        self.decisions = {commit.iter: decisions}
        self._last = commit.iter

    def at(self, iteration: int) -> list[dict[str, Any]] | None:
        """The decisions that held at ``iteration``: an iteration at which nothing changed
        has no inject stage, and the last one's decisions still hold. None before any."""
        if self._last < 0 or iteration < self._last:
            return None
        decisions = self.decisions[self._last]
        return decisions if iteration == self._last else [_at(d, iteration) for d in decisions]

    def decided(self, iteration: int) -> dict[str, dict[str, Any]]:
        return {d["id"]: _worded(d) for d in self.at(iteration) or []}

    def summary(
        self,
        iteration: int,
        sources: list[dict[str, Any]],
    ) -> dict[str, Any] | None:
        """The iteration's decisions: every injection evaluated, those that fired, those
        skipped and why. ``sources``: the sources of what its call was sent (system
        segments, injected messages, tools). Always-on injections of fixed text are not
        restated in the decisions (they cannot differ): what the call was sent names them.
        None when the iteration had no inject stage (an agent without injections)."""
        held = self.at(iteration)
        if held is None:
            return None
        decided = [_worded(d) for d in held]
        ids = {d["id"] for d in decided}
        fired: list[dict[str, Any]] = []
        for src in sources:
            if _is_injection(src) and src["id"] not in ids:
                ids.add(src["id"])
                fired.append(
                    {
                        "id": src["id"],
                        "flavor": src.get("kind"),
                        "trigger": src.get("trigger"),
                        "fired": True,
                        "reason": src.get("reason") or "always",
                    }
                )
        fired += [d for d in decided if d["fired"]]
        skipped = [d for d in decided if not d["fired"]]
        return {"evaluated": len(fired) + len(skipped), "fired": fired, "skipped": skipped}


class _Folds:
    """What the window strategy committed, gathered as the records go by: each fold, the
    messages it wrote (the summary, the summarizer's transcript) with their sources, and
    which calls were its summarizer's."""

    def __init__(self, resolver: _Resolver) -> None:
        self.resolver = resolver
        self.folds: list[dict[str, Any]] = []
        """each fold's value as written, with its number and its window commit's rsid"""
        self.messages: dict[int, dict[str, Any]] = {}
        """message n -> the source of the window or summarize write that put it there"""
        self.summarizing: dict[str, int] = {}
        """a summarize stage's rsid -> the fold it summarized for"""

    def see(self, commit: Commit) -> dict[str, Any] | None:
        """Take a commit in; return the fold it wrote, if it is a window stage's."""
        if commit.stage not in ("window", "summarize"):
            return None
        fold: dict[str, Any] | None = None
        for w in commit.writes:
            if w.key.startswith("message:") and w.source is not None:
                source = _source_json(w.source)
                try:
                    self.messages[int(w.key[8:])] = source
                except ValueError:
                    pass
                number = fold_number(as_text(source.get("id")))
                if commit.stage == "summarize" and number is not None:
                    self.summarizing[commit.rsid] = number
            n = fold_number(w.key)
            if commit.stage == "window" and n is not None and fold is None:
                value, missing = self.resolver.value(w)
                fold = (value if isinstance(value, dict) else {}) | {
                    "fold": n,
                    "rsid": commit.rsid,
                }
                if missing:
                    fold["missing"] = missing
                self.folds.append(fold)
        return fold

    def kind(self, rsid: str) -> dict[str, Any]:
        """``{"kind": "agent"}``, or for a summarizer's call ``{"kind": "summarizer", "fold":
        n}`` (n None when the file does not say which fold)."""
        if not rsid.startswith(SUMMARIZER):
            return {"kind": "agent", "fold": None}
        return {"kind": "summarizer", "fold": self.summarizing.get(rsid)}


def _response(resolver: _Resolver, reply: Any) -> dict[str, Any]:
    message, missing = resolver.value(reply.writes[0]) if reply.writes else (None, None)
    content = as_dict(message).get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    out: dict[str, Any] = {
        "text": "".join(as_text(b.get("text")) for b in blocks if b.get("type") == "text"),
        "tool_calls": [
            {"id": b.get("id"), "name": b.get("name"), "args": b.get("args")}
            for b in blocks
            if b.get("type") == "tool_call"
        ],
        "thinking_chars": sum(
            len(as_text(b.get("thinking"))) for b in blocks if b.get("type") == "thinking"
        ),
        "stop_reason": reply.stop_reason,
        "usage": _usage(reply.usage),
        "model": reply.model,
        "ms": reply.ms,
        "decision": reply.decision.model_dump(exclude_defaults=True) if reply.decision else None,
    }
    if missing:
        out["missing"] = missing
    return out


def _attempt(info: AttemptInfo | None) -> dict[str, Any] | None:
    """Which attempt a call is, for agents with reliability rules (None for others)."""
    if info is None:
        return None
    return {
        "n": info.n,
        "provider": info.provider,
        "via": info.via,
        "skipped": [s.model_dump(exclude_defaults=True) for s in info.skipped],
    }


def _error(record: ErrorEvent) -> dict[str, Any]:
    """An error event: what failed and, for an attempt at a model call, what came next."""
    out: dict[str, Any] = {"kind": record.error.kind, "message": record.error.message}
    for key in ("reason", "status"):
        value = getattr(record.error, key)
        if value is not None:
            out[key] = value
    if record.error.mid_stream:
        out["mid_stream"] = True
    if record.ms is not None:
        out["ms"] = record.ms
    if record.decision is not None:
        out["decision"] = record.decision.model_dump(exclude_defaults=True)
    if record.attempt is not None:
        out["attempt"] = _attempt(record.attempt)
    return out


def overview(rec: Recording) -> dict[str, Any]:
    """The run call by call: slot sizes, the reply's tool calls, each tool's result."""
    from afcore.recording import ArgsInvalid, Call, Commit, ErrorEvent, Reply, RunEnd

    resolver = _Resolver(rec)
    calls: list[dict[str, Any]] = []
    by_number: dict[int, dict[str, Any]] = {}
    errors: list[dict[str, Any]] = []
    end: RunEnd | None = None

    def current(iteration: int | None) -> dict[str, Any] | None:
        # Tools answer the agent's calls: a summarizer's call between a reply and the tools
        # it asked for is not theirs.
        return next(
            (
                c
                for c in reversed(calls)
                if c["kind"] == "agent" and (iteration is None or c["iteration"] == iteration)
            ),
            None,
        )

    injections = _Injections(resolver)
    folds = _Folds(resolver)
    previous_tools: list[str] | None = None
    by_rsid: dict[str, dict[str, Any]] = {}
    """a call-llm stage's rsid -> its last attempt (agents with reliability rules)"""
    for line, record in rec.records():
        if isinstance(record, Call):
            segments = resolver.listed(record.system)
            tools = resolver.listed(record.tools)
            names = [as_text(t.get("name")) for t in tools or []]
            kind = folds.kind(record.rsid)
            agent = kind["kind"] == "agent"
            sources = [as_dict(x.get("source")) for x in (segments or []) + (tools or [])]
            sources += [
                injections.messages[m]
                for m in window_numbers(record.window, rec.message_count)
                if m in injections.messages
            ]
            # The tools a summarizer is sent (none) are no change to the agent's.
            compared = agent and previous_tools is not None
            entry: dict[str, Any] = {
                "call": record.call,
                "iteration": record.iter,
                "rsid": record.rsid,
                "model": record.model,
                "line": line,
                **kind,
                "system": {
                    "segments": None if segments is None else len(segments),
                    "chars": resolver.system_chars(record.system),
                },
                "messages": sum(b - a + 1 for a, b in record.window),
                "window": [list(r) for r in record.window],
                "tools": None if tools is None else len(tools),
                "tools_added": [t for t in names if t not in (previous_tools or [])]
                if compared
                else [],
                "tools_removed": [t for t in (previous_tools or []) if t not in names]
                if compared
                else [],
                "injections": injections.summary(record.iter, sources) if agent else None,
                "attempt": _attempt(record.attempt),
                "response": None,
                "results": [],
                "invalid_args": [],
                "errors": [],
            }
            calls.append(entry)
            by_number[record.call] = entry
            by_rsid[record.rsid] = entry
            if agent:
                previous_tools = names
        elif isinstance(record, Reply):
            target = by_number.get(record.call)
            if target is not None:
                target["response"] = _response(resolver, record)
        elif isinstance(record, Commit) and record.stage == "inject":
            injections.see(record)
        elif isinstance(record, Commit) and record.stage in ("window", "summarize"):
            fold = folds.see(record)
            if fold is not None:
                fold["after_call"] = calls[-1]["call"] if calls else None
        elif isinstance(record, Commit) and record.tool is not None:
            message, missing = (
                resolver.value(record.writes[0]) if record.writes else (None, "no result written")
            )
            result: dict[str, Any] = {
                "name": record.tool.name,
                "call_id": record.tool.call_id,
                "status": record.tool.status,
                "ms": record.tool.ms,
                "content": as_dict(message).get("content"),
                "is_error": as_dict(message).get("is_error") is True,
            }
            if missing:
                result["missing"] = missing
            target = current(record.iter)
            if target is not None:
                target["results"].append(result)
        elif isinstance(record, ArgsInvalid):
            target = current(None)
            if target is not None:
                target["invalid_args"].append(
                    {
                        "name": record.name,
                        "call_id": record.call_id,
                        "problems": record.problems,
                        "enforced": record.enforced,
                    }
                )
        elif isinstance(record, ErrorEvent):
            error = _error(record)
            target = by_number.get(record.call) if record.call is not None else None
            if target is None and record.call is None and record.rsid is not None:
                # A fail-fast before an attempt was made: it ends its stage's last attempt.
                target = by_rsid.get(record.rsid)
            (target["errors"] if target is not None else errors).append(error)
        elif isinstance(record, RunEnd):
            end = record

    # How many attempts each call-llm stage made, now that all are known.
    attempts: dict[str, int] = {}
    for c in calls:
        if c["attempt"] is not None:
            attempts[c["rsid"]] = attempts.get(c["rsid"], 0) + 1
    for c in calls:
        if c["attempt"] is not None:
            c["attempt"]["of"] = attempts[c["rsid"]]
    header = rec.header
    answer = None
    if end is not None and end.answer is not None:
        answer, _ = resolver.value(end.answer)
    return {
        "run_id": header.run_id,
        "path": str(rec.path),
        "started_at": header.started_at,
        "agent": header.agent.model_dump(),
        "model": header.model,
        "provider": header.provider,
        "status": end.status if end is not None else "incomplete",
        "iterations": end.iterations
        if end is not None
        else max((c["iteration"] for c in calls), default=0),
        "calls": calls,
        "folds": folds.folds,
        "answer": answer,
        "usage": _usage(end.usage) if end is not None else None,
        "error": end.error.model_dump() if end is not None and end.error else None,
        "errors": errors,
        "ms": end.ms if end is not None else None,
        "problems": [p.to_json() for p in rec.problems],
        "torn_tail": rec.torn_tail.to_json() if rec.torn_tail else None,
        "unknown_records": rec.unknown_records,
    }


def call_detail(rec: Recording, n: int) -> dict[str, Any]:
    """Call ``n`` as sent, rebuilt from the file, with its hash check and its reply, and the
    provenance of every part: where each system segment, message and tool came from, why it
    is there, and what changed since the call before."""
    from pydantic import ValidationError

    from afcore.recording import Call, Commit, Reply

    numbers = rec.call_numbers
    if n not in numbers:
        have = f"calls {numbers[0]} to {numbers[-1]}" if numbers else "it has no calls"
        raise CliError(f"call {n} is not in {Path(rec.path).name} ({have})", EXIT_USAGE)
    try:
        call = rec.call(n)
        check = rec.check_call(n)
        reply = rec.reply(n)
    except ValidationError as e:
        raise CliError(
            f"call {n}'s records are malformed: {e.errors()[0]['msg']}", EXIT_FAILED
        ) from None
    resolver = _Resolver(rec)
    injections = _Injections(resolver)
    folds = _Folds(resolver)
    previous: int | None = None
    """the agent's last call before this one"""
    written = 0
    """the highest message number written so far"""
    when: list[tuple[dict[str, Any], int | None, int]] = []
    """each fold, the agent's call it came after, and the last message written before it"""
    # The inject stages up to this call: its iteration's decisions, and the injection behind
    # each injected message in its window (written when it first landed, maybe long before);
    # the folds before it, and the agent's calls (a summarizer's call is not one of them).
    for _, record in rec.records():
        if isinstance(record, Call):
            if record.call == n:
                break
            # The attempts before this one at the same call sent the same request.
            if not record.rsid.startswith(SUMMARIZER) and record.rsid != call.rsid:
                previous = record.call
            continue
        for w in record.writes if isinstance(record, Commit | Reply) else ():
            number = w.key.removeprefix("message:")
            if w.key.startswith("message:") and number.isdigit():
                written = max(written, int(number))
        if isinstance(record, Commit) and record.stage == "inject":
            injections.see(record)
        elif isinstance(record, Commit):
            fold = folds.see(record)
            if fold is not None:
                when.append((fold, previous, written))
    kind = folds.kind(call.rsid)
    if kind["kind"] != "agent":
        previous = None  # a summarizer is sent its own transcript: no call before it to compare
    before = _slots(rec, resolver, previous) if previous is not None else None
    window = list(window_numbers(call.window, rec.message_count))
    detail: dict[str, Any] = {
        "call": call.call,
        "iteration": call.iter,
        "rsid": call.rsid,
        **kind,
        "model": call.model,
        "previous_call": previous,
        "injections": None,
        "system": None,
        "messages": None,
        "tools": None,
        "removed": None,
        "params": call.params,
        "cache": call.cache,
        "window": [list(r) for r in call.window],
        "hash": call.hash,
        "rebuilt_hash": check.rebuilt,
        "verified": check.ok,
        "problem": check.problem,
        "response": _response(resolver, reply) if reply is not None else None,
        "attempt": _attempt_of(rec, call),
        "errors": _errors_of(rec, call),
    }
    try:
        request = rec.request(n)
        segments, tools = rec.segments(n), rec.tools(n)
    except (KeyError, IndexError, TypeError, ValueError):  # ValidationError is a ValueError
        # check.problem says what is missing; the request is not shown half-rebuilt.
        return detail
    decided = injections.decided(call.iter)
    marks = {(c.get("slot"), c.get("index")) for c in call.cache if isinstance(c, dict)}

    system: list[dict[str, Any]] = []
    for i, (seg, body) in enumerate(zip(segments, request["system"], strict=True)):
        src = _source_json(seg.source)
        text = as_text(as_dict(body).get("text"))
        entry = {"position": i + 1, "text": text} | _provenance(src, decided)
        entry["cache_breakpoint"] = ("system", i) in marks
        entry["change"] = _change(before, "segments", _segment_key(src, text), text)
        system.append(entry)

    messages: list[dict[str, Any]] = []
    for m, raw in zip(window, request["messages"], strict=True):
        try:
            writer: str | None = as_text(rec.message_writer(m)) or None
        except (IndexError, KeyError):
            writer = None
        msg = as_dict(raw)
        entry = {"n": m, "role": msg.get("role"), "content": msg.get("content")} | msg
        entry |= {"n": m, "writer": writer}
        if m in injections.messages:
            entry |= _provenance(injections.messages[m], decided)
        elif m in folds.messages:
            entry |= _provenance(folds.messages[m], {})
        entry["change"] = None if before is None or m in before["messages"] else "new"
        messages.append(entry)

    listed: list[dict[str, Any]] = []
    for i, (tool, spec) in enumerate(zip(tools, request["tools"], strict=True)):
        src = _source_json(tool.source)
        entry = {"name": tool.name} | as_dict(spec)
        entry |= {
            "name": tool.name,
            "source": src.get("kind"),
            "id": src.get("id"),
            "cache_breakpoint": ("tools", i) in marks,
            "change": _change(before, "tools", tool.name, tool.ref),
        }
        listed.append(entry)

    sources = [_source_json(x.source) for x in segments] + [_source_json(t.source) for t in tools]
    sources += [injections.messages[m] for m in window if m in injections.messages]
    # The folds since the agent's call before this one, with where each happened.
    recent = [(f, at) for f, after, at in when if previous is not None and after == previous]
    removed = _removed(before, system, window, listed, {**folds.messages, **injections.messages})
    if removed is not None:
        # A message that left in a fold since the call before is shown by the fold's seam.
        evicted = {
            m: f["fold"]
            for f, _ in recent
            for m in window_numbers(checked(f, 0)["messages"], rec.message_count)
        }
        for gone in removed["messages"]:
            if gone["n"] in evicted:
                gone["fold"] = evicted[gone["n"]]
    prior: list[int] = before["order"] if before is not None else []
    detail |= {
        "injections": injections.summary(call.iter, sources) if kind["kind"] == "agent" else None,
        "system": system,
        "messages": messages,
        "tools": listed,
        "removed": removed,
        "folds": _seams(folds.folds, recent, window, prior),
    }
    return detail


def _attempt_of(rec: Recording, call: Call) -> dict[str, Any] | None:
    """Which attempt ``call`` is, and how many its stage made (the calls around it with
    the same rsid)."""
    from pydantic import ValidationError

    from afcore.errors import RecordingError

    out = _attempt(call.attempt)
    if out is None:
        return None
    numbers = set(rec.call_numbers)
    count = 1
    for step in (-1, 1):
        m = call.call + step
        while m in numbers:
            try:
                if rec.call(m).rsid != call.rsid:
                    break
            except (RecordingError, ValidationError):
                break
            count += 1
            m += step
    return out | {"of": count}


def _errors_of(rec: Recording, call: Call) -> list[dict[str, Any]]:
    """The error events about ``call``: they follow it before the next call or reply."""
    from afcore.recording import ErrorEvent

    out: list[dict[str, Any]] = []
    try:
        line = rec.writer_lines(f"call:{call.call}")[0]
    except IndexError:
        return out
    for at in range(line + 1, rec.line_count + 1):
        kind = rec.kind(at)
        if kind in ("call", "reply", "commit", "run_end"):
            break
        if kind != "other":
            continue
        raw = rec.raw(at)
        if isinstance(raw, dict) and raw.get("t") == "error" and raw.get("call") == call.call:
            try:
                out.append(_error(ErrorEvent.model_validate(raw)))
            except ValueError:  # a malformed event is verify's to report
                continue
    return out


def _seams(
    folds: list[dict[str, Any]],
    recent: list[tuple[dict[str, Any], int]],
    window: list[int],
    prior: list[int],
) -> list[dict[str, Any]]:
    """Where a call's window shows a fold: before the summary it wrote, for as long as that
    summary is in the window; and, for a fold since the agent's call before (``recent``,
    each with the last message written before it) that wrote none, where the messages it
    dropped were, or where it happened. ``before``: the message the seam goes before (None:
    after the last)."""
    sent = set(window)
    out = []
    for raw in folds:
        f = checked(raw, raw["fold"])
        before: int | None
        at = next((at for r, at in recent if r is raw), None)
        if f["summary"] is not None and f["summary"] in sent:
            before = f["summary"]
        elif at is not None:
            before = _dropped_at(f, window, prior, at)
        else:
            continue
        out.append(f | {"rsid": as_text(raw.get("rsid")), "before": before})
    return out


def _dropped_at(f: dict[str, Any], window: list[int], prior: list[int], at: int) -> int | None:
    """The message of ``window`` that followed what fold ``f`` dropped from the window before
    (``prior``); for a fold that dropped nothing, the first written after it (``at``: the
    last message written before it)."""
    gone = set(window_numbers(f["messages"], max([*window, *prior, at, 0])))
    first = next((i for i, m in enumerate(prior) if m in gone), None)
    if first is not None:
        sent = set(window)
        after = next((m for m in prior[first:] if m not in gone and m in sent), None)
        if after is not None:
            return after
    return next((m for m in window if m > at), None)


def _provenance(src: dict[str, Any], decided: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Where a piece of context came from, and (for an injection) why it is there: the
    reason this iteration's decision gave, with what it read."""
    out: dict[str, Any] = {
        "source": src.get("kind"),
        "id": src.get("id"),
        "trigger": src.get("trigger"),
        "reason": src.get("reason"),
        "cache": src.get("cache"),
    }
    decision = decided.get(src.get("id") or "")
    if decision is not None and decision["fired"]:
        # An injected message is written once and sent again while its text stays the same;
        # the reason it is there at this call is this iteration's.
        out["reason"] = decision["reason"]
        if "reads" in decision:
            out["reads"] = decision["reads"]
    return out


def _segment_key(src: dict[str, Any], text: str) -> tuple[str, str]:
    """What identifies a segment from call to call: its injection, or its text."""
    return (as_text(src.get("kind")), as_text(src.get("id")) or text)


def _slots(rec: Recording, resolver: _Resolver, n: int) -> dict[str, Any] | None:
    """What call ``n`` was sent, enough to tell what the next call changed; None when its
    records cannot be read."""
    from afcore.errors import RecordingError

    try:
        segments: dict[Any, tuple[str, dict[str, Any]]] = {}
        for seg in rec.segments(n):
            text = seg.text
            if text is None:
                body, _ = resolver.value({"ref": seg.ref})
                text = as_text(as_dict(body).get("text"))
            src = _source_json(seg.source)
            segments[_segment_key(src, text)] = (text, src)
        tools = {t.name: (t.ref, _source_json(t.source)) for t in rec.tools(n)}
        order = list(window_numbers(rec.call(n).window, rec.message_count))
    except (KeyError, IndexError, TypeError, ValueError, RecordingError):
        return None
    return {"call": n, "segments": segments, "tools": tools, "messages": set(order), "order": order}


def _change(before: dict[str, Any] | None, slot: str, key: Any, value: Any) -> str | None:
    """`new` (not in the previous call), `changed` (there, different), or None (the same,
    or this is the first call)."""
    if before is None:
        return None
    known = before[slot].get(key)
    if known is None:
        return "new"
    return None if known[0] == value else "changed"


def _removed(
    before: dict[str, Any] | None,
    system: list[dict[str, Any]],
    window: list[int],
    tools: list[dict[str, Any]],
    placed: dict[int, dict[str, Any]],
) -> dict[str, Any] | None:
    """What the previous call was sent that this one was not."""
    if before is None:
        return None
    keys = {_segment_key({"kind": s["source"], "id": s["id"]}, s["text"]) for s in system}
    names = {t["name"] for t in tools}
    sent = set(window)
    return {
        "system": [
            {"source": src.get("kind"), "id": src.get("id"), "text": text}
            for key, (text, src) in before["segments"].items()
            if key not in keys
        ],
        "messages": [_gone_message(m, placed) for m in sorted(before["messages"] - sent)],
        "tools": [
            {"name": name, "source": src.get("kind"), "id": src.get("id")}
            for name, (_, src) in before["tools"].items()
            if name not in names
        ],
    }


def _gone_message(n: int, placed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """A message the call before was sent and this one was not; ``placed``: the sources of
    the messages written by an injection or a window stage."""
    src = placed.get(n)
    if src is None:
        return {"n": n}
    return {"n": n, "source": src.get("kind"), "id": src.get("id")}
