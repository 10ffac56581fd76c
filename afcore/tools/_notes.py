"""The sentences, markers and wire spellings of af's tool results, read from the one JSON
file the package ships (``notes.json`` beside this module), so a tool written in another
language mints the same bytes by reading the same file."""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "ABSENCE_MARKER",
    "ABSENCE_NOTE",
    "COVERAGE_BLOCK_HEADING",
    "COVERAGE_MARKER",
    "COVERAGE_NOTE",
    "IN_PROGRESS_CLAUSE",
    "IN_PROGRESS_SECTION_LABEL",
    "NOTES_PATH",
    "PERIOD_WIRE",
    "REFUSAL_PREFIX",
    "SEMANTICS_NOTE",
    "TOOL_RESULT_STATUSES",
    "canonical_notes",
]

_FILE = resources.files("afcore.tools").joinpath("notes.json")
NOTES_PATH = Path(str(_FILE))
"""Where the installed package keeps the file: hand it to a tool in another language."""

_DATA: dict[str, Any] = orjson.loads(_FILE.read_bytes())


def canonical_notes() -> dict[str, Any]:
    """The whole file as data (a copy): ``notes``, ``markers``, ``headings``, ``wire``,
    ``templates``."""
    return copy.deepcopy(_DATA)


NOTES: dict[str, str] = _DATA["notes"]
MARKERS: dict[str, str] = _DATA["markers"]
HEADINGS: dict[str, str] = _DATA["headings"]
WIRE: dict[str, Any] = _DATA["wire"]
TEMPLATES: dict[str, str] = _DATA["templates"]

ABSENCE_NOTE: str = NOTES["ABSENCE_NOTE"]
COVERAGE_NOTE: str = NOTES["COVERAGE_NOTE"]
SEMANTICS_NOTE: str = NOTES["SEMANTICS_NOTE"]
IN_PROGRESS_CLAUSE: str = NOTES["IN_PROGRESS_CLAUSE"]
ABSENCE_MARKER: str = MARKERS["ABSENCE_MARKER"]
COVERAGE_MARKER: str = MARKERS["COVERAGE_MARKER"]
REFUSAL_PREFIX: str = MARKERS["REFUSAL_PREFIX"]
COVERAGE_BLOCK_HEADING: str = HEADINGS["COVERAGE_BLOCK_HEADING"]
IN_PROGRESS_SECTION_LABEL: str = HEADINGS["IN_PROGRESS_SECTION_LABEL"]
PERIOD_WIRE: dict[str, str] = WIRE["PERIOD_WIRE"]
TOOL_RESULT_STATUSES: tuple[str, ...] = tuple(WIRE["TOOL_RESULT_STATUSES"])
