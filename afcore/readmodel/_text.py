"""Plain text from a recording, for both front ends (``af`` and the Lens).

Everything a model, a tool or a recording wrote is untrusted text: it goes through
:func:`safe` (no control character or escape sequence reaches the terminal) before a front
end shows it, and a front end shows it as literal text (so ``[bold]`` stays literal). Long
values are cut with the cut stated. Nothing here knows about Rich or Textual.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson
from orjson import dumps

from afcore.recording._typed import beyond_defaults

if TYPE_CHECKING:
    from afcore.recording import UsageInfo

__all__ = [
    "args_text",
    "block_text",
    "stop_text",
    "as_dict",
    "as_text",
    "evidence_text",
    "json_text",
    "line",
    "more_text",
    "ms_text",
    "params_text",
    "plural",
    "safe",
    "result_notes",
    "shown_status",
    "status_style",
    "usage_json",
    "usage_text",
]

# C0 controls but newline and tab, DEL, C1 controls; bidi overrides and isolates and the
# Unicode line/paragraph separators, which can reorder or break what a reader sees;
# zero-width characters and direction marks (U+200B-U+200F, U+FEFF, U+061C), which format
# text invisibly; lone surrogates, which cannot be encoded for the terminal at all.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e"
    "\u2066-\u2069\ufeff\ud800-\udfff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe(text: str) -> str:
    """``text`` with every control character but newline and tab replaced by a visible escape
    (ESC becomes ``\\x1b``), so no escape sequence can style, move or control the terminal."""
    # Every character _UNSAFE names is unprintable to str: most text is checked in C alone.
    return text if text.isprintable() else _UNSAFE.sub(_escape, text)


def more_text(n: int) -> str:
    return f"… ({n:,} more char{'s' if n != 1 else ''})"


def _more_len(n: int) -> int:
    """``len(more_text(n))``, counted rather than formatted (formatting ``1,234`` is the
    dearer part of cutting a line)."""
    if n.__class__ is not int or n < 0:
        return len(more_text(n))
    digits = len(str(n))
    return digits + (digits - 1) // 3 + (14 if n == 1 else 15)


@lru_cache(4096)
def _long_cut(size: int, limit: int, held: int) -> tuple[int, str]:
    """How many characters :func:`line` keeps of a printable value ``size`` characters long
    cut to ``limit``, when it holds ``held`` of them (all, or a head), and the words it ends
    with: a big run's results come in a few lengths, and counting and formatting the rest is
    the dearer part of cutting them."""
    kept = min(limit - _more_len(size), held)
    return kept, more_text(size - kept)


def _flat(text: str) -> str:
    # safe() has already made \r visible; newlines and tabs are what is left to flatten.
    return text.replace("\n", "⏎").replace("\t", " ")


def line(text: str, limit: int = 100, *, total: int | None = None) -> str:
    """``text`` made safe and flattened to one line of at most ``limit`` characters, the cut
    stated. Newlines show as ``⏎``. ``total``: the full length, when ``text`` is only the
    head of a longer value."""
    if limit < 24:
        limit = 24
    size = len(text)
    if total is not None and total > size:
        size = total
    # Only a head is ever escaped: a 50 MB value costs no more than a short one.
    head = text[: limit + 1]
    if head.isprintable():  # most text: nothing to escape or flatten, a character each
        if size <= limit:
            return head
        kept, more = _long_cut(size, limit, len(head))
        return head[:kept] + more
    flat = _flat(safe(head))
    if size <= limit and len(flat) <= limit:
        return flat
    room = limit - _more_len(size)
    if len(flat) == len(head):  # nothing was escaped: a character each
        kept = min(room, len(head))
        return flat[:kept] + more_text(size - kept)
    pieces: list[str] = []
    used = 0
    for ch in head:
        piece = _flat(safe(ch))
        if used + len(piece) > room:
            break
        pieces.append(piece)
        used += len(piece)
    return "".join(pieces) + more_text(size - len(pieces))


def as_text(value: Any) -> str:
    """A value from a file, as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else json_text(value)


def as_dict(value: Any) -> dict[str, Any]:
    """A value from a file that should be an object; anything else reads as an empty one."""
    return value if isinstance(value, dict) else {}


def json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer past 64 bits, or more than 255 levels of nesting
        pass
    try:
        return repr(value)
    except RecursionError:  # a file's JSON may nest 1,024 levels: more than the stack holds
        return _TOO_DEEP


_TOO_DEEP = "(a value nested too deep to be written out)"


def args_text(args: Any, limit: int = 100) -> str:
    """Tool call arguments on one line: ``city="Lisbon", kind="museum"``, cut to ``limit``."""
    if args.__class__ is dict or isinstance(args, Mapping):
        try:  # each value by the encoder at once, as json_text() writes it
            if args.__class__ is dict and len(args) == 1:  # most calls: no list to join
                for k, v in args.items():
                    text = f"{k}={dumps(v).decode()}"
            else:
                text = ", ".join([f"{k}={dumps(v).decode()}" for k, v in args.items()])
        except TypeError:  # a value it cannot write: each as json_text() writes it
            text = ", ".join([f"{k}={json_text(v)}" for k, v in args.items()])
    else:
        text = json_text(args)
    return line(text, limit)


def plural(n: int, word: str) -> str:
    """``1 call``, ``2 calls``, ``1,024 calls``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def usage_json(usage: UsageInfo | None) -> dict[str, Any] | None:
    """A usage as the read model's JSON gives it: the token counts, and what else it says."""
    if usage is None:
        return None
    return beyond_defaults(usage) | {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
    }


def usage_text(usage: Mapping[str, Any] | UsageInfo | None) -> str:
    """``1,949 in / 144 out tokens (estimated)``: a usage as :func:`usage_json` gives it, or
    the record's own (read as it is, not dumped first)."""
    if not usage:
        return "no usage reported"
    if isinstance(usage, Mapping):
        inputs, outputs = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        cached, estimated = usage.get("cache_read_tokens", 0), usage.get("estimated")
    else:
        inputs, outputs = usage.input_tokens, usage.output_tokens
        cached, estimated = usage.cache_read_tokens, usage.estimated
    text = f"{inputs:,} in / {outputs:,} out tokens"
    if cached:
        text += f", {cached:,} cached"
    if estimated:
        text += " (estimated)"
    return text


_MS: dict[float, str] = {}
""":func:`ms_text` of the times said before: a run's times repeat (a recorder writes them
to the microsecond), and formatting a float is the dearer part of saying one."""


def ms_text(ms: float | None) -> str:
    if ms.__class__ is float and ms > 0.0:
        # Above 0 only: -0.0 is 0.0 as a key, and is said "-0.0 ms".
        said = _MS.get(ms)
        if said is None:
            said = _ms_text(ms)
            if len(_MS) >= 4096:
                _MS.clear()
            _MS[ms] = said
        return said
    return _ms_text(ms)


def _ms_text(ms: float | None) -> str:
    if ms is None:
        return ""
    if -999.9 < ms < 999.9:  # no thousands to group (formatting them is the dearer part)
        return f"{ms:.1f} ms"
    return f"{ms:,.1f} ms" if ms < 10_000 else f"{ms / 1000:,.1f} s"


def status_style(status: str) -> str:
    return _STATUS_STYLES.get(status, "red")


_STATUS_STYLES = {
    "ok": "green",
    "answer": "green",
    "rejected": "yellow",
    "max_iterations": "yellow",
    "incomplete": "yellow",
    "interrupted": "yellow",
    "paused": "cyan",
    "withheld": "yellow",
    "denied": "yellow",
    "success": "green",
    "absent": "green",
    "partial": "yellow",
    "pending": "cyan",
    "invalid": "yellow",
    "failure": "red",
}


def params_text(schema: Any) -> str:
    """A tool's parameters from its input schema: ``city, kind?`` (``?``: optional)."""
    schema = as_dict(schema)
    required = schema.get("required")
    needed = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    return ", ".join(f"{k}{'' if k in needed else '?'}" for k in as_dict(schema.get("properties")))


def evidence_text(reads: Mapping[str, Any]) -> str:
    """What a rule or a content function read, in words: ``user_message = "hi", iteration = 3``."""
    return ", ".join(f"{k} = {_evidence(v)}" for k, v in reads.items())


def _evidence(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return str(value).lower()
    try:
        return str(value)
    except RecursionError:  # as in json_text: nested past the stack
        return _TOO_DEEP


_STOPS = {
    "max_tokens": "max_tokens (the answer was cut)",
    "pause_turn": "pause_turn (paused, continued)",
    "refusal": "refusal (the model refused)",
}


def stop_text(stop_reason: str) -> str:
    """A stop reason as a person reads it: ``max_tokens`` says the answer was cut."""
    return _STOPS.get(stop_reason, safe(stop_reason))


def block_text(block: Mapping[str, Any]) -> str:
    """A content block af shows by what it is rather than by its content: ``(thinking,
    1,204 chars)``, ``(redacted thinking)``, ``(server_tool_use web_search, kept for the
    vendor)``."""
    kind = block.get("type")
    if kind == "thinking":
        if block.get("redacted"):
            return "(redacted thinking)"
        return f"(thinking, {len(as_text(block.get('thinking'))):,} chars)"
    if kind == "opaque":
        data = block.get("data")
        data = data if isinstance(data, Mapping) else {}
        name = data.get("name") or data.get("tool_name")
        what = safe(as_text(data.get("type") or "block"))
        if name:
            what += f" {safe(as_text(name))}"
        return f"({what}, kept for {safe(as_text(block.get('wire') or 'its vendor'))})"
    return f"({safe(as_text(kind))} block)"


# The result status each tool status says by itself: only a status that says more is shown.
_PLAIN_RESULT = {
    "ok": "success",
    "error": "failure",
    "rejected": "invalid",
    "unknown_tool": "invalid",
    "denied": "denied",
    "withheld": "denied",
    "interrupted": "interrupted",
}


def shown_status(tool: Mapping[str, Any]) -> str:
    """A tool result's status as a reader is shown it: ``ok``, or ``ok · absent`` when the
    result's own status says more than how the call went."""
    status = as_text(tool.get("status"))
    result = tool.get("result_status")
    if isinstance(result, str) and result != _PLAIN_RESULT.get(status):
        return f"{status} · {result}"
    return status


def result_notes(tool: Mapping[str, Any], limits: Any = None) -> list[str]:
    """What became of a tool result, one line each, for ``af show`` and the Lens: where the
    tool comes from, a refusal over its ceiling, a cut, the nudge, the effects, the run an
    agent called as a tool made, and the limits the result declared (``limits``: the value
    of its ``limits:`` write)."""
    if limits is None and tool.keys().isdisjoint(_NOTED):
        return []  # most results: nothing became of them
    out: list[str] = []
    source = tool.get("source")
    if isinstance(source, str):
        out.append(f"from {source}")
    ceiling = as_dict(tool.get("ceiling"))
    if ceiling:
        narrow = ceiling.get("narrow_by") or []
        said = f"; narrow by {', '.join(map(str, narrow))}" if narrow else ""
        out.append(
            f"refused over its ceiling: {_n(ceiling.get('size'))} chars, the ceiling is "
            f"{_n(ceiling.get('max_chars'))}{said}; no data was returned"
        )
    cut = as_dict(tool.get("truncated"))
    if cut:
        out.append(
            f"cut by the agent's cap: the model read the first {_n(cut.get('kept'))} of "
            f"{_n(cut.get('size'))} chars"
        )
    repeat = as_dict(tool.get("repeat"))
    if repeat:
        out.append(
            f"identical call #{_n(repeat.get('occurrences'))} with the same result: the model "
            "read the nudge"
        )
    for effect in tool.get("effects") or []:
        effect = as_dict(effect)
        what = f"{as_text(effect.get('kind'))} {as_text(effect.get('instruction_id'))}".strip()
        if effect.get("outcome") == "accepted":
            out.append(f"effect: {what} → pushed into the next call")
        else:
            out.append(f"effect refused: {as_text(effect.get('why'))}")
    run = as_dict(tool.get("run"))
    if run:
        where = f" in {as_text(run.get('recording'))}" if run.get("recording") else ""
        out.append(
            f"ran agent {as_text(run.get('agent'))}: run {as_text(run.get('run_id'))} "
            f"({as_text(run.get('status'))}){where}"
        )
    limits = as_dict(limits)
    for declared in limits.get("declared") or []:
        out.append(_declared_text(as_dict(declared)))
    for assumed in limits.get("assumed") or []:
        assumed = as_dict(assumed)
        how = "sent the rule's own value" if assumed.get("sent") else "left out, the rule filled"
        out.append(
            f"assumed: {as_text(assumed.get('argument'))} = {json_text(assumed.get('value'))} "
            f"({how})"
        )
    return out


_NOTED = frozenset({"source", "ceiling", "truncated", "repeat", "effects", "run"})
"""The keys of a tool's outcome that :func:`result_notes` has words for."""


def _n(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _declared_text(declared: Mapping[str, Any]) -> str:
    parts = []
    for key, label in (
        ("checked", "checked"),
        ("not_checked", "not checked"),
        ("cannot_cover", "cannot cover"),
        ("in_progress", "in progress"),
        ("not_covered", "not covered"),
    ):
        items = declared.get(key) or []
        if items:
            whats = [
                as_text(as_dict(i).get("what")) if isinstance(i, dict) else as_text(i)
                for i in items
            ]
            parts.append(f"{label}: {'; '.join(whats)}")
    period = as_dict(declared.get("period"))
    if period:
        queried = as_dict(period.get("queried"))
        parts.append(f"period: {as_text(queried.get('from'))} to {as_text(queried.get('to'))}")
    return f"limits ({as_text(declared.get('source'))}): " + " · ".join(parts)
