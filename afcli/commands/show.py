"""``af show``: a recorded run, iteration by iteration, or one call exactly as sent."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from afcli._errors import command
from afcli._render import (
    args_text,
    as_dict,
    as_text,
    block,
    fit,
    line,
    ms_text,
    out_console,
    plural,
    print_indented,
    print_json,
    safe,
    status_style,
    usage_text,
)

__all__ = ["show"]


@command
def show(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="A recording's path, or a run id (or its unique prefix) in the recordings folder.",
            show_default=False,
        ),
    ],
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
    from afcli._runview import call_detail, open_run, overview

    with open_run(run) as rec:
        if call is not None:
            data = call_detail(rec, call)
            if json_output:
                print_json(data)
            else:
                _print_call(out_console(), data, rec.path.name)
            return
        view = overview(rec)
    if json_output:
        print_json(view)
    else:
        _print_overview(out_console(), view)


# -- the overview ------------------------------------------------------------------------


def _print_overview(console: Console, v: dict[str, Any]) -> None:

    width = max(console.width, 60)
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

    for c in v["calls"]:
        console.print()
        system, tools = c["system"], c["tools"]
        segments = "?" if system["segments"] is None else plural(system["segments"], "segment")
        chars = "?" if system["chars"] is None else f"{system['chars']:,}"
        console.print(
            Text.assemble(
                (f"call {c['call']}", "bold cyan"),
                (f" · iteration {c['iteration']}", "cyan"),
                ("   system ", "dim"),
                f"{segments}, {chars} chars",
                ("  messages ", "dim"),
                f"{c['messages']:,}",
                ("  tools ", "dim"),
                "?" if tools is None else f"{tools:,}",
            )
        )
        r = c["response"]
        if r is None:
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
            if r["text"] and r["tool_calls"]:
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
            f" after {plural(v['iterations'], 'iteration')} · {plural(len(v['calls']), 'call')}"
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


def _print_problems(console: Console, v: dict[str, Any]) -> None:

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


# -- one call ----------------------------------------------------------------------------


def _print_call(console: Console, d: dict[str, Any], file_name: str) -> None:

    width = max(console.width, 60)
    console.print(
        Text.assemble(
            (f"call {d['call']}", "bold cyan"),
            (f" · iteration {d['iteration']} · {safe(d['rsid'])} · model ", "dim"),
            safe(d["model"]),
        )
    )
    if d["verified"]:
        console.print(
            Text.assemble(
                ("✓ verified", "bold green"),
                (f": rebuilt from the file, it hashes to {d['hash'][:12]}… as when sent", "dim"),
            )
        )
    else:
        console.print(
            Text.assemble(
                ("✗ not verified", "bold red"), ": ", safe(str(d["problem"] or "unknown problem"))
            )
        )
    if d["system"] is None:
        console.print(Text("the request cannot be rebuilt from this file", "red"))
        return

    def section(title: str, note: str = "") -> None:
        console.print()
        console.print(Text.assemble((title, "bold"), (f"  {note}" if note else "", "dim")))

    system = d["system"]
    total = sum(len(as_text(as_dict(s).get("text"))) for s in system)
    section("system", f"{plural(len(system), 'segment')}, {total:,} chars")
    for i, (seg, src) in enumerate(zip(system, d["provenance"]["system"], strict=True), 1):
        console.print(Text(f"  [{i}] from {safe(_source(src))}", "dim"))
        print_indented(console, block(as_text(as_dict(seg).get("text"))))

    messages = d["messages"]
    ranges = ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in d["window"])
    section("messages", f"{plural(len(messages), 'message')} (window {ranges})")
    for raw, prov in zip(messages, d["provenance"]["messages"], strict=True):
        msg = as_dict(raw)
        role = as_text(msg.get("role")) or "?"
        label = Text.assemble((f"  #{prov['n']} ", "dim"), (safe(role), "bold"))
        if role == "tool":
            label.append(f" {safe(as_text(msg.get('name')))}", "cyan")
            if msg.get("is_error"):
                label.append(" error", "red")
        if prov["written_by"]:
            label.append(f"  written by {safe(prov['written_by'])}", "dim")
        console.print(label)
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

    tools = d["tools"]
    section("tools", plural(len(tools), "tool"))
    for raw_spec, src in zip(tools, d["provenance"]["tools"], strict=True):
        spec = as_dict(raw_spec)
        schema = as_dict(spec.get("input_schema"))
        required = schema.get("required")
        required = set(required) if isinstance(required, list) else set()
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
                (f"  from {safe(_source(src))}", "dim"),
            )
        )
        console.print(
            Text.assemble(("    ", ""), line(as_text(spec.get("description")), width - 6))
        )
    if d["params"]:
        section("params")
        console.print(Text("  " + args_text(d["params"], width - 4)))

    r = d["response"]
    if r is None:
        section("response", "none recorded: the run stopped before the reply came")
        return
    section(
        "response",
        f"{safe(str(r['stop_reason']))} · {usage_text(r['usage'])} · {ms_text(r['ms'])}",
    )
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


def _source(src: dict[str, Any]) -> str:
    out = str(src.get("kind", "?"))
    if src.get("id"):
        out += f" {src['id']}"
    if src.get("trigger"):
        out += f" ({src['trigger']})"
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
