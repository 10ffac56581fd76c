"""``af export``: one file to attach to a bug report (a bundle), or one page to open (HTML)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import RunArg

__all__ = ["export", "policy_of"]


@command
def export(
    run: RunArg,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the bundle (a zip) here: report.afz."),
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option("--html", help="Write one self-contained page here: report.html."),
    ] = None,
    redact: Annotated[
        list[str] | None,
        typer.Option(
            "--redact",
            metavar="PATTERN",
            help="Also replace what this matches: a regular expression, or NAME=REGEX to "
            "name it in the report. Repeatable.",
        ),
    ] = None,
    redact_field: Annotated[
        list[str] | None,
        typer.Option(
            "--redact-field",
            metavar="PATH",
            help="Also replace whatever stands under this key path (email, customer.email, "
            "args.*.phone), in JSON inside text too. Repeatable.",
        ),
    ] = None,
    policy_file: Annotated[
        Path | None,
        typer.Option(
            "--policy", help="A redaction policy file (TOML or JSON: fields, patterns, keep)."
        ),
    ] = None,
    keep: Annotated[
        list[str] | None,
        typer.Option(
            "--keep", metavar="RULE", help="Leave a built-in rule out (email, card). Repeatable."
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Export even when the scanner finds a secret (the report says so)."
        ),
    ] = False,
    with_source: Annotated[
        bool, typer.Option("--with-source", help="Include the agent's source file.")
    ] = False,
    calls: Annotated[
        str | None,
        typer.Option(
            "--calls", metavar="A-B", help="For --html: only calls A to B (N: call N alone)."
        ),
    ] = None,
    json_output: Annotated[
        bool,
        typer.Option("--json", help="Print what was written (manifest, report) as JSON."),
    ] = False,
) -> None:
    """Write a run (an agent's, or a flow's composed run) as a bundle to attach to a bug
    report, safe by default.

    The recording is redacted further (e-mail addresses and card numbers, and what
    --redact, --redact-field and --policy name; the same value becomes the same
    placeholder everywhere) and rewritten so it still verifies. A secret scanner then
    reads it; a hit refuses the export, naming where and which rule, never the value.
    Every af command opens the bundle as it opens a recording: af lens report.afz.
    """
    from afcli._render import err_console, print_json
    from afcli._runs import resolve
    from afcore.bundle import ExportRefused, prepare_export
    from afcore.errors import RecordingError, UsageError

    if output is None and html is None:
        raise CliError("say where to write: -o report.afz, --html report.html, or both")
    span = _span(calls) if calls else None
    if span is not None and html is None:
        raise CliError("--calls is for --html (a bundle always holds the whole run)")
    path = resolve(run)
    if html is not None:
        from afcore.recording import is_flow

        if is_flow(path):
            raise CliError(
                f"{path} is a flow's log: --html shows one agent's run; export the whole "
                "composed run as a bundle (-o report.afz), or one agent's run with --html "
                "(af show names them)",
                EXIT_USAGE,
            )
    try:
        policy = policy_of(redact or [], redact_field or [], policy_file, keep or [])
    except UsageError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    written: dict[str, Any] = {}
    try:
        with prepare_export(path, policy=policy, force=force, with_source=with_source) as ready:
            if html is not None:
                from afcli.page import PageTooLarge, write_page

                try:
                    written["html"] = str(
                        write_page(ready.recording, html, calls=span, manifest=ready.manifest)
                    )
                except PageTooLarge as e:
                    raise CliError(str(e), EXIT_FAILED) from None
            if output is not None:
                written["bundle"] = str(ready.write(output).path)
            manifest, report, hits = ready.manifest, ready.report, ready.hits
    except ExportRefused as e:
        if json_output:
            print_json({"ok": False, "refused": [h.to_json() for h in e.hits]})
        _say_refused(e.hits)
        raise typer.Exit(EXIT_FAILED) from None
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None
    if json_output:
        print_json({"ok": True, **written, "manifest": manifest, "report": report})
        return
    _print(written, manifest, report, hits, err_console())


def policy_of(
    patterns: list[str], fields: list[str], policy_file: Path | None, keep: list[str]
) -> Any:
    from afcore.bundle import ExportPolicy

    named: list[tuple[str, str]] = []
    for i, p in enumerate(patterns, start=1):
        name, sep, rx = p.partition("=")
        if sep and re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
            named.append((name, rx))
        else:
            named.append((f"pattern{i}", p))
    policy = ExportPolicy(fields=tuple(fields), patterns=tuple(named), keep=tuple(keep))
    if policy_file is not None:
        policy = ExportPolicy.from_file(policy_file).merged(policy)
    return policy


def _span(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if m is None:
        raise CliError(f"--calls takes A-B (10-40) or one call number, not {text!r}")
    a = int(m[1])
    b = int(m[2]) if m[2] else a
    if a < 1 or b < a:
        raise CliError(f"--calls {text}: calls are numbered from 1, A at most B")
    return a, b


def _say_refused(hits: list[Any]) -> None:
    from rich.text import Text

    from afcli._render import err_console
    from afcore.readmodel import safe

    console = err_console()
    console.print(
        Text.assemble(
            ("error: ", "bold red"),
            f"refused: the scanner found {len(hits)} secret{'s' if len(hits) != 1 else ''} "
            "in what would be written (values not shown)",
        )
    )
    for h in hits[:20]:
        console.print(Text.assemble("  ", (h.rule, "bold"), " at ", safe(h.where())))
    if len(hits) > 20:
        console.print(f"  … and {len(hits) - 20} more")
    console.print(
        "Redact them (--redact NAME=REGEX, --redact-field PATH, --policy FILE) "
        "or export anyway with --force."
    )


def _print(
    written: dict[str, Any],
    manifest: dict[str, Any],
    report: dict[str, Any],
    hits: list[Any],
    console: Any,
) -> None:
    from rich.text import Text

    from afcore.readmodel import plural, safe

    for rule in report["rules"]:
        console.print(
            Text.assemble(
                "  redacted ",
                (rule["rule"], "bold"),
                f": {plural(rule['values'], 'value')}, {plural(rule['count'], 'time')}",
            )
        )
    if hits:
        console.print(
            Text(
                f"  exported with --force: {plural(len(hits), 'secret')} the scanner found "
                "(listed in redaction.json, values not shown)",
                "bold yellow",
            )
        )
    if report["dropped_lines"]:
        n = len(report["dropped_lines"])
        console.print(
            Text(f"  left out {plural(n, 'line')} that {'is' if n == 1 else 'are'} not JSON")
        )
    verdict = manifest["verify"]
    counted = f"{verdict['verified']}/{verdict['calls']} calls verify"
    if verdict["ok"]:
        console.print(Text.assemble(("✓ ", "green"), counted))
    else:
        # Exported all the same (exit 0): a run cut off mid-write is what a bug report is for.
        problems = verdict.get("problems", [])
        more = len(problems) - 1 + verdict.get("problems_left_out", 0)
        where = written.get("bundle") or written.get("html", "")
        console.print(
            Text.assemble(
                ("! ", "bold yellow"),
                f"exported as it is, though it does not verify whole ({counted}): ",
                safe(problems[0] if problems else "af verify says why"),
                f" (and {plural(more, 'more problem')}: af verify {safe(where)})"
                if more > 0 and "bundle" in written
                else "",
            )
        )
    for kind, path in written.items():
        console.print(Text.assemble(("wrote ", "bold"), safe(path), f" ({kind})"))
    if "bundle" in written:
        console.print(Text(f"open it with: af lens {safe(written['bundle'])}", "dim"))
