"""Recordings as test fixtures: a pytest plugin, installed with af (the ``pytest11`` entry
point ``af``).

A test hands its agent to the ``af_cassette`` fixture and runs what it gets::

    def test_weather(af_cassette):
        agent = af_cassette(make_agent())
        assert "22C" in agent.run("Weather in Paris?")

The first time, the run is recorded into a *cassette* beside the test file
(``cassettes/<test module>/<test name>.jsonl``); from then on it is replayed from it: every
model call answered from the cassette, no network, no key, the tools' recorded results
served (``af_cassette(agent, tools="run")`` runs them again and compares). A test whose
agent now builds a different request fails there, with the call, the slot, the path and
both values. A cassette is an ordinary recording: ``af lens`` opens it, ``af verify``
checks it, ``af diff`` compares it with the replay's own recording.

``--af-record`` (or the ``af_record`` ini option) says what to do:

- ``once`` (the default): replay the cassettes there are, record the missing ones;
- ``none``: a missing cassette fails the test (for CI: nothing is recorded there);
- ``all``: record every cassette again.

While a test that uses the fixture runs, providers are made without their keys when none is
set (:func:`afcore.providers.keys_when_called`): a replay needs none, and a recording asks
for one at its first call. Each agent ``af_cassette`` returns runs once; a test with two runs
asks for two agents (their cassettes are ``<test name>.jsonl``, ``<test name>-2.jsonl``).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    from afcore.agent import Agent
    from afcore.replay import Replayer

__all__ = ["MODES", "Cassettes", "af_cassette"]

MODES = ("once", "none", "all")
FOLDER = "cassettes"
"""The folder beside a test file that holds its cassettes, one subfolder per test module."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("af", "af cassettes (recorded agent runs replayed in tests)")
    group.addoption(
        "--af-record",
        choices=MODES,
        default=None,
        help="once: replay the cassettes there are, record the missing ones (the default); "
        "none: a missing cassette fails the test; all: record every cassette again.",
    )
    parser.addini("af_record", "What --af-record says when it is not given.", default="once")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "af_cassette(name): the name of the test's cassette")


class Cassettes:
    """What ``af_cassette`` is: call it with an agent to get the agent a test runs."""

    def __init__(self, request: pytest.FixtureRequest, mode: str, replays: Path) -> None:
        self.mode = mode
        self.folder = Path(request.path).parent / FOLDER / Path(request.path).stem
        marker = request.node.get_closest_marker("af_cassette")
        self.name = _safe(str(marker.args[0]) if marker and marker.args else request.node.name)
        self.replays = replays
        self.used: list[tuple[Path, Agent]] = []

    def path(self, n: int) -> Path:
        """The n-th cassette of this test (from 1)."""
        return self.folder / f"{self.name}{'' if n == 1 else f'-{n}'}.jsonl"

    def __call__(self, agent: Agent, *, tools: Literal["run", "recorded"] = "recorded") -> Agent:
        from afcore.recording import RecordingConfig
        from afcore.replay import replaying

        path = self.path(len(self.used) + 1)
        if self.mode == "all" or (self.mode == "once" and not path.exists()):
            path.unlink(missing_ok=True)
            recording = copy_agent(agent)
            config = agent.recording or RecordingConfig()
            recording.recording = dataclasses.replace(config, dir=path.parent, run_id=path.stem)
            self.used.append((path, recording))
            return recording
        if not path.exists():
            pytest.fail(
                f"no cassette at {_shown(path)} and --af-record=none records none: record it "
                "with --af-record=once",
                pytrace=False,
            )
        replayed = replaying(agent, path, tools=tools, out=self.replays)
        self.used.append((path, replayed))
        return replayed

    def report(self) -> str | None:
        """What the test's replays found, for its report when it fails."""
        lines = []
        for path, agent in self.used:
            replayer: Replayer | None = agent.replayer  # type: ignore[assignment]
            if replayer is None:
                continue
            d = replayer.divergence
            result = agent.last_result
            mine = result.recording if result is not None else None
            if d is None:
                continue
            lines.append(f"cassette {_shown(path)}: diverged at {d.describe()}")
            lines.append(f"  recorded  {d.recorded!r}")
            lines.append(f"  replayed  {d.replayed!r}")
            if d.why_key:
                # A segment is asked about at the call (the other keys name their place).
                at = f" --at call:{d.call}" if d.why_key.startswith("system:") else ""
                lines.append(f"  why       af why {_shown(path)} {d.why_key}{at}")
            if mine is not None:
                lines.append(f"  all of it af diff {_shown(path)} {mine}")
            lines.append("  if the change is meant: record it again with --af-record=all")
        return "\n".join(lines) or None


def copy_agent(agent: Agent) -> Agent:
    import copy

    out = copy.copy(agent)
    out.last_result = None
    return out


@pytest.fixture
def af_cassette(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., Agent]]:
    """Call it with an agent: the agent to run, recorded into this test's cassette the first
    time and replayed from it after (see :mod:`afcore.pytest_plugin`)."""
    from afcore.providers import keys_when_called

    mode = request.config.getoption("--af-record") or request.config.getini("af_record")
    if mode not in MODES:
        raise pytest.UsageError(f"af_record is one of {', '.join(MODES)}, not {mode!r}")
    cassettes = Cassettes(request, str(mode), tmp_path_factory.mktemp("af-replays"))
    with keys_when_called():
        yield cassettes


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A test that failed on a replay says where it diverged, in a section of its report."""
    from afcore.errors import ReplayDivergedError

    report = yield
    if report.when == "call" and report.failed:
        cassettes = getattr(item, "funcargs", {}).get("af_cassette")
        found = cassettes.report() if isinstance(cassettes, Cassettes) else None
        if found is not None and call.excinfo is not None:
            if call.excinfo.errisinstance(ReplayDivergedError):
                # The divergence is the failure: said in full, without the loop's frames.
                report.longrepr = f"{item.nodeid}: the agent departed from its cassette\n{found}"
            else:
                report.sections.append(("af cassette", found))
    return report


def _safe(name: str) -> str:
    """A test's name as a file name: parametrized ids keep their letters and digits, their
    accents dropped (pytest writes ``São`` in an id as ``S\\xe3o``: read back first)."""
    try:
        name = name.encode("ascii", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        pass
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", plain).strip("-") or "test"


def _shown(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)
