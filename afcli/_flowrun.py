"""``af run`` on a flow: each step's progress on stderr as it starts and ends, the answer on
stdout, the recording's path; the exit code as for an agent."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from afcli._errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, CliError
from afcli._render import err_console, out_console, print_json
from afcore.errors import AfError
from afcore.flows import Flow, FlowResult, StepEvent
from afcore.readmodel import line, ms_text, plural, safe, status_style
from afcore.recording import RecordingConfig

__all__ = ["run_flow"]


def run_flow(
    flow: Flow,
    text: str,
    *,
    source: str | None = None,
    out: Path | None,
    json_output: bool,
    quiet: bool,
) -> None:
    """``source``: where the flow was loaded from, for its log's header (``af replay``
    loads it from there)."""
    runnable = copy.copy(flow)
    if source is not None:
        runnable.source = source
    config = flow.recording or RecordingConfig()
    if out is not None:
        if out.exists() and not out.is_dir():
            raise CliError(f"--out {out} is a file; give a folder", EXIT_USAGE)
        config = dataclasses.replace(config, dir=out)
    runnable.recording = config  # af run records, whatever the flow was built with
    runnable.last_result = None
    err = err_console()
    show = not (quiet or json_output)

    def progress(event: StepEvent) -> None:
        if not show:
            return
        moment, step, path, kind = event
        depth = path.count("/") + 1 if path else 0
        pad = "  " * depth
        if moment == "start":
            if kind == "agent":
                err.print(
                    Text.assemble(pad, ("▸ ", "dim"), (safe(path), "bold"), (" agent", "dim"))
                )
            return
        assert step is not None
        said = Text.assemble(
            pad, ("✓ " if step.status == "ok" else "• ", status_style(step.status))
        )
        said.append(safe(path or runnable.name), "bold")
        said.append(f" {kind}  ", "dim")
        said.append(step.status, status_style(step.status))
        said.append(f"  {ms_text(step.ms)}", "dim")
        if step.run is not None:
            said.append(f"  {plural(step.run.calls, 'call')}", "dim")
        for d in step.decisions[-1:]:
            if d.chosen is not None:
                said.append(f"  → {safe(d.chosen)}", "magenta")
        if step.error is not None and not step.steps:
            said.append(f"  {line(f'{type(step.error).__name__}: {step.error}', 100)}", "red")
        err.print(said)

    interrupted = False
    try:
        asyncio.run(runnable.arun_result(text, progress=progress))
    except KeyboardInterrupt:
        interrupted = True
    except AfError:
        if runnable.last_result is None:
            raise
    result = runnable.last_result
    if result is None:
        raise typer.Exit(EXIT_INTERRUPTED if interrupted else EXIT_FAILED)
    _outcome(result, json_output=json_output, quiet=quiet)
    if interrupted or result.status == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    if result.status not in ("answer", "paused"):
        raise typer.Exit(EXIT_FAILED)


def _outcome(result: FlowResult, *, json_output: bool, quiet: bool) -> None:
    err = err_console()
    error = None if result.error is None else f"{type(result.error).__name__}: {result.error}"
    if json_output:
        data: dict[str, Any] = {
            "run_id": result.run_id,
            "recording": str(result.recording) if result.recording else None,
            "status": result.status,
            "answer": result.answer,
            "produced_by": result.produced_by,
            "calls": result.calls,
            "iterations": result.iterations,
            "usage": result.usage.to_json(),
            "steps": [
                {"path": s.path, "kind": s.kind, "status": s.status} for s in result.steps.walk()
            ],
            "error": error,
        }
        if result.paused is not None:
            data["paused"] = result.paused.to_json()
        print_json(data)
    elif result.status == "answer":
        out_console().print(Text(safe(result.answer)), soft_wrap=True)
    if result.paused is not None:
        p = result.paused
        err.print(
            Text.assemble(
                ("paused: ", "bold yellow"),
                (safe(p.link), "bold"),
                f" asks before {safe(p.tool)}: {safe(p.question)}",
            ),
            soft_wrap=True,
        )
        err.print(
            Text.assemble(
                ("the flow ends here; answer the agent's run with ", "dim"),
                f"af resume {p.recording} --approve",
                (" and run the flow again", "dim"),
            ),
            soft_wrap=True,
        )
    if result.status == "error" and not json_output:
        err.print(Text.assemble(("error: ", "bold red"), safe(error or "")), soft_wrap=True)
    if result.recording is not None and not quiet:
        err.print(Text.assemble(("recording ", "dim"), safe(str(result.recording))), soft_wrap=True)
