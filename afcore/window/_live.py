"""The live window of a run with a window strategy, kept up to date as messages arrive and
folds remove them, so that neither a call nor a strategy's visit walks the whole window in
Python: the turns, the messages as sent and the window's ranges of message numbers are
updated in place (a fold costs what leaves and the number of turns, not every message).

(The verifier replays the same window from a recording's records; this is the loop's.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from afcore.messages import Message, ToolResultMessage
from afcore.window._turns import LiveMessage, count_into

__all__ = ["LiveWindowState"]


class LiveWindowState:
    """The live window while a run goes: what the next call is sent, in turns."""

    def __init__(self) -> None:
        self.items: list[LiveMessage] = []
        self.messages: list[Message] = []
        """The messages as sent, in window order."""
        self.ranges: list[tuple[int, int]] = []
        """The messages' numbers as inclusive ranges, in window order."""
        self.sizes: list[int] = []
        """How many messages each turn holds, oldest first (see ``_turns``): a fold deletes
        entries instead of renumbering every turn after it."""
        self.folded = False
        """Whether a fold has changed the window: until then it is the whole history."""
        self._open: set[str] = set()
        """The tool calls of the newest reply, which its results join."""
        self.refusals: dict[tuple[int, int, int, str], tuple[Any, Any, Any]] = {}
        """What the loop made of turns that refused to leave (kept by their first and last
        messages' ids), for the next visit that finds them refusing again."""

    def __len__(self) -> int:
        return len(self.items)

    def append(self, item: LiveMessage) -> None:
        self._open = count_into(self.sizes, self._open, item.message)
        self.items.append(item)
        self.messages.append(item.message)
        _extend(self.ranges, item.n)

    def remove(self, first: int, last: int, summary: LiveMessage | None = None) -> None:
        """Remove positions ``first``..``last`` (whole turns), putting ``summary`` (a turn of
        its own) in their place."""
        count = last - first + 1
        if summary is None:
            del self.items[first : last + 1]
            del self.messages[first : last + 1]
            self.ranges = _cut(self.ranges, first, count, ())
            put = 0
        else:
            self.items[first : last + 1] = [summary]
            self.messages[first : last + 1] = [summary.message]
            self.ranges = _cut(self.ranges, first, count, (summary.n,))
            put = 1
        # The turns from position `first` to `last` are whole: find them by their sizes.
        sizes = self.sizes
        k = pos = 0
        while pos < first:
            pos += sizes[k]
            k += 1
        j, covered = k, 0
        while covered < count:
            covered += sizes[j]
            j += 1
        sizes[k:j] = [1] * put
        self.folded = True

    def newest_result(self) -> int | None:
        """The position of the newest tool result (looked for from the end)."""
        for i in range(len(self.items) - 1, -1, -1):
            if isinstance(self.messages[i], ToolResultMessage):
                return i
        return None


def _extend(ranges: list[tuple[int, int]], n: int) -> None:
    if ranges and ranges[-1][1] == n - 1:
        ranges[-1] = (ranges[-1][0], n)
    else:
        ranges.append((n, n))


def _cut(
    ranges: Sequence[tuple[int, int]], first: int, count: int, put: Sequence[int]
) -> list[tuple[int, int]]:
    """``ranges`` (window order) with ``count`` positions from ``first`` replaced by the
    numbers ``put``: interval arithmetic over the few ranges, not the many messages."""
    if not put:
        # A drop inside one range that leaves some of it (the oldest turn of a sliding
        # window): that range shrinks or splits, and its neighbours stay as they are (no
        # number is in the window twice, so nothing new becomes consecutive).
        pos = 0
        for i, (a, b) in enumerate(ranges):
            size = b - a + 1
            if pos + size > first:
                lo, hi = first - pos, first - pos + count  # offsets in this range
                if hi < size or (lo > 0 and hi == size):
                    kept = [(a, a + lo - 1)] if lo else []
                    if hi < size:
                        kept.append((a + hi, b))
                    return [*ranges[:i], *kept, *ranges[i + 1 :]]
                break
            pos += size
    out: list[tuple[int, int]] = []
    pos = 0
    inserted = False
    end = first + count  # the first position after the cut
    for a, b in ranges:
        size = b - a + 1
        lo, hi = pos, pos + size  # this range's positions: lo..hi-1
        if hi <= first or lo >= end:
            if lo >= end and not inserted:
                for n in put:
                    _extend(out, n)
                inserted = True
            _join(out, a, b)
        else:
            if lo < first:
                _join(out, a, a + (first - lo) - 1)
            if not inserted:
                for n in put:
                    _extend(out, n)
                inserted = True
            if hi > end:
                _join(out, a + (end - lo), b)
        pos = hi
    if not inserted:
        for n in put:
            _extend(out, n)
    return out


def _join(out: list[tuple[int, int]], a: int, b: int) -> None:
    if out and out[-1][1] == a - 1:
        out[-1] = (out[-1][0], b)
    else:
        out.append((a, b))
