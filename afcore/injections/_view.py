"""The run view ``s`` that rules read: every value a predicate touches is noted, so its
decision is recorded with the evidence it rested on."""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from afcore.messages import Message
from afcore.secrets import shorten

__all__ = ["MISSING", "RunView", "preview", "token"]

_PREVIEW = 200

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""What a rule saw when it looked up a key that is not there (evidence: null)."""


def preview(value: Any) -> Any:
    """A value as evidence: JSON scalars as they are, strings and the rest cut to a line."""
    if value is None or value is MISSING or isinstance(value, bool | int | float):
        return None if value is MISSING else value
    return shorten(value if isinstance(value, str) else _json(value), _PREVIEW)


def token(value: Any) -> Any:
    """A value as a rule saw it, reduced to something that compares equal only when the
    value is the same: a snapshot, so a list mutated in place later still differs."""
    if value is None or value is MISSING or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return (value.__class__, value)  # 1, 1.0 and True are different evidence
    try:
        return orjson.dumps(
            value, default=repr, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
        )
    except TypeError:
        return repr(value)


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return repr(value)


class ReadNotes:
    """What a view was read for, the first value of each key as it was read: the evidence
    of a decision. A rule's :class:`RunView` and a flow's view of its state keep it alike."""

    __slots__ = ("_reads",)
    _reads: dict[str, Any]

    def _note(self, key: str, value: Any) -> None:
        if key not in self._reads:
            self._reads[key] = value

    def _take_reads(self) -> dict[str, Any]:
        reads, self._reads = self._reads, {}
        return reads


class _Tracked(Mapping[str, Any]):
    """A read-only mapping whose reads are noted as `<prefix>.<key>` by ``view`` (a rule's
    :class:`RunView`, or a flow's view of its state)."""

    def __init__(self, view: ReadNotes, prefix: str, data: Mapping[str, Any]) -> None:
        self._view = view
        self._prefix = prefix
        self._data = data

    # Rules read the state at every iteration they are decided at: the reads note their
    # evidence inline, without a call to _note.

    def __getitem__(self, key: str) -> Any:
        # A missing key is evidence too: the rule looked and found nothing.
        value = self._data.get(key, MISSING)
        name = f"{self._prefix}.{key}"
        reads = self._view._reads
        if name not in reads:
            reads[name] = value
        return self._data[key] if value is MISSING else value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._data.get(key, MISSING)
        name = f"{self._prefix}.{key}"
        reads = self._view._reads
        if name not in reads:
            reads[name] = value
        return default if value is MISSING else value

    def __contains__(self, key: object) -> bool:
        value = self._data.get(key, MISSING)  # type: ignore[call-overload]
        self._view._note(f"{self._prefix}.{key}", value)
        return value is not MISSING

    def __iter__(self) -> Iterator[str]:
        self._view._note(self._prefix, sorted(self._data))
        return iter(self._data)

    def __len__(self) -> int:
        self._view._note(self._prefix, sorted(self._data))
        return len(self._data)


class RunView(ReadNotes):
    """What a rule may read about the run. Reads are noted per evaluation, as the values
    were (the engine turns them into evidence and into what it compares next time)."""

    __slots__ = (
        "_clock",
        "_history",
        "_iteration",
        "_last_results",
        "_random",
        "_skills",
        "_state",
        "_tracked_state",
        "_user",
    )

    def __init__(
        self,
        *,
        user_message: str,
        iteration: int,
        last_tool_results: Mapping[str, str],
        active_skills: frozenset[str],
        history: Sequence[Message],
        state: Mapping[str, Any],
        clock: Callable[[], datetime] | None = None,
        random: Callable[[], _random.Random] | None = None,
    ) -> None:
        self._clock = clock
        self._random = random
        self._user = user_message
        self._iteration = iteration
        self._last_results = last_tool_results
        self._skills = active_skills
        self._history = history
        self._state = state
        self._tracked_state: _Tracked | None = None
        self._reads: dict[str, Any] = {}

    # The two reads nearly every rule makes note themselves, without a call to _note.

    @property
    def user_message(self) -> str:
        """The message this turn started from."""
        if "user_message" not in self._reads:
            self._reads["user_message"] = self._user
        return self._user

    @property
    def iteration(self) -> int:
        """The iteration about to call the model, from 1."""
        if "iteration" not in self._reads:
            self._reads["iteration"] = self._iteration
        return self._iteration

    @property
    def last_tool_results(self) -> Mapping[str, str]:
        """Tool name -> the text the tool returned in the previous iteration."""
        return _Tracked(self, "last_tool_results", self._last_results)

    @property
    def active_skills(self) -> frozenset[str]:
        """Ids of the skills the model has activated this turn."""
        self._note("active_skills", sorted(self._skills))
        return self._skills

    @property
    def history(self) -> tuple[Message, ...]:
        """The conversation so far (user, assistant and tool messages)."""
        self._note("history", f"{len(self._history)} messages")
        return tuple(self._history)  # a snapshot: the run's own list goes on growing

    @property
    def state(self) -> Mapping[str, Any]:
        """Values the application put in the run's state (``run(..., state=...)``)."""
        tracked = self._tracked_state
        if tracked is None:
            tracked = self._tracked_state = _Tracked(self, "state", self._state)
        return tracked

    def _release(self) -> None:
        """Drop the state's tracker, which refers back to the view: without the cycle, the
        view of an iteration is freed as soon as the iteration is done with it, not left to
        the garbage collector (a view kept by a rule makes a new tracker when read)."""
        self._tracked_state = None

    def now(self) -> datetime:
        """The time, in UTC, from the run's recorded clock (a replay serves it back). A rule
        that reads it is decided again at every iteration, with the time as its evidence."""
        instant = self._clock() if self._clock is not None else datetime.now(UTC)
        self._note("now", instant.isoformat(timespec="microseconds"))
        return instant

    @property
    def random(self) -> _random.Random:
        """The iteration's random source, seeded from the run's recorded seed (a replay
        draws the same numbers). A rule that draws from it is decided again at every
        iteration."""
        self._note("random", "seeded")
        return self._random() if self._random is not None else _random.Random()
