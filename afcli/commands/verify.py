"""``af verify``: rebuild every call of a recording and check its hash."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from afcli._errors import EXIT_FAILED, CliError, command
from afcli._params import RunArg

__all__ = ["verify"]


@command
def verify(
    run: RunArg,
    json_output: Annotated[
        bool,
        typer.Option(
            "--json",
            help='Print {"ok", "calls", "verified", "problems", "torn_tail"} on stdout.',
        ),
    ] = False,
) -> None:
    """Check a recording: every call rebuilt byte for byte, the commit log consistent.

    Exit 0 only when every call verifies and nothing is wrong with the file.
    """
    from afcli._render import print_json
    from afcli._runs import open_run, reading_only, resolve
    from afcore.recording import InvalidRecord, is_flow
    from afcore.recording import verify as check

    reading_only()

    path = resolve(run)
    if is_flow(path):
        from afcli._flows import open_flow_cli, verify_flow_cli

        if not verify_flow_cli(open_flow_cli(path), json_output=json_output):
            raise typer.Exit(EXIT_FAILED)
        return
    try:
        rec = open_run(path, index=False)
    except CliError as e:
        if not json_output or e.code != EXIT_FAILED:
            raise
        # A file that cannot be opened failed the check: say so in the data too.
        print_json(_unopenable(e.message))
        raise
    with rec:
        try:
            report = check(rec)
        except InvalidRecord as e:
            # A record the checker reads directly (the run_end) breaks the format.
            message = f"{rec.origin} has a malformed record: {e.where or 'record'}: {e.msg}"
            if json_output:
                print_json(_unopenable(message, line=0))
            raise CliError(message, EXIT_FAILED) from None
        data = {"path": str(rec.origin), **report.to_json()}
    if json_output:
        print_json(data)
    else:
        _print(data)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _unopenable(message: str, line: int = 1) -> dict[str, Any]:
    return {
        "ok": False,
        "calls": 0,
        "verified": 0,
        "problems": [{"line": line, "message": message}],
        "torn_tail": None,
        "unknown_records": 0,
    }


def _print(data: dict[str, Any]) -> None:
    from rich.text import Text

    from afcli._render import err_console, out_console
    from afcore.readmodel import line, plural, safe

    console = out_console()
    for p in data["problems"]:
        where = f"line {p['line']}: " if p["line"] else ""
        console.print(Text.assemble(("✗ ", "red"), (where, "bold"), line(p["message"], 200)))
    if data["torn_tail"]:
        t = data["torn_tail"]
        console.print(
            Text.assemble(
                ("✗ ", "red"),
                (f"line {t['line']}: ", "bold"),
                f"torn ({t['bytes']:,} bytes): the run was cut off mid-write",
            )
        )
    if data["unknown_records"]:
        console.print(
            Text(
                f"{plural(data['unknown_records'], 'record')} of unknown types (kept, not checked)",
                "dim",
            )
        )
    summary = Text.assemble(
        (f"{data['verified']}/{data['calls']} calls verified", "bold"),
        (f" · {plural(len(data['problems']), 'problem')} · {safe(data['path'])}", "dim"),
    )
    console.print(summary)
    if data["ok"]:
        console.print(Text("✓ ok: every call rebuilds to the hash taken when it was sent", "green"))
    else:
        err_console().print(Text("✗ the recording does not verify", "bold red"))
