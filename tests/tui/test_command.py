"""``af lens``: which recording it opens, and the errors it says in one sentence."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afcli.app import app
from tests.tui.conftest import SAMPLES
from tui.app import LensApp


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, bool]]:
    """The recordings the Lens was opened on, instead of running it."""
    seen: list[tuple[Path, bool]] = []

    def run(self: LensApp) -> None:
        seen.append((self.rec.path, self.follow))

    monkeypatch.setattr(LensApp, "run", run)
    return seen


def lens(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["lens", *map(str, args)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"af lens raised {result.exception!r}") from result.exception
    return result.exit_code, result.stderr


def test_no_run_opens_the_newest_recording(
    opened: list[tuple[Path, bool]], _recordings_in_tmp: Path
) -> None:
    folder = _recordings_in_tmp
    folder.mkdir()
    shutil.copy(SAMPLES / "sample-trip.jsonl", folder / "sample-trip.jsonl")
    older = folder / "20260101-120000-000-aaaaaa.jsonl"
    newer = folder / "20260102-120000-000-bbbbbb.jsonl"
    for path in (older, newer):
        shutil.copy(SAMPLES / "sample-trip-rain.jsonl", path)
    assert lens() == (0, "")
    assert lens("--follow") == (0, "")
    assert lens("sample-trip") == (0, "")
    assert opened == [(newer, False), (newer, True), (folder / "sample-trip.jsonl", False)]


def test_no_recordings_is_a_usage_error(opened: list[tuple[Path, bool]]) -> None:
    code, err = lens()
    assert code == 2 and "no recordings in" in err and "af lens RUN" in err
    assert not opened


def test_bad_names_and_files(opened: list[tuple[Path, bool]], tmp_path: Path) -> None:
    code, err = lens(tmp_path / "missing.jsonl")
    assert code == 2 and "error: no recording at" in err
    notes = tmp_path / "notes.jsonl"
    notes.write_text("just some notes\n")
    code, err = lens(notes)
    assert code == 1 and "is not an af recording" in err
    code, err = lens("run*")
    assert code == 2 and "holds no *" in err
    assert "Traceback" not in err and not opened


def test_every_binding_has_an_id_and_says_what_it_does() -> None:
    # Ids let a keymap rebind a key; descriptions are what the footer and ? show.
    import importlib
    import inspect
    import pkgutil

    from textual.binding import Binding
    from textual.screen import Screen

    import tui.screens

    screens = {
        cls
        for info in pkgutil.iter_modules(tui.screens.__path__, "tui.screens.")
        for _, cls in inspect.getmembers(importlib.import_module(info.name), inspect.isclass)
        if issubclass(cls, Screen) and cls.__module__.startswith("tui.")
    }
    assert {s.__name__ for s in screens} >= {"LensScreen", "Help", "SearchScreen", "WhyScreen"}
    ids = []
    for screen in screens:
        for binding in screen.BINDINGS:
            assert isinstance(binding, Binding), (screen.__name__, binding)
            assert binding.id and binding.description, (screen.__name__, binding.key)
            ids.append(binding.id)
    assert len(ids) == len(set(ids))
