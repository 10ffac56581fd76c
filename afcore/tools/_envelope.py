"""The result envelope ``{content, effects, status}``: a tool's way to steer the run with
data rather than with text the model could have written.

Recognition is exact, so no value a tool returns today changes meaning: a mapping whose
keys are ``content`` and ``effects`` (and maybe ``status``), whose ``effects`` is a list of
effects of a kind af knows, and which says something (an empty ``effects`` needs a
``status``). Anything else is plain data, byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from afcore.tools._notes import TOOL_RESULT_STATUSES, WIRE

__all__ = [
    "Envelope",
    "RequireInstruction",
    "ToolResultStatus",
    "read_envelope",
    "status_only_near_miss",
]

ToolResultStatus: TypeAlias = Literal[
    "success", "failure", "denied", "invalid", "partial", "pending", "absent"
]

_W: dict[str, Any] = WIRE["ENVELOPE_WIRE"]
_CONTENT, _EFFECTS, _STATUS = _W["content"], _W["effects"], _W["status"]
_KIND, _REQUIRE = _W["effectKind"], _W["requireInstruction"]
_ID, _LEASE = _W["instructionId"], _W["lease"]
_LEASES: tuple[str, ...] = tuple(_W["leases"])
_EFFECT_KINDS = (_REQUIRE,)


@dataclass(frozen=True, slots=True)
class RequireInstruction:
    """Push a registered instruction into the coming call(s)."""

    instruction_id: str
    lease: Literal["next-call"]

    def to_json(self) -> dict[str, str]:
        return {_KIND: _REQUIRE, _ID: self.instruction_id, _LEASE: self.lease}


@dataclass(frozen=True, slots=True)
class Envelope:
    """A recognized envelope: what the model reads, and what is for the run."""

    content: Any
    """What the model reads: exactly what returning ``content`` alone would have shown."""
    effects: tuple[RequireInstruction, ...]
    """The well-formed effects, in the order declared."""
    status: ToolResultStatus | None
    """The outcome the tool declared (None: undeclared, which matches no status rule)."""
    refusals: tuple[str, ...]
    """One sentence per malformed effect, for the model and the record."""


def read_envelope(value: Any) -> Envelope | None:
    """The envelope ``value`` is, or None when it is plain data."""
    if not isinstance(value, Mapping) or _CONTENT not in value or _EFFECTS not in value:
        return None
    if not set(value) <= {_CONTENT, _EFFECTS, _STATUS}:
        return None
    effects = value[_EFFECTS]
    if isinstance(effects, str | bytes | Mapping) or not isinstance(effects, Sequence):
        return None
    status = value.get(_STATUS)
    if status is not None and status not in TOOL_RESULT_STATUSES:
        return None
    if not effects and status is None:
        return None  # `{content, effects: []}` declares nothing: data
    if not all(isinstance(e, Mapping) and e.get(_KIND) in _EFFECT_KINDS for e in effects):
        return None
    good: list[RequireInstruction] = []
    refusals: list[str] = []
    for i, effect in enumerate(effects):
        problem = _problem(effect)
        if problem:
            refusals.append(f"tool effect {i} refused: {problem}")
        else:
            good.append(RequireInstruction(effect[_ID], effect[_LEASE]))
    return Envelope(value[_CONTENT], tuple(good), status, tuple(refusals))


def _problem(effect: Mapping[str, Any]) -> str | None:
    extra = sorted(set(effect) - {_KIND, _ID, _LEASE})
    if extra:
        return f"{_REQUIRE} takes `{_ID}` and `{_LEASE}`, not `{extra[0]}`."
    instruction = effect.get(_ID)
    if not isinstance(instruction, str) or not instruction.strip():
        return f"{_REQUIRE} needs `{_ID}`: the id of a registered instruction."
    lease = effect.get(_LEASE)
    if lease not in _LEASES:
        return f"`{_LEASE}` is {lease!r}; it is " + " or ".join(repr(x) for x in _LEASES) + "."
    return None


def status_only_near_miss(value: Any) -> str | None:
    """The sentence for a value shaped like an envelope that lacks its ``effects`` marker
    (``{content, status}``), which stays plain data; None for anything else."""
    if (
        isinstance(value, Mapping)
        and set(value) == {_CONTENT, _STATUS}
        and value[_STATUS] in TOOL_RESULT_STATUSES
    ):
        return (
            f"this result has `{_CONTENT}` and `{_STATUS}` but no `{_EFFECTS}`, so it is read "
            f"as plain data and its status is not declared; to declare one, return "
            f"{{{_CONTENT}, {_EFFECTS}: [], {_STATUS}}}."
        )
    return None
