"""The response and events of the selected call: the reply (its text, and each tool call it
asked for with the result that came back, its status and time), then what else the file says
happened before the agent's next call (the route taken, folds of the window, the summarizer's
call, errors, progress, the answer and the end of the run, and records of types this af does
not know, shown raw), then the iteration's injection decisions, usage and timing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from rich.text import Text
from textual.visual import VisualType

from afcore.readmodel import (
    CallDetail,
    CallView,
    Decisions,
    ToolCall,
    as_dict,
    as_text,
    fold_text,
    ms_text,
    plural,
    refusal_texts,
    safe,
    status_style,
    stop_text,
    usage_json,
    usage_text,
)
from tui.slots import ARGS
from tui.text import args_line, flat, preview
from tui.widgets.item_list import Item, Part, heading, row

__all__ = ["response_entries"]

Entry = tuple[VisualType, Item | None]


def response_entries(view: CallView, width: int) -> Iterator[Entry]:
    d = view.detail
    mark = view.mark
    r = d.response if d is not None else None
    tools = [e for e in view.events if e["kind"] == "tool"]
    invalid = {e["call_id"]: e for e in view.events if e["kind"] == "invalid"}
    if d is not None and not d.verified:
        # A call that does not verify says so first.
        yield from _call_facts(d)
        yield Text(""), None
    if d is None:
        yield heading("RESPONSE"), None
        yield Text("this call cannot be read", style="red"), None
    elif r is None:
        yield heading("RESPONSE"), None
        failed = any(e["kind"] == "error" for e in view.events)
        said = "none: the call failed (see its events)" if failed else "none recorded: the run "
        said += "" if failed else "stopped before the reply came"
        yield Text(said, style="yellow"), None
    else:
        yield heading("RESPONSE", stop_text(as_text(r.stop_reason))), None
        note = Text(usage_text(usage_json(r.usage)), style="dim")
        if r.ms is not None:
            note.append(f" · {ms_text(r.ms)}", style="dim")
        if r.response_id:
            note.append(f" · {safe(r.response_id)}", style="dim")
        yield note, None
        if r.stop_reason == "max_tokens":
            yield Text("the answer was cut at the model's token limit", style="yellow"), None
        if r.redacted_thinking:
            yield Text("(redacted thinking: the vendor sent it encrypted)", "dim italic"), None
        for opaque in r.opaque:
            yield Text(safe(opaque), style="dim italic"), None
        if r.unsent_params:
            unsent = ", ".join(safe(p) for p in r.unsent_params)
            yield Text(f"{unsent} not sent: the server has no way to say it", "yellow"), None
        if r.missing:
            yield Text(f"the reply's message is missing: {safe(r.missing)}", style="red"), None
        if r.text:
            shown, hidden = preview(r.text)
            yield (
                shown,
                Item(
                    "reply",
                    full=r.text if hidden else None,
                    title=f"call {mark.n} · reply",
                    why="answer"
                    if any(e["kind"] == "answer" for e in view.events)
                    else f"call:{mark.n}",
                ),
            )
        if r.thinking_chars:
            yield Text(f"(thinking, {r.thinking_chars:,} chars)", style="dim italic"), None
        used: set[int] = set()
        for i, tc in enumerate(r.tool_calls):
            result = next(
                (
                    (j, e)
                    for j, e in enumerate(tools)
                    if j not in used and e.get("call_id") == as_text(tc.id)
                ),
                None,
            )
            if result is not None:
                used.add(result[0])
            yield _tool_call(mark.n, i, tc, result[1] if result else None, invalid, width)
        tools = [e for j, e in enumerate(tools) if j not in used]
    events = [e for e in view.events if e["kind"] not in ("tool", "invalid")] + tools
    events.sort(key=lambda e: e["line"])
    if events or view.more_events:
        yield Text(""), None
        yield heading("EVENTS", f"after call {mark.n}"), None
        for event in events:
            yield _event(mark.n, event, width)
        if view.more_events:
            yield Text(f"… and {view.more_events:,} more records", style="dim"), None
    if d is not None and d.injections is not None:
        yield Text(""), None
        yield from _decisions(d.injections, d)
    if d is not None and d.verified:
        yield Text(""), None
        yield from _call_facts(d)


def _tool_call(
    call: int,
    i: int,
    tc: ToolCall,
    result: dict[str, Any] | None,
    invalid: dict[str, dict[str, Any]],
    width: int,
) -> Entry:
    name = as_text(tc.name)
    head = Text.assemble(
        ("→ ", "cyan"),
        (safe(name), "bold cyan"),
        ("(", "dim"),
        args_line(tc.args, ARGS),
        (")", "dim"),
    )
    parts: list[Part] = [head]
    full = None
    key = None
    if result is None:
        parts.append(Text("  no result recorded", style="yellow"))
    else:
        parts.extend(_result_lines(result, invalid))
        full = _result_text(result)
        if result.get("k") is not None:
            key = f"tool:{name}#{result['k']}"
    linked = as_dict(result.get("run")) if result is not None else {}
    return row(None, *parts), Item(
        f"call:{i}",
        full=full,
        title=f"call {call} · {safe(name)} result",
        why=f"{key}.args" if key else None,
        run=as_text(linked["recording"]) if linked.get("recording") else None,
    )


def _result_text(result: dict[str, Any]) -> str | None:
    content = result.get("content")
    if content is None:
        return None
    text = as_text(content)
    return text if len(text) > 200 or "\n" in text else None


def _result_lines(result: dict[str, Any], invalid: dict[str, dict[str, Any]]) -> list[Part]:
    status = as_text(result.get("status"))
    label = as_text(result.get("shown")) or status
    declared = as_text(result.get("result_status")) if status == "ok" else ""
    style = status_style(declared or status)
    head = Text.assemble(("  ← ", style), (safe(label), style))
    if result.get("ms") is not None:
        head.append(f" · {ms_text(result['ms'])}", style="dim")
    if result.get("message") is not None:
        head.append(f" · message #{result['message']}", style="dim")
    if result.get("unfinished"):
        head.append(" · started, no result recorded", style="yellow")
    out: list[Part] = [head]
    bad = invalid.get(as_text(result.get("call_id")))
    if bad is not None:
        problems = "; ".join(
            f"{as_text(p.get('path', '$'))}: {as_text(p.get('message'))}" for p in bad["problems"]
        )
        verb = "refused" if bad["enforced"] else "ran with invalid arguments"
        out.append(Text(f"    {verb}: {safe(problems)[:400]}", style="yellow"))
    for said in result.get("progress") or []:
        out.append(Text(f"    … {safe(as_text(said))[:300]}", style="dim"))
    for ruled in result.get("rules") or []:
        out.append(Text(f"    ⚖ {safe(as_text(ruled))[:300]}", style="yellow"))
    for note in result.get("notes") or []:
        out.append(Text(f"    {safe(as_text(note))[:300]}", style="dim"))
    if as_dict(result.get("run")).get("recording"):
        out.append(Text("    ⏎ opens the run it made", style="cyan"))
    content = result.get("content")
    if content is not None:
        shown, _ = preview(as_text(content), chars=300, lines=3)
        out.append((4, shown))
    return out


_GOVERNED = {
    "allow": ("⚖", "green"),
    "deny": ("⚖", "red"),
    "ask": ("⚖", "yellow"),
    "ok": ("✓", "green"),
    "failed": ("✗", "yellow"),
}


def _event(call: int, e: dict[str, Any], width: int) -> Entry:
    kind = e["kind"]
    text: Text
    at = Text(f"line {e['line']} ", style="dim")
    if kind == "tool":
        name = as_text(e.get("name"))
        head = Text.assemble(at, ("tool ", "dim"), (safe(name), "cyan"))
        lines = [head, *_result_lines(e, {})]
        key = f"tool:{name}#{e['k']}.result" if e.get("k") is not None else None
        full = _result_text(e)
        return row(None, *lines), Item(
            f"ev:{e['line']}", full=full, title=f"{safe(name)} result", why=key
        )
    if kind == "route":
        return Text.assemble(at, ("route → ", "dim"), safe(as_text(e["value"]))), Item(
            f"ev:{e['line']}", why="route"
        )
    if kind == "fold":
        f = e["fold"]
        lines = [Text.assemble(at, (fold_text(f), "yellow"))]
        lines += [Text(f"  {t}", style="dim") for t in refusal_texts(f)]
        if e.get("evicted"):
            lines.append(Text(f"  {plural(e['evicted'], 'message')} left the window", style="dim"))
        return row(None, *lines), Item(f"ev:{e['line']}", why=f"fold:{f.fold}")
    if kind == "evicted":
        said = f"{plural(e['evicted'], 'message')} left the window (fold {e.get('fold')})"
        return Text.assemble(at, (safe(said), "yellow")), None
    if kind == "summarize":
        return Text.assemble(at, ("the summarizer was sent the folded messages", "magenta")), None
    if kind == "call":
        text = Text.assemble(at, (f"call {e.get('call')} ", "bold magenta"))
        text.append(f"{safe(as_text(e.get('rsid')))} · Enter goes to it", style="dim")
        n = e.get("call")
        return text, Item(f"ev:{e['line']}", jump=n if isinstance(n, int) else None)
    if kind == "error":
        text = Text.assemble(at, ("✗ ", "bold red"), (safe(e["error"]), "red"), ": ")
        text.append_text(flat(e["message"], 600))
        decision = e.get("decision") or {}
        if decision.get("verb"):
            # A failed attempt at a model call: what the reliability rules decided next.
            then = as_text(decision["verb"]).replace("_", " ")
            by = decision.get("rule") or decision.get("kind") or decision.get("reason")
            text.append(f"\n  then: {safe(then)}", style="yellow")
            if by:
                text.append(f" ({safe(as_text(by))})", style="dim")
        return text, Item(f"ev:{e['line']}", full=e["message"], title="error")
    if kind == "answer":
        shown, hidden = preview(as_text(e["value"]), chars=600, lines=6)
        return row(None, Text.assemble(at, ("answer", "bold green")), shown), Item(
            f"ev:{e['line']}",
            full=as_text(e["value"]) if hidden else None,
            title="the answer",
            why="answer",
        )
    if kind == "end":
        record = e["record"]
        status = e["status"] or "?"
        text = Text.assemble(at, ("run ended: ", "bold"), (safe(status), status_style(status)))
        iterations, calls = record.get("iterations"), record.get("calls")
        if isinstance(iterations, int) and isinstance(calls, int):
            text.append(
                f" after {plural(iterations, 'iteration')} · {plural(calls, 'call')}", style="dim"
            )
        error = as_dict(record.get("error"))
        if error:
            text.append(f"\n  {safe(as_text(error.get('kind')))}: ", style="red")
            text.append_text(flat(error.get("message"), 400))
        return text, None
    if kind == "progress":
        return Text.assemble(at, ("… ", "dim"), flat(e["message"], 400)), None
    if kind == "bad":
        return Text.assemble(at, ("not a record (af verify says why)", "red")), None
    if kind == "stage":
        return Text.assemble(at, (safe(as_text(e.get("rsid"))), "dim")), None
    if kind == "governed":
        mark, style = _GOVERNED.get(as_text(e.get("verb")), ("⚖", "dim"))
        words = [as_text(w) for w in e.get("words") or []]
        lines = [Text.assemble(at, (f"{mark} ", style), (safe(as_text(e.get("stage"))), "cyan"))]
        lines += [Text.assemble("  ", (safe(w), style)) for w in words]
        return row(None, *lines), Item(f"ev:{e['line']}", why=e.get("why"))
    if kind == "pause":
        text = Text.assemble(at, ("⏸ paused: ", "bold yellow"), (safe(e["link"]), "bold"))
        text.append(" asks a person: ")
        text.append_text(flat(e["question"], 600))
        return text, Item(f"ev:{e['line']}", full=e["question"], title="the question")
    if kind == "resume":
        verb = "approved" if e.get("verb") == "approve" else "declined"
        style = "bold green" if verb == "approved" else "bold red"
        when = as_text(e.get("at"))[:19].replace("T", " ")
        text = Text.assemble(at, (f"▶ {verb}", style), f" by {safe(as_text(e.get('by')))}")
        text.append(f" at {safe(when)} UTC", style="dim")
        if e.get("why"):
            text.append(": ")
            text.append_text(flat(e["why"], 400))
        return text, None
    # A record of a type this af does not know: shown as it is, made safe.
    raw = orjson.dumps(e.get("record")).decode()
    text = Text.assemble(at, ("unknown record ", "yellow"))
    text.append_text(flat(raw, 600))
    return text, Item(f"ev:{e['line']}", full=raw if len(raw) > 600 else None, title="record")


def _decision_key(id: str, d: CallDetail) -> str | None:
    """What ``w`` asks about a decision that fired: the segment it put in the system prompt,
    or the message it put in the window."""
    if any(s.provenance.id == id for s in d.system or []):
        return f"system:{id}"
    placed = [m.n for m in d.messages or [] if m.id == id]
    return f"message:{placed[-1]}" if placed else None


def _decisions(inj: Decisions, detail: CallDetail) -> Iterator[Entry]:
    yield heading("DECISIONS", f"{inj.evaluated} injections evaluated"), None
    for d in inj.fired:
        text = Text.assemble(("fired ", "green"), (safe(as_text(d.id)), "bold green"))
        trigger = as_text(d.trigger)
        text.append(f" · {safe(trigger)}", style="dim")
        reason = as_text(d.reason)
        if reason and reason != trigger:
            text.append(f" · {safe(reason)[:400]}", style="dim")
        yield text, Item(f"dec:{d.id}", why=_decision_key(as_text(d.id), detail))
    for d in inj.skipped:
        failed = d.error is not None
        text = Text.assemble(
            ("skipped ", "red" if failed else "yellow"), (safe(as_text(d.id)), "bold")
        )
        why = as_text(d.reason) + (f": {as_text(d.error)}" if failed else "")
        text.append(f" · {safe(why)[:400]}", style="red" if failed else "dim")
        yield text, None


def _call_facts(d: CallDetail) -> Iterator[Entry]:
    yield heading("CALL", f"{safe(d.rsid)} · model {safe(d.model)}"), None
    v = d.verification
    if v.verified:
        yield (
            Text.assemble(
                ("✓ verified", "bold green"),
                (f": rebuilt from the file, it hashes to {v.hash[:12]}… as when sent", "dim"),
            ),
            None,
        )
    else:
        yield (
            Text.assemble(("✗ not verified", "bold red"), ": ", safe(v.problem or "unknown")),
            None,
        )
    if d.params:
        yield Text.assemble(("params ", "dim"), args_line(d.params, 200)), None
