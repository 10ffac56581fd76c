from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from afcli.app import app


@dataclass
class Ran:
    """What a CLI invocation left: exit code, stdout, stderr."""

    result: Result

    @property
    def code(self) -> int:
        return self.result.exit_code

    @property
    def out(self) -> str:
        return self.result.stdout

    @property
    def err(self) -> str:
        return self.result.stderr

    def json(self) -> Any:
        return json.loads(self.out)


Invoke = Callable[..., Ran]


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading an agent puts its folder (or the current one) on sys.path, as python does.
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def invoke() -> Invoke:
    """Run ``af ARGS``; an exception escaping the app is a failure of the test, never an exit."""

    def run(*args: str | Path, env: dict[str, str] | None = None, input: str | None = None) -> Ran:
        result = CliRunner().invoke(app, [str(a) for a in args], env=env, input=input)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"af {args} raised {result.exception!r}") from result.exception
        return Ran(result)

    return run


@pytest.fixture
def demo(invoke: Invoke, tmp_path: Path) -> dict[str, Any]:
    """One run of the demo, recorded in tmp_path/runs; its `af run --json` outcome."""
    ran = invoke("run", "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    outcome: dict[str, Any] = ran.json()
    return outcome
