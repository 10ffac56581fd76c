"""``af show``: a recorded run, iteration by iteration, or one call exactly as sent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from afcli._errors import command
from afcli._params import RunArg
from afcli._render import Printer, block, fit, out_console, print_indented, print_json
from afcore.readmodel import (
    args_text,
    as_dict,
    as_text,
    checked,
    evidence_text,
    fold_text,
    line,
    ms_text,
    plural,
    refusal_texts,
    safe,
    seam_text,
    status_style,
    usage_text,
)

if TYPE_CHECKING:
    from afcore.readmodel import CallDetail
    from afcore.recording import Recording

Out = Console | Printer
"""Where the overview prints: a console, or a Printer over one."""

__all__ = ["show"]


@command
def show(
    run: RunArg,
    call: Annotated[
        int | None,
        typer.Option(
            "--call",
            "-c",
            min=1,
            help="Show call N (from 1): its system text, messages and tools as sent.",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Show a recorded run: each call's slot sizes, tool calls and results, and the outcome."""
    from afcli._runs import open_run
    from afcore.readmodel import call_detail

    with open_run(run, index=call is not None) as rec:
        if call is not None:
            data = call_detail(rec, call)
            if json_output:
                print_json(data.to_json())
            else:
                _print_call(out_console(), data, rec.path.name)
            return
        if json_output:
            _print_run_json(rec)
        else:
            _print_run(out_console(), rec)


# -- the overview ------------------------------------------------------------------------


def _print_run(console: Console, rec: Recording) -> None:
    """The run as the file is read: each call printed once complete, each fold after it."""
    from afcore.readmodel import run_view

    out = Printer(console)
    calls = 0
    for part in run_view(rec):
        if part.kind == "header":
            _print_head(out, part.data)
        elif part.kind == "call":
            calls += 1
            _print_call_line(out, part.data)
        elif part.kind == "fold":
            _print_fold(out, part.data)
        else:
            _print_end(out, part.data, calls)
    out.flush()


def _print_head(console: Out, v: dict[str, Any]) -> None:
    agent = v["agent"]
    head = Text.assemble(
        ("run ", "dim"),
        (safe(v["run_id"]), "bold"),
        ("  ", ""),
        (safe(agent["name"]), "bold"),
    )
    if agent.get("source"):
        head.append(f" ({safe(agent['source'])})", "dim")
    head.append(f"  model {safe(v['model'])}", "dim")
    console.print(head)
    started = safe(str(v["started_at"]))
    console.print(Text(f"started {started[:19].replace('T', ' ')} UTC", "dim"))


def _print_call_line(console: Out, c: dict[str, Any]) -> None:
    """One call of the overview: its sizes and decisions, its reply, what followed it."""
    width = max(console.width, 60)
    console.print()
    system, tools = c["system"], c["tools"]
    segments = "?" if system["segments"] is None else plural(system["segments"], "segment")
    chars = "?" if system["chars"] is None else f"{system['chars']:,}"
    sizes = Text.assemble(
        ("system ", "dim"),
        f"{segments}, {chars} chars",
        ("  messages ", "dim"),
        f"{c['messages']:,}",
        ("  tools ", "dim"),
        "?" if tools is None else f"{tools:,}",
    )
    attempt = _shown_attempt(c)
    if attempt is None:
        console.print(
            Text.assemble(
                (f"call {c['call']}", "bold cyan"),
                (_summarizer_for(c.get("kind"), c.get("fold")), "bold magenta"),
                (f" · iteration {c['iteration']}", "cyan"),
                "   ",
                sizes,
            )
        )
    else:
        _print_hanging(console, _attempt_head(c, attempt), indent=0)
        for skipped in attempt["skipped"]:
            console.print(fit(Text("  skipped ", "yellow"), _skipped_text(skipped), width))
    # Later attempts at a call send what the first sent: its sizes and decisions hold.
    first = attempt is None or attempt["n"] == 1
    if attempt is not None and first:
        console.print(Text("  ") + sizes)
    if c["injections"] is not None and first:
        decisions = _decisions_text(c["injections"], max(60, width // 2), cap=8)
        _print_hanging(console, decisions, indent=2)
    changes = _tool_changes(c["tools_added"], c["tools_removed"])
    if changes:
        console.print(fit(Text("  tools ", "dim"), changes, width))
    r = c["response"]
    if r is None:
        if not c["errors"]:
            console.print(Text("  no reply recorded", "yellow"))
    else:
        console.print(
            Text.assemble(
                ("  reply ", "dim"),
                usage_text(r["usage"]),
                (f" · {ms_text(r['ms'])} · {safe(str(r['stop_reason']))}", "dim"),
            )
        )
        if r.get("missing"):
            console.print(Text(f"  (reply message missing: {safe(r['missing'])})", "red"))
        if r["text"] and c["kind"] == "summarizer":
            console.print(fit(Text("  summary ", "dim"), r["text"], width))
        elif r["text"] and r["tool_calls"]:
            console.print(fit(Text("  says ", "dim"), r["text"], width))
        for tc in r["tool_calls"]:
            name = safe(str(tc["name"]))
            console.print(
                Text.assemble(
                    ("  → ", "cyan"),
                    (name, "bold cyan"),
                    ("(", "dim"),
                    args_text(tc["args"], width - len(name) - 8),
                    (")", "dim"),
                )
            )
    refused = {}
    for bad in c["invalid_args"]:
        problems = "; ".join(
            f"{p.get('path', '$')}: {p.get('message', '')}" for p in bad["problems"]
        )
        if bad["enforced"]:
            # Shown on the rejected result, in place of the correction's boilerplate.
            refused[bad["call_id"]] = problems
        else:
            head = Text.assemble(
                ("  ! ", "yellow"),
                (safe(str(bad["name"])), "cyan"),
                (" ran with invalid arguments: ", "yellow"),
            )
            console.print(fit(head, problems, width))
    for res in c["results"]:
        status = res["status"]
        content = res["content"]
        if res["call_id"] in refused:
            tail = refused[res["call_id"]]
        elif content is not None:
            tail = str(content)
        else:
            tail = f"(missing: {res.get('missing') or 'no value'})"
        head = Text.assemble(
            ("  ← ", status_style(status)),
            (safe(res["name"]), "cyan"),
            (f" {status}", status_style(status)),
            (f" · {ms_text(res['ms'])} · ", "dim"),
        )
        console.print(fit(head, tail, width))
    for err in c["errors"]:
        head = Text.assemble(("  ✗ ", "bold red"), (safe(err["kind"]), "red"), ": ")
        console.print(fit(head, err["message"], width))
        decision = err.get("decision")
        why = as_text(decision.get("reason")) if isinstance(decision, dict) else ""
        if why and why not in as_text(err["message"]):
            # Why af decided what it did (a default, an override): its own words.
            console.print(fit(Text("    ", ""), why, width), style="dim")
        for skipped in as_dict(err.get("attempt")).get("skipped") or []:
            console.print(fit(Text("  skipped ", "yellow"), _skipped_text(skipped), width))


def _print_end(console: Out, v: dict[str, Any], calls: int) -> None:
    """The outcome, after the last call."""
    width = max(console.width, 60)
    console.print()
    if v["answer"] is not None:
        console.print(Text("answer", "bold"))
        console.print(Text(safe(str(v["answer"]))))
        console.print()
    _print_problems(console, v)
    status = v["status"]
    outcome = Text.assemble((status.replace("_", " "), f"bold {status_style(status)}"))
    if status == "incomplete":
        outcome.append(": the recording has no run_end (the run was cut off, or is still running)")
    else:
        outcome.append(
            f" after {plural(v['iterations'], 'iteration')} · {plural(calls, 'call')}"
            f" · {usage_text(v['usage'])} · {ms_text(v['ms'])}",
            "dim",
        )
    console.print(outcome)
    if v["error"]:
        console.print(
            Text.assemble(
                ("  ", ""), (safe(v["error"]["kind"]), "red"), ": ", safe(v["error"]["message"])
            )
        )
    for err in v["errors"]:
        # A fail-fast before any attempt at its call: the providers it passed over.
        for skipped in as_dict(err.get("attempt")).get("skipped") or []:
            console.print(fit(Text("  skipped ", "yellow"), _skipped_text(skipped), width))


def _shown_attempt(c: dict[str, Any]) -> dict[str, Any] | None:
    """A call's attempt, when there is something to say about it: more than one attempt at
    its call, a failure, a provider other than the agent's, a provider passed over."""
    a = c.get("attempt")
    if not isinstance(a, dict):
        return None
    plain = (
        a.get("n") == 1
        and a.get("of") == 1
        and a.get("via") == "agent"
        and not a.get("skipped")
        and not c["errors"]
        and not (c["response"] or {}).get("decision")
    )
    return None if plain else a


def _attempt_head(c: dict[str, Any], a: dict[str, Any]) -> Text:
    """``call 3 · attempt 1 of iteration 2 · anthropic:claude-sonnet-4-5 · failed:
    rate_limited (429) → retry``."""
    out = Text.assemble(
        (f"call {c['call']}", "bold cyan"),
        (f" · attempt {a['n']} of iteration {c['iteration']}", "cyan"),
        (" · ", "dim"),
        safe(f"{as_text(a.get('provider'))}:{as_text(c.get('model'))}"),
    )
    if a.get("via") != "agent":
        out.append(f" ({safe(as_text(a.get('via')))})", "dim")
    failed = next((e for e in c["errors"] if "attempt" not in e), None)
    if failed is not None:
        reason = as_text(failed.get("reason")) or as_text(failed.get("kind"))
        status = f" ({failed['status']})" if isinstance(failed.get("status"), int) else ""
        mid = ", mid-stream" if failed.get("mid_stream") else ""
        out.append(" · ", "dim")
        out.append(f"failed: {safe(reason)}{status}{mid}", "red")
        decision = failed.get("decision")
        if isinstance(decision, dict):
            out.append(" → ", "dim")
            out.append_text(_decision_text(decision, True))
    refused = as_dict((c["response"] or {}).get("decision"))
    if refused and refused.get("verb") != "ok":
        out.append(" · ", "dim")
        out.append("answer refused", "yellow")
        out.append(" → ", "dim")
        out.append_text(_decision_text(refused, False))
    return out


def _decision_text(d: dict[str, Any], failed: bool) -> Text:
    """``retry (rule transient, after 0.5 s)``, ``fail_fast: attempts-exhausted (retry
    asked by rule transient)``; ``ok`` after a failure is said as what it means."""
    verb = as_text(d.get("verb"))
    style = "bold red" if verb == "fail_fast" else "bold yellow"
    out = Text("error stands" if verb == "ok" and failed else safe(verb), style)
    if d.get("kind"):
        out.append(f": {safe(as_text(d['kind']))}", style)
    notes = []
    if d.get("asked"):
        by = f" by rule {as_text(d['rule'])}" if d.get("rule") else ""
        notes.append(f"{as_text(d['asked'])} asked{by}")
    elif d.get("rule"):
        notes.append(f"rule {as_text(d['rule'])}")
    if isinstance(d.get("delay"), int | float) and d["delay"]:
        notes.append(f"after {d['delay']:g} s")
    if notes:
        out.append(f" ({safe(', '.join(notes))})", "dim")
    return out


def _skipped_text(skipped: dict[str, Any]) -> str:
    """``mock:m (agent): retry_other, the circuit breaker of mock is open``."""
    decision = as_dict(skipped.get("decision"))
    text = f"{as_text(skipped.get('provider'))}:{as_text(skipped.get('model'))}"
    text += f" ({as_text(skipped.get('via'))}): {as_text(decision.get('verb'))}"
    if decision.get("rule"):
        text += f" by rule {as_text(decision['rule'])}"
    if decision.get("reason"):
        text += f", {as_text(decision['reason'])}"
    return text


def _summarizer_for(kind: Any, fold: Any) -> str:
    """`` · summarizer for fold 1`` for a summarizer's call; empty for the agent's."""
    if kind != "summarizer":
        return ""
    return f" · summarizer for fold {fold}" if isinstance(fold, int) else " · summarizer"


def _print_fold(console: Out, raw: dict[str, Any]) -> None:
    """A fold of the live window, between the calls it separates, and what it kept."""
    fold = raw.get("fold")
    f = checked(raw, fold if isinstance(fold, int) else 0)
    console.print()
    _print_hanging(console, Text(fold_text(f), "bold magenta"), indent=0)
    for kept in refusal_texts(f):
        _print_hanging(console, Text(kept, "magenta"), indent=2)
    if raw.get("missing"):
        console.print(Text(f"  (fold value missing: {safe(str(raw['missing']))})", "red"))


def _print_problems(console: Out, v: dict[str, Any]) -> None:

    problems = v["problems"]
    if problems:
        console.print(Text(f"{plural(len(problems), 'problem')} reading the file:", "yellow"))
        for p in problems[:20]:
            where = f"line {p['line']}: " if p["line"] else ""
            console.print(Text(f"  {where}{line(p['message'], 160)}"))
        if len(problems) > 20:
            console.print(Text(f"  … and {len(problems) - 20:,} more (--json lists all)", "dim"))
    if v["torn_tail"]:
        t = v["torn_tail"]
        console.print(
            Text(
                f"line {t['line']} is torn ({t['bytes']:,} bytes): the run was cut off mid-write",
                "yellow",
            )
        )
    if v["unknown_records"]:
        console.print(
            Text(
                f"{plural(v['unknown_records'], 'record')} of a type this af does not know "
                "(kept, not shown)",
                "dim",
            )
        )


def _print_run_json(rec: Recording) -> None:
    """The run as one JSON object, written as the file is read: the calls and the folds are
    long lists, each item written when it is complete (as ``json.dumps(..., indent=2)``
    would lay it out)."""
    import sys

    import orjson

    from afcore.readmodel import run_view

    out = sys.stdout
    indent = orjson.OPT_INDENT_2

    def item(value: Any) -> str:
        return "    " + orjson.dumps(value, option=indent).decode().replace("\n", "\n    ")

    def field(key: str, value: Any) -> str:
        text = orjson.dumps(value, option=indent).decode().replace("\n", "\n  ")
        return f"  {orjson.dumps(key).decode()}: {text}"

    folds: list[dict[str, Any]] = []
    started = False
    for part in run_view(rec):
        if part.kind == "header":
            out.write("{\n" + ",\n".join(field(k, v) for k, v in part.data.items()))
            out.write(',\n  "calls": [')
        elif part.kind == "call":
            out.write(("," if started else "") + "\n" + item(part.data))
            started = True
        elif part.kind == "fold":
            folds.append(part.data)  # a few per call at most, small: written after the calls
        else:
            out.write("\n  ],\n" if started else "],\n")
            end = {k: v for k, v in part.data.items() if k != "calls"}
            out.write(",\n".join([field("folds", folds), *(field(k, v) for k, v in end.items())]))
            out.write("\n}\n")
    out.flush()


# -- one call ----------------------------------------------------------------------------


def _print_call(console: Console, d: CallDetail, file_name: str) -> None:

    width = max(console.width, 60)
    head = Text.assemble(
        (f"call {d.call}", "bold cyan"),
        (_summarizer_for(d.kind, d.fold), "bold magenta"),
        (f" · iteration {d.iteration} · {safe(d.rsid)} · model ", "dim"),
        safe(d.model),
    )
    attempt = d.attempt
    if isinstance(attempt, dict):
        head.append(f" · attempt {attempt['n']} of {attempt['of']} · provider ", "dim")
        head.append(safe(as_text(attempt.get("provider"))))
        if attempt.get("via") != "agent":
            head.append(f" ({safe(as_text(attempt.get('via')))})", "dim")
    console.print(head)
    for skipped in as_dict(attempt).get("skipped") or []:
        console.print(fit(Text("skipped ", "yellow"), _skipped_text(skipped), width))
    v = d.verification
    if v.verified:
        console.print(
            Text.assemble(
                ("✓ verified", "bold green"),
                (
                    f": rebuilt from the file, it hashes to {v.hash[:12]}… as when sent",
                    "dim",
                ),
            )
        )
    else:
        console.print(
            Text.assemble(
                ("✗ not verified", "bold red"),
                ": ",
                safe(str(d.verification.problem or "unknown problem")),
            )
        )
    if d.system is None or d.messages is None or d.tools is None:
        console.print(Text("the request cannot be rebuilt from this file", "red"))
        return
    if d.injections is not None:
        _print_hanging(console, _decisions_text(d.injections, width), indent=0)
    previous = d.previous_call
    since = f" since call {previous}" if previous is not None else ""
    removed = d.removed or {"system": [], "messages": [], "tools": []}

    def section(title: str, note: str, items: list[dict[str, Any]]) -> None:
        console.print()
        changes = _change_counts(items)
        console.print(
            Text.assemble(
                (title, "bold"),
                (f"  {note}", "dim"),
                (f" · {changes}{since}" if changes and previous is not None else "", "yellow"),
            )
        )

    def breakpoint_line() -> None:
        console.print(Text("    ┈┈ cache breakpoint ┈┈", "dim"))

    system = d.system
    total = sum(len(s["text"]) for s in system)
    section("system", f"{plural(len(system), 'segment')}, {total:,} chars", system)
    for seg in system:
        head = Text(f"  [{seg['position']}] ", "dim")
        head.append_text(_origin(seg))
        _with_reason(console, head, seg, width)
        print_indented(console, block(seg["text"]))
        if seg["cache_breakpoint"]:
            breakpoint_line()
    for gone in removed["system"]:
        console.print(
            Text.assemble(("  gone", "yellow"), (f"{since}: ", "dim"), _origin(gone, marks=False))
        )

    messages = d.messages
    ranges = ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in d.window)
    section("messages", f"{plural(len(messages), 'message')} (window {ranges})", messages)
    seams: dict[Any, list[str]] = {}
    for raw in d.seams or []:
        seams.setdefault(raw["before"], []).append(seam_text(raw))

    def seam(before: Any) -> None:
        for text in seams.pop(before, []):
            console.print(Text(f"  {text}", "magenta"))

    for msg in messages:
        seam(msg["n"])
        role = as_text(msg.get("role")) or "?"
        label = Text.assemble((f"  #{msg['n']} ", "dim"), (safe(role), "bold"))
        if role == "tool":
            label.append(f" {safe(as_text(msg.get('name')))}", "cyan")
            if msg.get("is_error"):
                label.append(" error", "red")
        if msg.get("source") is not None:
            label.append("  ")
            label.append_text(_origin(msg))
        elif msg.get("change"):
            label.append(f"  {msg['change']}", "bold yellow")
        if msg["writer"]:
            label.append(f"  written by {safe(msg['writer'])}", "dim")
        _with_reason(console, label, msg, width)
        for part in _message_parts(msg):
            if isinstance(part, tuple):
                name, args = part
                print_indented(
                    console,
                    Text.assemble(
                        ("→ ", "cyan"),
                        (safe(str(name)), "bold cyan"),
                        ("(", "dim"),
                        args_text(args, width - 12),
                        (")", "dim"),
                    ),
                )
            else:
                print_indented(console, block(part))
    for rest in list(seams):
        seam(rest)
    for gone in removed["messages"]:
        if gone.get("fold") is not None:
            continue  # its fold's seam says where it went
        what = Text(f"#{gone['n']}")
        if gone.get("source"):
            what.append(" ")
            what.append_text(_origin(gone, marks=False))
        console.print(Text.assemble(("  gone", "yellow"), (f"{since}: ", "dim"), what))

    tools = d.tools
    section("tools", plural(len(tools), "tool"), tools)
    for spec in tools:
        schema = as_dict(spec.get("input_schema"))
        required = schema.get("required")
        required = (
            {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
        )
        params = ", ".join(
            f"{k}{'' if k in required else '?'}" for k in as_dict(schema.get("properties"))
        )
        console.print(
            Text.assemble(
                ("  ", ""),
                (safe(as_text(spec.get("name"))), "bold cyan"),
                ("(", "dim"),
                safe(params),
                (")", "dim"),
                ("  ", ""),
                _tool_origin(spec),
            )
        )
        console.print(
            Text.assemble(("    ", ""), line(as_text(spec.get("description")), width - 6))
        )
        if spec["cache_breakpoint"]:
            breakpoint_line()
    for gone in removed["tools"]:
        console.print(
            Text.assemble(
                ("  gone", "yellow"),
                (f"{since}: ", "dim"),
                (safe(as_text(gone["name"])), "cyan"),
                "  ",
                _tool_origin(gone),
            )
        )
    if d.params:
        section("params", "", [])
        console.print(Text("  " + args_text(d.params, width - 4)))

    r = d.response
    failures = [e for e in d.errors if "attempt" not in e]
    for err in failures:
        status = f" ({err['status']})" if isinstance(err.get("status"), int) else ""
        section("failed", f"{safe(as_text(err.get('reason') or err['kind']))}{status}", [])
        print_indented(console, Text(f"{safe(err['kind'])}: {safe(as_text(err['message']))}"))
        decision = err.get("decision")
        if isinstance(decision, dict):
            print_indented(console, Text("→ ", "dim") + _decision_text(decision, True))
            if decision.get("reason"):
                print_indented(console, Text(safe(as_text(decision["reason"])), "dim"))
    if r is None:
        if not failures:
            section("response", "none recorded: the run stopped before the reply came", [])
        return
    section(
        "response",
        f"{safe(str(r['stop_reason']))} · {usage_text(r['usage'])} · {ms_text(r['ms'])}",
        [],
    )
    if r.get("decision") and r["decision"].get("verb") != "ok":
        print_indented(console, Text("refused → ", "yellow") + _decision_text(r["decision"], False))
    if r["text"]:
        print_indented(console, block(r["text"]))
    for tc in r["tool_calls"]:
        print_indented(
            console,
            Text.assemble(
                ("→ ", "cyan"),
                (safe(str(tc["name"])), "bold cyan"),
                ("(", "dim"),
                args_text(tc["args"], width - 12),
                (")", "dim"),
            ),
        )


# -- provenance --------------------------------------------------------------------------


def _origin(item: dict[str, Any], *, marks: bool = True) -> Text:
    """``skill prices`` / ``base``, and ``new`` or ``changed`` since the previous call."""
    out = Text(safe(as_text(item.get("source")) or "?"), "magenta")
    if item.get("id"):
        out.append(f" {safe(as_text(item['id']))}", "bold magenta")
    if marks and item.get("change"):
        out.append(f"  {item['change']}", "bold yellow")
    return out


def _why(item: dict[str, Any]) -> str:
    """The trigger, the cache policy and the reason it fired, when that says more than the
    trigger: ``rule · cache never · rule returned true reading user_message = "..."``."""
    trigger, reason = as_text(item.get("trigger")), as_text(item.get("reason"))
    parts = [trigger]
    if item.get("cache"):
        parts.append(f"cache {as_text(item['cache'])}")
    if reason != trigger:
        parts.append(reason)
    reads = item.get("reads")
    if isinstance(reads, dict) and reads and " reading " not in reason:
        # What a content function read, or the result a tool-return trigger saw.
        parts.append(f"reading {evidence_text(reads)}")
    return " · ".join(p for p in parts if p)


def _with_reason(console: Console, head: Text, item: dict[str, Any], width: int) -> None:
    """Print ``head`` and, for injected context, why it is there: on the same line when it
    fits, else wrapped below it."""
    why = _why(item)
    if not why or item.get("source") in (None, "base", "configure"):
        console.print(head)
        return
    if len(head) + 3 + len(line(why, 10_000)) <= width:
        console.print(Text.assemble(head, (" · ", "dim"), (line(why, 10_000), "dim")))
        return
    console.print(head)
    # Evidence is kept short by the recorder (a preview of each value): show all of it.
    print_indented(console, Text(line(why, 1_000), "dim"), indent=6)


def _tool_origin(tool: dict[str, Any]) -> Text:
    source, id = as_text(tool.get("source")), as_text(tool.get("id"))
    if source == "skill" and id == "read_skill":
        schema = as_dict(as_dict(tool.get("input_schema")).get("properties")).get("id")
        skills = as_dict(schema).get("enum")
        listed = ", ".join(map(as_text, skills)) if isinstance(skills, list) else ""
        out = Text("skill catalog", "magenta")
        if listed:
            out.append(f": {safe(listed)}", "magenta")
    else:
        out = Text(safe(source) or "?", "magenta")
        if id:
            out.append(f" {safe(id)}", "bold magenta")
    if tool.get("change"):
        out.append(f"  {tool['change']}", "bold yellow")
    return out


def _change_counts(items: list[dict[str, Any]]) -> str:
    new = sum(1 for i in items if i.get("change") == "new")
    changed = sum(1 for i in items if i.get("change") == "changed")
    return ", ".join(
        part
        for part in (f"{new} new" if new else "", f"{changed} changed" if changed else "")
        if part
    )


def _print_hanging(console: Out, text: Text, indent: int) -> None:
    """``text`` wrapped to the console, its first line indented by ``indent``, the rest by
    two more."""
    room = max(console.width - indent - 2, 20)
    if "\n" not in text.plain and cell_len(text.plain) <= room:
        line = text.copy()
        line.rstrip()
        console.print(Text(" " * indent) + line, soft_wrap=True)
        return
    full = console.console if isinstance(console, Printer) else console
    lines = text.wrap(full, room)
    for i, wrapped in enumerate(lines):
        wrapped.rstrip()
        console.print(Text(" " * (indent + (2 if i else 0))) + wrapped, soft_wrap=True)


def _tool_changes(added: list[str], removed: list[str]) -> str:
    """``+convert_currency -search``: the tools slot since the previous call (untrusted)."""
    return " ".join([f"+{t}" for t in added] + [f"-{t}" for t in removed])


def _decisions_text(inj: dict[str, Any], reason_limit: int, cap: int | None = None) -> Text:
    """``injections 5 evaluated · fired tone, refund-rule · skipped cite (search did not
    return)``. Skipped injections that give the same reason are named together, failed ones
    first; each reason is cut to ``reason_limit``. ``cap``: name at most this many
    injections in each list, and say how many more there are."""
    out = Text.assemble(("injections ", "dim"), f"{inj['evaluated']} evaluated")
    if inj["fired"]:
        out.append(" · fired ", "dim")
        out.append_text(_ids([f["id"] for f in inj["fired"]], cap, "green"))
    if not inj["skipped"]:
        return out
    out.append(" · skipped ", "dim")
    groups: dict[tuple[bool, str], list[Any]] = {}
    for skip in inj["skipped"]:
        failed = skip.get("error") is not None
        why = as_text(skip.get("reason"))
        if failed:
            why += f": {as_text(skip['error'])}"
        groups.setdefault((failed, why), []).append(skip["id"])
    ordered = sorted(groups.items(), key=lambda g: not g[0][0])  # failed first, else in order
    shown = ordered if cap is None else ordered[:cap]
    for i, ((failed, why), ids) in enumerate(shown):
        if i:
            out.append(", ")
        out.append_text(_ids(ids, cap, "red" if failed else ""))
        out.append(f" ({line(why, reason_limit)})", "red" if failed else "dim")
    if len(shown) < len(ordered):
        rest = sum(len(ids) for _, ids in ordered[len(shown) :])
        out.append(f", and {rest:,} more for {len(ordered) - len(shown):,} other reasons", "dim")
    return out


def _ids(ids: list[Any], cap: int | None, style: str) -> Text:
    """``a, b, c`` or, past ``cap``, ``a, b, c and 12 more``."""
    shown = ids if cap is None else ids[:cap]
    out = Text(", ".join(safe(as_text(i)) for i in shown), style)
    if len(shown) < len(ids):
        out.append(f" and {len(ids) - len(shown):,} more", "dim")
    return out


def _message_parts(msg: dict[str, Any]) -> list[str | tuple[Any, Any]]:
    """A message's text and tool calls, in order; thinking is summarised by its length."""
    content = msg.get("content")
    if not isinstance(content, list):
        return [as_text(content)]
    parts: list[str | tuple[Any, Any]] = []
    for b in content:
        if not isinstance(b, dict):
            parts.append(as_text(b))
        elif b.get("type") == "text":
            parts.append(as_text(b.get("text")))
        elif b.get("type") == "tool_call":
            parts.append((b.get("name"), b.get("args")))
        elif b.get("type") == "thinking":
            parts.append(f"(thinking, {len(as_text(b.get('thinking'))):,} chars)")
        else:
            parts.append(as_text(b))
    return parts
