"""``af ls``: the recordings in a folder, newest first."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from afcli._errors import EXIT_USAGE, CliError, command

__all__ = ["ls"]


STATUSES = (
    "answer",
    "error",
    "max_iterations",
    "interrupted",
    "paused",
    "incomplete",
    "unreadable",
)
"""What ``--status`` takes: a run's own status, or what ``af ls`` makes of a file."""


@command
def ls(
    folder: Annotated[
        Path | None,
        typer.Argument(
            metavar="[DIR]",
            help="The recordings folder (default: $AF_RECORDINGS or ./recordings).",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", "-n", min=1, help="Show at most this many runs.", show_default=False
        ),
    ] = None,
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            metavar="STATUS",
            help=f"Only runs that ended so: {', '.join(STATUSES)}.",
            show_default=False,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="NAME",
            help="Only runs of the agent of this name.",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only runs started since then: a date (2026-11-29), a UTC time "
            "(2026-11-29T13:00) or an age (30m, 2h, 7d).",
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
    from afcli._runs import newest_first
    from afcore.recording import default_dir

    given = folder is not None
    where = folder if folder is not None else default_dir()
    keep = _filter(status, agent, since)
    if not where.is_dir():
        if given or where.exists():
            hint = ""
            if folder is not None and folder.name.lower() in ("true", "false", "1", "0"):
                # `af ls --json true`: a flag takes no value, so the word became the folder.
                hint = "; --json and the other flags take no value (af ls --json)"
            raise CliError(f"{where} is not a folder{hint}", EXIT_USAGE)
        # No recordings yet is not an error: nothing has run here.
        entries: list[dict[str, Any]] = []
    else:
        entries = []
        for path in newest_first(where):
            entry = peek(path)
            if keep(entry):
                entries.append(entry)
                if limit is not None and len(entries) >= limit:
                    break

    if json_output:
        print_json(entries)
        return
    if not entries:
        what = " matching those filters" if (status or agent or since) else ""
        err_console().print(f"no recordings{what} in {where}")
        return
    _table(entries)


def _filter(status: str | None, agent: str | None, since: str | None) -> Any:
    """A test of one ``peek`` entry for the filters given."""
    if status is not None:
        status = status.replace("-", "_").replace(" ", "_").lower()
        if status not in STATUSES:
            raise CliError(
                f"--status {status!r} is not a status; give one of {', '.join(STATUSES)}",
                EXIT_USAGE,
            )
    cutoff = _since(since) if since is not None else None

    def keep(entry: dict[str, Any]) -> bool:
        if status is not None and entry["status"] != status:
            return False
        if agent is not None and entry["agent"] != agent:
            return False
        if cutoff is not None:
            started = _parse_time(entry["started_at"])
            if started is None or started < cutoff:
                return False
        return True

    return keep


_AGE = re.compile(r"(\d+)\s*(s|m|min|h|d|w)", re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _since(text: str) -> datetime:
    """``--since``: an age back from now, or a date or time (UTC unless it names a zone)."""
    age = _AGE.fullmatch(text.strip())
    if age is not None:
        seconds = int(age.group(1)) * _SECONDS[age.group(2).lower()]
        return datetime.now(UTC) - timedelta(seconds=seconds)
    when = _parse_time(text.strip())
    if when is None:
        raise CliError(
            f"--since {text!r} is neither a date or time (2026-11-29, 2026-11-29T13:00) nor an "
            "age (30m, 2h, 7d)",
            EXIT_USAGE,
        )
    return when


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _table(entries: list[dict[str, Any]]) -> None:
    from rich.text import Text

    from afcli._render import columns, out_console
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
    cells = columns(heads, rows, right={4, 5})

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
