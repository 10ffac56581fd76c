"""Read commands stay light: `af --help` loads only the command definitions, and `af ls`,
`af show`, `af why` and `af verify` import what reading a recording takes, not the agent
loop, the providers, jsonschema, a vendor SDK or the Lens's UI toolkit. Each check runs in
a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "sample-trip.jsonl"

# A finder that notes every attempt to import a watched module, even one that fails because
# the package is not installed: the check holds whether or not it is.
PROBE = r"""
import json, sys
from importlib.abc import MetaPathFinder

WATCHED = {"textual", "anthropic", "openai", "httpx", "jsonschema", "tui"}
WATCHED_MODULES = ("afcore.loop", "afcore.providers", "afcore.agent", "afcore.tools",
                   "afcore.injections", "afcore.window", "afcore.recording._writer")
attempts = []

class Spy(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in WATCHED or name.startswith(WATCHED_MODULES):
            attempts.append(name)
        return None

sys.meta_path.insert(0, Spy())

from typer.testing import CliRunner
from afcli.app import app

result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps({
    "code": result.exit_code,
    "out": result.stdout,
    "attempts": sorted(set(attempts)),
    "pydantic": "pydantic" in sys.modules,
}))
"""


def probe(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def test_help_loads_only_the_command_definitions() -> None:
    report = probe("--help")
    assert report["code"] == 0
    assert report["attempts"] == []
    assert report["pydantic"] is False


def test_ls_of_an_empty_folder_is_light(tmp_path: Path) -> None:
    report = probe("ls", str(tmp_path), "--json")
    assert report["code"] == 0 and json.loads(str(report["out"])) == []
    assert report["attempts"] == []


@pytest.mark.parametrize(
    "args",
    [
        ("ls", str(SAMPLE.parent)),
        ("show", str(SAMPLE)),
        ("show", str(SAMPLE), "--call", "3"),
        ("show", str(SAMPLE), "--json"),
        ("why", str(SAMPLE), "answer"),
        ("verify", str(SAMPLE)),
    ],
    ids=lambda a: " ".join(a[:1] + a[2:]),
)
def test_read_commands_import_only_what_reading_takes(args: tuple[str, ...]) -> None:
    report = probe(*args)
    assert report["code"] == 0, report["out"]
    assert report["attempts"] == []


# Through the console script's own entry point, as a person runs af: what the process holds
# when it exits, whatever imported it (af, typer, rich or a library below them).
EXIT_PROBE = r"""
import atexit, json, sys

@atexit.register
def _held() -> None:
    sys.__stderr__.write("\nHELD " + json.dumps(sorted(sys.modules)) + "\n")

sys.argv = ["af", *sys.argv[1:]]
from afcli import main
main()
"""


def held_at_exit(*args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stderr
    said = done.stderr.rpartition("\nHELD ")[2]
    return set(json.loads(said))


READS = [
    ("--help",),
    ("ls", str(SAMPLE.parent)),
    ("show", str(SAMPLE)),
    ("why", str(SAMPLE), "answer"),
]


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_read_commands_start_without_an_event_loop(args: tuple[str, ...]) -> None:
    # asyncio (with ssl, sockets, threads) is af run's and af chat's: 14 ms of every start-up.
    held = held_at_exit(*args)
    assert "afcli.app" in held, "the probe ran no af"
    assert "asyncio" not in held


def test_help_starts_without_the_read_model_or_the_recording_models() -> None:
    # Listing the commands needs their signatures, not what they show.
    held = held_at_exit("--help")
    assert "afcli.app" in held, "the probe ran no af"
    assert not {"pydantic", "afcore.readmodel._model", "afcore.recording._reader"} & held


def test_help_lists_the_commands_without_their_modules() -> None:
    # Their summaries are enough to list them; msgspec and the record types are a reader's.
    held = held_at_exit("--help")
    assert "afcli.app" in held, "the probe ran no af"
    assert not {m for m in held if m.startswith("afcli.commands.")}
    assert not {"msgspec", "afcore.recording._typed", "afcli._render"} & held


def test_help_draws_without_markdown_or_tracebacks() -> None:
    # typer's formatter imports both when it loads (a third of the start-up); af's help is
    # Rich markup and af prints its own errors, so neither is drawn.
    for args in (("--help",), ("show", "--help"), ("why", "--help")):
        held = held_at_exit(*args)
        assert "typer.rich_utils" in held, "the probe drew no help"
        assert not {"rich.markdown", "markdown_it", "pygments", "rich.traceback", "attr"} & held


@pytest.mark.parametrize(
    "args",
    [("show", str(SAMPLE)), ("why", str(SAMPLE), "answer"), ("verify", str(SAMPLE))],
    ids=lambda a: a[0],
)
def test_reading_a_run_builds_no_flow_models(args: tuple[str, ...]) -> None:
    # Whether a file is a flow's log is its first bytes; the flow records' models are a
    # flow reader's to build.
    held = held_at_exit(*args)
    assert "afcore.recording._reader" in held, "the probe read no run"
    assert "afcore.recording._flows" not in held


def test_listing_runs_builds_no_models(tmp_path: Path) -> None:
    # af ls reads a header and a run_end per file, as af writes them: Structs generated from
    # the record models (afcore/recording/_structs.py), without importing pydantic (about
    # 60 ms of every start-up).
    (tmp_path / SAMPLE.name).write_bytes(SAMPLE.read_bytes())
    held = held_at_exit("ls", str(tmp_path))
    assert "afcore.recording._structs" in held, "the probe read no header"
    assert not {"pydantic", "afcore.recording._models", "afcore.recording._flows"} & held
    flow = next(SAMPLE.parent.glob("flow-*.jsonl"))
    (tmp_path / flow.name).write_bytes(flow.read_bytes())
    held = held_at_exit("ls", str(tmp_path))
    assert not {"pydantic", "afcore.recording._models", "afcore.recording._flows"} & held


def test_listing_a_line_af_would_not_write_asks_the_model(tmp_path: Path) -> None:
    # A value pydantic would coerce is the model's to judge: af ls reads it as before.
    lines = SAMPLE.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["seed"] = "7"  # a string where the model says int: pydantic makes it 7
    (tmp_path / SAMPLE.name).write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    held = held_at_exit("ls", str(tmp_path))
    assert "pydantic" in held
    report = probe("ls", str(tmp_path), "--json")
    assert json.loads(str(report["out"]))[0]["status"] == "answer"


@pytest.mark.parametrize(
    "args",
    [*READS[2:], ("verify", str(SAMPLE))],
    ids=lambda a: a[0],
)
def test_reading_a_run_loads_no_pydantic(args: tuple[str, ...]) -> None:
    # Records are read as Structs (afcore/recording/_structs.py): importing pydantic and
    # building the models is about 60 ms of a start-up, their validators 20 ms more.
    held = held_at_exit(*args)
    assert "afcore.recording._reader" in held, "the probe read no run"
    assert not {"pydantic", "afcore.recording._models", "afcore.recording._flows"} & held


def test_reading_a_line_af_would_not_write_asks_the_model(tmp_path: Path) -> None:
    # A value pydantic would coerce is the model's to judge: af show reads it as before.
    lines = SAMPLE.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["seed"] = "7"  # a string where the model says int: pydantic makes it 7
    odd = tmp_path / SAMPLE.name
    odd.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]))
    assert "pydantic" in held_at_exit("show", str(odd))
    assert probe("show", str(odd))["out"] == probe("show", str(SAMPLE))["out"].replace(
        str(SAMPLE), str(odd)
    )


@pytest.mark.parametrize(
    "args",
    [("show", str(SAMPLE)), ("why", str(SAMPLE), "answer")],
    ids=lambda a: a[0],
)
def test_reading_a_run_loads_no_other_command_s_library(args: tuple[str, ...]) -> None:
    # The console script running a command loads that command's module alone, and the
    # command imports what its body needs inside it: af show does not load af replay's,
    # af diff's or af why's library, af why not af show's read model, and neither loads what
    # only a bundle (a zip, extracted to a temporary folder) takes.
    held = held_at_exit(*args)
    assert "afcore.recording._bundled" in held, "the probe read no run"
    assert f"afcli.commands.{args[0]}" in held
    others = {f"afcli.commands.{c}" for c in ("run", "chat", "replay", "diff", "ls", "verify")}
    assert not others & held
    assert not {"afcore.replay", "afcore.readmodel._diff", "zipfile", "tempfile"} & held
    if args[0] == "show":
        assert not {"afcli.commands.why", "afcore.why", "afcore.why._slice"} & held
    else:
        assert not {"afcli.commands.show", "afcore.readmodel._model"} & held


# Every module af show, af why and the Lens load to read a run: the read model's, the reader's
# and the slice's types, private ones included.
READ_MODULES = (
    "afcore.readmodel._model",
    "afcore.readmodel._call",
    "afcore.readmodel._callview",
    "afcore.readmodel._run",
    "afcore.readmodel._session",
    "afcore.readmodel._timeline",
    "afcore.recording._reader",
    "afcore.why._slice",
    "afcore.why._summary",
    "afcli.commands.why",
)

MADE = r"""
import dataclasses, importlib, inspect, json, sys
made = {}
for name in sys.argv[1:]:
    m = importlib.import_module(name)
    classes = [c for c in vars(m).values() if inspect.isclass(c) and c.__module__ == name]
    assert classes, name
    made[name] = [c.__qualname__ for c in classes if dataclasses.is_dataclass(c)]
print(json.dumps(made))
"""


def test_the_read_model_s_types_are_made_without_dataclasses() -> None:
    # dataclass() writes and execs the methods of each class it makes (about 0.4 ms a class,
    # 9 ms of af show's start-up for the read model's types, 6 ms of af why's for the reader's,
    # the slice's and the session's); a Struct's are built in C.
    done = subprocess.run(
        [sys.executable, "-c", MADE, *READ_MODULES],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == {name: [] for name in READ_MODULES}
