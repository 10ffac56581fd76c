"""A recording as plain data, for ``af show``: the JSON output, and what the human output is
drawn from, so both always say the same thing.

Values are kept whole here; only the human rendering cuts them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError
from afcli._render import as_dict, as_text

if TYPE_CHECKING:
    from afcore.recording import Recording, UsageInfo

__all__ = ["call_detail", "open_run", "overview"]


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
            value, _ = self.value({"ref": ref})
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
    }
    if missing:
        out["missing"] = missing
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
        return next(
            (c for c in reversed(calls) if iteration is None or c["iteration"] == iteration),
            None,
        )

    for line, record in rec.records():
        if isinstance(record, Call):
            segments = resolver.listed(record.system)
            tools = resolver.listed(record.tools)
            entry: dict[str, Any] = {
                "call": record.call,
                "iteration": record.iter,
                "line": line,
                "system": {
                    "segments": None if segments is None else len(segments),
                    "chars": resolver.system_chars(record.system),
                },
                "messages": sum(b - a + 1 for a, b in record.window),
                "window": [list(r) for r in record.window],
                "tools": None if tools is None else len(tools),
                "response": None,
                "results": [],
                "invalid_args": [],
                "errors": [],
            }
            calls.append(entry)
            by_number[record.call] = entry
        elif isinstance(record, Reply):
            target = by_number.get(record.call)
            if target is not None:
                target["response"] = _response(resolver, record)
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
            error = {"kind": record.error.kind, "message": record.error.message}
            target = by_number.get(record.call) if record.call is not None else None
            (target["errors"] if target is not None else errors).append(error)
        elif isinstance(record, RunEnd):
            end = record

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
    """Call ``n`` as sent, rebuilt from the file, with its hash check and its reply."""
    from pydantic import ValidationError

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
    try:
        request: dict[str, Any] | None = rec.request(n)
        sources = {
            "system": [s.source.model_dump(exclude_none=True) for s in rec.segments(n)],
            "tools": [t.source.model_dump(exclude_none=True) for t in rec.tools(n)],
        }
    except (KeyError, IndexError, TypeError, ValidationError):
        # check.problem says what is missing; the request is not shown half-rebuilt.
        request, sources = None, {"system": [], "tools": []}
    numbers = [m for a, b in call.window for m in range(a, b + 1)]
    writers: list[str | None] = []
    for m in numbers:
        try:
            writers.append(as_text(rec.message_writer(m)) or None)
        except (IndexError, KeyError):
            writers.append(None)
    return {
        "call": call.call,
        "iteration": call.iter,
        "rsid": call.rsid,
        "model": call.model,
        "system": request["system"] if request else None,
        "messages": request["messages"] if request else None,
        "tools": request["tools"] if request else None,
        "params": call.params,
        "cache": call.cache,
        "window": [list(r) for r in call.window],
        "provenance": {
            **sources,
            "messages": [{"n": m, "written_by": w} for m, w in zip(numbers, writers, strict=True)],
        },
        "hash": call.hash,
        "rebuilt_hash": check.rebuilt,
        "verified": check.ok,
        "problem": check.problem,
        "response": _response(_Resolver(rec), reply) if reply is not None else None,
    }
