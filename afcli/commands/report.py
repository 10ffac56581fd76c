"""``af report``: a Markdown summary of a run to paste into an issue."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._params import RunArg

__all__ = ["markdown", "report"]

_CELL = 80
"""Characters of text in a table cell."""
_ANSWER = 4000


@command
def report(run: RunArg) -> None:
    """Print a Markdown summary of a run to paste into an issue: the agent, the model, the
    outcome, the answer, the calls (the one that failed or was refused picked out), the
    verification, af's version, and how to open the attached bundle."""
    from afcli._runs import open_run, reading_only, resolve
    from afcore.bundle import is_bundle, read_bundle
    from afcore.errors import RecordingError
    from afcore.readmodel import overview
    from afcore.recording import is_flow, verify

    reading_only()

    path = resolve(run)
    if is_flow(path):
        raise CliError(
            f"{path} is a flow's recording, and af report summarizes one agent's run (not "
            f"yet a flow's): af show {path} shows the flow, each agent's calls with it",
            EXIT_USAGE,
        )
    manifest = None
    try:
        if is_bundle(path):
            manifest, _ = read_bundle(path)
        with open_run(path) as rec:
            data = overview(rec)
        with open_run(path, index=False) as rec:
            checked = verify(rec).to_json()
    except RecordingError as e:
        raise CliError(str(e), EXIT_FAILED) from None
    print(markdown(data, checked, bundle=path if manifest else None, manifest=manifest), end="")


def markdown(
    data: dict[str, Any],
    checked: dict[str, Any],
    *,
    bundle: Path | None = None,
    manifest: dict[str, Any] | None = None,
) -> str:
    """The summary. Every text from the run is made inert: cells escaped for Markdown and
    HTML, the answer in a code fence longer than any run of backticks in it."""
    from afcore import __version__

    agent = data.get("agent") or {}
    status = data.get("status", "unknown")
    calls = data.get("calls", [])
    out: list[str] = []
    out.append(f"### af run {_cell(data.get('run_id', '?'))}: {_cell(_status(data), 200)}\n")
    out.append("| | |\n|---|---|")
    spec = f" ({_cell(agent['source'])})" if agent.get("source") else ""
    out.append(f"| Agent | {_cell(agent.get('name', '?'))}{spec} |")
    provider = data.get("provider") or {}
    models = sorted({str(m) for m in [data.get("model"), *(c.get("model") for c in calls)] if m})
    out.append(
        f"| Model | {', '.join(_cell(m) for m in models if m)}"
        + (f" ({_cell(provider.get('name', ''))})" if provider.get("name") else "")
        + " |"
    )
    out.append(
        f"| Outcome | {_cell(status)} after {data.get('calls_made', len(calls))} "
        f"call{'s' if len(calls) != 1 else ''}, {data.get('iterations', '?')} iterations"
        + (f", {_usage(data['usage'])}" if data.get("usage") else "")
        + " |"
    )
    if checked.get("ok"):
        verified = f"✓ {checked['verified']}/{checked['calls']} calls rebuild to their hashes"
    else:
        first = (checked.get("problems") or [{}])[0]
        verified = (
            f"✗ {checked.get('verified', 0)}/{checked.get('calls', 0)} calls verify; "
            f"{len(checked.get('problems', []))} problems"
            + (f" (line {first.get('line')}: {_cell(first.get('message', ''))})" if first else "")
        )
    out.append(f"| Verification | {verified} |")
    recorded_by = (manifest or {}).get("run", {}).get("af_version")
    out.append(
        f"| af | {_cell(__version__)}"
        + (f" (recorded by {_cell(recorded_by)})" if recorded_by else "")
        + " |"
    )
    if manifest:
        red = manifest.get("redactions", 0)
        forced = (
            " · **exported with --force despite secrets found**" if manifest.get("forced") else ""
        )
        out.append(f"| Bundle | {red} values redacted at export{forced} |")
    out.append("")

    if data.get("error"):
        err = data["error"]
        out.append(
            f"**Error:** {_cell(err.get('kind', ''))}: {_cell(err.get('message', ''), 300)}\n"
        )
    answer = data.get("answer")
    if answer not in (None, ""):
        text = _printable(answer if isinstance(answer, str) else _json(answer))
        if len(text) > _ANSWER:
            text = text[:_ANSWER] + f"\n… ({len(text) - _ANSWER} more characters)"
        fence = "`" * max(3, _longest_backticks(text) + 1)
        out.append(f"**Answer**\n\n{fence}text\n{text}\n{fence}\n")

    picked = [c["call"] for c in calls if _trouble(c)]
    out.append("**Calls**\n")
    out.append("| call | iter | model | system | msgs | tools | reply | tokens in/out | |")
    out.append("|---:|---:|---|---:|---:|---:|---|---:|---|")
    for c in calls:
        resp = c.get("response") or {}
        usage = resp.get("usage") or {}
        reply = _reply(c)
        mark = f"**✗ {_cell(_trouble(c) or '')}**" if c["call"] in picked else ""
        number = f"**{c['call']}**" if c["call"] in picked else str(c["call"])
        system = (c.get("system") or {}).get("segments")
        out.append(
            f"| {number} | {c.get('iteration', '')} | {_cell(c.get('model', ''), 30)} | "
            f"{system if system is not None else '?'} | {c.get('messages', '')} | "
            f"{c.get('tools') if c.get('tools') is not None else '?'} | {reply} | "
            f"{usage.get('input_tokens', '')}/{usage.get('output_tokens', '')} | {mark} |"
        )
    out.append("")
    if picked:
        out.append(f"Picked out: call {', '.join(map(str, picked))} (✗).\n")
    name = bundle.name if bundle else "report.afz"
    out.append("<details><summary>Open the attached bundle</summary>\n")
    if not bundle:
        out.append(
            f"Make it with `af export {_code(data.get('run_id', 'RUN'))} -o {name}`, then:\n"
        )
    out.append("```sh")
    out.append("pip install af")
    out.append(f"af lens {name}      # scrub the calls, see each slot as sent")
    out.append(f"af show {name}      # the run call by call")
    out.append(f"af verify {name}    # every call rebuilds to its hash")
    out.append("```\n</details>\n")
    return "\n".join(out) + "\n"


def _status(data: dict[str, Any]) -> str:
    status = str(data.get("status", "unknown"))
    return {
        "answer": "answered",
        "error": "failed",
        "max_iterations": "stopped at max iterations",
        "interrupted": "interrupted",
        "paused": "paused",
    }.get(status, status)


def _trouble(c: dict[str, Any]) -> str | None:
    """Why a call is picked out: it failed, or something was refused."""
    if c.get("errors"):
        e = c["errors"][0]
        return f"failed: {e.get('kind', '')}"
    resp = c.get("response") or {}
    if resp.get("decision") and resp["decision"].get("verb") not in (None, "ok"):
        return f"reply {resp['decision']['verb']}"
    if resp.get("stop_reason") in ("refusal", "content_filter"):
        return "the model refused"
    for g in c.get("governed") or []:
        if g.get("verb") in ("deny", "decline", "failed"):
            return f"{g.get('kind')}: {g.get('verb')}"
    for a in c.get("invalid_args") or []:
        if a.get("enforced"):
            return f"invalid args to {a.get('name')}"
    for r in c.get("results") or []:
        if r.get("is_error"):
            return f"tool {r.get('name')} failed"
    return None


def _reply(c: dict[str, Any]) -> str:
    resp = c.get("response")
    if not resp:
        return "(no reply)"
    tools = [t.get("name", "?") for t in resp.get("tool_calls") or []]
    if tools:
        return "→ " + ", ".join(_cell(str(t), 30) for t in tools)
    return _cell(resp.get("text") or f"({resp.get('stop_reason', '')})", 50)


def _usage(u: dict[str, Any]) -> str:
    return f"{u.get('input_tokens', 0)} tokens in, {u.get('output_tokens', 0)} out"


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _cell(value: Any, limit: int = _CELL) -> str:
    """Text made inert in a Markdown table cell: one line, HTML escaped, Markdown's
    characters escaped, cut with the cut stated."""
    text = str(value)
    text = "".join(" " if (c < " " or c == "\x7f") else c for c in text)
    if len(text) > limit:
        text = text[:limit] + "…"
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def _printable(text: str) -> str:
    """Text with its control characters spelled out (``\\x1b``): what a terminal or an
    issue tracker shows, never what it obeys."""
    return "".join(
        c if c in "\n\t" or not (c < " " or "\x7f" <= c <= "\x9f") else f"\\x{ord(c):02x}"
        for c in text
    )


def _code(value: Any) -> str:
    """A run id for a command to copy: the characters a run id is made of, nothing else."""
    return re.sub(r"[^A-Za-z0-9._-]", "", str(value))[:120] or "RUN"


def _longest_backticks(text: str) -> int:
    return max((len(m) for m in re.findall(r"`+", text)), default=0)


def _json(value: Any) -> str:
    import orjson

    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
