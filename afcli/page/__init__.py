"""``af export --html``: one self-contained page that shows a run as the Lens does.

The page is one file: its stylesheet and script are inline, its data is one JSON document
in a ``<script type="application/json">`` block (never executed, and with every ``<``
written as ``\\u003c`` so no text can close the block), and a Content-Security-Policy
allows nothing but that one script and that one stylesheet, by their hashes: no network,
no other script, no image, no form. The script builds the page with ``textContent`` only,
so every text from a model, a tool or a user stays text.

Its size is linear in the recording's content: each message, system segment and tool is
stored once and calls name them, as the recording does.
"""

from __future__ import annotations

import base64
import hashlib
import html
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

__all__ = ["PAGE_LIMIT", "PageTooLarge", "page_data", "render_page", "write_page"]

PAGE_LIMIT = 48 * 1024 * 1024
"""Bytes of data past which a page is too large for a browser to open comfortably."""
_RESULT_CHARS = 20_000
"""Characters of a tool result shown under its call (the whole result is in the window of
the call that follows)."""


class PageTooLarge(Exception):
    """The run holds more than one page can show; ``--calls`` picks a part."""


def write_page(
    recording: str | Path,
    out: str | Path,
    *,
    calls: tuple[int, int] | None = None,
    manifest: dict[str, Any] | None = None,
    limit: int = PAGE_LIMIT,
) -> Path:
    """Write the page of ``recording`` (calls ``calls[0]`` to ``calls[1]``, or all)."""
    data = page_data(recording, calls=calls, manifest=manifest)
    page = render_page(data)
    if len(page) > limit:
        total = len(data["calls"])
        fit = max(1, int(total * limit / len(page) * 0.9))
        raise PageTooLarge(
            f"the page would be {len(page) / 2**20:.0f} MB for {total} calls, too large for "
            f"one page: write part of it, --calls 1-{fit} (and so on)"
        )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_bytes(page)
    tmp.replace(out)
    return out


def page_data(
    recording: str | Path,
    *,
    calls: tuple[int, int] | None = None,
    manifest: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the page shows, as one JSON-ready dict."""
    from afcore import __version__
    from afcore.errors import AfError
    from afcore.readmodel import Timeline, build, call_detail, overview, seam_text, walk_lines
    from afcore.recording import InvalidRecord, open_recording, verify

    with open_recording(recording, index=False) as rec:
        checked = verify(rec).to_json()
    with open_recording(recording) as rec:
        run = overview(rec)
        summaries = {c["call"]: c for c in run["calls"]}
        numbers = [n for n in rec.call_numbers if calls is None or calls[0] <= n <= calls[1]]
        if calls is not None and not numbers:
            last = max(rec.call_numbers, default=0)
            asked = (
                f"call {calls[0]}" if calls[0] == calls[1] else f"calls in {calls[0]}-{calls[1]}"
            )
            raise PageTooLarge(
                f"no {asked}: the run has " + (f"calls 1 to {last}" if last else "no calls")
            )
        messages: dict[int, dict[str, Any]] = {}
        system: dict[bytes, int] = {}
        tools: dict[bytes, int] = {}
        system_list: list[dict[str, Any]] = []
        tool_list: list[dict[str, Any]] = []
        out_calls: list[dict[str, Any]] = []
        # As the Lens does: each call walks only the lines it depends on, not the file from
        # the top, so the page costs the file once, not once per call.
        timeline = Timeline()
        for _ in build(rec, timeline):
            pass
        for n in numbers:
            mark = timeline.at(n)
            lines = None
            if mark is not None:
                lines = walk_lines(rec, timeline, mark, timeline.previous_agent(mark))
            try:
                detail = call_detail(rec, n, lines=lines)
            except (AfError, InvalidRecord, KeyError, IndexError, ValueError, TypeError) as e:
                out_calls.append(_unreadable(n, f"call {n} cannot be read: {e}"))
                continue
            d = detail.to_json()
            entry: dict[str, Any] = {
                "call": n,
                "iteration": detail.iteration,
                "kind": detail.kind,
                "model": detail.model,
                "rsid": detail.rsid,
                "verified": detail.verified,
                "problem": detail.verification.problem,
                "params": detail.params,
                "response": d["response"],
                "attempt": d["attempt"],
                "errors": d["errors"],
                "injections": d["injections"],
                "system": None,
                "messages": None,
                "tools": None,
                "seams": [
                    {"before": s.before, "text": seam_text(s.fold)} for s in detail.seams or []
                ],
            }
            if detail.system is not None:
                entry["system"] = [
                    _intern(_without(s.to_json(), "change", "position"), system, system_list)
                    for s in detail.system
                ]
            if detail.tools is not None:
                entry["tools"] = [
                    _intern(_without(t.to_json(), "change"), tools, tool_list) for t in detail.tools
                ]
            if detail.messages is not None:
                for m in detail.messages:
                    if m.n not in messages:
                        messages[m.n] = _without(m.to_json(), "change")
                entry["messages"] = [m.n for m in detail.messages]
            summary = summaries.get(n) or {}
            entry["results"] = [_cut_result(r) for r in summary.get("results", [])]
            entry["governed"] = [
                {"kind": g["kind"], "verb": g["verb"], "words": g["words"]}
                for g in summary.get("governed", [])
            ]
            entry["invalid_args"] = summary.get("invalid_args", [])
            out_calls.append(entry)
        # A tool result is the message the next call sends: named by its number, not
        # stored twice.
        by_call_id = {
            m.get("tool_call_id"): n for n, m in messages.items() if m.get("tool_call_id")
        }
        for entry in out_calls:
            for r in entry["results"]:
                number = by_call_id.get(r.get("call_id"))
                if number is not None:
                    r["message"] = number
                    r.pop("content", None)
        why_lines = _why(rec)
    head = {k: run.get(k) for k in ("run_id", "started_at", "agent", "model", "provider")}
    outcome = {k: run.get(k) for k in ("status", "iterations", "answer", "usage", "error")}
    return {
        "af_version": __version__,
        "run": head | outcome | {"calls": len(summaries)},
        "shown": [numbers[0], numbers[-1]] if numbers else None,
        "verify": {
            "ok": checked["ok"],
            "calls": checked["calls"],
            "verified": checked["verified"],
            "problems": checked["problems"][:20],
        },
        "bundle": _bundle_words(manifest),
        "calls": out_calls,
        "messages": {str(k): v for k, v in sorted(messages.items())},
        "system": system_list,
        "tools": tool_list,
        "why": why_lines,
    }


def _unreadable(n: int, problem: str) -> dict[str, Any]:
    return {
        "call": n,
        "iteration": None,
        "kind": "agent",
        "model": "",
        "verified": False,
        "problem": problem,
        "response": None,
        "errors": [],
        "system": None,
        "messages": None,
        "tools": None,
        "seams": [],
        "results": [],
        "governed": [],
        "invalid_args": [],
    }


def _intern(value: dict[str, Any], seen: dict[bytes, int], table: list[dict[str, Any]]) -> int:
    key = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    at = seen.get(key)
    if at is None:
        at = seen[key] = len(table)
        table.append(value)
    return at


def _without(value: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


def _cut_result(r: dict[str, Any]) -> dict[str, Any]:
    content = r.get("content")
    text = content if isinstance(content, str) else orjson.dumps(content).decode()
    if len(text) > _RESULT_CHARS:
        text = text[:_RESULT_CHARS] + f"… ({len(text) - _RESULT_CHARS:,} more characters)"
    return {**r, "content": text}


def _why(rec: Any) -> list[dict[str, str]] | None:
    from afcore.errors import AfError
    from afcore.why import summary, why

    try:
        return [{"text": line.text, "kind": line.kind} for line in summary(why(rec, "answer"))]
    except (AfError, KeyError, IndexError, ValueError):
        return None


def _bundle_words(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    if not manifest:
        return None
    return {
        "redactions": manifest.get("redactions", 0),
        "forced": manifest.get("forced", False),
        "secrets_found": manifest.get("secrets_found", 0),
    }


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def inert_json(value: Any) -> str:
    """JSON to sit in an HTML ``<script type="application/json">`` block: no ``<``, ``>``
    or ``&`` (so no text can end the block or open a comment), no line separators."""
    raw = orjson.dumps(value).decode()
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        raw = raw.replace(c, esc)
    return raw.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_page(data: dict[str, Any]) -> bytes:
    css = _asset("page.css")
    js = _asset("page.js")
    csp = (
        f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
        "img-src 'none'; connect-src 'none'; font-src 'none'; media-src 'none'; "
        "object-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'"
    )
    title = html.escape(f"af · {data['run'].get('run_id') or 'run'}", quote=True)
    page = (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n"
        f"<style>{css}</style>\n"
        "</head><body>\n"
        '<noscript><p class="noscript">This page shows a run recorded by af; it needs '
        "JavaScript (inline, no network) to draw the calls.</p></noscript>\n"
        '<div id="app"></div>\n'
        f'<script type="application/json" id="af-data">{inert_json(data)}</script>\n'
        f"<script>{js}</script>\n"
        "</body></html>\n"
    )
    return page.encode("utf-8", "replace")
