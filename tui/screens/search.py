"""``/``: search every text in the recording, messages, segments, tool specs and results,
decisions, events, and list where each match is shown; Enter on one goes there. A flow's
screen searches the flow's own log first (each step's input, output, the state it wrote and
read, its error, each decision with its evidence, each merge, the answer: a match names its
step), then every agent's run of the flow, in the order the agents started, each match named
by its step and agent.

The file is scanned in chunks for the text as JSON writes it (case ignored for ASCII), off the
screen's thread, through the recording's own mapping (a file removed since it was opened, a
flow's run folded into its log, is searched still), its pages let go after each chunk; each
line that matches is then parsed to keep only matches in a string (not in a key or a hash)
and to cut a snippet around it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Input, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from afcore.errors import RecordingError
from afcore.readmodel import FlowText, Timeline, safe
from afcore.readmodel import line as one_line
from afcore.recording import Recording
from tui.locate import Place, locate
from tui.widgets.item_list import Item, ItemList

__all__ = ["LogMatch", "Match", "SearchScreen", "Source", "search", "search_texts"]

CHUNK = 8 * 1024 * 1024
RESULTS = 500
"""Matches listed at most."""


@dataclass(frozen=True)
class Match:
    line: int
    place: Place
    snippet: str
    source: int = 0
    """Which of the searched recordings it is in (its index among them)."""


@dataclass(frozen=True)
class LogMatch:
    """A match in a flow's own log: the value of a step that holds it."""

    text: FlowText
    snippet: str


@dataclass(frozen=True)
class Source:
    """A recording to search, with its timeline (to say where a match is shown)."""

    rec: Recording
    timeline: Timeline
    name: str = ""
    """What a match in it is called by (a flow's step and agent); "" for the one run."""


def _pattern(query: str) -> re.Pattern[bytes]:
    # The text as it stands in the file: JSON-escaped (quotes, backslashes, newlines).
    escaped = orjson.dumps(query)[1:-1]
    return re.compile(re.escape(escaped), re.IGNORECASE)


def search(
    rec: Recording,
    timeline: Timeline,
    query: str,
    stop: Callable[[], bool] = lambda: False,
    limit: int = RESULTS,
) -> Iterator[tuple[float, list[Match]]]:
    """The matches of ``query`` (``limit`` at most), a batch at a time with the share of
    the file scanned."""
    if not query or limit <= 0:
        return
    pattern = _pattern(query)
    wanted = query.lower()
    size = rec.indexed_bytes
    found = 0
    last = 0
    pos = 0
    while pos < size and found < limit and not stop():
        chunk = rec.read(pos, min(CHUNK, size - pos))
        rec.release_pages()  # a big file is not held in memory by a search through it
        if not chunk:
            break
        end = chunk.rfind(b"\n") + 1 if pos + len(chunk) < size else len(chunk)
        if end <= 0:
            end = len(chunk)  # one line longer than a chunk: scanned in pieces
        batch: list[Match] = []
        for hit in pattern.finditer(chunk, 0, end):
            line = rec.line_at(pos + hit.start())
            if line <= last or line > rec.line_count:
                continue
            last = line
            match = _match(rec, timeline, line, wanted)
            if match is not None:
                batch.append(match)
                found += 1
                if found >= limit:
                    break
        pos += end
        yield min(pos / max(size, 1), 1.0), batch


def search_texts(texts: Sequence[FlowText], query: str, limit: int = RESULTS) -> list[LogMatch]:
    """The values of a flow's log that hold ``query`` (case ignored), ``limit`` at most: in
    a string or a number they hold, not in a key."""
    wanted = query.lower()
    found: list[LogMatch] = []
    if not wanted:
        return found
    for text in texts:
        if len(found) >= limit:
            break
        try:
            value = _numbers_as_text(text.value)
        except RecursionError:  # a value the file nested past the stack: not searched
            continue
        snippet = _snippet(value, wanted)
        if snippet is not None:
            found.append(LogMatch(text, snippet))
    return found


def _numbers_as_text(value: Any) -> Any:
    """A step's value with its numbers as the text it shows (an invoice number searched
    for is found)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return [_numbers_as_text(v) for v in value.values()]
    if isinstance(value, list | tuple):
        return [_numbers_as_text(v) for v in value]
    return value


def _match(rec: Recording, timeline: Timeline, line: int, wanted: str) -> Match | None:
    try:
        data = rec.raw(line)
    except (ValueError, RecordingError):
        return None
    snippet = _snippet(data, wanted)
    if snippet is None:
        return None  # the text is in a key or a hash, not in anything written
    place = locate(rec, timeline, line)
    if place is None:
        return None
    return Match(line, place, snippet)


def _snippet(value: Any, wanted: str) -> str | None:
    """A short stretch around the first string in ``value`` that holds ``wanted``."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            at = v.lower().find(wanted)
            if at >= 0:
                start = max(0, at - 40)
                head = ("…" if start else "") + v[start : at + len(wanted) + 60]
                return one_line(head, 110)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return None


class SearchScreen(ModalScreen[Match | LogMatch | None]):
    BINDINGS = [Binding("escape", "dismiss", "Back", id="search.back")]

    def __init__(
        self, sources: Sequence[Source], query: str = "", texts: Sequence[FlowText] = ()
    ) -> None:
        """``texts``: a flow's own values (:func:`afcore.readmodel.flow_texts`), searched
        before ``sources``."""
        super().__init__()
        self.sources = list(sources)
        self.texts = list(texts)
        self.query_text = query
        self.matches: dict[str, Match | LogMatch] = {}
        self._pending: Timer | None = None

    def compose(self) -> ComposeResult:
        runs = f"{len(self.sources)} agents' runs" if len(self.sources) != 1 else "agent's run"
        with Vertical():
            yield Input(
                value=self.query_text,
                placeholder=f"search the flow's log and its {runs}"
                if self.texts
                else "search every text in the recording"
                if len(self.sources) == 1
                else f"search every text of the {runs}",
                id="query",
            )
            yield Static(Text("type to search · Enter: the results · Esc: back"), id="status")
            yield ItemList(id="results")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        if self.query_text:
            self.start(self.query_text)

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if self._pending is not None:
            self._pending.stop()
        value = event.value
        if value == self.query_text:
            # The input says its first value once mounted, and a query typed back to the
            # one searched needs no new search: a restart would clear the results and move
            # the highlight someone may have moved already.
            return
        self._pending = self.set_timer(0.25, lambda: self.start(value))

    @on(Input.Submitted)
    def _submitted(self) -> None:
        results = self.query_one(ItemList)
        if results.option_count:
            results.focus()

    def start(self, query: str) -> None:
        self.query_text = query
        self.matches = {}
        self.query_one(ItemList).fill([], keep=False)
        self._status(f"searching for {one_line(query, 60)}…" if query else "type to search")
        self._scan(query)

    @work(thread=True, exclusive=True, group="search")
    def _scan(self, query: str) -> None:
        worker = get_current_worker()
        many = len(self.sources)
        logged = search_texts(self.texts, query)
        found = len(logged)
        if logged:
            self.app.call_from_thread(self._add, query, logged, 0.0 if many else 1.0)
        for k, source in enumerate(self.sources):
            scanned = search(
                source.rec, source.timeline, query, lambda: worker.is_cancelled, RESULTS - found
            )
            for done, batch in scanned:
                if worker.is_cancelled:
                    return
                if k:
                    batch = [replace(m, source=k) for m in batch]
                found += len(batch)
                self.app.call_from_thread(self._add, query, batch, (k + done) / many)
            if found >= RESULTS:
                break
        if not worker.is_cancelled:
            self.app.call_from_thread(self._add, query, [], 1.0)

    def _add(self, query: str, batch: Sequence[Match | LogMatch], done: float) -> None:
        if query != self.query_text or not self.is_active:
            # Another query's, or handed over as the screen closed: its list is gone.
            return
        results = self.query_one(ItemList)
        for m in batch:
            item = Item(f"r{len(self.matches)}")
            self.matches[item.id] = m
            if isinstance(m, LogMatch):
                # A value of the flow's own log: its step, and what of it holds the text.
                text = Text(f"{safe(m.text.step) or '(the flow)'} · ", style="bold")
                text.append(safe(m.text.what), style="bold magenta")
                text.append(" · the flow's log\n", style="dim")
                text.append(m.snippet)
                results.items[item.id] = item
                results.add_option(Option(text, id=item.id))
                continue
            name = self.sources[m.source].name
            text = Text(f"{safe(name)} · " if name else "", style="bold")
            text.append(f"call {m.place.call}", style="bold cyan")
            text.append(f" · {safe(m.place.what)} · line {m.line}\n", style="dim")
            text.append(m.snippet)
            results.items[item.id] = item
            results.add_option(Option(text, id=item.id))
        if results.highlighted is None and results.option_count:
            results.highlighted = 0
        count = len(self.matches)
        full = " (the first ones; say more to narrow it)" if count >= RESULTS else ""
        where = "" if done >= 1.0 else f" · searching {done:.0%}"
        if any(source.rec.partial for source in self.sources):
            where += " of what is indexed so far"
        self._status(f"{count:,} matches{full}{where} · Enter goes there · Esc: back")

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(Text(text, style="dim"))

    @on(ItemList.OptionSelected)
    def _chosen(self, event: ItemList.OptionSelected) -> None:
        if event.option.id is not None and event.option.id in self.matches:
            self.dismiss(self.matches[event.option.id])
