"""The governance stages of the loop: the middleware chains around tools and messages, the
pause for a person, and the answer's contract.

    govern:input#k        (agents with message middleware) before the seed: writes
                          govern:input; the seed reads it
    govern:<tool>#k       (agents with on_tool_call links) before a tool call runs: reads
                          reply:<n>; writes govern:<tool>#<k>, and tool:<tool>#<k>.args when
                          a link changed the arguments; the tool stage reads both
    tool:<tool>#k         as before; with on_tool_result links also writes
                          govern:<tool>#<k>.result
    pause / run_end       a link asked: the run ends `paused`, with its checkpoint
    resume / resume#k     a person answered: writes approval:<tool>#<k>
    govern:output#k       (message middleware) on an answer: reads reply:<n>
    output#k              (output schema) reads reply:<n>; writes output:<m>, and the
                          correction message when the answer is sent back
    fallback#k            (typed runs) writes output:<m> for each fallback tier taken
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from afcore.errors import MessageDeniedError, OutputSchemaError
from afcore.governance._chain import Walk, walk_call, walk_message, walk_result
from afcore.governance._contract import NO_CANNED
from afcore.governance._pause import Paused
from afcore.governance._verbs import Phase, ToolCallInfo, ToolResultInfo
from afcore.loop._state import Output, RunState
from afcore.loop._values import as_text
from afcore.messages import Source, ToolCall, ToolResultMessage, UserMessage
from afcore.recording._models import (
    Checkpoint,
    MiddlewareDecision,
    OutputCheck,
    Pause,
    PendingCall,
    ToolStatus,
    line,
    trusted,
)
from afcore.recording._writer import round_ms, usage_info
from afcore.tools._validation import validate_args

__all__ = [
    "Decided",
    "PauseRun",
    "ResumeAnswer",
    "govern_calls",
    "govern_input",
    "govern_result",
    "pause_here",
    "settle_answer",
    "settle_typed",
]

_decision = trusted(MiddlewareDecision)
_check = trusted(OutputCheck)
_checkpoint = trusted(Checkpoint)
_pause = line(Pause)
_pending = trusted(PendingCall)
_CORRECTION = Source(kind="output_schema", id="output_schema")


@dataclass
class Decided:
    """A tool call once its chain was walked: run it (with these arguments) or answer it
    with a denial; the keys its tool stage reads besides the reply."""

    call: ToolCall
    k: int
    run: bool
    reason: str = ""
    reads: list[str] = field(default_factory=list)
    validated: bool = False
    """Its arguments were checked against the tool's schema already."""


@dataclass(frozen=True)
class ResumeAnswer:
    """A person's answer to a paused run's question."""

    approve: bool
    why: str | None
    approval_key: str
    asked: int
    """The index, among the reply's tool calls, of the call whose chain asked."""


class PauseRun(Exception):  # noqa: N818 - not an error: how the loop leaves for a person
    """A link asked: the loop stops here, and the run ends paused."""

    def __init__(self, rsid: str, index: int, call: ToolCall, k: int, walk: Walk) -> None:
        super().__init__(walk.question)
        self.rsid = rsid
        self.index = index
        self.call = call
        self.k = k
        self.walk = walk


# -- messages -------------------------------------------------------------------------


async def govern_input(run: RunState, message: str) -> tuple[str, list[str]]:
    """The user's message through the message chain, before the run commits it: the text
    every later stage reads, and the key the seed reads (none without a chain)."""
    links = run.agent.governance.on_message
    if not links:
        return message, []
    walk = await walk_message(links, message, "input")
    _commit_message(run, walk, "input", reads=())
    return walk.value, ["govern:input"]


async def _govern_output(run: RunState, reply_key: str, text: str) -> tuple[str, list[str]]:
    links = run.agent.governance.on_message
    if not links:
        return text, []
    walk = await walk_message(links, text, "output")
    _commit_message(run, walk, "output", reads=(reply_key,))
    return walk.value, ["govern:output"]


def _commit_message(run: RunState, walk: Walk, phase: Phase, reads: tuple[str, ...]) -> None:
    rec = run.rec
    key = f"govern:{phase}"
    decision = _decision(
        moment=phase,
        verb=walk.verb,
        links=walk.links,
        not_walked=walk.not_walked,
        changed=walk.changed,
    )
    rsid = rec.next_rsid(key)
    rec.commit(rsid, key, run.iteration, reads=reads, writes=[rec.write(key, decision)])
    if walk.verb != "allow":
        raise MessageDeniedError(walk.reason, phase=phase, link=walk.by)


# -- tool calls -----------------------------------------------------------------------


async def govern_calls(
    run: RunState,
    planned: list[tuple[ToolCall, int]],
    reply_key: str,
    resume: ResumeAnswer | None = None,
) -> list[Decided]:
    """Walk the call-side chain over each call of a reply, in call order, before any of
    them runs. A link that asks stops the walk (:class:`PauseRun`); a resumed walk takes up
    the decisions recorded before the pause and goes on from the call that asked."""
    agent, rec = run.agent, run.rec
    links = agent.governance.on_call
    visible = run.composition.tools_by_name if run.composition is not None else agent.tools
    mode = agent.tool_arg_validation
    out: list[Decided] = []
    for i, (call, k) in enumerate(planned):
        tool = visible.get(call.name)
        base = f"{call.name}#{k}"
        if resume is not None and i < resume.asked:
            out.append(_recorded(run, call, k))
            continue
        start = 0
        changed_before = False
        reads = [reply_key]
        if resume is not None and i == resume.asked:
            if not resume.approve:
                why = f": {resume.why}" if resume.why else "."
                out.append(
                    Decided(
                        call, k, False, f"A person declined this call{why}", [resume.approval_key]
                    )
                )
                continue
            before = _as_recorded(run, call, k)
            changed_before = before is not call
            call = before
            asker = _decision_of(run, f"govern:{base}")
            names = [name for name, _ in links]
            last = asker.links[-1].link if asker is not None and asker.links else ""
            start = names.index(last) + 1 if last in names else len(links)
            reads = [reply_key, resume.approval_key]
        elif tool is None or (mode == "enforce" and validate_args(tool, call.args)):
            # An unknown tool, or arguments the tool refuses: answered as without a chain.
            out.append(Decided(call, k, True))
            continue
        info = ToolCallInfo(
            name=call.name,
            args=dict(call.args),
            call_id=call.id,
            k=k,
            iteration=run.iteration,
            run_id=run.run_id,
            state=run.state,
        )
        walk, _ = await walk_call(links, info, start)
        problems: list[dict[str, str]] = []
        if walk.verb == "allow" and walk.changed and tool is not None and mode != "off":
            problems = [p.to_json() for p in validate_args(tool, walk.value)]
            if problems and mode == "enforce":
                said = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:5])
                walk.verb = "deny"
                walk.reason = (
                    f"The tool middleware ({walk.by}) changed the arguments of {call.name} into "
                    f"ones the tool refuses: {said}"
                )
        if walk.verb == "ask" and not _can_pause(run):
            walk.verb = "deny"
            walk.reason = (
                f"This call needs a person's approval ({walk.by} asks: {walk.question}), "
                f"and {_why_not_pause(run)}"
            )
        key = f"govern:{base}"
        writes = [
            rec.write(
                key,
                _decision(
                    moment="tool_call",
                    verb=walk.verb,
                    links=walk.links,
                    not_walked=walk.not_walked,
                    changed=walk.changed,
                    tool=call.name,
                    k=k,
                    call_id=call.id,
                    problems=problems,
                    resumed=start > 0,
                ),
            )
        ]
        if walk.changed:
            writes.append(rec.write(f"tool:{base}.args", walk.value))
        rsid = rec.next_rsid(f"govern:{call.name}")
        rec.commit(rsid, f"govern:{call.name}", run.iteration, reads=reads, writes=writes)
        if walk.changed:
            call = replace(call, args=dict(walk.value))
        if walk.verb == "ask":
            raise PauseRun(rsid, i, call, k, walk)
        changed = walk.changed or changed_before
        stage_reads = [key] + ([f"tool:{base}.args"] if changed else [])
        if walk.verb == "deny":
            out.append(Decided(call, k, False, walk.reason, stage_reads))
        else:
            validated = mode == "enforce" and not problems
            out.append(Decided(call, k, True, reads=stage_reads, validated=validated))
    return out


def _can_pause(run: RunState) -> bool:
    return run.rec.enabled and run.rec.path is not None and _session(run) is None


def _session(run: RunState) -> Any:
    return run.conversation.session if run.conversation is not None else None


def _why_not_pause(run: RunState) -> str:
    if _session(run) is not None:
        return "a session's turn cannot wait for one"
    return "a run that is not recorded cannot wait for one (there is nothing to resume from)"


def _decision_of(run: RunState, key: str) -> MiddlewareDecision | None:
    value = run.rec_value(key)
    return MiddlewareDecision.model_validate(value) if isinstance(value, dict) else None


def _as_recorded(run: RunState, call: ToolCall, k: int) -> ToolCall:
    """The call with the arguments the links before a pause left it with."""
    args = run.rec_value(f"tool:{call.name}#{k}.args")
    return replace(call, args=dict(args)) if isinstance(args, dict) else call


def _recorded(run: RunState, call: ToolCall, k: int) -> Decided:
    """A call decided before the pause, as its govern stage recorded it."""
    base = f"{call.name}#{k}"
    decision = _decision_of(run, f"govern:{base}")
    if decision is None:
        return Decided(call, k, True)  # walked no chain (an unknown tool, refused arguments)
    call = _as_recorded(run, call, k)
    reads = [f"govern:{base}"] + ([f"tool:{base}.args"] if decision.changed else [])
    if decision.verb == "deny":
        reason = next((d.reason or "" for d in reversed(decision.links) if d.verb == "deny"), "")
        if decision.problems:
            said = "; ".join(f"{p['path']}: {p['message']}" for p in decision.problems[:5])
            reason = (
                f"The tool middleware changed the arguments of {call.name} into ones the tool "
                f"refuses: {said}"
            )
        return Decided(call, k, False, reason, reads)
    return Decided(call, k, True, reads=reads)


async def govern_result(
    run: RunState,
    call: ToolCall,
    k: int,
    result: ToolResultMessage,
    status: ToolStatus,
) -> tuple[ToolResultMessage, ToolStatus, MiddlewareDecision | None]:
    """A tool's result through the result-side chain (walked backwards) before the model
    reads it. Only results of tools that ran go through it."""
    links = run.agent.governance.on_result
    if not links or status not in ("ok", "error"):
        return result, status, None
    info = ToolResultInfo(
        name=call.name,
        args=dict(call.args),
        call_id=call.id,
        k=k,
        iteration=run.iteration,
        run_id=run.run_id,
        content=result.content,
        is_error=result.is_error,
        state=run.state,
    )
    walk = await walk_result(links, info, as_text)
    decision = _decision(
        moment="tool_result",
        verb=walk.verb,
        links=walk.links,
        not_walked=walk.not_walked,
        changed=walk.changed,
        tool=call.name,
        k=k,
        call_id=call.id,
    )
    if walk.verb == "deny":
        denied = ToolResultMessage(call.id, call.name, walk.reason, is_error=True)
        return denied, "withheld", decision
    if walk.changed:
        result = ToolResultMessage(call.id, call.name, walk.value, is_error=result.is_error)
    return result, status, decision


# -- the answer -----------------------------------------------------------------------


async def settle_answer(
    run: RunState, reply_key: str, text: str
) -> tuple[Literal["answer", "retry"], str, list[str]]:
    """An answer through the output chain (a denial raises: never asked again), then the
    contract: ``retry`` when it failed and retries are left (the errors are sent back),
    else ``answer``. Returns the route, the text the caller is to get, and the keys the
    route and the answer read."""
    text, reads = await _govern_output(run, reply_key, text)
    contract = run.agent.governance.contract
    if contract is None:
        return "answer", text, [reply_key, *reads]
    rec = run.rec
    run.output_checks += 1
    n = run.output_checks
    value, problems = contract.check(text)
    # Every check so far was of an answer (the tiers come after the last): n answers, n - 1
    # of them sent back.
    retry = bool(problems) and n <= contract.retries
    rsid = rec.next_rsid("output")
    writes = [
        rec.write(
            f"output:{n}",
            _check(attempt=n, tier="answer", ok=not problems, errors=problems, retry=retry),
        )
    ]
    if retry:
        writes.append(run.remember(UserMessage(contract.correction(problems)), rsid, _CORRECTION))
    rec.commit(rsid, "output", run.iteration, reads=[reply_key, *reads], writes=writes)
    run.output = Output(
        met=not problems,
        value=value,
        errors=problems,
        checks=n,
        tier="answer" if not problems else None,
        raw=text,
    )
    return ("retry" if retry else "answer"), text, [reply_key, *reads, f"output:{n}"]


async def settle_typed(run: RunState, raw: str) -> None:
    """For a typed run whose answer did not meet the contract: the fallback function, then
    the canned value, each recorded as a check."""
    contract = run.agent.governance.contract
    output = run.output
    if contract is None or not run.typed or (output is not None and output.met):
        return
    errors = output.errors if output is not None else [{"path": "$", "message": "no answer"}]
    rec = run.rec
    reads = [f"output:{run.output_checks}"] if run.output_checks else []
    if contract.fallback is not None:
        run.output_checks += 1
        n = run.output_checks
        error = OutputSchemaError(
            f"the answer does not hold to {contract.name}", errors=errors, raw=raw, checks=n - 1
        )
        failed: str | None = None
        value: Any = None
        problems: list[dict[str, str]] = []
        try:
            value, problems = contract.validate(await contract.call_fallback(error, raw))
        except Exception as e:  # the next tier takes over; the record says why
            failed = f"{type(e).__name__}: {e}"
        ok = failed is None and not problems
        check = _check(
            attempt=n,
            tier="fallback",
            ok=ok,
            errors=problems,
            error=failed,
            value=_plain(value) if ok else None,
        )
        rsid = rec.next_rsid("fallback")
        rec.commit(
            rsid, "fallback", run.iteration, reads=reads, writes=[rec.write(f"output:{n}", check)]
        )
        reads = [f"output:{n}"]
        if ok:
            run.output = Output(False, value, errors, n, "fallback", raw)
            return
    if contract.canned is not NO_CANNED:
        run.output_checks += 1
        n = run.output_checks
        check = _check(attempt=n, tier="canned", ok=True, value=_plain(contract.canned))
        rsid = rec.next_rsid("fallback")
        rec.commit(
            rsid, "fallback", run.iteration, reads=reads, writes=[rec.write(f"output:{n}", check)]
        )
        run.output = Output(False, contract.canned, errors, n, "canned", raw)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


# -- the pause --------------------------------------------------------------------------


def pause_here(run: RunState, pause: PauseRun, ms: float) -> Paused:
    """Record where a paused run stands (the `pause` record and its checkpoint, which the
    `run_end` after it follows) and say what is asked."""
    rec = run.rec
    walk = pause.walk  # the walk that asked
    reply = run.last_call
    calls = _reply_calls(run)
    pending = [
        _pending(
            id=c.id,
            name=c.name,
            k=k,
            state="decided" if i < pause.index else "asked" if i == pause.index else "waiting",
        )
        for i, (c, k) in enumerate(calls)
    ]
    live = run.live
    turn = run.turn
    checkpoint = _checkpoint(
        reply=reply,
        iteration=run.iteration,
        asked=pause.call.id,
        link=walk.by,
        question=walk.question,
        calls=pending,
        model_calls=run.calls,
        usage=usage_info(run.usage),
        tool_counts=dict(run.tool_counts),
        model=run.model,
        last_text=run.last_text,
        history=rec.history_ranges(),
        live=None if live is None else list(live.ranges),
        folded=live is not None and live.folded,
        request=run.request.n if run.request is not None else None,
        folds=run.folds,
        last_call=run.last_call,
        last_usage=None if run.last_usage is None else usage_info(run.last_usage),
        active_skills=dict(turn.active_skills) if turn is not None else {},
        last_tool_results={
            name: int(key[8:])
            for name, key in run.result_keys.items()
            if key.startswith("message:") and key[8:].isdecimal()
        },
        output_checks=run.output_checks,
        ms=round_ms(ms),
    )
    rec.event(_pause(rsid=pause.rsid, iter=run.iteration, checkpoint=checkpoint))
    assert rec.path is not None  # a run that cannot be continued does not pause
    return Paused(
        run_id=run.run_id,
        recording=rec.path,
        question=walk.question,
        link=walk.by,
        tool=pause.call.name,
        args=dict(pause.call.args),
        call_id=pause.call.id,
        k=pause.k,
        iteration=run.iteration,
    )


def _reply_calls(run: RunState) -> list[tuple[ToolCall, int]]:
    """The tool calls of the reply the run stopped at, each with its k."""
    last = run.history[-1] if run.history else None
    calls = list(getattr(last, "tool_calls", ()) or ())
    counts = dict(run.tool_counts)
    out: list[tuple[ToolCall, int]] = []
    for c in reversed(calls):
        out.append((c, counts[c.name]))
        counts[c.name] -= 1
    return out[::-1]
