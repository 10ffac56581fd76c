"""``af ls``: the recordings in a folder, newest first."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from afcli._errors import EXIT_USAGE, CliError, command

__all__ = ["ls"]


@command
def ls(
    folder: Annotated[
        Path | None,
        typer.Argument(
            metavar="DIR",
            help="The recordings folder (default: $AF_RECORDINGS or ./recordings).",
            show_default=False,
        ),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print a JSON list of the runs on stdout.")
    ] = False,
) -> None:
    """List recordings, newest first: start time, agent, status, iterations, tokens.

    Reads only the first and last line of each file. A file without a run_end shows as
    incomplete; a file that is not a recording as unreadable, with the reason.
    """
    from afcli._peek import peek
    from afcli._render import err_console, print_json
    from afcore.recording import default_dir

    given = folder is not None
    where = folder if folder is not None else default_dir()
    if not where.is_dir():
        if given or where.exists():
            raise CliError(f"{where} is not a folder", EXIT_USAGE)
        # No recordings yet is not an error: nothing has run here.
        entries: list[dict[str, Any]] = []
    else:
        entries = [peek(p) for p in _newest_first(where)]

    if json_output:
        print_json(entries)
        return
    if not entries:
        err_console().print(f"no recordings in {where}")
        return
    _table(entries)


_RUN_ID = re.compile(r"\d{8}-\d{6}-\d{3}-")


def _newest_first(folder: Path) -> list[Path]:
    """Run ids start with the time the run started, so name order is time order. Files named
    otherwise (the shipped samples, a renamed copy) follow, by name."""
    files = [p for p in folder.glob("*.jsonl") if p.is_file()]
    runs = sorted((p for p in files if _RUN_ID.match(p.name)), reverse=True)
    others = sorted(p for p in files if not _RUN_ID.match(p.name))
    return runs + others


def _table(entries: list[dict[str, Any]]) -> None:
    from rich.text import Text

    from afcli._render import out_console
    from afcore.readmodel import line, status_style

    rows = []
    for e in entries:
        tokens = "" if e["tokens"] is None else f"{e['tokens']:,}"
        if tokens and (e["usage"] or {}).get("estimated"):
            tokens = "~" + tokens  # the provider reported none; af estimated them
        rows.append(
            (
                # The file's name is what `af show` takes; it is the run id unless renamed.
                line(Path(e["path"]).name.removesuffix(".jsonl"), 40),
                _started(e["started_at"]),
                line(e["agent"] or "", 24),
                e["status"].replace("_", " "),
                "" if e["iterations"] is None else str(e["iterations"]),
                tokens,
            )
        )
    heads = ("RUN", "STARTED UTC", "AGENT", "STATUS", "ITER", "TOKENS")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    right = {4, 5}

    def cells(values: tuple[str, ...]) -> list[str]:
        return [
            v.rjust(w) if i in right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]

    console = out_console()
    console.print(Text("  ".join(cells(heads)).rstrip(), "bold"), soft_wrap=True)
    for e, row in zip(entries, rows, strict=True):
        run, started, agent, status, iters, tokens = cells(row)
        text = Text.assemble(
            run,
            "  ",
            (started, "dim"),
            "  ",
            agent,
            "  ",
            (status, status_style(e["status"])),
            "  ",
            iters,
            "  ",
            tokens,
        )
        text.rstrip()
        console.print(text, soft_wrap=True)
        if e["status"] in ("unreadable", "incomplete", "error") and e["reason"]:
            console.print(Text(f"  └ {line(e['reason'], 200)}", "dim"))


def _started(iso: str | None) -> str:
    if not iso:
        return ""
    # 2026-11-29T13:01:26.637+00:00 -> 2026-11-29 13:01 (the run id has the seconds)
    return iso[:16].replace("T", " ")
