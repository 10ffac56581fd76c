"""af's help is Rich markup made from its Markdown docstrings, drawn by typer's formatter with
stand-ins for the Markdown and traceback classes it never uses here."""

from __future__ import annotations

import subprocess
import sys

from afcli._help import reflow
from tests.afcli.conftest import Invoke


def test_reflow_joins_each_paragraph_and_styles_code() -> None:
    doc = """First line
    goes on here.

    Run `af ls`, then `af show RUN`.
    """
    assert reflow(doc) == (
        "First line goes on here.\n\n"
        "Run [markdown.code]af ls[/], then [markdown.code]af show RUN[/]."
    )


def test_reflow_keeps_brackets_as_text() -> None:
    # Rich markup would read these as styles; the docstring means them as text.
    text = reflow("Keys like [red] and `[bold]x` stay literal.")
    from rich.text import Text

    assert Text.from_markup(text).plain == "Keys like [red] and [bold]x stay literal."


def test_reflow_keeps_a_fenced_block_line_by_line() -> None:
    doc = """Examples:

    ```
    af why RUN answer
    af why RUN --list
    ```
    """
    from rich.text import Text

    plain = Text.from_markup(reflow(doc)).plain
    assert plain.splitlines() == [
        "Examples:",
        "",
        " ",
        " af why RUN answer",
        " af why RUN --list",
        " ",
    ]


def test_command_help_reads_as_its_markdown_did(invoke: Invoke) -> None:
    ran = invoke("run", "--help")
    assert ran.code == 0
    words = " ".join(ran.out.split())
    assert 'af run "Trip to Porto?" sends the demo that message' in words
    assert "`" not in ran.out
    ran = invoke("why", "--help")
    lines = [line.strip() for line in ran.out.splitlines()]
    assert "af why RUN refunds --at call:5" in lines  # each example on its own line
    assert "af why answer                (the newest run)" in lines
    assert "```" not in ran.out


def test_the_stand_ins_give_way_to_the_real_classes() -> None:
    # After --help, typer's formatter holds stand-ins; whatever uses them, or imports the two
    # modules, gets Rich's own classes.
    probe = r"""
import sys
sys.argv = ["af", "--help"]
from afcli import main
try:
    main()
except SystemExit:
    pass
import typer.rich_utils as ru
assert "rich.markdown" not in sys.modules and "rich.traceback" not in sys.modules
md = ru.Markdown("*x*")
import rich.markdown, rich.traceback
assert type(md) is rich.markdown.Markdown and isinstance(md, ru.Markdown)
assert ru.Traceback.from_exception is not None
assert rich.traceback.Traceback.__module__ == "rich.traceback"
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("ok\n")
