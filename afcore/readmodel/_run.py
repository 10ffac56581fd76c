"""A recording as plain data, call by call: what ``af show`` prints and its JSON output are
drawn from it, so both always say the same thing.

Values are kept whole here; only a front end cuts them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from afcore.readmodel._text import as_dict, as_text
from afcore.readmodel._walk import (
    Folds,
    Injections,
    Resolver,
    attempt_json,
    error_json,
    response_json,
    usage_json,
    window_numbers,
)

if TYPE_CHECKING:
    from afcore.recording import Recording

__all__ = ["overview"]


def overview(rec: Recording) -> dict[str, Any]:
    """The run call by call: slot sizes, the reply's tool calls, each tool's result."""
    from afcore.recording import ArgsInvalid, Call, Commit, ErrorEvent, Reply, RunEnd

    resolver = Resolver(rec)
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

    injections = Injections(resolver)
    folds = Folds(resolver)
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
                "attempt": attempt_json(record.attempt),
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
                target["response"] = response_json(resolver, record)
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
            error = error_json(record)
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
        "usage": usage_json(end.usage) if end is not None else None,
        "error": end.error.model_dump() if end is not None and end.error else None,
        "errors": errors,
        "ms": end.ms if end is not None else None,
        "problems": [p.to_json() for p in rec.problems],
        "torn_tail": rec.torn_tail.to_json() if rec.torn_tail else None,
        "unknown_records": rec.unknown_records,
    }
