"""``af show``: a recorded run, iteration by iteration, or one call exactly as sent."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from afcli._errors import EXIT_USAGE, CliError, command
from afcli._params import OptionalRunArg
from afcli._render import (
    Line,
    Printer,
    _joined,
    block,
    cells,
    dumps,
    fit,
    out_console,
    print_hanging,
    print_indented,
    print_json,
)
from afcli._stores import StoreOption
from afcore.readmodel import (
    args_text,
    as_dict,
    as_text,
    block_text,
    evidence_text,
    fold_text,
    line,
    ms_text,
    params_text,
    plural,
    refusal_texts,
    safe,
    seam_text,
    status_style,
    stop_text,
    usage_json,
    usage_text,
    window_text,
)

if TYPE_CHECKING:
    from afcore.readmodel import (
        Attempt,
        CallDetail,
        CallError,
        CallSummary,
        Decisions,
        FoldPart,
        Governed,
        Provenance,
        Response,
        RunHead,
        RunOutcome,
    )
    from afcore.recording import AttemptDecision, Recording, SkippedProvider

__all__ = ["show"]


@command
def show(
    run: OptionalRunArg = None,
    call: Annotated[
        int | None,
        typer.Option(
            "--call",
            "-c",
            min=1,
            help="Show call N (from 1): its system text, messages and tools as sent.",
            show_default=False,
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(
            "--session",
            "-s",
            metavar="ID|RUN",
            help="Show a session turn by turn: its id, or any of its turns' runs.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """Show a recorded run: each call's slot sizes, tool calls and results, and the outcome.
    A flow's recording shows as the tree of its steps with each agent's calls.

    With --session, a session's turns in order, each with what the user said: the session
    store (--store, by default the one beside the recordings folder) names its turns'
    recordings; a session it does not hold is found in the recordings folder (or beside the
    run given) by the links the recordings' headers hold.
    """
    from afcli._runs import newest, open_run, reading_only, resolve
    from afcore.recording import is_flow

    reading_only()

    if session is not None:
        if run is not None or call is not None:
            raise CliError(
                "--session shows a whole session; for one turn, or one call of it, name its "
                "run: af show RUN [--call N]",
                EXIT_USAGE,
            )
        _show_session(session, store, json_output)
        return
    if store is not None:
        raise CliError("--store names where a session is kept: give --session ID", EXIT_USAGE)

    path = resolve(run) if run is not None else newest("af show")
    if is_flow(path):
        from afcli._flows import open_flow_cli, show_flow

        show_flow(open_flow_cli(path), json_output=json_output)
        return
    with open_run(path, index=call is not None) as rec:
        if call is not None:
            from afcore.readmodel import call_detail  # --call's alone: the run view needs none

            data = call_detail(rec, call)
            if json_output:
                print_json(data.to_json())
            else:
                _print_call(out_console(), data, rec.origin.name)
            return
        # The walk makes a few objects per line, none in a cycle: the cycle collector would
        # only walk them again and again (1% of a big file's time).
        collecting = gc.isenabled()
        gc.disable()
        try:
            if json_output:
                _print_run_json(rec)
            else:
                _print_run(out_console(), rec)
        finally:
            if collecting:
                gc.enable()


# -- a session -----------------------------------------------------------------------------


def _show_session(ref: str, store: str | None, json_output: bool) -> None:
    """Each turn of the session: its place and what the user said, then its run as ``af
    show RUN`` shows it."""
    from afcli._runs import find_session, open_run
    from afcore.readmodel import overview, user_message

    runs = find_session(ref, store)
    if json_output:
        turns = []
        for t in runs.turns:
            with open_run(t.path) as rec:
                turns.append(
                    t.to_json() | {"user_message": user_message(rec), "run": overview(rec)}
                )
        print_json(runs.to_json() | {"turns": turns})
        return
    console = out_console()
    out = Printer(console)
    agent = model = None
    for t in runs.turns:
        with open_run(t.path) as rec:
            h = rec.header
            head = Line(("━━ ", "cyan"), (f"turn {t.turn}", "bold cyan"), (" ━━ ", "cyan"))
            if t is runs.turns[0]:
                head = Line(("session ", "dim"), (safe(runs.id), "bold cyan"), "  ")
                head.append(safe(h.agent.name), "bold")
                head.append(f"  model {safe(h.model)}", "dim")
                head.append(
                    f"  {plural(len(runs.turns), 'turn')} in {safe(str(runs.folder))}", "dim"
                )
                out.print(head)
                for gap in runs.gaps:
                    out.print(Line(safe(gap), style="yellow"))
                head = Line(("━━ ", "cyan"), (f"turn {t.turn}", "bold cyan"), (" ━━ ", "cyan"))
            elif (h.agent.name, h.model) != (agent, model):
                head.append(f"{safe(h.agent.name)}  model {safe(h.model)} · ", "dim")
            agent, model = h.agent.name, h.model
            head.append(f"run {safe(h.run_id)} · ", "dim")
            head.append(f"{safe(h.started_at)[:19].replace('T', ' ')} UTC", "dim")
            out.print()
            out.print(head)
            said = user_message(rec)
            if said is not None:
                print_hanging(out, Line(("you  ", "bold"), safe(said)), indent=0, more=5)
            _print_run_parts(out, rec, head=False)
            if t.status is not None and rec.end is None:
                # The turn's process died: the store knows how it ended, the file cannot.
                said = f"the session store says turn {t.turn} ended {t.status.replace('_', ' ')}"
                if t.note:
                    said += f": {t.note}"
                out.print(Line(safe(said), style="yellow"))
    out.flush()


def _followed(path: Path) -> str:
    """The run an agent called as a tool made, in a line: how it ended, and its answer."""
    from afcore.errors import RecordingError
    from afcore.recording import open_recording

    try:
        with open_recording(path) as sub:
            end = sub.end
            if end is None:
                return f"{path.name}: the run did not finish"
            answer = sub.value(end.answer) if end.answer is not None else None
            said = f": {as_text(answer)}" if answer else ""
            return f"{path.name}: {end.status} after {plural(end.calls, 'call')}{said}"
    except (RecordingError, OSError) as e:
        return f"{path.name}: cannot be read ({type(e).__name__})"


# -- the overview ------------------------------------------------------------------------


def _print_run(console: Console, rec: Recording) -> None:
    """The run as the file is read: each call printed once complete, each fold after it."""
    out = Printer(console)
    _print_run_parts(out, rec)
    out.flush()


def _print_run_parts(out: Printer, rec: Recording, *, head: bool = True) -> None:
    from afcore.readmodel import run_view

    calls = 0
    folder = Path(rec.path).parent
    for part in run_view(rec):
        kind = part.kind
        if kind == "call":  # most parts
            calls += 1
            _print_call_line(out, part.data, folder)
        elif kind == "fold":
            _print_fold(out, part.data)
        elif kind == "header":
            if head:
                _print_head(out, part.data)
        else:
            _print_end(out, part.data, calls)
    out.flush()


def _print_head(out: Printer, v: RunHead) -> None:
    agent = v.agent
    head = Line(("run ", "dim"), (safe(v.run_id), "bold"), "  ", (safe(agent["name"]), "bold"))
    if agent.get("source"):
        head.append(f" ({safe(agent['source'])})", "dim")
    head.append(f"  model {safe(v.model)}", "dim")
    out.print(head)
    started = safe(str(v.started_at))
    out.print(Line(f"started {started[:19].replace('T', ' ')} UTC", style="dim"))
    if v.session is not None:
        out.print(_turn_line(v.session))


def _turn_line(link: dict[str, Any]) -> Line:
    """``turn 3 of session ticket-4711 · after run 2026...``: where a session's turn stands."""
    said = Line(
        (f"turn {link.get('turn')} of session ", "dim"),
        (safe(as_text(link.get("id"))), "bold cyan"),
    )
    if link.get("previous"):
        said.append(f" · after run {safe(as_text(link['previous']))}", "dim")
    return said


def _print_call_line(out: Printer, c: CallSummary, folder: Path | None = None) -> None:
    """One call of the overview: its sizes and decisions, its reply, what followed it."""
    width = max(out.width, 60)
    make = out.line  # without colour a line is built as its text alone
    plain = out.plain
    out.put("")
    segments = "?" if c.segments is None else plural(c.segments, "segment")
    chars = "?" if c.chars is None else f"{c.chars:,}"
    attempt = None if c.attempt is None else _shown_attempt(c)
    sizes = []
    if attempt is not None or not plain:
        sizes = [
            ("system ", "dim"),
            (f"{segments}, {chars} chars", ""),
            ("  messages ", "dim"),
            (f"{c.messages:,}", ""),
            ("  tools ", "dim"),
            ("?" if c.tools is None else f"{c.tools:,}", ""),
        ]
    if attempt is None and plain:  # the line's text, as make() would join it
        tools = "?" if c.tools is None else f"{c.tools:,}"
        top = (
            f"call {c.call}{_summarizer_for(c.kind, c.fold)} · iteration {c.iteration}   "
            f"system {segments}, {chars} chars  messages {c.messages:,}  tools {tools}"
        )
        out.print_sized(top, len(top))  # numbers and words in ASCII, and "·": a cell each
    elif attempt is None:
        out.print(
            make(
                (f"call {c.call}", "bold cyan"),
                (_summarizer_for(c.kind, c.fold), "bold magenta"),
                (f" · iteration {c.iteration}", "cyan"),
                "   ",
                *sizes,
            )
        )
    else:
        print_hanging(out, _attempt_head(c, attempt), indent=0)
        for skipped in attempt.skipped:
            out.print(fit(Line("  skipped ", style="yellow"), _skipped_text(skipped), width))
    # Later attempts at a call send what the first sent: its sizes and decisions hold.
    first = attempt is None or attempt.n == 1
    if attempt is not None and first:
        out.print(Line("  ", *sizes))
    if c.injections is not None and first:
        print_hanging(out, _call_decisions(c.injections, width, make), indent=2)
    if c.tools_added or c.tools_removed:
        changes = _tool_changes(c.tools_added, c.tools_removed)
        if changes:
            out.print(fit(Line("  tools ", style="dim"), changes, width))
    r = c.response
    if r is None:
        if not c.errors:
            out.print(Line("  no reply recorded", style="yellow"))
    else:
        if plain:  # the line's text, as make() would join it
            rid = f" · {safe(r.response_id)}" if r.response_id else ""
            stop = stop_text(r.stop_reason)
            out.print(f"  reply {usage_text(r.usage)} · {ms_text(r.ms)} · {stop}{rid}")
        else:
            out.print(
                make(
                    ("  reply ", "dim"),
                    usage_text(r.usage),
                    (f" · {ms_text(r.ms)} · ", "dim"),
                    (stop_text(r.stop_reason), "yellow" if r.stop_reason in _NOTED else "dim"),
                    (f" · {safe(r.response_id)}" if r.response_id else "", "dim"),
                )
            )
        if r.redacted_thinking or r.opaque or r.unsent_params:  # what _reply_notes says
            for note in _reply_notes(r):
                out.print(Line(f"  {note}", style="yellow"))
        if r.missing:
            out.print(Line(f"  (reply message missing: {safe(r.missing)})", style="red"))
        if r.text and c.kind == "summarizer":
            out.print_fit(make("  summary ", style="dim"), r.text, width)
        elif r.text and r.tool_calls and plain:
            out.print_cut("  says ", 7, r.text, width)
        elif r.text and r.tool_calls:
            out.print_fit(make("  says ", style="dim"), r.text, width)
        for tc in r.tool_calls:
            name = safe(str(tc.name))
            if plain:  # the line's text, as make() would join it
                out.print(f"  → {name}({args_text(tc.args, width - len(name) - 8)})")
                continue
            out.print(
                make(
                    ("  → ", "cyan"),
                    (name, "bold cyan"),
                    ("(", "dim"),
                    args_text(tc.args, width - len(name) - 8),
                    (")", "dim"),
                )
            )
    refused = {}
    for bad in c.invalid_args:
        problems = "; ".join(f"{p.get('path', '$')}: {p.get('message', '')}" for p in bad.problems)
        if bad.enforced:
            # Shown on the rejected result, in place of the correction's boilerplate.
            refused[bad.call_id] = problems
        else:
            head = Line(
                ("  ! ", "yellow"),
                (safe(str(bad.name)), "cyan"),
                (" ran with invalid arguments: ", "yellow"),
            )
            out.print(fit(head, problems, width))
    early = []
    if c.governed:
        early = [
            g for g in c.governed if g.kind in ("pause", "resume") or g.moment != "tool_result"
        ]
        early = [g for g in early if g.kind != "check" and g.moment != "output"]
    for g in early:
        _print_governed(out, g, width)
    heads = _RESULT_HEADS
    for res in c.results:
        status = res.status
        if res.call_id in refused:
            tail = refused[res.call_id]
        elif res.content is not None:
            tail = str(res.content)
        else:
            tail = f"(missing: {res.missing or 'no value'})"
        if plain:  # the line's text, as make() would join it
            # Its head measured once for each tool and status: the time is ASCII.
            key = (res.name, res.shown or status)
            known = heads.get(key)
            if known is None:
                known = _result_head(*key)
                if len(heads) >= 1024:
                    heads.clear()
                heads[key] = known
            ms = ms_text(res.ms)
            if known[1] >= 0:
                out.print_cut(f"{known[0]}{ms} · ", known[1] + len(ms) + 3, tail, width)
            else:
                out.print_fit(f"{known[0]}{ms} · ", tail, width)
        else:
            style = status_style(
                res.result_status if status == "ok" and res.result_status else status
            )
            said = make(
                ("  ← ", style),
                (safe(res.name), "cyan"),
                (f" {res.shown or status}", style),
                (f" · {ms_text(res.ms)} · ", "dim"),
            )
            out.print_fit(said, tail, width)
        for note in res.notes:
            out.print(fit(Line("    "), note, width), style="dim")
        linked = res.run.get("recording") if res.run else None
        if linked and folder is not None:
            out.print(fit(Line(("    ↳ ", "cyan")), _followed(folder / str(linked)), width))
    for g in c.governed:
        if g not in early:
            _print_governed(out, g, width)
    for err in c.errors:
        head = Line(("  ✗ ", "bold red"), (safe(err.kind), "red"), ": ")
        out.print(fit(head, err.message, width))
        why = as_text(err.decision.reason) if err.decision is not None else ""
        if why and why not in as_text(err.message):
            # Why af decided what it did (a default, an override): its own words.
            out.print(fit(Line("    "), why, width), style="dim")
        for skipped in err.attempt.skipped if err.attempt is not None else []:
            out.print(fit(Line("  skipped ", style="yellow"), _skipped_text(skipped), width))


_RESULT_HEADS: dict[tuple[str, str], tuple[str, int]] = {}
"""A tool result's line without colour, up to its time, by tool name and status: its text
and the cells it takes (see :func:`_result_head`)."""


def _result_head(name: str, status: str) -> tuple[str, int]:
    """``  ← search ok · ``: the head of a tool result's line without colour, and the cells it
    takes (-1: measured with the rest of the line, as a head that holds a newline or a
    character Rich measures with its neighbours is)."""
    head = f"  ← {safe(name)} {status} · "
    if "\n" in head or "\u200d" in head or "\ufe0f" in head:
        return head, -1
    return head, cells(head)


_GOVERNED = {
    "allow": ("⚖", "green"),
    "deny": ("⚖", "red"),
    "ask": ("⚖", "yellow"),
    "ok": ("✓", "green"),
    "failed": ("✗", "yellow"),
    "approve": ("▶", "green"),
    "decline": ("▶", "red"),
}


def _print_governed(out: Printer, g: Governed, width: int) -> None:
    """A governance step: a chain's decisions, the pause, a person's answer, a check."""
    if g.kind == "pause":
        out.print(fit(Line(("  ⏸ ", "bold yellow")), g.words[0], width))
        return
    mark, style = _GOVERNED.get(g.verb, ("⚖", "dim"))
    if g.kind == "rules":
        what = {
            "input": "the message",
            "output": "the answer",
        }.get(g.moment or "", f"{g.tool} call {g.k}")
        if g.moment == "tool_result":
            what += "'s result"
        for i, words in enumerate(g.words):
            head = (
                Line((f"  {mark} ", style), (safe(what), "cyan"), ": ")
                if i == 0
                else Line(" " * (len(what) + 6))
            )
            out.print(fit(head, words, width))
        if g.value is not None:
            out.print(Line(("    arguments as changed: ", "dim"), args_text(g.value, width - 30)))
        return
    for words in g.words:
        out.print(fit(Line((f"  {mark} ", style)), words, width))


def _print_end(out: Printer, v: RunOutcome, calls: int) -> None:
    """The outcome, after the last call."""
    width = max(out.width, 60)
    out.print()
    if v.answer is not None:
        out.print(Line(("answer", "bold")))
        out.print(Text(safe(str(v.answer))))
        out.print()
    _print_problems(out, v.to_json())
    status = v.status
    outcome = Line((status.replace("_", " "), f"bold {status_style(status)}"))
    if status == "incomplete":
        outcome.append(": the recording has no run_end (the run was cut off, or is still running)")
    else:
        outcome.append(
            f" after {plural(v.iterations, 'iteration')} · {plural(calls, 'call')}"
            f" · {usage_text(usage_json(v.usage))} · {ms_text(v.ms)}",
            "dim",
        )
    out.print(outcome)
    if v.paused is not None:
        p = v.paused
        out.print(
            fit(
                Line(("  asks: ", "cyan"), (safe(str(p.get("link"))), "bold"), ": "),
                str(p.get("question")),
                width,
            )
        )
        out.print(
            Line("  continue with af resume RUN --approve, or --decline --why TEXT", style="dim")
        )
    if v.contract is not None:
        met = v.contract.get("met")
        said = "met" if met else "not met"
        tier = v.contract.get("tier")
        if tier and tier != "answer":
            said += f"; the typed value came from the {tier}"
        out.print(Line(("  output schema: ", "dim"), (said, "green" if met else "yellow")))
    if v.error:
        out.print(Line("  ", (safe(v.error["kind"]), "red"), ": ", safe(v.error["message"])))
    for err in v.errors:
        # A fail-fast before any attempt at its call: the providers it passed over.
        for skipped in err.attempt.skipped if err.attempt is not None else []:
            out.print(fit(Line("  skipped ", style="yellow"), _skipped_text(skipped), width))


def _shown_attempt(c: CallSummary) -> Attempt | None:
    """A call's attempt, when there is something to say about it: more than one attempt at
    its call, a failure, a provider other than the agent's, a provider passed over."""
    a = c.attempt
    if a is None:
        return None
    plain = a.plain and not c.errors and not (c.response is not None and c.response.decision)
    return None if plain else a


def _attempt_head(c: CallSummary, a: Attempt) -> Line:
    """``call 3 · attempt 1 of iteration 2 · anthropic:claude-sonnet-4-5 · failed:
    rate_limited (429) → retry``."""
    out = Line(
        (f"call {c.call}", "bold cyan"),
        (f" · attempt {a.n} of iteration {c.iteration}", "cyan"),
        (" · ", "dim"),
        safe(f"{a.provider}:{c.model}"),
    )
    if a.via != "agent":
        out.append(f" ({safe(a.via)})", "dim")
    failed = next((e for e in c.errors if e.attempt is None), None)
    if failed is not None:
        reason = as_text(failed.reason) or as_text(failed.kind)
        status = f" ({failed.status})" if isinstance(failed.status, int) else ""
        mid = ", mid-stream" if failed.mid_stream else ""
        out.append(" · ", "dim")
        out.append(f"failed: {safe(reason)}{status}{mid}", "red")
        if failed.decision is not None:
            out.append(" → ", "dim")
            out.extend(_decision_text(failed.decision, True))
    refused = c.response.decision if c.response is not None else None
    if refused is not None and refused.verb != "ok":
        out.append(" · ", "dim")
        out.append("answer refused", "yellow")
        out.append(" → ", "dim")
        out.extend(_decision_text(refused, False))
    return out


def _decision_text(d: AttemptDecision, failed: bool) -> Line:
    """``retry (rule transient, after 0.5 s)``, ``fail_fast: attempts-exhausted (retry
    asked by rule transient)``; ``ok`` after a failure is said as what it means."""
    verb = as_text(d.verb)
    style = "bold red" if verb == "fail_fast" else "bold yellow"
    out = Line(("error stands" if verb == "ok" and failed else safe(verb), style))
    if d.kind:
        out.append(f": {safe(as_text(d.kind))}", style)
    notes = []
    if d.asked:
        by = f" by rule {as_text(d.rule)}" if d.rule else ""
        notes.append(f"{as_text(d.asked)} asked{by}")
    elif d.rule:
        notes.append(f"rule {as_text(d.rule)}")
    if d.delay:
        notes.append(f"after {d.delay:g} s")
    if notes:
        out.append(f" ({safe(', '.join(notes))})", "dim")
    return out


def _skipped_text(skipped: SkippedProvider) -> str:
    """``mock:m (agent): retry_other, the circuit breaker of mock is open``."""
    decision = skipped.decision
    text = f"{as_text(skipped.provider)}:{as_text(skipped.model)}"
    text += f" ({as_text(skipped.via)}): {as_text(decision.verb)}"
    if decision.rule:
        text += f" by rule {as_text(decision.rule)}"
    if decision.reason:
        text += f", {as_text(decision.reason)}"
    return text


def _summarizer_for(kind: Any, fold: Any) -> str:
    """`` · summarizer for fold 1`` for a summarizer's call; empty for the agent's."""
    if kind != "summarizer":
        return ""
    return f" · summarizer for fold {fold}" if isinstance(fold, int) else " · summarizer"


def _print_fold(out: Printer, part: FoldPart) -> None:
    """A fold of the live window, between the calls it separates, and what it kept."""
    f = part.view
    out.put("")
    plain = out.plain  # without colour a line is its text
    text = fold_text(f)
    print_hanging(out, text if plain else Line(text, style="bold magenta"), indent=0)
    for kept in refusal_texts(f):
        print_hanging(out, kept if plain else Line(kept, style="magenta"), indent=2)
    if part.missing:
        out.print(Line(f"  (fold value missing: {safe(str(part.missing))})", style="red"))


def _print_problems(console: Printer, v: dict[str, Any]) -> None:

    problems = v["problems"]
    if problems:
        console.print(Text(f"{plural(len(problems), 'problem')} reading the file:", "yellow"))
        for p in problems[:20]:
            where = f"line {p['line']}: " if p["line"] else ""
            console.print(Text(f"  {where}{line(p['message'], 160)}"))
        if len(problems) > 20:
            console.print(Text(f"  … and {len(problems) - 20:,} more (--json lists all)", "dim"))
    if v["torn_tail"]:
        t = v["torn_tail"]
        console.print(
            Text(
                f"line {t['line']} is torn ({t['bytes']:,} bytes): the run was cut off mid-write",
                "yellow",
            )
        )
    if v["unknown_records"]:
        console.print(
            Text(
                f"{plural(v['unknown_records'], 'record')} of a type this af does not know "
                "(kept, not shown)",
                "dim",
            )
        )


def _print_run_json(rec: Recording) -> None:
    """The run as one JSON object, written as the file is read: the calls and the folds are
    long lists, each item written when it is complete (as ``json.dumps(..., indent=2)``
    would lay it out)."""
    import sys

    from afcore.readmodel import run_view

    out = sys.stdout

    def item(value: Any) -> str:
        return "    " + dumps(value).replace("\n", "\n    ")

    def field(key: str, value: Any) -> str:
        text = dumps(value).replace("\n", "\n  ")
        return f"  {dumps(key)}: {text}"

    folds: list[dict[str, Any]] = []
    started = False
    for part in run_view(rec):
        if part.kind == "header":
            head = part.data.to_json()
            out.write("{\n" + ",\n".join(field(k, v) for k, v in head.items()))
            out.write(',\n  "calls": [')
        elif part.kind == "call":
            out.write(("," if started else "") + "\n" + item(part.data.to_json()))
            started = True
        elif part.kind == "fold":
            # A few per call at most, small: written after the calls.
            folds.append(part.data.to_json())
        else:
            out.write("\n  ],\n" if started else "],\n")
            end = {k: v for k, v in part.data.to_json().items() if k != "calls"}
            out.write(",\n".join([field("folds", folds), *(field(k, v) for k, v in end.items())]))
            out.write("\n}\n")
    out.flush()


# -- one call ----------------------------------------------------------------------------


def _print_call(console: Console, d: CallDetail, file_name: str) -> None:
    out = Printer(console)
    _print_detail(out, d)
    out.flush()


def _print_detail(console: Printer, d: CallDetail) -> None:
    width = max(console.width, 60)
    head = Line(
        (f"call {d.call}", "bold cyan"),
        (_summarizer_for(d.kind, d.fold), "bold magenta"),
        (f" · iteration {d.iteration} · {safe(d.rsid)} · model ", "dim"),
        safe(d.model),
    )
    attempt = d.attempt
    if attempt is not None:
        head.append(f" · attempt {attempt.n} of {attempt.of} · provider ", "dim")
        head.append(safe(attempt.provider))
        if attempt.via != "agent":
            head.append(f" ({safe(attempt.via)})", "dim")
    console.print(head)
    for skipped in attempt.skipped if attempt is not None else []:
        console.print(fit(Line("skipped ", style="yellow"), _skipped_text(skipped), width))
    v = d.verification
    if v.verified:
        console.print(
            Line(
                ("✓ verified", "bold green"),
                (f": rebuilt from the file, it hashes to {v.hash[:12]}… as when sent", "dim"),
            )
        )
    else:
        console.print(
            Line(("✗ not verified", "bold red"), ": ", safe(str(v.problem or "unknown problem")))
        )
    if d.system is None or d.messages is None or d.tools is None:
        console.print(Line("the request cannot be rebuilt from this file", style="red"))
        return
    if d.injections is not None:
        print_hanging(console, _decisions_text(d.injections, width, make=console.line), indent=0)
    previous = d.previous_call
    since = f" since call {previous}" if previous is not None else ""
    from afcore.readmodel import Removed

    removed = d.removed or Removed([], [], [])

    def section(title: str, note: str, changes: str = "") -> None:
        console.print()
        console.print(
            Line(
                (title, "bold"),
                (f"  {note}", "dim"),
                (f" · {changes}{since}" if changes and previous is not None else "", "yellow"),
            )
        )

    def breakpoint_line() -> None:
        console.print(Line("    ┈┈ cache breakpoint ┈┈", style="dim"))

    system = d.system
    total = sum(len(s.text) for s in system)
    section(
        "system",
        f"{plural(len(system), 'segment')}, {total:,} chars",
        _change_counts([s.change for s in system]),
    )
    for seg in system:
        head = (
            Line(f"  [{seg.position}] ", style="dim")
            .extend(_origin(seg.provenance, seg.change))
            .flat()
        )
        _with_reason(console, head, seg.provenance, width)
        print_indented(console, block(seg.text))
        if seg.cache_breakpoint:
            breakpoint_line()
    for gone in removed.system:
        console.print(
            Line(("  gone", "yellow"), (f"{since}: ", "dim")).extend(
                _origin_of(gone.source, gone.id)
            )
        )

    messages = d.messages
    injected = [m.n for m in messages if (m.writer or "").startswith("inject#")]
    section(
        "messages",
        f"{plural(len(messages), 'message')} (window {window_text(d.window, injected)})",
        _change_counts([m.change for m in messages]),
    )
    seams: dict[int | None, list[str]] = {}
    for seam in d.seams or []:
        seams.setdefault(seam.before, []).append(seam_text(seam.fold))

    def print_seams(before: int | None) -> None:
        for text in seams.pop(before, []):
            console.print(Line(f"  {text}", style="magenta"))

    for msg in messages:
        print_seams(msg.n)
        role = as_text(msg.role) or "?"
        label = Line((f"  #{msg.n} ", "dim"), (safe(role), "bold"))
        if role == "tool":
            label.append(f" {safe(as_text(msg.message.get('name')))}", "cyan")
            if msg.message.get("is_error"):
                label.append(" error", "red")
        if msg.provenance is not None and msg.provenance.source is not None:
            label.append("  ")
            label.extend(_origin(msg.provenance, msg.change))
        elif msg.change:
            label.append(f"  {msg.change}", "bold yellow")
        # Who wrote it is in its role and provenance; the stage id is in --json (writer).
        _with_reason(console, label, msg.provenance, width)
        for part in _message_parts(msg.message):
            if isinstance(part, tuple):
                name, args = part
                print_indented(
                    console,
                    Line(
                        ("→ ", "cyan"),
                        (safe(str(name)), "bold cyan"),
                        ("(", "dim"),
                        args_text(args, width - 12),
                        (")", "dim"),
                    ),
                )
            else:
                print_indented(console, block(part))
    for rest in list(seams):
        print_seams(rest)
    for gone in removed.messages:
        if gone.fold is not None:
            continue  # its fold's seam says where it went
        what = Line(f"#{gone.n}")
        if gone.source:
            what.append(" ")
            what.extend(_origin_of(gone.source, gone.id))
        console.print(Line(("  gone", "yellow"), (f"{since}: ", "dim")).extend(what))

    tools = d.tools
    section("tools", plural(len(tools), "tool"), _change_counts([t.change for t in tools]))
    for spec in tools:
        console.print(
            Line(
                "  ",
                (safe(as_text(spec.name)), "bold cyan"),
                ("(", "dim"),
                safe(params_text(spec.input_schema)),
                (")", "dim"),
                "  ",
                ("strict  " if spec.spec.get("strict") is True else "", "yellow"),
            ).extend(_tool_origin(spec.source, spec.id, spec.input_schema, spec.change))
        )
        console.print(Line("    ", line(as_text(spec.description), width - 6)))
        if spec.cache_breakpoint:
            breakpoint_line()
    for gone in removed.tools:
        console.print(
            Line(
                ("  gone", "yellow"),
                (f"{since}: ", "dim"),
                (safe(as_text(gone.name)), "cyan"),
                "  ",
            ).extend(_tool_origin(gone.source, gone.id, None, None))
        )
    if d.params:
        section("params", "")
        console.print(Line("  " + args_text(d.params, width - 4)))

    r = d.response
    failures = [e for e in d.errors if e.attempt is None]
    for err in failures:
        status = f" ({err.status})" if isinstance(err.status, int) else ""
        section("failed", f"{safe(as_text(err.reason or err.kind))}{status}")
        print_indented(console, Line(f"{safe(err.kind)}: {safe(as_text(err.message))}"))
        for said in _vendor_said(err):
            print_indented(console, Line(said, style="dim"))
        if err.decision is not None:
            print_indented(
                console, Line("→ ", style="dim").extend(_decision_text(err.decision, True))
            )
            if err.decision.reason:
                print_indented(console, Line(safe(as_text(err.decision.reason)), style="dim"))
    if r is None:
        if not failures:
            section("response", "none recorded: the run stopped before the reply came")
        return
    said = f"{stop_text(r.stop_reason)} · {usage_text(usage_json(r.usage))} · {ms_text(r.ms)}"
    section("response", said + (f" · {safe(r.response_id)}" if r.response_id else ""))
    for note in _reply_notes(r):
        print_indented(console, Line(note, style="yellow"))
    if r.refused and r.decision is not None:
        print_indented(
            console, Line("refused → ", style="yellow").extend(_decision_text(r.decision, False))
        )
    if r.text:
        print_indented(console, block(r.text))
    for tc in r.tool_calls:
        print_indented(
            console,
            Line(
                ("→ ", "cyan"),
                (safe(str(tc.name)), "bold cyan"),
                ("(", "dim"),
                args_text(tc.args, width - 12),
                (")", "dim"),
            ),
        )


# -- provenance --------------------------------------------------------------------------


def _origin(p: Provenance, change: str | None = None) -> Line:
    """``skill prices`` / ``base`` / ``turn 3`` (a session's history), and ``new`` or
    ``changed`` since the previous call."""
    out = Line((p.label, "magenta")) if p.label is not None else _origin_of(p.source, p.id)
    if change:
        out.append(f"  {change}", "bold yellow")
    return out


def _origin_of(source: str | None, id: str | None) -> Line:
    out = Line((safe(as_text(source)) or "?", "magenta"))
    if id:
        out.append(f" {safe(as_text(id))}", "bold magenta")
    return out


def _why(p: Provenance) -> str:
    """The trigger, the cache policy and the reason it fired, when that says more than the
    trigger: ``rule · cache never · rule returned true reading user_message = "..."``."""
    trigger, reason = as_text(p.trigger), as_text(p.reason)
    parts = [trigger]
    if p.cache:
        parts.append(f"cache {as_text(p.cache)}")
    if reason != trigger:
        parts.append(reason)
    if p.reads and " reading " not in reason:
        # What a content function read, or the result a tool-return trigger saw.
        parts.append(f"reading {evidence_text(p.reads)}")
    return " · ".join(part for part in parts if part)


def _with_reason(console: Printer, head: Line, p: Provenance | None, width: int) -> None:
    """Print ``head`` and, for injected context, why it is there: on the same line when it
    fits, else wrapped below it."""
    why = _why(p) if p is not None else ""
    if not why or p is None or p.source in (None, "base", "configure"):
        console.print(head)
        return
    if len(head) + 3 + len(line(why, 10_000)) <= width:
        console.print(Line(*head.flat().pieces, (" · ", "dim"), (line(why, 10_000), "dim")))
        return
    console.print(head)
    # Evidence is kept short by the recorder (a preview of each value): show all of it.
    print_indented(console, Line(line(why, 1_000), style="dim"), indent=6)


def _tool_origin(source: Any, id: Any, schema: Any, change: str | None) -> Line:
    source, id = as_text(source), as_text(id)
    if source == "skill" and id == "read_skill":
        prop = as_dict(as_dict(schema).get("properties")).get("id")
        skills = as_dict(prop).get("enum")
        listed = ", ".join(map(as_text, skills)) if isinstance(skills, list) else ""
        out = Line(("skill catalog", "magenta"))
        if listed:
            out.append(f": {safe(listed)}", "magenta")
    else:
        out = Line((safe(source) or "?", "magenta"))
        if id:
            out.append(f" {safe(id)}", "bold magenta")
    if change:
        out.append(f"  {change}", "bold yellow")
    return out


def _change_counts(changes: list[str | None]) -> str:
    new = changes.count("new")
    changed = changes.count("changed")
    return ", ".join(
        part
        for part in (f"{new} new" if new else "", f"{changed} changed" if changed else "")
        if part
    )


def _tool_changes(added: list[str], removed: list[str]) -> str:
    """``+convert_currency -search``: the tools slot since the previous call (untrusted)."""
    return " ".join([f"+{t}" for t in added] + [f"-{t}" for t in removed])


def _decisions_text(
    inj: Decisions,
    reason_limit: int,
    cap: int | None = None,
    *,
    make: Callable[..., Line | str] = Line,
) -> Line | str:
    """``injections 5 evaluated · fired tone, refund-rule · skipped cite (search did not
    return)``. Skipped injections that give the same reason are named together, failed ones
    first; each reason is cut to ``reason_limit``. ``cap``: name at most this many
    injections in each list, and say how many more there are. ``make`` makes the line of its
    pieces (a :class:`Printer`'s)."""
    out: list[str | tuple[str, str]] = [("injections ", "dim"), f"{inj.evaluated} evaluated"]
    if inj.fired:
        out.append((" · fired ", "dim"))
        out += _ids([f.id for f in inj.fired], cap, "green")
    if not inj.skipped:
        return make(*out)
    out.append((" · skipped ", "dim"))
    groups: dict[tuple[bool, str], list[Any]] = {}
    for skip in inj.skipped:
        failed = skip.error is not None
        why = as_text(skip.reason)
        if failed:
            why += f": {as_text(skip.error)}"
        groups.setdefault((failed, why), []).append(skip.id)
    ordered = sorted(groups.items(), key=lambda g: not g[0][0])  # failed first, else in order
    shown = ordered if cap is None else ordered[:cap]
    for i, ((failed, why), ids) in enumerate(shown):
        if i:
            out.append(", ")
        out += _ids(ids, cap, "red" if failed else "")
        out.append((f" ({line(why, reason_limit)})", "red" if failed else "dim"))
    if len(shown) < len(ordered):
        rest = sum(len(ids) for _, ids in ordered[len(shown) :])
        more = f", and {rest:,} more for {len(ordered) - len(shown):,} other reasons"
        out.append((more, "dim"))
    return make(*out)


_DECIDED: dict[tuple[int, tuple[str, ...]], str] = {}
"""An overview's injections line without colour when none was skipped, by what it says (no
reason to cut: the width changes nothing): a run's calls mostly make the same decisions."""


def _call_decisions(inj: Decisions, width: int, make: Callable[..., Line | str]) -> Line | str:
    """A call's injections line in the overview: :func:`_decisions_text`, kept without
    colour for the decisions calls repeat."""
    if make is not _joined or inj.skipped:
        return _decisions_text(inj, max(60, width // 2), cap=8, make=make)
    ids = [d.id for d in inj.fired]
    try:
        "".join(ids)  # ids of another type say other words as text (1.0, true): not kept
    except TypeError:
        return _decisions_text(inj, max(60, width // 2), cap=8, make=make)
    key = (inj.evaluated, tuple(ids))
    said = _DECIDED.get(key)
    if said is None:
        made = _decisions_text(inj, max(60, width // 2), cap=8, make=make)
        assert isinstance(made, str)
        if len(_DECIDED) >= 1024:
            _DECIDED.clear()
        said = _DECIDED[key] = made
    return said


def _ids(ids: list[Any], cap: int | None, style: str) -> list[str | tuple[str, str]]:
    """``a, b, c`` or, past ``cap``, ``a, b, c and 12 more``: a line's pieces."""
    shown = ids if cap is None else ids[:cap]
    out: list[str | tuple[str, str]] = [(", ".join(safe(as_text(i)) for i in shown), style)]
    if len(shown) < len(ids):
        out.append((f" and {len(ids) - len(shown):,} more", "dim"))
    return out


def _message_parts(msg: dict[str, Any]) -> list[str | tuple[Any, Any]]:
    """A message's text and tool calls, in order; thinking is summarised by its length."""
    content = msg.get("content")
    if not isinstance(content, list):
        return [as_text(content)]
    parts: list[str | tuple[Any, Any]] = []
    for b in content:
        if not isinstance(b, dict):
            parts.append(as_text(b))
        elif b.get("type") == "text":
            parts.append(as_text(b.get("text")))
        elif b.get("type") == "tool_call":
            parts.append((b.get("name"), b.get("args")))
        elif b.get("type") in ("thinking", "opaque"):
            parts.append(block_text(b))
        else:
            parts.append(as_text(b))
    return parts


_NOTED = ("max_tokens", "pause_turn", "refusal")
"""Stop reasons said in words, in colour: the answer is not what it seems."""


def _reply_notes(r: Response) -> list[str]:
    """What a reply says besides its content: thinking it could not show, blocks kept for
    the vendor, params that were not sent."""
    notes = []
    if r.redacted_thinking:
        times = f" x{r.redacted_thinking}" if r.redacted_thinking > 1 else ""
        notes.append(f"(redacted thinking{times}: the vendor sent it encrypted)")
    notes += [safe(o) for o in r.opaque]
    if r.unsent_params:
        unsent = ", ".join(safe(p) for p in r.unsent_params)
        notes.append(f"{unsent} not sent: the server has no way to say it")
    return notes


def _vendor_said(err: CallError) -> list[str]:
    """What the vendor said about an error besides its message."""
    out = []
    if err.error_type:
        out.append(f"error type {safe(err.error_type)}")
    if err.request_id:
        out.append(f"request id {safe(err.request_id)}")
    if err.details:
        out.append("details " + args_text(err.details, 200))
    return out
