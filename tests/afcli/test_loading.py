"""`af run AGENT`: every way of naming an agent, and every way that can go wrong (exit 2)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from afcore import recording
from tests.afcli.conftest import Invoke, Ran

BUILD = """
from afcore import Agent, mock

def make(answer="hello"):
    return Agent.create(provider=mock(reply=answer), model="m", name=answer).build()
"""

_names = itertools.count()


def unique(stem: str) -> str:
    """Module names are cached per process; each test imports its own."""
    return f"{stem}_{next(_names)}_{id(_names)}"


def write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(BUILD + body)
    return path


def ran_ok(ran: Ran) -> dict[str, object]:
    assert ran.code == 0, ran.err
    outcome: dict[str, object] = ran.json()
    return outcome


def source_of(outcome: dict[str, object]) -> str | None:
    with recording.open_recording(str(outcome["recording"])) as rec:
        return rec.header.agent.source


def test_a_file_with_one_agent_needs_no_attribute(invoke: Invoke, tmp_path: Path) -> None:
    path = write(tmp_path, "one.py", "agent = make('from the file')\n")
    outcome = ran_ok(invoke("run", path, "hi", "--json"))
    assert outcome["answer"] == "from the file"
    assert source_of(outcome) == "one.py:agent"


def test_file_colon_attribute_picks_among_several(invoke: Invoke, tmp_path: Path) -> None:
    path = write(tmp_path, "two.py", "first = make('one')\nsecond = make('two')\n")
    outcome = ran_ok(invoke("run", f"{path}:second", "hi", "--json"))
    assert outcome["answer"] == "two"
    assert source_of(outcome) == "two.py:second"


def test_a_factory_function_is_called(invoke: Invoke, tmp_path: Path) -> None:
    path = write(tmp_path, "factory.py", "def build_agent():\n    return make('built')\n")
    outcome = ran_ok(invoke("run", f"{path}:build_agent", "hi", "--json"))
    assert outcome["answer"] == "built"
    assert source_of(outcome) == "factory.py:build_agent"


def test_module_colon_attribute_imports_from_the_current_folder(
    invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = unique("bots")
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    write(tmp_path / package, "support.py", "agent = make('from a module')\n")
    monkeypatch.chdir(tmp_path)
    outcome = ran_ok(invoke("run", f"{package}.support:agent", "hi", "--json"))
    assert outcome["answer"] == "from a module"
    assert source_of(outcome) == f"{package}.support:agent"


def test_a_file_can_import_its_neighbours(invoke: Invoke, tmp_path: Path) -> None:
    helper = unique("helper")
    (tmp_path / f"{helper}.py").write_text("ANSWER = 'neighbourly'\n")
    path = write(tmp_path, "main.py", f"from {helper} import ANSWER\nagent = make(ANSWER)\n")
    assert ran_ok(invoke("run", path, "hi", "--json"))["answer"] == "neighbourly"


def test_a_file_with_the_name_of_a_loaded_module_still_loads(
    invoke: Invoke, tmp_path: Path
) -> None:
    path = write(tmp_path, "json.py", "agent = make('not the json module')\n")
    assert ran_ok(invoke("run", path, "hi", "--json"))["answer"] == "not the json module"


# -- failures: one sentence, exit 2 ------------------------------------------------------

FAILURES = [
    # (file name, body, how AGENT names it, what the error must say)
    ("x.py", None, "{dir}/missing.py", "no such file: "),
    ("syntax.py", "def broken(:\n", "{path}", "syntax error in "),
    ("raises.py", "raise RuntimeError('no database')\n", "{path}", "RuntimeError: no database"),
    ("exits.py", "import sys\nsys.exit(3)\n", "{path}", "called exit(3) while loading"),
    ("imports.py", "import no_such_dependency_af\n", "{path}", "No module named"),
    ("none.py", "x = 1\n", "{path}", "defines no Agent at module level"),
    ("several.py", "a = make()\nb = make()\n", "{path}", "defines 2 agents (a, b)"),
    ("attr.py", "a = make()\n", "{path}:nope", "has no attribute 'nope'; the agents it defines: a"),
    ("notagent.py", "thing = 42\n", "{path}:thing", "is a int, not an Agent"),
    ("args.py", "def f(model):\n    return make()\n", "{path}:f", "takes arguments (model)"),
    (
        "fraises.py",
        "def f():\n    raise ValueError('bad key')\n",
        "{path}:f",
        "ValueError: bad key",
    ),
    ("freturns.py", "def f():\n    return 'agent'\n", "{path}:f", "returned a str, not an Agent"),
    (
        "builder.py",
        "from afcore import Agent, mock\nb = Agent.create(provider=mock(reply='x'), model='m')\n",
        "{path}:b",
        "is an agent builder; finish it with .build()",
    ),
    ("afolder.py", None, "{dir}", "is a folder"),
    ("x.py", None, "no_such_module_af:agent", "no module named 'no_such_module_af'"),
    ("x.py", None, "not a module:agent", "is neither a .py file nor a module name"),
    ("x.py", None, "x.py:not-an-attr", "is not a Python attribute name"),
]


@pytest.mark.parametrize(
    ("name", "body", "spec", "expected"), FAILURES, ids=[f[3][:30] for f in FAILURES]
)
def test_loading_errors_are_one_sentence_and_exit_2(
    invoke: Invoke, tmp_path: Path, name: str, body: str | None, spec: str, expected: str
) -> None:
    path = tmp_path / name
    if body is not None:
        write(tmp_path, name, body)
    ran = invoke("run", spec.format(path=path, dir=tmp_path), "hi", "--json")
    assert ran.code == 2
    assert ran.out == ""
    assert "Traceback" not in ran.err
    lines = ran.err.strip().splitlines()
    assert len(lines) == 1, ran.err
    assert lines[0].startswith("error: ") and expected in lines[0]
    assert not list(tmp_path.rglob("*.jsonl")), "nothing ran, so nothing is recorded"


def test_an_agent_other_than_the_demo_needs_a_message(invoke: Invoke, tmp_path: Path) -> None:
    path = write(tmp_path, "one.py", "agent = make()\n")
    ran = invoke("run", path)
    assert ran.code == 2
    assert ran.err.strip() == f"error: say what to send to the agent: af run {path} MESSAGE"


def test_debug_shows_the_traceback(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "raises.py"
    path.write_text("raise RuntimeError('no database')\n")
    ran = invoke("--debug", "run", path, "hi")
    assert ran.code == 2
    assert "Traceback" in ran.err and "RuntimeError: no database" in ran.err
