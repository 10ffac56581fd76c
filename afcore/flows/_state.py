"""A flow's state: one scope every step reads and writes, and the view ``s`` through which
they do, which notes what was read (a predicate's evidence) and what was written (a step's
writes), as injection rules' views do.

Steps of a Parallel run at the same time. A write is attributed to the step that made it:
through its own view, or, for an agent's tools writing ``ctx.state``, through the step whose
task is running (a context variable; a sync tool's thread runs in its step's context).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from typing import Any

from afcore.errors import UsageError
from afcore.injections._view import MISSING, ReadNotes, _Tracked

__all__ = ["FlowView", "Scope", "Writes", "writing"]


class Writes:
    """What one step wrote to the state, key -> the last value written, in first-write
    order (a key removed: MISSING)."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def note(self, key: str, value: Any) -> None:
        self.values[key] = value


_writer: ContextVar[Writes | None] = ContextVar("af_flow_writer", default=None)


def writing(writes: Writes | None) -> Any:
    """Make ``writes`` the step that writes made in this task (and the tasks and threads it
    starts) are attributed to; returns the token to reset it with."""
    return _writer.set(writes)


def reset_writing(token: Any) -> None:
    _writer.reset(token)


class Scope(dict[str, Any]):
    """The flow's state: a dict (agents' rules and tools get it as their run's ``state``)
    whose writes are noted against the step making them."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        writes = _writer.get()
        if writes is not None:
            writes.note(key, value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        writes = _writer.get()
        if writes is not None:
            writes.note(key, MISSING)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self) -> tuple[str, Any]:
        key = next(reversed(self))
        return key, self.pop(key)

    def clear(self) -> None:
        for key in list(self):
            del self[key]

    def __ior__(self, other: Any) -> Scope:  # type: ignore[override,misc]
        self.update(other)
        return self


class FlowView(ReadNotes, MutableMapping[str, Any]):
    """``s``: the flow's state as a step, a predicate or a merge sees it.

    ``s["key"]``, ``s.get("key")`` and ``"key" in s`` read the state; every value read is
    noted (``state.key``, a key looked up and missing too), and becomes the evidence of a
    predicate's decision and the reads of a step in the recording. Each step's output is in
    the state under the step's name. ``s["key"] = value`` writes, in a step or a merge; a
    predicate only reads.
    """

    __slots__ = ("_input", "_scope", "_tracked", "_turn", "_user", "_writes")

    def __init__(
        self,
        scope: Scope,
        *,
        input: Any,
        user_message: str,
        turn: int | None = None,
        writes: Writes | None = None,
    ) -> None:
        self._scope = scope
        self._input = input
        self._user = user_message
        self._turn = turn
        self._writes = writes
        self._reads: dict[str, Any] = {}
        self._tracked = _Tracked(self, "state", scope)

    @property
    def message(self) -> Any:
        """The message at this point of the flow: what the step (or the branch a predicate
        chooses) is given; in a loop's ``until``, what the turn just ended with."""
        self._note("message", self._input)
        return self._input

    @property
    def user_message(self) -> str:
        """The message the flow was run on."""
        self._note("user_message", self._user)
        return self._user

    @property
    def turn(self) -> int | None:
        """In a loop, the turn that is running (or, in ``until``, that just ended), from 1;
        None outside loops."""
        self._note("turn", self._turn)
        return self._turn

    def __getitem__(self, key: str) -> Any:
        return self._tracked[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._tracked.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._tracked

    def __iter__(self) -> Iterator[str]:
        return iter(self._tracked)

    def __len__(self) -> int:
        return len(self._tracked)

    def __setitem__(self, key: str, value: Any) -> None:
        if self._writes is None:
            raise UsageError(
                f"a predicate reads the flow's state and writes nothing (it set {key!r}); "
                "write in a step"
            )
        if not isinstance(key, str):
            raise UsageError(f"the flow's state has string keys, got {type(key).__name__}")
        token = writing(self._writes)
        try:
            self._scope[key] = value
        finally:
            reset_writing(token)

    def __delitem__(self, key: str) -> None:
        if self._writes is None:
            raise UsageError(f"a predicate reads the flow's state and deletes nothing ({key!r})")
        token = writing(self._writes)
        try:
            del self._scope[key]
        finally:
            reset_writing(token)

    def __repr__(self) -> str:
        return f"<flow state {sorted(self._scope)}>"


def evidence(reads: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A view's reads as the recording's evidence, ``[key, value]`` each, values cut to a
    line as a rule's are."""
    from afcore.injections._view import preview

    return [(k, preview(v)) for k, v in reads.items()]


def keys_read(reads: Iterable[str]) -> list[str]:
    """The state keys among a view's reads (``state.intent`` -> ``intent``)."""
    return [k.removeprefix("state.") for k in reads if k.startswith("state.")]
