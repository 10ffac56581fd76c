"""Replaying the live window from the log, to check that each agent call was sent the window
the folds before it left, and that every message a fold removed is accounted for.

The live window grows with the conversation (the messages written by `history` and `seed`,
by the replies to the agent's calls that were kept, and by tool stages) and changes only at
`window` stages: the messages a fold names leave, and its summary, if any, takes the place of the
first of them. A call's window is that live window followed by the injected messages
(written by `inject` stages).
Summarizer calls (`summarize#k`) are sent their transcript and checked by their hash only.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from afcore.recording._structs import Call, Commit, ContextEvicted, Reply

__all__ = ["WindowReplay"]

_LIMIT = 10_000_000
"""Larger ranges than this are not expanded (a hostile file could name 10**30 messages)."""


class WindowReplay:
    def __init__(self, value: Callable[[Any], Any], ref: Callable[[int], str | None]) -> None:
        self._value = value
        self._ref = ref
        """message n -> the id it was written under"""
        self.live: list[int] = []
        self._runs: list[tuple[int, int]] = []
        """``live`` as runs of consecutive numbers, as a call's window names them"""
        self.injected: set[int] = set()
        self.folds: dict[int, set[int]] = {}
        """fold -> the messages it removed and no evicted event named yet"""

    def commit(self, record: Commit, numbers: list[int] | None = None) -> list[str]:
        """``numbers``: of the messages it writes, when the caller has read them already."""
        if numbers is None:
            numbers = _numbers(record.writes)
        stage = record.stage
        if stage.startswith("tool:") or stage in _JOINING:
            self.join(numbers)  # what joins the history (see the writer's joins_history)
        elif stage == "inject":
            self.injected.update(numbers)
        elif stage == "window":
            return self._fold(record, numbers)
        return _NO_PROBLEMS

    def join(self, numbers: list[int]) -> None:
        """Messages ``numbers`` join the live window (a tool's commit, a kept reply, ...)."""
        self.live.extend(numbers)
        runs = self._runs
        if len(numbers) == 1 and runs:  # _runs's, inline: most stages write one message
            n = numbers[0]
            a, b = runs[-1]
            if b + 1 == n:
                runs[-1] = (a, n)
            else:
                runs.append((n, n))
        else:
            _runs(runs, numbers)

    def reply(self, record: Reply, numbers: list[int] | None = None) -> None:
        # An answer a reliability rule refused is kept in the file but joins no window.
        kept = record.decision is None or record.decision.verb == "ok"
        if kept and record.rsid.startswith("call-llm#"):
            self.join(_numbers(record.writes) if numbers is None else numbers)

    def call(self, record: Call) -> str | None:
        """Why the call's window is not the live window (None when it is)."""
        if not record.rsid.startswith("call-llm#"):
            return None
        if record.window == self._runs and not self.injected:
            # The same ranges: the same messages, seen without expanding a window that grows
            # with the run at every call (which would make the check quadratic in the run).
            return None
        sent = _expand(record.window)
        if sent is None:
            return None  # ranges out of bounds are reported by verify itself
        injected = self.injected
        conversation = (  # filtered in Python only when an injected message is in it
            sent
            if not injected or injected.isdisjoint(sent)
            else [n for n in sent if n not in injected]
        )
        if conversation == self.live:
            return None
        sent_set, live_set = set(conversation), set(self.live)
        missing = [n for n in self.live if n not in sent_set]
        extra = [n for n in conversation if n not in live_set]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"messages {_short(missing)} should be in it")
            if extra:
                parts.append(f"messages {_short(extra)} should not (folded or never written)")
            return "its window differs from what the folds before it leave: " + "; ".join(parts)
        return "its window holds the live messages in another order"

    def evicted(self, record: ContextEvicted) -> str | None:
        pending = self.folds.get(record.fold)
        if pending is None or record.message not in pending:
            return f"message {record.message} was not folded by fold {record.fold}"
        pending.discard(record.message)
        if not pending:  # all accounted for: its set's memory goes, the verdicts stay
            self.folds[record.fold] = _NONE_LEFT
        ref = self._ref(record.message)
        if ref is not None and ref != record.hash:
            return (
                f"message {record.message} left with hash {record.hash[:12]}, but it was "
                f"written as {ref[:12]}"
            )
        return None

    def unaccounted(self) -> list[str]:
        """Folds whose removed messages have no context_evicted event."""
        return [
            f"fold {fold} removed messages {_short(sorted(left))} without a context_evicted event"
            for fold, left in self.folds.items()
            if left
        ]

    def _fold(self, record: Commit, numbers: list[int]) -> list[str]:
        writes = record.writes
        fold_write = (
            writes[0]  # as af writes a fold: its one write
            if len(writes) == 1 and writes[0].key.startswith("fold:")
            else next((w for w in writes if w.key.startswith("fold:")), None)
        )
        if fold_write is None:
            return ["a window stage writes no fold"]
        try:
            fold = int(fold_write.key.removeprefix("fold:"))
            value = self._value(fold_write)
        except (KeyError, ValueError):
            return [f"{fold_write.key} cannot be read"]
        listed = value.get("messages") if isinstance(value, dict) else None
        removed = _expand(listed) if isinstance(listed, list) else None
        if removed is None:
            return [f"{fold_write.key} does not say which messages left"]
        gone = set(removed)
        problems = []
        window = self.live
        at = _index(window, removed[0]) if removed else -1
        end = at + len(removed)
        if (
            at >= 0
            and window[at:end] == removed
            and gone.isdisjoint(window[:at])
            and gone.isdisjoint(window[end:])
        ):
            # As a fold removes them, together: each is in the window, the first of them at
            # ``at``, and what stays is the window less that stretch (what the lines below
            # work out, in C).
            kept = window[:at] + window[end:]
        else:
            live = set(window)
            absent = [n for n in removed if n not in live]
            if absent:
                problems.append(
                    f"{fold_write.key} removes messages {_short(absent)}, not in the window"
                )
            at = next((i for i, n in enumerate(window) if n in gone), len(window))
            kept = [n for n in window if n not in gone]
        summaries = [n for n in numbers if n not in gone] if numbers else numbers
        self.live = live_now = kept[:at] + summaries + kept[at:]
        # _runs([], live_now), cut where a number is not one more than the one before: a
        # window stage comes at every iteration of a run under a sliding window.
        cuts = [k for k, (a, b) in enumerate(pairwise(live_now), 1) if b != a + 1]
        bounds = [0, *cuts, len(live_now)] if live_now else []
        self._runs = [(live_now[s], live_now[e - 1]) for s, e in pairwise(bounds)]
        self.folds[fold] = gone
        return problems


_JOINING = frozenset({"history", "seed", "output"})
"""Stages whose messages join the history, with the tools' (``tool:<name>``)."""
_NO_PROBLEMS: list[str] = []
"""What :meth:`WindowReplay.commit` gives for a stage with nothing wrong (never added to)."""

_NONE_LEFT: set[int] = set()
"""Shared by the folds all of whose messages were accounted for: never added to (a message is
discarded only when it is in the set)."""


def _numbers(writes: list[Any]) -> list[int]:
    return [n for n in (_number(w.key) for w in writes) if n is not None]


def _number(key: str) -> int | None:
    if not key.startswith("message:"):
        return None
    try:
        return int(key[8:])
    except ValueError:
        return None


def _runs(runs: list[tuple[int, int]], numbers: list[int]) -> list[tuple[int, int]]:
    """``runs`` extended by ``numbers``: each number one more than the last extends its run."""
    for n in numbers:
        if runs and runs[-1][1] + 1 == n:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


_PAIR = (list, tuple)


def _expand(ranges: Any) -> list[int] | None:
    out: list[int] = []
    for r in ranges:
        if not (isinstance(r, _PAIR) and len(r) == 2):
            return None
        a, b = r
        if not (isinstance(a, int) and isinstance(b, int)) or not 0 <= b - a < _LIMIT:
            return None
        out.extend(range(a, b + 1))
        if len(out) > _LIMIT:
            return None
    return out


def _index(numbers: list[int], n: int) -> int:
    """Where ``n`` first is in ``numbers`` (-1: nowhere)."""
    try:
        return numbers.index(n)
    except ValueError:
        return -1


def _short(numbers: list[int]) -> str:
    text = ", ".join(map(str, numbers[:8]))
    return text + (f" and {len(numbers) - 8} more" if len(numbers) > 8 else "")
