"""What a new user meets first: help, completion, naming runs, listing them, one argument to
`af run`, and the sentences af says when something is not what it should be."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.afcli.conftest import Invoke

COMMANDS = ("run", "ls", "show", "verify", "schema", "why", "lens")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_reads_like_any_typer_program(invoke: Invoke, command: str) -> None:
    ran = invoke(*([command] if command else []), "--help")
    assert ran.code == 0, ran.err
    # A flag takes no value, and a required argument is named as typer always named it.
    assert "<bool>" not in ran.out and "<str>" not in ran.out
    assert "{RUN}" not in ran.out and "{run}" not in ran.out
    usage = next(line for line in ran.out.splitlines() if "Usage:" in line)
    if command in ("verify",):
        assert usage.split()[-1] == "RUN"
    if command in ("show", "lens", "why"):
        assert "[RUN]" in usage


def test_a_flag_given_a_value_says_flags_take_none(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = invoke("ls", "--json", "true")
    assert ran.code == 2
    assert "take no value" in ran.err and "--json" in ran.err


def test_completion_installs_for_bash(tmp_path: Path) -> None:
    # The shell is the one af runs in, found among its parent processes (not $SHELL, nor a
    # word after the flag): as a person types it at a bash prompt, af runs under bash.
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine to install completion for")
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("SHELL", None)
    # bash stays the parent: a command followed by another is not exec'd in its place.
    af = [
        bash,
        "-c",
        '"$@"; exit $?',
        "bash",
        sys.executable,
        "-c",
        "from afcli import main; main()",
    ]
    shown = subprocess.run(
        [*af, "--show-completion"], env=env, capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "complete" in shown.stdout and "_AF_COMPLETE" in shown.stdout.upper()
    assert "COMP_WORDS" in shown.stdout  # bash's script, not another shell's
    installed = subprocess.run(
        [*af, "--install-completion"], env=env, capture_output=True, text=True, timeout=60
    )
    assert installed.returncode == 0, installed.stderr + installed.stdout
    assert "bash completion installed" in installed.stdout
    assert (tmp_path / ".bashrc").read_text().strip()


@pytest.mark.parametrize("flag", ["--install-completion", "--show-completion"])
@pytest.mark.parametrize("detected", [None, ("sh", "/bin/sh")])
def test_completion_with_no_shell_to_complete_in_says_what_to_do(
    invoke: Invoke,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    detected: tuple[str, str] | None,
) -> None:
    import shellingham

    def detect_shell() -> tuple[str, str]:
        if detected is None:
            raise shellingham.ShellDetectionFailure()
        return detected

    monkeypatch.setattr(shellingham, "detect_shell", detect_shell)  # what typer asks
    ran = invoke(flag, env={"HOME": str(tmp_path)})
    assert ran.code == 2
    assert "not supported" not in ran.out + ran.err
    said = " ".join(ran.err.split())
    assert ("runs in sh" if detected else "cannot tell which shell") in said
    assert f"af {flag} from bash" in said and "_AF_COMPLETE=source_bash af" in said
    assert not list(tmp_path.iterdir())  # nothing installed
    # What the sentence says to load is the script af --install-completion installs.
    env = {**os.environ, "_AF_COMPLETE": "source_bash"}
    af = [sys.executable, "-c", "from afcli import main; main()"]
    script = subprocess.run(af, env=env, capture_output=True, text=True, timeout=60)
    assert script.returncode == 0, script.stderr
    assert "complete -o default -F _af_completion af" in script.stdout
    env = {**env, "_AF_COMPLETE": "complete_bash", "COMP_WORDS": "af ve", "COMP_CWORD": "1"}
    tab = subprocess.run(af, env=env, capture_output=True, text=True, timeout=60)
    assert tab.stdout.split() == ["verify"], tab.stderr


def test_the_names_af_takes_from_typers_private_modules_are_as_af_uses_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # afcli.app._typer_completion is af's one use of typer's private modules: typer offers no
    # public way to register its shells without add_completion, nor to name the shell its
    # install picks. When a typer release moves them, this says which.
    import shellingham
    import typer._completion_shared as shared
    from typer._click.shell_completion import get_completion_class

    from afcli.app import _SHELLS, _typer_completion

    shell_name = _typer_completion()
    assert set(_SHELLS) == {s.value for s in shared.Shells}, "typer's shells changed"
    for shell in _SHELLS:
        cls = get_completion_class(shell)
        assert cls is not None and cls.__module__ == "typer._completion_classes", (
            f"typer's completion_init() no longer registers its {shell} class"
        )
    assert "_get_shell_name" in shared.install.__code__.co_names, (
        "typer's install() no longer picks the shell with _get_shell_name()"
    )

    def failing() -> tuple[str, str]:
        raise shellingham.ShellDetectionFailure()

    monkeypatch.setattr(shellingham, "detect_shell", lambda: ("zsh", "/bin/zsh"))
    assert shell_name() == "zsh", "typer's _get_shell_name() no longer asks shellingham"
    monkeypatch.setattr(shellingham, "detect_shell", failing)
    assert shell_name() is None, "typer's _get_shell_name() no longer says None for no shell"


# -- naming runs -----------------------------------------------------------------------------


@pytest.fixture
def two_runs(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Two demo runs in ./recordings, oldest first: their run ids."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AF_RECORDINGS", raising=False)
    ids = []
    for message in ("Trip to Porto?", "Trip to Lisbon?"):
        ran = invoke("run", "--json", message)
        assert ran.code == 0, ran.err
        ids.append(ran.json()["run_id"])
    return ids


def test_show_and_why_without_run_take_the_newest(invoke: Invoke, two_runs: list[str]) -> None:
    shown = invoke("show", "--json")
    assert shown.code == 0, shown.err
    assert shown.json()["run_id"] == two_runs[-1]
    asked = invoke("why", "answer", "--json")
    assert asked.code == 0, asked.err
    assert asked.json()["key"] == "answer"
    listed = invoke("why", "--list", "--json")
    assert listed.code == 0 and any(k["key"] == "answer" for k in listed.json())
    # Named, the older run is the one read.
    older = invoke("show", two_runs[0], "--json")
    assert older.json()["run_id"] == two_runs[0]


def test_a_single_argument_that_names_no_agent_is_the_message(
    invoke: Invoke, two_runs: list[str]
) -> None:
    shown = invoke("show", two_runs[0], "--json")
    assert shown.code == 0
    calls = invoke("show", two_runs[0], "--call", "1", "--json").json()
    first = calls["messages"][0]
    assert first["role"] == "user" and first["content"] == "Trip to Porto?"


def test_ls_filters_and_limits(invoke: Invoke, two_runs: list[str]) -> None:
    everything = invoke("ls", "--json").json()
    assert [e["run_id"] for e in everything] == two_runs[::-1]
    assert [e["run_id"] for e in invoke("ls", "-n", "1", "--json").json()] == [two_runs[-1]]
    assert len(invoke("ls", "--status", "answer", "--json").json()) == 2
    assert invoke("ls", "--status", "error", "--json").json() == []
    assert len(invoke("ls", "--agent", "trip-demo", "--json").json()) == 2
    assert invoke("ls", "--agent", "someone-else", "--json").json() == []
    assert len(invoke("ls", "--since", "1h", "--json").json()) == 2
    assert invoke("ls", "--since", "2999-01-01", "--json").json() == []
    bad = invoke("ls", "--since", "yesterday")
    assert bad.code == 2 and "30m" in bad.err
    wrong = invoke("ls", "--status", "done")
    assert wrong.code == 2 and "max_iterations" in wrong.err


def test_ls_shows_the_name_an_agent_was_loaded_by(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AF_RECORDINGS", raising=False)
    (tmp_path / "bots.py").write_text(
        textwrap.dedent(
            """
            from afcore import Agent, mock

            def make():
                return Agent.create(provider=mock(replies=[{"content": "hi"}]), model="m").build()

            def named():
                provider = mock(replies=[{"content": "hi"}])
                return Agent.create(provider=provider, model="m", name="greeter").build()
            """
        )
    )
    for attr in ("make", "named"):
        ran = invoke("run", f"bots.py:{attr}", "hello", "--json")
        assert ran.code == 0, ran.err
    agents = [e["agent"] for e in invoke("ls", "--json").json()]
    assert agents == ["greeter", "make"]


# -- what af says ----------------------------------------------------------------------------


def test_a_folder_given_as_an_agent_or_as_a_run(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bots").mkdir()
    ran = invoke("run", "bots", "hello")
    assert ran.code == 2
    assert "bots is a folder" in ran.err and "bots/bot.py" in ran.err
    for command in ("show", "verify", "lens"):
        shown = invoke(command, "bots")
        assert shown.code == 2, command
        assert "bots is a folder, not a recording" in shown.err


def test_not_a_recording_says_so_and_where(invoke: Invoke, tmp_path: Path) -> None:
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"note": "buy milk"}\n')
    for command in ("show", "lens", "why"):
        ran = invoke(command, notes, *(["answer"] if command == "why" else []))
        assert ran.code == 1, command
        assert f"{notes} is not an af recording: line 1" in ran.err, ran.err
        assert "Traceback" not in ran.err


def test_a_name_too_long_and_an_empty_key_are_one_sentence(
    invoke: Invoke, demo: dict[str, Any]
) -> None:
    long = "a" * 5000
    ran = invoke("show", long)
    assert ran.code == 2
    assert "5,000 characters" in ran.err and long not in ran.err
    assert "OSError" not in ran.err and len(ran.err.strip().splitlines()) == 1
    empty = invoke("why", demo["recording"], "")
    assert empty.code == 2
    assert empty.err.startswith("error: the KEY is empty") and "was never written" not in empty.err


def test_a_missing_key_names_the_variable(
    invoke: Invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    ran = invoke("run", "--model", "anthropic:claude-sonnet-4-5", "--out", tmp_path)
    assert ran.code == 2
    assert "set the ANTHROPIC_API_KEY environment variable" in ran.err
    assert "api_key=" not in ran.err


def test_off_a_terminal_progress_is_not_wrapped_and_the_answer_is_exact(
    tmp_path: Path,
) -> None:
    text = "Line one\x1b[31m red?\nA tab\there, and [bold]markup[/bold] kept."
    (tmp_path / "echo.py").write_text(
        "from afcore import Agent, mock\n"
        f"agent = Agent.create(provider=mock(replies=[{{'content': {text!r}}}]), model='m')"
        ".build()\n"
    )
    env = {**os.environ, "AF_RECORDINGS": str(tmp_path / "runs"), "COLUMNS": "80"}
    ran = subprocess.run(
        [sys.executable, "-c", "from afcli import main; main()", "run", "echo.py", "hi"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout.decode() == text + "\n"
    lines = ran.stderr.decode().splitlines()
    end = next(line for line in lines if line.startswith("answer after"))
    assert end.endswith("ms"), lines  # one line, however long
    assert not any(line.lstrip().startswith("ms") for line in lines), lines


INVISIBLE = "a\u202eb\u2066c\x9bd\x85e\u2028f\u200bg\u200fh\ufeffi\u061cj"


def test_json_escapes_what_a_terminal_acts_on_and_text_for_people_hides_nothing(
    invoke: Invoke, tmp_path: Path
) -> None:
    (tmp_path / "odd.py").write_text(
        "from afcore import Agent, mock\n"
        f"agent = Agent.create(provider=mock(replies=[{{'content': {INVISIBLE!r}}}]), "
        "model='m').build()\n"
    )
    ran = invoke("run", tmp_path / "odd.py", "hi", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    path = ran.json()["recording"]
    for args in (("show", path, "--json"), ("show", path, "--call", "1", "--json")):
        shown = invoke(*args)
        assert shown.code == 0, shown.err
        assert not any(ch in shown.out for ch in INVISIBLE if not ch.isalpha())
        assert "\\u202e" in shown.out and "\\u009b" in shown.out
    assert invoke("show", path, "--json").json()["answer"] == INVISIBLE  # exact
    human = invoke("show", path, env={"COLUMNS": "200"})
    assert human.code == 0
    assert not any(ch in human.out for ch in INVISIBLE if not ch.isalpha())
    assert "\\u200b" in human.out and "\\ufeff" in human.out and "\\u061c" in human.out


def test_the_readme_first_agent_runs_with_python_and_with_af_run(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("```python\nfrom afcore import Agent, define_tool, mock")
    code = readme[start + len("```python\n") : readme.index("```", start + 10)]
    (tmp_path / "weather.py").write_text(code)
    env = {**os.environ, "AF_RECORDINGS": str(tmp_path / "runs")}
    ran = subprocess.run(
        [sys.executable, "weather.py"], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr.decode()
    assert ran.stdout.decode().startswith("It is 22C and sunny in Paris.")
    monkeypatch.chdir(tmp_path)
    again = invoke("run", "weather.py:make", "Weather in Paris?", "--json", "--out", tmp_path)
    assert again.code == 0, again.err
    assert again.json()["answer"] == "It is 22C and sunny in Paris."
