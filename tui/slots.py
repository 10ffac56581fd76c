"""The three slots of the selected call, exactly as sent: SYSTEM (each segment with its source
in the gutter, its cache policy, and what is new since the agent's call before), MESSAGES (the
window, each message with its role and the stage that wrote it, tool calls and their results
paired, a seam where a fold took messages out, which opens to show them) and TOOLS (each with
its source, and what came and went).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from rich.text import Text
from textual.visual import VisualType

from afcore.errors import RecordingError
from afcore.readmodel import (
    CallDetail,
    CallView,
    FoldMark,
    FoldView,
    MessageEntry,
    Provenance,
    Removed,
    Seam,
    as_dict,
    as_text,
    block_text,
    checked,
    fold_text,
    params_text,
    plural,
    reasons_text,
    safe,
    seam_text,
    window_text,
)
from afcore.recording import Recording
from tui.text import args_line, preview, source_label
from tui.widgets.item_list import Item, Part, Row, heading, row, rule

__all__ = ["FOLDED_SHOWN", "ROWS_KEPT", "Rows", "slot_entries"]

FOLDED_SHOWN = 200
"""Messages an open seam lists at most."""

ARGS = 400
"""Characters of a tool call's arguments shown (they wrap); all of them are in the file."""
ROWS_KEPT = 2000
"""Messages kept drawn, for the calls around the selection."""

Entry = tuple[VisualType, Item | None]
Rows = OrderedDict[tuple[Any, ...], tuple["Row", str | None]]


def slot_entries(
    view: CallView, rec: Recording, opened: set[int], width: int, rows: Rows | None = None
) -> Iterator[Entry]:
    """The slots' items; ``rows``: messages already drawn, kept from call to call."""
    rows = OrderedDict() if rows is None else rows
    d = view.detail
    if d is None:
        yield Text(f"✗ {safe(view.problem or 'this call cannot be read')}", style="red"), None
        return
    if d.system is None or d.messages is None or d.tools is None:
        yield (
            Text(
                "✗ the request cannot be rebuilt from this file: "
                + safe(str(d.verification.problem)),
                style="red",
            ),
            None,
        )
        return
    if view.note:
        yield Text(safe(view.note), style="yellow"), None
    previous = d.previous_call
    since = f" since call {previous}" if previous is not None else ""
    removed = d.removed or Removed([], [], [])
    yield from _system(d, removed, since)
    yield Text(""), None
    yield from _messages(d, d.messages, removed, since, rec, opened, width, rows, view.earlier)
    yield Text(""), None
    yield from _tools(d, removed, since)


def _changes(changes: list[str | None], since: str) -> Text:
    new = changes.count("new")
    changed = changes.count("changed")
    parts = [f"{new} new" if new else "", f"{changed} changed" if changed else ""]
    said = ", ".join(p for p in parts if p)
    return Text(f" · {said}{since}" if said and since else "", style="yellow")


def _badge(change: Any) -> Text:
    return Text(f"\n{change}", style="bold yellow") if change else Text("")


def _why_line(p: Provenance | None) -> Text | None:
    """For context an injection put there: why it fired, when that says more than its
    trigger (the gutter names the trigger and the cache policy)."""
    if p is None or p.source in (None, "base", "configure", "static"):
        return None
    trigger, reason = as_text(p.trigger), as_text(p.reason)
    if not reason or reason in (trigger, "always"):
        return None
    return Text(safe(reason)[:600], style="dim italic")


def _system(d: CallDetail, removed: Removed, since: str) -> Iterator[Entry]:
    system = d.system or []
    total = sum(len(s.text) for s in system)
    note = Text(f"{plural(len(system), 'segment')} · {total:,} chars", style="dim")
    note.append_text(_changes([s.change for s in system], since))
    yield heading("SYSTEM", note), None
    for seg in system:
        p = seg.provenance
        gutter = Text(source_label(p.source, p.id, p.trigger), style="magenta")
        if p.cache:
            gutter.append(f"\ncache {safe(as_text(p.cache))}", style="dim")
        gutter.append_text(_badge(seg.change))
        body, hidden = preview(seg.text)
        why = _why_line(p)
        key = f"system:{p.id}" if p.id else f"call:{d.call}"
        item = Item(
            f"seg:{seg.position}",
            full=seg.text if hidden else None,
            title=f"call {d.call} · system segment {seg.position}",
            why=key,
        )
        yield (row(gutter, why, body) if why is not None else row(gutter, body)), item
        if seg.cache_breakpoint:
            yield rule("cache breakpoint"), None
    for gone in removed.system:
        label = source_label(gone.source, gone.id)
        yield Text(f"  gone{since}: {label}", style="yellow"), None


def _messages(
    d: CallDetail,
    messages: list[MessageEntry],
    removed: Removed,
    since: str,
    rec: Recording,
    opened: set[int],
    width: int,
    rows: Rows,
    earlier: list[FoldMark],
) -> Iterator[Entry]:
    injected = [m.n for m in messages if (m.writer or "").startswith("inject#")]
    window = window_text(d.window, injected)
    note = Text(f"{plural(len(messages), 'message')} · window {window}", style="dim")
    note.append_text(_changes([m.change for m in messages], since))
    yield heading("MESSAGES", note), None
    seams: dict[int | None, list[Seam]] = {}
    for seam in d.seams or []:
        seams.setdefault(seam.before, []).append(seam)
    results = _results(messages)
    calls = _calls(messages)
    earlier = [f for f in earlier if f.count]
    # The messages earlier folds took out were where the first message after them is now.
    first = min((f.first for f in earlier if f.first is not None), default=None)
    for msg in messages:
        if earlier and first is not None and msg.n > first:
            yield from _earlier(earlier, rec, opened)
            earlier = []
        for seam in seams.pop(msg.n, []):
            yield from _seam(seam.fold, rec, opened)
        yield _message(d, msg, results, calls, width, rows)
    if earlier:
        yield from _earlier(earlier, rec, opened)
    for seam in seams.pop(None, []) + [s for ss in seams.values() for s in ss]:
        yield from _seam(seam.fold, rec, opened)
    for gone in removed.messages:
        if gone.fold is not None:
            continue  # its seam says where it went
        what = f"#{gone.n}"
        if gone.source:
            what += f" {source_label(gone.source, gone.id)}"
        yield Text(f"  gone{since}: {what}", style="yellow"), None


def _results(messages: list[MessageEntry]) -> dict[str, int]:
    """tool call id -> the message in the window that answers it."""
    return {
        as_text(m.message.get("tool_call_id")): m.n
        for m in messages
        if m.role == "tool" and m.message.get("tool_call_id")
    }


def _calls(messages: list[MessageEntry]) -> dict[str, tuple[int, str]]:
    """tool call id -> the assistant message that asked for it, and the tool's name."""
    out: dict[str, tuple[int, str]] = {}
    for m in messages:
        content = m.content
        for block in content if isinstance(content, list) else []:
            b = as_dict(block)
            if b.get("type") == "tool_call" and b.get("id"):
                out[as_text(b["id"])] = (m.n, as_text(b.get("name")))
    return out


def _message(
    d: CallDetail,
    msg: MessageEntry,
    results: dict[str, int],
    calls: dict[str, tuple[int, str]],
    width: int,
    rows: Rows,
) -> Entry:
    role = as_text(msg.role) or "?"
    # Calls next to each other share most of their window: a message drawn for one is
    # drawn for the next unless what is said about it there differs.
    key = (
        msg.n,
        width,
        msg.change,
        *_placed(msg.provenance),
        msg.writer,
        calls.get(as_text(msg.message.get("tool_call_id"))),
        tuple(results.get(id) for id in _asked(msg)),
    )
    cached = rows.get(key)
    if cached is None:
        cached = _message_row(msg, role, results, calls, width)
        rows[key] = cached
        while len(rows) > ROWS_KEPT:
            rows.popitem(last=False)
    else:
        rows.move_to_end(key)
    drawn, full = cached
    item = Item(
        f"msg:{msg.n}",
        full=full,
        title=f"call {d.call} · message #{msg.n} ({safe(role)})",
        why=f"message:{msg.n}",
    )
    return drawn, item


def _placed(p: Provenance | None) -> tuple[str | None, ...]:
    """What a row says of where a message came from."""
    if p is None:
        return (None,) * 5
    return (p.source, p.id, p.trigger, p.reason, p.cache)


def _asked(msg: MessageEntry) -> list[str]:
    """The ids of the tool calls a message asks for."""
    content = msg.content
    return [
        as_text(b.get("id"))
        for b in (as_dict(x) for x in (content if isinstance(content, list) else []))
        if b.get("type") == "tool_call"
    ]


def _message_row(
    msg: MessageEntry,
    role: str,
    results: dict[str, int],
    calls: dict[str, tuple[int, str]],
    width: int,
) -> tuple[Row, str | None]:
    gutter = Text(f"#{msg.n} ", style="dim")
    gutter.append(safe(role), style="bold")
    if role == "tool":
        gutter.append(f" {safe(as_text(msg.message.get('name')))}", style="cyan")
        if msg.message.get("is_error"):
            gutter.append(" error", style="red")
    p = msg.provenance
    if p is not None and p.source is not None:
        label = source_label(p.source, p.id, p.trigger)
        gutter.append(f"\n{label}", style="magenta")
    gutter.append_text(_badge(msg.change))
    parts: list[Part] = []
    why = _why_line(p)
    if why is not None:
        parts.append(why)
    if role == "tool":
        asked = calls.get(as_text(msg.message.get("tool_call_id")))
        if asked is not None:
            parts.append(Text(f"← answers {safe(asked[1])} asked in #{asked[0]}", style="dim"))
        else:
            parts.append(Text("← its call is not in this window", style="yellow"))
    full, hidden_total = "", 0
    content = msg.content
    for part in content if isinstance(content, list) else [content]:
        b = as_dict(part)
        if isinstance(part, dict) and b.get("type") == "tool_call":
            answered = results.get(as_text(b.get("id")))
            call = Text.assemble(
                ("→ ", "cyan"),
                (safe(as_text(b.get("name"))), "bold cyan"),
                ("(", "dim"),
                args_line(b.get("args"), ARGS),
                (")", "dim"),
            )
            call.append(
                f"  ⇢ #{answered}" if answered is not None else "  ⇢ no result in this window",
                style="dim" if answered is not None else "yellow",
            )
            parts.append(call)
            continue
        if isinstance(part, dict) and b.get("type") in ("thinking", "opaque"):
            parts.append(Text(block_text(b), style="dim italic"))
            continue
        text = as_text(b.get("text")) if b.get("type") == "text" else as_text(part)
        shown, hidden = preview(text)
        parts.append(shown)
        full += text
        hidden_total += hidden
    return row(gutter, *parts), full if hidden_total else None


def _seam(f: FoldView, rec: Recording, opened: set[int]) -> Iterator[Entry]:
    number = f.fold
    is_open = number in opened
    text = Text("▾ " if is_open else "▸ ", style="bold yellow")
    text.append(seam_text(f), style="bold yellow")
    said = reasons_text(f)
    said += (" · " if said else "") + ("Enter hides them" if is_open else "Enter shows them")
    lines: list[Part] = [text, (4, Text(said, style="dim"))]
    yield row(None, *lines), Item(f"seam:{number}", seam=number, why=f"fold:{number}")
    if not is_open:
        return
    shown = 0
    for a, b in f.messages:
        for m in range(a, b + 1):
            if shown >= FOLDED_SHOWN:
                left = f.count - shown
                yield Text(f"   … and {left:,} more folded messages", style="dim"), None
                return
            shown += 1
            yield _folded(rec, number, m)
    yield Text("   ── end of fold ──", style="dim yellow"), None


EARLIER = -1
"""The seam number of the folds before the ones a call's own seams show."""


def _earlier(folds: list[FoldMark], rec: Recording, opened: set[int]) -> Iterator[Entry]:
    """One seam for the folds before: how many messages they took out, and when."""
    is_open = EARLIER in opened
    count = sum(f.count for f in folds)
    strategies = ", ".join(sorted({safe(f.strategy) for f in folds}))
    iterations = [f.iteration for f in folds if f.iteration is not None]
    when = f", iterations {min(iterations)}–{max(iterations)}" if iterations else ""
    text = Text("▾ " if is_open else "▸ ", style="yellow")
    text.append(
        f"── {plural(count, 'message')} left in {plural(len(folds), 'earlier fold')} "
        f"({strategies}{when})",
        style="yellow",
    )
    hint = Text("Enter hides them" if is_open else "Enter shows them", style="dim")
    yield row(None, text, (4, hint)), Item("seam:earlier", seam=EARLIER)
    if not is_open:
        return
    shown = 0
    for mark in folds:
        f = _fold_value(rec, mark)
        yield Text(f"   {fold_text(f, compact=True)}", style="dim yellow"), None
        for a, b in f.messages:
            for m in range(a, b + 1):
                if shown >= FOLDED_SHOWN:
                    yield Text(f"   … and {count - shown:,} more", style="dim"), None
                    return
                shown += 1
                yield _folded(rec, mark.number, m)
    yield Text("   ── end of the earlier folds ──", style="dim yellow"), None


def _fold_value(rec: Recording, mark: FoldMark) -> FoldView:
    """The fold written on ``mark``'s line, its fields checked."""
    try:
        writes = as_dict(rec.raw(mark.line)).get("writes") or []
        value = next(
            (rec.value(w) for w in writes if as_dict(w).get("key") == f"fold:{mark.number}"),
            None,
        )
    except (KeyError, ValueError, RecordingError):
        value = None
    return checked(value, mark.number)


def _folded(rec: Recording, fold: int, n: int) -> Entry:
    """A message a fold took out of the window, read back from the file."""
    try:
        msg = as_dict(rec.message(n))
        writer = rec.message_writer(n)
    except (KeyError, IndexError, ValueError, RecordingError) as e:
        return Text(f"   #{n}: cannot be read ({safe(str(e))})", style="red"), None
    role = as_text(msg.get("role")) or "?"
    gutter = Text(f"#{n} ", style="dim")
    gutter.append(safe(role), style="dim bold")
    gutter.append(f"\n{safe(writer)}\nfolded", style="dim yellow")
    content = msg.get("content")
    texts = []
    for part in content if isinstance(content, list) else [content]:
        b = as_dict(part)
        if b.get("type") == "tool_call":
            texts.append(f"→ {as_text(b.get('name'))}({args_line(b.get('args'), 200)})")
        elif b.get("type") == "text":
            texts.append(as_text(b.get("text")))
        elif b.get("type") in ("thinking", "opaque"):
            texts.append(block_text(b))
        else:
            texts.append(as_text(part))
    text = "\n".join(texts)
    body, hidden = preview(text, lines=6)
    body.stylize("dim")
    item = Item(
        f"folded:{fold}:{n}",
        full=text if hidden else None,
        title=f"message #{n} ({role}), folded in fold {fold}",
        why=f"message:{n}",
    )
    return row(gutter, body), item


def _tools(d: CallDetail, removed: Removed, since: str) -> Iterator[Entry]:
    tools = d.tools or []
    note = Text(plural(len(tools), "tool"), style="dim")
    note.append_text(_changes([t.change for t in tools], since))
    added = [t.name for t in tools if t.change == "new"]
    gone = [t.name for t in removed.tools]
    if since and (added or gone):
        moves = " ".join(
            [f"+{safe(as_text(t))}" for t in added] + [f"-{safe(as_text(t))}" for t in gone]
        )
        note.append(f" · {moves}", style="yellow")
    yield heading("TOOLS", note), None
    for spec in tools:
        source, id = as_text(spec.source), spec.id
        if source == "skill" and id == "read_skill":
            gutter = Text("skill catalog", style="magenta")
        else:
            gutter = Text(source_label(source, id), style="magenta")
        gutter.append_text(_badge(spec.change))
        params = params_text(spec.input_schema)
        head = Text.assemble(
            (safe(as_text(spec.name)), "bold cyan"), ("(", "dim"), safe(params), (")", "dim")
        )
        if spec.spec.get("strict") is True:
            head.append("  strict", style="yellow")
        description, hidden = preview(as_text(spec.description), lines=4)
        item = Item(
            f"tool:{as_text(spec.name)}",
            full=as_text(spec.description) if hidden else None,
            title=f"call {d.call} · tool {safe(as_text(spec.name))}",
            why=f"tools@{d.call}",
        )
        description.stylize("dim")
        yield row(gutter, head, description), item
        if spec.cache_breakpoint:
            yield rule("cache breakpoint"), None
    for t in removed.tools:
        label = source_label(t.source, t.id)
        yield Text(f"  gone{since}: {safe(as_text(t.name))} ({label})", style="yellow"), None
