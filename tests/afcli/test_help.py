"""af's help is Rich markup made from its Markdown docstrings, drawn by typer's formatter with
stand-ins for the Markdown and traceback classes it never uses here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


def test_each_command_s_summary_is_its_docstring_s_first_paragraph() -> None:
    # af --help lists the commands from SUMMARIES without importing their modules.
    import importlib
    import inspect

    from afcli.app import COMMANDS, SUMMARIES

    for name in COMMANDS:
        fn = getattr(importlib.import_module(f"afcli.commands.{name}"), name)
        first = inspect.cleandoc(fn.__doc__).split("\n\n")[0]
        assert SUMMARIES[name] == " ".join(first.split()), name


def test_only_af_s_own_help_lists_the_commands_by_their_summaries() -> None:
    from afcli.app import root_help

    assert root_help([], {}) and root_help(["--help"], {}) and root_help(["--debug", "-h"], {})
    assert not root_help(["--debug"], {})  # a usage error, not the help
    assert not root_help(["--version"], {}) and not root_help(["--help", "ls"], {})
    assert not root_help([], {"_AF_COMPLETE": "complete_bash"})


# The console script, which lists the commands by their summaries, and the app with every
# command's module registered.
HELP_BY = {
    "summaries": "import sys; sys.argv = ['af', *sys.argv[1:]]; from afcli import main; main()",
    "modules": "import sys; from afcli.app import app; app(sys.argv[1:], prog_name='af')",
}


@pytest.mark.parametrize("columns", ["80", "200"])
@pytest.mark.parametrize("colour", [False, True], ids=["plain", "colour"])
@pytest.mark.parametrize("args", [("--help",), ("-h",), ()], ids=["--help", "-h", "none"])
def test_af_help_from_the_summaries_reads_as_from_the_modules(
    columns: str, colour: bool, args: tuple[str, ...]
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update({"COLUMNS": columns, "FORCE_COLOR" if colour else "NO_COLOR": "1"})
    outs = {
        how: subprocess.run(
            [sys.executable, "-c", code, *args], capture_output=True, env=env, timeout=60
        )
        for how, code in HELP_BY.items()
    }
    assert outs["summaries"].stdout == outs["modules"].stdout
    assert b"report" in outs["summaries"].stdout
    assert outs["summaries"].returncode == outs["modules"].returncode
