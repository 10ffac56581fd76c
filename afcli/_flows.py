"""A flow's recording at the command line: ``af show`` draws its tree of steps with each
agent's calls, ``af verify`` checks the log and every agent's run, ``af why`` follows the
answer or a state value from step to step and into the agent that produced it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from afcli._render import Line, Printer, out_console, print_json
from afcore.readmodel import as_text, evidence_text, line, ms_text, plural, safe, status_style
from afcore.recording import FlowLogStep, FlowRecording, dump

__all__ = ["flow_keys", "open_flow_cli", "show_flow", "verify_flow_cli", "why_flow"]


def open_flow_cli(path: Path) -> FlowRecording:
    """The flow's recording at ``path``, or the command's error in a sentence."""
    from afcli._errors import EXIT_FAILED, CliError
    from afcore.errors import RecordingError
    from afcore.recording import open_flow

    try:
        return open_flow(path)
    except (OSError, RecordingError) as e:
        raise CliError(str(e), EXIT_FAILED) from None


def show_flow(flow: FlowRecording, *, json_output: bool) -> None:
    if json_output:
        print_json(_flow_json(flow))
        return
    console = out_console()
    out = Printer(console)
    h = flow.header
    out.print(
        Line(
            ("flow ", "dim"),
            (safe(h.run_id), "bold"),
            "  ",
            (safe(h.flow.name), "bold"),
            (f"  {h.flow.kind}", "dim"),
        )
    )
    out.print(Line(f"started {safe(h.started_at)[:19].replace('T', ' ')} UTC", style="dim"))
    if h.source:
        out.print(Line(("from ", "dim"), safe(h.source)))
    if h.replay_of is not None:
        r = h.replay_of
        out.print(
            Line(
                ("replay of ", "dim"),
                (safe(r.file), "bold"),
                (f"  tools {'recorded' if r.tools == 'recorded' else 'run again'}", "dim"),
            )
        )
    out.print()
    if flow.top is not None:
        _print_step(out, flow, flow.top, 0)
    end = flow.end
    out.print()
    if end is None:
        out.print(Line(("✗ ", "red"), "the flow did not finish (no flow_end)"))
    else:
        head = Line((end.status, f"bold {status_style(end.status)}"))
        head.append(f" · {plural(end.calls, 'call')} · {ms_text(end.duration_ms)}", "dim")
        if end.produced_by:
            head.append(f" · answer from {safe(end.produced_by)}", "cyan")
        out.print(head)
        if end.answer:
            out.print(Line("answer: ", (line(end.answer, 200), "")))
        if end.error is not None:
            out.print(Line(("error: ", "red"), line(f"{end.error.kind}: {end.error.message}", 200)))
        if end.paused:
            out.print(Line(("paused at ", "yellow"), safe(end.paused)))
    for number, problem in flow.problems:
        out.print(Line(("✗ ", "red"), f"line {number}: {problem}"))
    out.flush()


def _print_step(out: Printer, flow: FlowRecording, step: FlowLogStep, depth: int) -> None:
    pad = "  " * depth
    end = step.end
    label = step.path.rsplit("/", 1)[-1] if step.path else flow.header.flow.name
    head = Line(
        pad, ("▸ " if step.steps else "• ", "dim"), (safe(label), "bold"), (f" {step.kind}", "dim")
    )
    head.append(f"  {step.status}", status_style(step.status))
    if end is not None:
        head.append(f"  {ms_text(end.ms)}", "dim")
        if end.calls:
            head.append(f"  {plural(end.calls, 'call')}", "dim")
    out.print(head)
    for d in step.decisions:
        which = f"turn {d.turn}: " if d.turn is not None else ""
        chosen = d.chosen if d.chosen is not None else "(none: could not decide or nothing held)"
        out.print(Line(pad, "    ", ("⤷ ", "magenta"), f"{which}chose ", (safe(chosen), "magenta")))
        for v in d.verdicts:
            mark = ("✓ ", "green") if v.fired else ("✗ ", "dim")
            said = Line(pad, "      ", mark, (safe(v.name), ""), f": {safe(v.reason)}")
            if v.reads:
                said.append(f"  read {line(evidence_text(dict(v.reads)), 120)}", "dim")
            out.print(said)
    if end is not None and step.kind == "function" and end.writes:
        out.print(Line(pad, "    ", (f"wrote {line(', '.join(end.writes), 100)}", "dim")))
    if end is not None and end.error is not None:
        out.print(
            Line(
                pad, "    ", ("error: ", "red"), line(f"{end.error.kind}: {end.error.message}", 160)
            )
        )
    if step.kind == "agent":
        _print_agent_calls(out, flow, step, pad + "    ")
    for child in step.steps:
        _print_step(out, flow, child, depth + 1)
    if step.merge is not None:
        m = step.merge
        merged = Line(
            pad,
            "    ",
            ("⤶ merge ", "magenta"),
            " ".join(f"{k}={v}" for k, v in m.branches.items()),
        )
        if m.reads:
            merged.append(f"  read {line(evidence_text(dict(m.reads)), 100)}", "dim")
        out.print(merged)
    if end is not None and step.kind != "agent" and not step.steps and end.output is not None:
        out.print(Line(pad, "    ", ("→ ", "dim"), line(as_text(end.output), 120)))


def _print_agent_calls(out: Printer, flow: FlowRecording, step: FlowLogStep, pad: str) -> None:
    from afcore.errors import RecordingError
    from afcore.readmodel import run_view
    from afcore.recording import open_recording

    file = flow.run_file(step)
    if file is None:
        return
    out.print(Line(pad, ("run ", "dim"), (safe(_run_name(step)), "dim")))
    try:
        with open_recording(file) as rec:
            for part in run_view(rec):
                if part.kind == "call":
                    c = part.data
                    said = Line(
                        pad,
                        (f"call {c.call}", "bold"),
                        (f"  {plural(c.messages, 'message')}", "dim"),
                    )
                    r = c.response
                    if r is not None:
                        if r.tool_calls:
                            names = ", ".join(t.name for t in r.tool_calls)
                            said.append(f"  → {safe(names)}", "cyan")
                        elif r.text:
                            said.append(f"  {line(r.text, 80)}")
                        said.append(f"  {safe(r.stop_reason)}", "dim")
                    out.print(said)
    except (OSError, RecordingError) as e:
        out.print(Line(pad, ("✗ ", "red"), f"cannot read it: {e}"))
    if step.end is not None and step.end.output is not None:
        out.print(Line(pad, ("answer ", "dim"), line(as_text(step.end.output), 120)))


def _run_name(step: FlowLogStep) -> str:
    """An agent step's run as the log names it (folded into the log or beside it)."""
    return step.end.run or "" if step.end is not None else ""


def _flow_json(flow: FlowRecording) -> dict[str, Any]:
    def node(step: FlowLogStep) -> dict[str, Any]:
        end = step.end
        return {
            "path": step.path,
            "kind": step.kind,
            "status": step.status,
            "ms": end.ms if end else None,
            "output": end.output if end else None,
            "writes": end.writes if end else {},
            "run": end.run if end else None,
            "decisions": [dump(d, exclude={"t"}) for d in step.decisions],
            "merge": dump(step.merge, exclude={"t"}) if step.merge else None,
            "steps": [node(s) for s in step.steps],
        }

    return {
        "run_id": flow.header.run_id,
        "flow": dump(flow.header.flow),
        "source": flow.header.source,
        "replay_of": dump(flow.header.replay_of) if flow.header.replay_of else None,
        "steps": node(flow.top) if flow.top else None,
        "end": dump(flow.end, exclude={"t"}) if flow.end else None,
    }


def _verified_run(flow: FlowRecording, path: str, file: Path, report: Any) -> dict[str, Any]:
    """A run of ``af verify --json``: named as the log names it beside the file given (a
    folded run is read from a copy that is gone once af exits), and whether it is folded."""
    step = flow.find(path)
    named = flow.run_shown(step) if step is not None else None
    return {
        "step": path,
        "run": str(named or file),
        "folded": step is not None and step.end is not None and step.end.run in flow.frames,
        "ok": report is not None and report.ok,
        "calls": report.calls if report else 0,
    }


def verify_flow_cli(flow: FlowRecording, *, json_output: bool) -> bool:
    from afcore.recording import verify_flow

    report = verify_flow(flow)
    data: dict[str, Any] = {
        "path": str(flow.shown),
        "ok": report.ok,
        "calls": report.calls,
        "verified": report.verified,
        "runs": [_verified_run(flow, p, f, r) for p, f, r in report.runs],
        "problems": [{"line": n, "message": m} for n, m in report.problems],
    }
    if json_output:
        print_json(data)
        return report.ok
    console: Console = out_console()
    for run in data["runs"]:
        mark = ("✓ ", "green") if run["ok"] else ("✗ ", "red")
        console.print(
            Text.assemble(
                mark,
                (safe(run["step"]), "bold"),
                f"  {plural(run['calls'], 'call')}  ",
                (safe(Path(run["run"]).name), "dim"),
            )
        )
    for p in data["problems"]:
        where = f"line {p['line']}: " if p["line"] else ""
        console.print(Text.assemble(("✗ ", "red"), where, line(p["message"], 200)))
    console.print(
        Text.assemble(
            (f"{data['verified']}/{data['calls']} calls verified", "bold"),
            (f" · {plural(len(report.runs), 'agent run')} · {safe(str(flow.shown))}", "dim"),
        )
    )
    if report.ok:
        console.print(
            Text(
                "✓ ok: the flow's log is whole, its seals hold, and every agent's call "
                "rebuilds to its hash",
                "green",
            )
        )
    return report.ok


def why_flow(flow: FlowRecording, key: str) -> list[Line]:
    """The chain that explains ``key`` of a flow's run: ``answer`` (the step that produced it
    and, for an agent, its run), a state key (the step that wrote it, what it read, the
    decisions that read it), or a step's path."""
    out: list[Line] = []
    if key == "answer":
        end = flow.end
        if end is None or end.produced_by is None:
            return [Line("the flow has no answer, or no step produced it")]
        out.append(Line("answer ", ("← ", "dim"), "step ", (safe(end.produced_by), "bold")))
        step = flow.find(end.produced_by)
        if step is not None:
            out.extend(_why_step(flow, step, 1))
        return out
    name = key.removeprefix("state.")
    writer = flow.writer_of(name)
    step = flow.find(key)
    if writer is None and step is None:
        return [Line(f"no step wrote {key!r} and no step is at that path")]
    if writer is not None:
        value = writer.end.writes.get(name) if writer.end else None
        if writer.merge is not None and name in writer.merge.writes:
            value = writer.merge.writes[name]
        out.append(
            Line(
                f"state.{safe(name)} = {line(as_text(value), 80)} ",
                ("← written by ", "dim"),
                (safe(writer.path or "(top)"), "bold"),
            )
        )
        out.extend(_why_step(flow, writer, 1))
        readers = [
            (s, d)
            for s in flow.steps()
            for d in s.decisions
            if any(k == f"state.{name}" for v in d.verdicts for k, _ in v.reads)
        ]
        for s, d in readers:
            out.append(
                Line(
                    "  ",
                    ("→ read by the decision of ", "dim"),
                    (safe(s.path or "(top)"), "bold"),
                    f": chose {safe(str(d.chosen))}",
                )
            )
    elif step is not None:
        out.extend(_why_step(flow, step, 0))
    return out


def flow_keys(flow: FlowRecording) -> list[tuple[str, str, str]]:
    """What one can ask ``af why`` of a flow: its answer, each state key, each step."""
    rows = [("answer", flow.end.produced_by or "" if flow.end else "", "the flow's answer")]
    seen: set[str] = set()
    for step in flow.steps():
        writes = dict(step.end.writes) if step.end else {}
        if step.merge is not None:
            writes.update(step.merge.writes)
        for key in writes:
            if key not in seen:
                seen.add(key)
                writer = flow.writer_of(key)
                rows.append(
                    (f"state.{key}", (writer.path or "(top)") if writer else "", "state value")
                )
    rows += [(s.path, s.path, f"{s.kind} step") for s in flow.steps() if s.path]
    return rows


def _why_step(flow: FlowRecording, step: FlowLogStep, depth: int) -> list[Line]:
    pad = "  " * depth
    out: list[Line] = []
    parent_path = step.path.rpartition("/")[0] if "/" in step.path else ""
    parent = flow.find(parent_path) if step.path else None
    if parent is not None:
        for d in parent.decisions:
            if d.chosen == step.name:
                fired = next((v for v in d.verdicts if v.fired), None)
                why = (
                    f"its predicate read {evidence_text(dict(fired.reads))}"
                    if fired and fired.reads
                    else "no predicate held: otherwise"
                )
                out.append(
                    Line(
                        pad,
                        ("chosen by ", "dim"),
                        (safe(parent.path or "(top)"), "bold"),
                        f": {line(why, 160)}",
                    )
                )
                for k, _ in fired.reads if fired else ():
                    if k.startswith("state."):
                        writer = flow.writer_of(k.removeprefix("state."))
                        if writer is not None:
                            out.append(
                                Line(
                                    pad,
                                    "  ",
                                    (f"{safe(k)} ← written by ", "dim"),
                                    (safe(writer.path), "bold"),
                                )
                            )
    if step.kind == "function" and step.end is not None and step.end.reads:
        out.append(Line(pad, ("it read ", "dim"), line(evidence_text(dict(step.end.reads)), 160)))
    if step.kind == "agent":
        file = flow.run_file(step)
        if file is not None:
            out.append(
                Line(
                    pad,
                    ("agent run ", "dim"),
                    (safe(_run_name(step)), "cyan"),
                )
            )
            out.extend(_agent_why(flow, file, pad + "  "))
    return out


def _agent_why(flow: FlowRecording, file: Path, pad: str) -> list[Line]:
    """The agent's own why of its answer, crossing into its run; a rule of it that read the
    flow's state crosses back to the step that wrote that value."""
    from afcore.errors import AfError
    from afcore.recording import open_recording
    from afcore.why import state_writers, why

    try:
        with open_recording(file) as rec:
            chain = why(rec, "answer", depth=4, max_nodes=12)
    except AfError as e:
        return [Line(pad, ("✗ ", "red"), str(e))]
    out: list[Line] = []
    crossed: set[str] = set()
    for node in chain.nodes.values():
        said = Line(pad, (safe(node.label or node.rsid), "bold"))
        if node.value:
            said.append(f": {line(node.value, 120)}")
        out.append(said)
        for d in node.decisions:
            out.append(Line(pad, "  ", (line(d, 160), "dim")))
            for key, writer in state_writers(flow, d):
                if key not in crossed:
                    crossed.add(key)
                    out.append(
                        Line(
                            pad,
                            "  ",
                            (f"{safe(key)} ← written by the flow's step ", "dim"),
                            (safe(writer.path), "bold"),
                        )
                    )
    return out
