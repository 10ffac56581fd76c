"""Folds of the live window in words, for ``af show`` and ``af run``'s progress.

A fold's value (the ``fold:<n>`` write of a ``window`` stage) comes from the file and may
be of any shape: :func:`checked` keeps the fields the words need, each of the type it
should be, and drops the rest. Every text these functions return is made safe to print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Struct, ValidationError, convert

from afcore.readmodel._text import line, plural, safe

if TYPE_CHECKING:
    from afcore.readmodel._model import FoldView, Refusal

__all__ = [
    "SUMMARIZER",
    "checked",
    "checked_json",
    "fold_number",
    "fold_text",
    "messages_text",
    "numbers_text",
    "window_text",
    "reasons_text",
    "refusal_texts",
    "seam_text",
    "writers_text",
]

SUMMARIZER = "summarize#"
"""The rsid prefix of a summarizer's call: a model call of the window, not of the agent."""

_REASONS = {
    "current_request": "the current request",
    "unresolved_tool_call": "an unresolved tool call",
    "last_tool_result": "the last tool result",
    "summarizer_failed": "the summarizer failed",
    "summary_not_smaller": "the summary was not smaller",
}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ranges(value: Any) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    if isinstance(value, list):
        for r in value:
            if isinstance(r, _PAIR) and len(r) == 2:
                a, b = _int(r[0]), _int(r[1])
                if a is not None and b is not None:
                    out.append((a, b))
    return out


_PAIR = (list, tuple)
"""What a range may be held in (a tuple of types: ``list | tuple`` is built anew each time it
is evaluated)."""


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def fold_number(key: str) -> int | None:
    """``fold:3`` -> 3; None for any other key."""
    number = key.removeprefix("fold:")
    return int(number) if key.startswith("fold:") and number.isdecimal() else None


_MODEL: list[Any] = []
"""FoldView and Refusal, once imported (an import statement costs a fold a quarter of its
checking)."""


def _import_model() -> None:
    # The text helpers start without the model: it is imported when needed.
    from afcore.readmodel import _model

    _MODEL.extend((_model.FoldView, _model.Refusal))


def checked(value: Any, fold: int) -> FoldView:
    """A fold's value with the fields the words need, each of its type (or None)."""
    if not _MODEL:
        _import_model()
    view, refusal = _MODEL
    v = value if isinstance(value, dict) else {}
    get = v.get
    summary = get("summary")
    if not isinstance(summary, dict):
        summary = None
    refusals = []
    listed = get("refusals")
    for r in listed if isinstance(listed, list) else []:
        if isinstance(r, dict):
            error, reason = r.get("error"), r.get("reason")
            refusals.append(
                refusal(
                    reason if isinstance(reason, str) else "?",
                    _ranges(r.get("messages")),
                    _strings(r.get("writers")),
                    error if isinstance(error, str) else None,
                )
            )
    count = _int(get("count"))
    messages = _ranges(get("messages"))
    strategy = get("strategy")
    # In the fields' order: fold, strategy, iteration, count, messages, folded, measured,
    # threshold, summary, summary_call, refusals (a big run has a fold a call).
    found: FoldView = view(
        fold,
        strategy if isinstance(strategy, str) else "?",
        _int(get("iteration")),
        count if count is not None else sum(b - a + 1 for a, b in messages),
        messages,
        _strings(get("folded")),
        _int(get("measured")),
        _int(get("threshold")),
        _int(summary.get("message")) if summary is not None else None,
        _int(summary.get("call")) if summary is not None else None,
        refusals,
    )
    return found


class _Summary(Struct):
    message: int | None = None
    call: int | None = None


class _Kept(Struct):
    reason: str = "?"
    messages: list[tuple[int, int]] = []
    writers: list[str] = []
    error: str | None = None


class _Fold(Struct):
    """A fold's value in the shape the window strategies write it: each field of its type,
    or absent."""

    strategy: str = "?"
    iteration: int | None = None
    count: int | None = None
    messages: list[tuple[int, int]] = []
    folded: list[str] = []
    measured: int | None = None
    threshold: int | None = None
    summary: _Summary | None = None
    refusals: list[_Kept] = []


def checked_json(value: Any, fold: int) -> FoldView:
    """:func:`checked` of a value parsed from JSON (its arrays are lists): one conversion
    for a value in the strategies' shape (a big run has a fold a call), :func:`checked` for
    any other. Not for other values: the conversion takes a tuple for a list, which
    :func:`checked` does not."""
    try:
        shape = convert(value, _Fold)
    except ValidationError:
        return checked(value, fold)
    if not _MODEL:
        _import_model()
    view, refusal = _MODEL
    summary, messages = shape.summary, shape.messages
    count = shape.count
    # In the fields' order, as in checked.
    found: FoldView = view(
        fold,
        shape.strategy,
        shape.iteration,
        count if count is not None else sum(b - a + 1 for a, b in messages),
        messages,
        shape.folded,
        shape.measured,
        shape.threshold,
        summary.message if summary is not None else None,
        summary.call if summary is not None else None,
        [refusal(r.reason, r.messages, r.writers, r.error) for r in shape.refusals],
    )
    return found


def writers_text(writers: list[str]) -> str:
    """``seed#0``, ``a, b`` or ``first .. last``."""
    if len(writers) > 2:
        return f"{safe(writers[0])} .. {safe(writers[-1])}"
    return ", ".join(safe(w) for w in writers)


def messages_text(ranges: list[tuple[int, int]]) -> str:
    """``message 1``, ``messages 12–13``, ``messages 10–12, 15``: in order, whatever order
    the ranges came in."""
    if len(ranges) == 1:
        a, b = ranges[0]
        count = b - a + 1
    else:
        count = sum(b - a + 1 for a, b in ranges)
    return f"{'message' if count == 1 else 'messages'} {numbers_text(ranges)}"


def numbers_text(ranges: list[tuple[int, int]] | list[list[int]]) -> str:
    """``1–2, 5–11``: message numbers in order, runs joined."""
    if len(ranges) == 1:  # most windows and folds: one run
        a, b = ranges[0]
        a, b = int(a), int(b)
        return f"{a}–{b}" if a != b else str(a)
    merged: list[list[int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return ", ".join(f"{a}–{b}" if a != b else str(a) for a, b in merged)


def window_text(window: list[list[int]], injected: list[int]) -> str:
    """A call's window in order: ``1–5, 7 (2, 5 injected, sent after the others)``."""
    text = numbers_text(window)
    listed = {n for a, b in window for n in range(a, b + 1)}
    sent = sorted(n for n in injected if n in listed)
    if sent and max(listed - set(sent), default=0) > sent[0]:
        # Out of number order only because injected messages go after the conversation.
        text += f" ({', '.join(map(str, sent))} injected, sent last)"
    return text


def _at(f: FoldView) -> str:
    return f" at iteration {f.iteration}" if f.iteration is not None else ""


def fold_text(f: FoldView, *, compact: bool = False) -> str:
    """``fold 1 at iteration 7: 12 messages (1–12) -> 1 summary by
    summarize_oldest; 41,210 tokens measured, threshold 30,000``. ``compact``: for a line
    under its iteration, ``fold 1: 12 messages -> 1 summary by summarize_oldest (41,210
    tokens over 30,000)``."""
    strategy = safe(f.strategy)
    head = f"fold {f.fold}{'' if compact else _at(f)}: "
    if compact and not f.count:
        head = f"fold {f.fold} by {strategy}: nothing left the window"
    elif f.count:
        which = "" if compact or not f.messages else numbers_text(f.messages)
        head += plural(f.count, "message") + (f" ({which})" if which else "")
        if f.summary is not None:
            head += f" -> 1 summary by {strategy}"
        else:
            head += f" -> dropped by {strategy}"
    else:
        head += f"nothing left the window ({strategy})"
    measured, threshold = f.measured, f.threshold
    if measured is not None and compact:
        head += f" ({measured:,} tokens" + (f" over {threshold:,})" if threshold else ")")
    elif measured is not None:
        head += f"; {measured:,} tokens measured"
        if threshold is not None:
            head += f", threshold {threshold:,}"
    return head


def _why(refusal: Refusal) -> str:
    why = _REASONS.get(refusal.reason, safe(refusal.reason))
    if refusal.error:
        why += f": {line(refusal.error, 300)}"
    return why


def reasons_text(f: FoldView) -> str:
    """The refusals' reasons on one line: ``kept: the current request, the last tool
    result``."""
    return "kept: " + ", ".join(_why(r) for r in f.refusals) if f.refusals else ""


def refusal_texts(f: FoldView) -> list[str]:
    """One line per refusal: ``kept: message 1: the current request``."""
    out = []
    for r in f.refusals:
        what = messages_text(r.messages) if r.messages else "messages"
        out.append(f"kept: {what}: {_why(r)}")
    return out


def seam_text(f: FoldView) -> str:
    """``── 8 messages folded by summarize_oldest at iteration 6 (fold 1) ──``."""
    strategy = safe(f.strategy)
    if not f.count:
        what = f"nothing left the window ({strategy})"
    elif f.summary is not None:
        what = f"{plural(f.count, 'message')} folded by {strategy}"
    else:
        what = f"{plural(f.count, 'message')} dropped by {strategy}"
    return f"── {what}{_at(f)} (fold {f.fold}) ──"
