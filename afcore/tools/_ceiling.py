"""Results too big to serve: the tool's own ceiling refuses, the agent's cap truncates.

A truncated result reads as a complete one, so a tool author who knows how a call can be
narrowed declares a :class:`ResultCeiling`: over it, the model reads a refusal that says
the true size, the ceiling and how to narrow the call, and no data. ``truncate_result`` is
the agent-wide cap for tools the agent's author did not write: a verbatim head and a
marker that says it is not the whole result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from afcore.errors import UsageError
from afcore.tools._notes import TEMPLATES

__all__ = [
    "MIN_TOOL_RESULT_CHARS",
    "ResultCeiling",
    "ceiling_refusal",
    "over_ceiling",
    "truncate_result",
]

MIN_TOOL_RESULT_CHARS = 512
"""The smallest agent-wide cap: below it the marker would crowd out the head."""


@dataclass(frozen=True, slots=True, init=False)
class ResultCeiling:
    """A tool's contract on the size of what it returns.

    ``max_chars``: the most characters of result text the model may be served.
    ``narrow_by``: the arguments that make a call return less (named in the refusal);
    leave it out to suggest none.
    """

    max_chars: int
    narrow_by: tuple[str, ...] | None

    def __init__(self, max_chars: int, narrow_by: Sequence[str] | None = None) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1:
            raise UsageError(
                f"ResultCeiling(max_chars=...) must be a positive whole number, got {max_chars!r}"
            )
        if narrow_by is not None:
            if isinstance(narrow_by, str) or not isinstance(narrow_by, Sequence):
                raise UsageError(
                    "ResultCeiling(narrow_by=...) takes a list of argument names, "
                    f"got {narrow_by!r}"
                )
            if not narrow_by:
                raise UsageError(
                    "ResultCeiling(narrow_by=[]) could suggest nothing: leave narrow_by out "
                    "to say there is no argument that narrows a call"
                )
            for name in narrow_by:
                if not isinstance(name, str) or not name:
                    raise UsageError(f"ResultCeiling(narrow_by=...) names arguments, got {name!r}")
            narrow_by = tuple(narrow_by)
        object.__setattr__(self, "max_chars", max_chars)
        object.__setattr__(self, "narrow_by", narrow_by)

    def check_against(self, tool: str, input_schema: Mapping[str, Any]) -> None:
        """Refuse a ``narrow_by`` argument that the tool's schema does not offer."""
        offered = input_schema.get("properties")
        names = set(offered) if isinstance(offered, Mapping) else set()
        for name in self.narrow_by or ():
            if name not in names:
                raise UsageError(
                    f"define_tool({tool!r}): result_ceiling narrows by {name!r}, which is not "
                    "an argument in the tool's input_schema"
                )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"max_chars": self.max_chars}
        if self.narrow_by:
            out["narrow_by"] = list(self.narrow_by)
        return out


def over_ceiling(text: str, ceiling: ResultCeiling | None) -> bool:
    """Whether the served ``text`` is over the tool's ceiling (never, without one)."""
    return ceiling is not None and len(text) > ceiling.max_chars


def ceiling_refusal(tool: str, size: int, ceiling: ResultCeiling) -> str:
    """What the model reads instead of a result over ``ceiling``: the true size, the
    ceiling, how to narrow the call, and that no data was returned."""
    narrow = ""
    if ceiling.narrow_by:
        names = [f"'{n}'" for n in ceiling.narrow_by]
        arguments = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        narrow = TEMPLATES["RESULT_CEILING_NARROW_BY"].format(arguments=arguments)
    return TEMPLATES["RESULT_CEILING_REFUSAL"].format(
        tool=tool, size=size, max_chars=ceiling.max_chars, narrow=narrow
    )


def truncate_result(tool: str, text: str, max_chars: int) -> str:
    """``text`` cut to fit ``max_chars`` with its marker: a verbatim head, then a line that
    says how much there was and that this is not all of it. Unchanged when it fits."""
    return truncation(tool, text, max_chars)[0]


def truncation(tool: str, text: str, max_chars: int) -> tuple[str, int]:
    """:func:`truncate_result`, and how many characters of the head it kept."""
    if isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise UsageError(f"max_tool_result_chars must be a whole number, got {max_chars!r}")
    if max_chars < MIN_TOOL_RESULT_CHARS:
        raise UsageError(
            f"max_tool_result_chars must be at least {MIN_TOOL_RESULT_CHARS}, got {max_chars}"
        )
    if len(text) <= max_chars:
        return text, len(text)
    kept = max_chars
    while True:
        marker = TEMPLATES["TRUNCATION_MARKER"].format(tool=tool, size=len(text), kept=kept)
        if kept + len(marker) <= max_chars:
            return text[:kept] + marker, kept
        kept = max_chars - len(marker)
