"""The agent loop: call the model, run the tools it asks for, repeat until it answers.

Every stage commits what it read and wrote to the recording:

    history#0              writes message:1..k: the conversation the run continues (runs
                           given history=, and session turns; the seed is then #1)
    seed#0                 writes user_message, message:1
    configure#1            writes model, instructions         (agents with .configure())
    inject#k               reads what the rules read; writes injections (the decisions),
                           system, tools, and the injected messages, each when it changed
                           (agents with injections; none when nothing changed)
    call-llm#k   (call)    reads system, tools, messages; writes call:<n>   as it is sent
                 (reply)   writes reply:<n>, message:<m>, route       when the answer is in
                           (route: tools | answer | continue; with an output chain or
                           schema, a route#k stage after them writes it instead)
    tool:<name>#k          reads reply:<n>, writes message:<m> (the result)  one per tool call
    finalize#k             reads reply:<n>, writes answer

Agents with middleware or an output schema add the governance stages (``_govern``): the
rules around the message, each tool call and result, and the answer; a pause ends the run
``paused``, and ``_resume`` continues it in the same file.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import warnings
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import orjson

from afcore._version import __version__
from afcore.errors import (
    AfError,
    ProviderError,
    RefusedError,
    ReliabilityFailFastError,
    RunError,
    UsageError,
)
from afcore.governance._pause import Paused
from afcore.injections._engine import (
    READ_SKILL,
    Composition,
    TurnState,
)
from afcore.injections._model import ConfigureContext
from afcore.loop._attempts import attempt_call
from afcore.loop._conversation import Conversation
from afcore.loop._govern import (
    Decided,
    PauseRun,
    ResumeAnswer,
    govern_calls,
    govern_input,
    govern_result,
    pause_here,
    settle_answer,
    settle_typed,
)
from afcore.loop._interrupt import (
    INTERRUPTED_TEXT,
    ToolInterrupted,
    can_inline,
    inline,
    sigint_reaches_tools,
)
from afcore.loop._interrupt import in_thread as run_in_thread
from afcore.loop._sources import Sources, new_seed
from afcore.loop._state import (
    AgentParts,
    RunResult,
    RunState,
    RunStatus,
    Served,
    provider_error,
)
from afcore.loop._values import as_text
from afcore.loop._window import visit
from afcore.messages import (
    AssistantMessage,
    Message,
    Request,
    Response,
    Source,
    SystemSegment,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from afcore.providers._base import StreamHandler
from afcore.recording._hashing import content_hash
from afcore.recording._models import (
    AgentInfo,
    ArgsInvalid,
    AttemptDecision,
    CeilingRefusal,
    ClockRead,
    ContractEnd,
    EffectInfo,
    ErrorEvent,
    ErrorInfo,
    Header,
    Line,
    MiddlewareDecision,
    RedactionInfo,
    RepeatInfo,
    ResultStatus,
    RunConfig,
    RunEnd,
    SessionLink,
    SubRun,
    ToolInfo,
    ToolOutcome,
    ToolProgress,
    ToolStatus,
    Truncation,
    as_json,
    line,
    trusted,
)
from afcore.recording._paths import started_at
from afcore.recording._writer import (
    Recorder,
    error_info,
    ranges,
    round_ms,
    usage_line,
    watcher_name,
)
from afcore.secrets import Redactor
from afcore.tools._assume import Assumed, assumed_note, fill_assumed
from afcore.tools._ceiling import ceiling_refusal, over_ceiling, truncation
from afcore.tools._envelope import RequireInstruction
from afcore.tools._notes import WIRE
from afcore.tools._reading import (
    Limits,
    answer_coverage,
    limits_block,
    read_result,
    with_limits,
)
from afcore.tools._repeats import RepeatedCalls, with_note
from afcore.tools._tool import Tool, ToolContext
from afcore.tools._validation import correction, validate_args
from afcore.window._live import LiveWindowState

__all__ = [
    "RunResult",
    "RunStatus",
    "drive",
    "iterate",
    "open_sources",
    "read_sources",
    "run_loop",
    "run_tools",
]


YIELD_EVERY = 0.005
"""Seconds of the loop's own work after which it lets the event loop in, even when its
provider and tools never wait on anything (a scripted model, a replay): a Ctrl-C or a
cancel then stops the run within about that, without the loop paying for a turn of the
event loop at every iteration."""

REQUIRE_INSTRUCTION: str = WIRE["ENVELOPE_WIRE"]["requireInstruction"]

_agent_info = trusted(AgentInfo)
_ceiling = trusted(CeilingRefusal)
_effect = trusted(EffectInfo)
_repeat = trusted(RepeatInfo)
_sub_run = trusted(SubRun)
_truncation = trusted(Truncation)
_args_invalid = line(ArgsInvalid)
_clock_read = line(ClockRead)
_config = trusted(RunConfig)
_contract_end = trusted(ContractEnd)
_error = line(ErrorEvent)
_header: Any = line(Header, plain=True)
_redaction = trusted(RedactionInfo)
_run_end: Any = line(RunEnd, plain=True)
_session = trusted(SessionLink)
_tool_info = trusted(ToolInfo)
_tool_outcome = line(ToolOutcome)
_tool_progress = line(ToolProgress)


async def run_loop(
    agent: AgentParts,
    message: str,
    rec: Recorder,
    run_id: str,
    state: dict[str, Any],
    identity: Any = None,
    stream: StreamHandler | None = None,
    conversation: Conversation | None = None,
    *,
    typed: bool = False,
    started: datetime | None = None,
) -> tuple[RunResult, BaseException | None]:
    """Run one turn of ``agent`` on ``message``, writing to ``rec``; close ``rec``. Returns
    how the run ended, and the exception to raise for it (None when it ended without one):
    the loop raises nothing itself, so its caller learns how the run ended whatever
    happened. ``stream`` sees each agent call's reply as it arrives. ``conversation``: the
    messages the turn continues from (None: it starts from ``message`` alone). ``typed``:
    the caller wants a typed answer (the output schema's fallback tiers may run).
    ``started``: the wall clock's reading the run was named by, which its header gives as
    its start (None: the clock is read for it)."""
    run = RunState(
        agent=agent,
        rec=rec,
        run_id=run_id,
        state=state,
        identity=identity,
        loop_thread=threading.get_ident(),
        model=agent.model,
        base=_base(agent),
        stream=stream,
        conversation=conversation,
        typed=typed,
        repeats=RepeatedCalls() if agent.repeated_call_nudge else None,
        started=started,
    )
    return await drive(run, _turn(run, message))


async def drive(
    run: RunState, body: Coroutine[Any, Any, tuple[RunStatus, str]]
) -> tuple[RunResult, BaseException | None]:
    """Run ``body`` (a turn, or a paused turn's continuation), then record how it ended and
    close the recording."""
    agent, rec = run.agent, run.rec
    clock = agent.recording.clock if agent.recording else time.perf_counter
    started = clock()
    status: RunStatus = "error"
    answer: str | None = None
    failure: BaseException | None = None
    raised: BaseException | None = None
    ended_by: ErrorInfo | None = None
    paused: Paused | None = None
    try:
        with sigint_reaches_tools():
            ended, said = await body
        if agent.replayer is not None:
            agent.replayer.finished(ended)  # a difference left: the run ends on it
        status, answer = ended, said
    except PauseRun as pause:
        status = "paused"
        paused = pause_here(run, pause, run.ms_before + (clock() - started) * 1000)
        if agent.replayer is not None and paused is not None:
            agent.replayer.paused(paused)  # the same question as the recorded run's?
    except (asyncio.CancelledError, KeyboardInterrupt) as e:
        status, failure, raised = "interrupted", e, e
    except AfError as e:
        failure, raised, ended_by = e, e, _ended_by(run, e)
    except Exception as e:  # an error of ours or of the application's: recorded, then raised
        failure, ended_by = e, error_info(e)
        raised = RunError(f"the run stopped on {type(e).__name__}: {e}", recording=rec.path)
        raised.__cause__ = e
    except BaseException as e:  # SystemExit and the like: the run ends, and it goes on up
        raised = e
    output = run.output
    try:
        if rec.enabled:
            contract = None
            if agent.governance.contract is not None and status != "paused":
                contract = _contract_end(
                    met=output is not None and output.met,
                    checks=run.output_checks,
                    tier=output.tier if output is not None else None,
                )
            answered = run.answered
            rec.event(
                _run_end(
                    status=status,
                    iterations=run.iteration,
                    calls=run.calls,
                    usage=usage_line(run.usage),
                    # The answer's write as the finalize stage made it, by a redactor
                    # that has learned nothing since.
                    answer=None
                    if not answer
                    else answered[1]
                    if answered is not None
                    and answered[0] is answer
                    and answered[2] == rec.redactor.shape
                    else rec.write("answer", answer),
                    error=None if ended_by is None else as_json(ended_by),
                    ms=round_ms(run.ms_before + (clock() - started) * 1000),
                    redactions=rec.redactor.count,
                    contract=None if contract is None else as_json(contract),
                ),
                # Made of af's own values and of writes screened as they were made, but
                # for an error's message.
                trusted=ended_by is None,
            )
    finally:
        rec.close()
    result = RunResult(
        status=status,
        answer=answer or "",
        iterations=run.iteration,
        calls=run.calls,
        usage=run.usage,
        run_id=run.run_id,
        recording=rec.path,
        error=failure,
        stop_reason=run.last_stop,
        transcript=tuple(run.live.messages if run.live is not None else run.history),
        paused=paused,
        output=output,
        answer_coverage=answer_coverage(
            run.declared, [(a.tool, a.argument, a.value) for a in run.assumed]
        )
        if run.declared or run.assumed
        else None,
    )
    return result, raised


def _base(agent: AgentParts) -> tuple[SystemSegment, ...]:
    """The base system segments: the builder's, then the output schema's instruction."""
    contract = agent.governance.contract
    return agent.system if contract is None else (*agent.system, contract.segment)


async def _turn(run: RunState, message: str) -> tuple[RunStatus, str]:
    """The loop itself: how the turn ended, and its answer (for `max_iterations`, the last
    text the model wrote)."""
    await _start(run, message)
    return await iterate(run)


async def iterate(run: RunState) -> tuple[RunStatus, str]:
    """Iterations until the run answers or reaches its limit."""
    agent, rec = run.agent, run.rec
    yielded = time.perf_counter()
    settles = agent.governance.settles
    while True:
        if run.iteration >= agent.max_iterations:
            await settle_typed(run, run.last_text)
            return "max_iterations", run.last_text
        run.iteration += 1
        reply_seq_key, response, ks = await _call_model(run)
        calls = response.tool_calls
        # A paused turn is not an answer: its reply is in the history (its route says
        # `continue`), and the next call sends it back for the vendor to go on (within the
        # iteration budget).
        paused = not calls and response.stop_reason == "pause_turn"
        answer = response.text
        reads: list[str] = [reply_seq_key]
        if not calls and not paused and settles:
            # The output chain and the contract decide where an answer goes: the route is
            # their commit's, after them (the reply does not write it).
            route, answer, reads = await settle_answer(run, reply_seq_key, answer)
            rec.commit(
                rec.next_rsid("route"),
                "route",
                run.iteration,
                reads=reads,
                writes=[rec.write("route", route, trusted=True)],
            )
            paused = route == "retry"
        if paused:
            rec.sync()
            continue
        if not calls:
            if run.conversation is not None and agent.window is not None:
                # The conversation goes on after this answer: leave what the next turn
                # continues from in budget, measured by the call just made.
                await visit(run, agent.window)
            answer, limit_reads = _limits_travel(run, answer)
            fin = rec.next_rsid("finalize")
            written = rec.write("answer", answer)
            if rec.enabled:
                run.answered = (answer, written, rec.redactor.shape)
            rec.commit(
                fin,
                "finalize",
                run.iteration,
                reads=[*reads, *limit_reads],
                writes=[written],
            )
            await settle_typed(run, answer)
            return "answer", answer
        if agent.window is not None:
            await visit(run, agent.window)
        await run_tools(run, list(zip(calls, ks, strict=True)), reply_seq_key)
        rec.sync()
        now = time.perf_counter()
        if now - yielded >= YIELD_EVERY:
            rec.flush()  # nothing held back while other tasks run
            await asyncio.sleep(0)
            yielded = now


def _limits_travel(run: RunState, answer: str) -> tuple[str, list[str]]:
    """The answer with the limits the tools declared appended (agents that asked for it,
    with no output schema: a typed answer gets them as data), and the keys it read."""
    agent = run.agent
    if not agent.limits_travel or agent.governance.contract is not None:
        return answer, []
    assumed = [(a.tool, a.argument, a.value) for a in run.assumed]
    block = limits_block(((tool, limits) for tool, _, limits in run.declared), assumed)
    if block is None:
        return answer, []
    return with_limits(answer, block), list(run.limits_keys)


def _ended_by(run: RunState, e: AfError) -> ErrorInfo:
    """What run_end says about the error that stopped the run; with reliability rules, also
    the kind word they decide on and the status."""
    if isinstance(e, ReliabilityFailFastError):
        return error_info(e, reason=e.kind)
    if isinstance(e, ProviderError) and run.agent.reliability is not None:
        # A provider's own exception, wrapped: of a kind no rule knows, as rules saw it.
        wrapped = type(e) is ProviderError and not isinstance(e.__cause__, ProviderError | None)
        return error_info(
            e, reason="unknown" if wrapped else e.kind, status=e.status, mid_stream=e.mid_stream
        )
    return error_info(e)


async def _start(run: RunState, message: str) -> None:
    agent, rec = run.agent, run.rec
    if agent.replayer is not None:
        agent.replayer.start(rec.path if rec.enabled else None)
    run.sources = open_sources(run)
    if rec.enabled:
        # Before anything is written: a secret the inputs name (a state's `password`, a
        # `token=...` in the message or the conversation before it) is replaced wherever
        # it appears, the header included.
        inputs = {"user_message": message, "state": run.state, "identity": run.identity}
        if run.conversation is not None:
            inputs["history"] = [m.to_json() for m in run.conversation.history]
        rec.header(_header_line(run, inputs), screened=True)
        for t in agent.tools.values():
            rec.tool_ref(t.spec)
    if agent.window is not None:
        run.live = LiveWindowState()
    conversation = run.conversation
    if conversation is not None and conversation.history:
        # The conversation before this message, recorded as what it is: prior messages,
        # each with where it came from, written before the seed.
        rsid = rec.next_rsid("history")
        writes = []
        for i, prior in enumerate(conversation.history):
            writes.append(run.remember(prior, rsid, conversation.source(i)))
        rec.commit(rsid, "history", 0, writes=writes)
    # The message as the message chain leaves it is what the run agrees was said.
    message, reads = await govern_input(run, message)
    seed = rec.next_rsid("seed")
    write = run.remember(UserMessage(message), seed)
    if run.live is not None:
        run.request = run.live.items[-1]
    rec.commit(seed, "seed", 0, reads=reads, writes=[rec.write("user_message", message), write])
    if agent.configure_fn is not None:
        _configure(run, message)
    turn = run.turn = TurnState(
        user_message=message,
        iteration=0,
        history=(),
        state=run.state,
        identity=run.identity,
    )
    assert run.sources is not None
    read_sources(run.sources, turn)
    if agent.engine.trivial:
        run.fixed = agent.engine.compose_fixed(run.turn, run.base)
    if conversation is not None:
        run.keep = conversation.keep


def _header_line(run: RunState, inputs: dict[str, Any]) -> Line:
    """The header, every value in it screened: the run's own fields (its id, start, session,
    seed, replay) at each run, the agent's through :func:`_header_fixed`. Screened apart
    they are redacted as the header whole would be: a secret the agent's fields name is
    replaced in the run's own (they are screened again), and one the run's own name is in
    the redactor's shape, which :func:`_header_fixed` is looked up by. The redactor learns
    the secrets the run's ``inputs`` name first; inputs and own fields are screened in one
    pass, and apart only when it finds something (the walk of the two together changes
    nothing when the screen of their bytes finds nothing: neither then names a secret)."""
    agent, redactor = run.agent, run.rec.redactor
    config, replayer, link = agent.recording, agent.replayer, _session_link(run)
    own: dict[str, Any] = {
        "run_id": run.run_id,
        "started_at": started_at(run.started or config.now()) if config else "",
        "session": link,
        "seed": run.sources.seed if run.sources is not None else None,
        "replay_of": None if replayer is None else replayer.link,
    }
    count = redactor.count
    try:
        clean = not redactor.screen(orjson.dumps((inputs, own), default=as_json))
    except TypeError:  # not JSON as it is (a big integer, a lone surrogate): apart
        clean = False
    if clean:
        screened = own
    else:
        redactor.learn(inputs)
        screened = _screened(redactor, own)
    shape = redactor.shape
    fixed, replaced = _header_fixed(run)
    if redactor.shape != shape:  # the agent's fields named a secret the run's may hold
        redactor.count = count
        screened = _screened(redactor, own)
    redactor.count += replaced
    header: Line = _header(**screened, **fixed)
    return header


def _screened(redactor: Redactor, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` as the header's screen leaves them (as they are when it finds nothing)."""
    raw = orjson.dumps(fields, default=as_json)
    return redactor.redact(orjson.loads(raw)) if redactor.screen(raw) else fields


def _header_fixed(run: RunState) -> tuple[dict[str, Any], int]:
    """The header's fields that are the agent's (its name, provider, model, config, the
    redaction policy), screened and serialized (each an ``orjson.Fragment``, written as it
    is), and how many values screening them replaced. Made once for the runs of an agent
    whose redactor replaces the same: building, serializing and screening them again cost
    a short run more than the rest of its header."""
    agent, rec = run.agent, run.rec
    redactor = rec.redactor
    frames = rec.frames
    key = (redactor.shape, agent.watchers.observers, agent.name, agent.model)
    if frames is not None:
        hit = frames.header.get(key)
        if hit is not None:
            return hit
    count = redactor.count
    engine, governance = agent.engine, agent.governance
    config = _config(
        max_iterations=agent.max_iterations,
        tool_arg_validation=agent.tool_arg_validation,
        tools=[
            _tool_info(name=t.name, ref=content_hash(redactor.redact(t.spec.to_json())))
            for t in agent.tools.values()
        ],
        params=redactor.redact(dict(agent.params)),
        injections=engine.describe(),
        tool_providers=[p.name for p in engine.providers],
        configure=None
        if agent.configure_fn is None
        else getattr(agent.configure_fn, "__qualname__", "configure"),
        window=None if agent.window is None else agent.window.describe(),
        reliability=None
        if agent.reliability is None
        else agent.reliability.describe(lambda p: redactor.redact(p.describe())),
        tool_middleware=governance.describe_tools(),
        message_middleware=governance.describe_messages(),
        output_schema=None if governance.contract is None else governance.contract.describe(),
        watchers=[watcher_name(w) for w in agent.watchers.observers],
        max_tool_result_chars=agent.max_tool_result_chars,
        repeated_call_nudge=agent.repeated_call_nudge,
        limits_travel=agent.limits_travel,
    )
    redaction = _redaction(
        fields=list(redactor.policy.fields),
        patterns=redactor.pattern_names,
        env=redactor.env_names,
    )
    fields = _screened(
        redactor,
        {
            "af_version": __version__,
            "python": ".".join(map(str, sys.version_info[:3])),
            "agent": _agent_info(name=agent.name, source=agent.source),
            "provider": redactor.redact(agent.provider.describe()),
            "model": agent.model,
            "config": config,
            "redaction": redaction,
        },
    )
    fixed = {k: orjson.Fragment(orjson.dumps(v, default=as_json)) for k, v in fields.items()}
    made = (fixed, redactor.count - count)
    redactor.count = count
    if frames is not None and redactor.shape == key[0]:  # it learned nothing on the way
        frames.keep(frames.header, key, made)
    return made


def read_sources(sources: Sources, turn: TurnState) -> None:
    """The rules and facts of an iteration read the run's sources as one reader, named
    after it."""
    turn.clock = lambda: sources.now(f"iteration:{turn.iteration}")
    turn.random = lambda: sources.random(f"iteration:{turn.iteration}")


def open_sources(run: RunState, seed: int | None = None) -> Sources:
    """The run's clock and random source: the replayed run's seed and readings for a
    replay, ``seed`` for a continued run (the one its header holds); each reading written
    to the recording as it is read."""
    agent, rec = run.agent, run.rec
    config, replayer = agent.recording, agent.replayer
    if seed is None and replayer is not None:
        seed = replayer.seed
    if seed is None:
        seed = config.seed if config is not None and config.seed is not None else new_seed()
    record = None
    if rec.enabled:
        loop = asyncio.get_running_loop()

        def emit(by: str, value: str) -> None:
            if rec.enabled:
                rec.event(_clock_read(by=by, value=value), flush=False)

        def record(by: str, value: str) -> None:
            # A tool on its own thread reads the clock: the writer is the loop's.
            if threading.get_ident() == run.loop_thread:
                emit(by, value)
                return
            try:
                loop.call_soon_threadsafe(emit, by, value)
            except RuntimeError:
                pass  # the run is over: a tool it abandoned reads for no one

    return Sources(
        seed=seed,
        now=config.now if config is not None else _utc_now,
        record=record,
        served=replayer.clock if replayer is not None else None,
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _session_link(run: RunState) -> SessionLink | None:
    """The header's ``session`` field, for a session's turn."""
    link = run.conversation.session if run.conversation is not None else None
    if link is None:
        return None
    return _session(id=link["id"], turn=link["turn"], previous=link.get("previous"))


def _configure(run: RunState, message: str) -> None:
    """Let the agent's configure() decide this run's model and instructions, and commit what
    it decided before the first call reads it."""
    agent, rec = run.agent, run.rec
    assert agent.configure_fn is not None
    defaults = ConfigureContext(
        message=message,
        identity=run.identity,
        model=agent.model,
        instructions="\n\n".join(s.text for s in agent.system),
    )
    resolved = agent.configure_fn(defaults) or {}
    if not isinstance(resolved, Mapping) or set(resolved) - {"model", "instructions"}:
        raise UsageError(
            "configure() returns None or a mapping with 'model' and/or 'instructions', "
            f"got {resolved!r}"
        )
    writes = []
    model = resolved.get("model")
    if model is not None:
        if not isinstance(model, str) or not model:
            raise UsageError(f"configure() returned a model that is not a name: {model!r}")
        run.model = model
    instructions = resolved.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise UsageError("configure() returned instructions that are not a string")
        contract = agent.governance.contract
        tail = (contract.segment,) if contract is not None else ()
        run.base = (SystemSegment(instructions, Source(kind="configure")), *tail)
    writes.append(rec.write("model", run.model))
    writes.append(rec.write("instructions", "\n\n".join(s.text for s in run.base)))
    rec.commit(rec.next_rsid("configure"), "configure", 0, reads=("user_message",), writes=writes)


def _compose(
    run: RunState,
) -> tuple[Composition, list[tuple[int, int]] | None, list[int], list[Message]]:
    """The slots for the next call: composed once for a plain agent, else evaluated now,
    with the decisions committed by an `inject` stage."""
    if run.fixed is not None:
        return run.fixed, None, [], []
    agent, rec, turn = run.agent, run.rec, run.turn
    assert turn is not None
    turn.iteration = run.iteration
    turn.history = run.history  # copied only for a rule that reads it
    comp = agent.engine.compose(turn, run.base)
    if comp is run.last_composed and not run.required:
        # The engine decided nothing differently: the slots, the injected messages and the
        # decisions the recording holds stand, and the iteration writes no `inject` stage.
        assert run.last_injected is not None
        return comp, None, run.last_injected[1], run.last_injected[2]
    if run.required:
        # A tool's envelope pushed a registered instruction into this call (lease: next-call).
        segments, pushed = agent.engine.pushed(turn, run.required)
        run.required = []
        comp = replace(comp, system=[*comp.system, *segments], messages=[*comp.messages, *pushed])
    writes: list[Line] = []
    known_comp = run.composed.get(id(comp))
    if known_comp is not None and known_comp[0] is comp:
        # A composition of an earlier iteration (a rule flipped back): its injected messages
        # are written and numbered, and what its decisions read is known.
        _, extra, messages, read_keys = known_comp
        run.last_injected = (comp.messages, extra, messages)
    else:
        if run.last_injected is not None and run.last_injected[0] is comp.messages:
            # The engine carried the injected messages over: known, numbered and written.
            _, extra, messages = run.last_injected
        else:
            extra, messages = [], []
            for role, text, source in comp.messages:
                key = (source.id or "", role, text)
                known = run.injected.get(key)
                if known is None:
                    msg: Message = (
                        UserMessage(text)
                        if role == "user"
                        else AssistantMessage((TextBlock(text),))
                    )
                    n, write = rec.injected(msg, source)
                    writes.append(write)
                    known = run.injected[key] = (n, msg)
                extra.append(known[0])
                messages.append(known[1])
            run.last_injected = (comp.messages, extra, messages)
        read_keys = sorted(comp.reads)
        if len(run.composed) >= 16:
            run.composed.clear()
        run.composed[id(comp)] = (comp, extra, messages, read_keys)
    reads = ["user_message"] if "user_message" in read_keys else []
    for read in read_keys:
        if read.startswith("last_tool_results."):
            written = run.result_keys.get(read.removeprefix("last_tool_results."))
            if written is not None:
                reads.append(written)
    if rec.enabled:
        rec.inject(
            run.iteration,
            system=comp.system,
            tools=comp.specs,
            decisions=agent.engine.written(comp.decisions, run.decisions),
            message_writes=writes,
            reads=reads,
        )
        run.decisions = comp.decisions
    run.last_composed = comp
    return comp, None, extra, messages


async def _call_model(run: RunState) -> tuple[str, Response, list[int]]:
    agent, rec = run.agent, run.rec
    comp, window, extra, injected = _compose(run)
    run.composition = comp
    rsid = rec.next_rsid("call-llm")
    conversation: list[Message] = run.history
    if run.live is not None and run.live.folded:
        # Once a fold changed it, the window is named message by message; until then it is
        # the whole history, sent and hashed as for an agent without a strategy.
        conversation = run.live.messages
        window = run.live.ranges + ranges(extra) if extra else run.live.ranges
    request = Request(
        model=run.model,
        system=comp.system,
        messages=[*conversation, *injected],
        tools=comp.specs,
        params=agent.params,
        cache=comp.cache,
    )
    decision: AttemptDecision | None = None
    if agent.reliability is not None:
        n, response, ms, decision = await attempt_call(
            run, agent.reliability, rsid, request, window, extra
        )
    else:
        run.calls += 1
        n = run.calls
        sent = run.record_call(rsid, n, request, window, extra)
        provider = agent.provider
        if agent.replayer is not None:
            provider = agent.replayer.provider(provider, n, sent, None)
        clock = agent.recording.clock if agent.recording else time.perf_counter
        t0 = clock()
        try:
            response = await provider.complete(request, on_stream=run.stream)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:
            error = provider_error(e, provider.name, n)
            rec.event(_error(rsid=rsid, iter=run.iteration, call=n, error=error_info(error)))
            if error is e:
                raise
            raise error from e
        ms = (clock() - t0) * 1000
    assistant = AssistantMessage(response.content)
    run.last_text = response.text or run.last_text
    run.last_stop = response.stop_reason
    run.last_usage, run.last_call = response.usage, n
    if response.usage is not None:
        run.usage = run.usage + response.usage
    write = run.remember(assistant, rsid)
    calls = response.tool_calls
    ks = []
    for call in calls:
        k = run.tool_counts.get(call.name, 0) + 1
        run.tool_counts[call.name] = k
        ks.append(k)
    if rec.enabled:
        route: str | None
        tool_calls: list[Line] = []
        if calls:
            route = "tools"
            for i, c in enumerate(calls):  # = line(ReplyToolCall)(...): a literal, every call's
                tool_calls.append({"id": c.id, "name": c.name, "k": ks[i]})  # type: ignore[arg-type]
        elif response.stop_reason == "pause_turn":
            route = "continue"
        else:  # an answer the output chain or a contract settles is routed after them
            route = None if run.agent.governance.settles else "answer"
        rec.reply(
            rsid,
            run.iteration,
            n,
            route=route,
            message_write=write,
            stop_reason=response.stop_reason,
            tool_calls=tool_calls,
            usage=response.usage,
            model=response.model,
            ms=ms,
            decision=decision,
            response_id=response.response_id,
            unsent_params=response.unsent_params,
        )
    return f"reply:{n}", response, ks


async def run_tools(
    run: RunState,
    planned: list[tuple[ToolCall, int]],
    reply_key: str,
    resume: ResumeAnswer | None = None,
) -> None:
    """Run a reply's tool calls (at once when there are several) and add their results to
    the history in call order. With tool middleware, each call's chain is walked first, in
    call order, before any runs: a denied call is answered by its denial, and a chain that
    asks pauses the run before anything of the reply ran. ``resume``: a paused reply's
    calls, continued with a person's answer."""
    rec = run.rec
    decided: list[Decided] | None = None
    if run.agent.governance.on_call or resume is not None:
        decided = await govern_calls(run, planned, reply_key, resume)
    # One entry per call, in call order: what runs, and what is answered without running.
    jobs: list[tuple[ToolCall, int, str, Decided | None]] = []
    for i, (call, k) in enumerate(planned):
        d = decided[i] if decided is not None else None
        if d is not None:
            call = d.call
        jobs.append((call, k, rec.next_rsid(f"tool:{call.name}"), d))
    running = [(c, k, rsid, d) for c, k, rsid, d in jobs if d is None or d.run]
    first = _visible(run).get(running[0][0].name) if running else None
    if len(running) != 1 or not can_inline() or (first is not None and first.is_async):
        rec.flush()  # the loop is about to wait on tools: the reply that asked goes out first
    else:
        rec.before_tool()  # a lone sync tool, inline
    done: list[_Outcome]
    if len(running) == 1:
        # One tool: run in this task (a sync one on this thread when a signal can reach it),
        # without a task or a turn of the event loop of its own.
        c, k1, rsid1, d1 = running[0]
        try:
            done = [
                await _run_tool(run, c, k1, rsid1, False, validated=d1 is not None and d1.validated)
            ]
        except (asyncio.CancelledError, KeyboardInterrupt) as e:
            _record_interrupted(run, running, [None], reply_key)
            raise e from None
        except ToolInterrupted:
            # Ctrl-C came while a sync tool ran inline: the handler has cancelled the run
            # (or will); the tool is unwound, and the run ends as a cancel ends it.
            _record_interrupted(run, running, [None], reply_key)
            raise asyncio.CancelledError from None
    else:
        tasks = [
            asyncio.ensure_future(
                _run_tool(run, c, k, rsid, True, validated=d is not None and d.validated)
            )
            for c, k, rsid, d in running
        ]
        try:
            done = await asyncio.gather(*tasks)
        except (asyncio.CancelledError, KeyboardInterrupt):
            for task in tasks:
                task.cancel()
            _record_interrupted(run, running, tasks, reply_key)
            raise
    ran = iter(done)
    outcomes: list[_Outcome] = [
        next(ran)
        if d is None or d.run
        else (_result(c, d.reason, error=True), "denied", 0.0, None, _Facts("denied"))
        for c, _, _, d in jobs
    ]
    # Results join the history in call order, whatever order they finished in.
    if len(outcomes) > 1 and rec.enabled:
        # Results are written one after another: what one names as a secret is learned
        # before the first is written.
        rec.redactor.learn([result.content for result, _, _, _, _ in outcomes])
    turn = run.turn
    assert turn is not None
    turn.last_tool_results = {}
    replayer = run.agent.replayer
    for (call, k, rsid, d), (result, status, ms, ruled, facts) in zip(jobs, outcomes, strict=True):
        if replayer is not None:
            result = replayer.tool_done(call, k, result, status, _reading(status, facts))
        write = run.remember(result, rsid)
        turn.last_tool_results[call.name] = result.content
        run.result_keys[call.name] = write["key"]
        if call.name == READ_SKILL and status == "ok" and READ_SKILL in _visible(run):
            turn.active_skills.setdefault(str(call.args["id"]), run.iteration)
        limits = facts.limits if status != "withheld" else ()
        for declared in limits:
            run.declared.append((call.name, call.id, declared))
        run.assumed.extend(facts.assumed)
        if rec.enabled:
            writes = [write]
            if ruled is not None:
                writes.append(rec.write(f"govern:{call.name}#{k}.result", ruled))
            if limits or facts.assumed:
                key = f"limits:{call.name}#{k}"
                value: dict[str, Any] = {}
                if limits:
                    value["declared"] = [x.to_json() for x in limits]
                if facts.assumed:
                    value["assumed"] = [a.to_json() for a in facts.assumed]
                writes.append(rec.write(key, value))
                run.limits_keys.append(key)
            rec.commit(
                rsid,
                f"tool:{call.name}",
                run.iteration,
                reads=(reply_key,) if d is None else (reply_key, *d.reads),
                writes=writes,
                tool=_outcome(call, k, status, ms, facts),
            )


@dataclass
class _Facts:
    """What the loop learned of one call beyond the text the model reads: for the record,
    and for the limits that travel with the answer."""

    result_status: ResultStatus
    source: str | None = None
    limits: tuple[Limits, ...] = ()
    assumed: tuple[Assumed, ...] = ()
    ceiling: CeilingRefusal | None = None
    truncated: Truncation | None = None
    repeat: RepeatInfo | None = None
    effects: list[EffectInfo] = field(default_factory=list)
    sub_run: SubRun | None = None


_Outcome = tuple[ToolResultMessage, ToolStatus, float, MiddlewareDecision | None, _Facts]


def _reading(status: ToolStatus, facts: _Facts) -> ResultStatus:
    """The result's status in the tools' own words, as the tool commit writes it."""
    return "denied" if status == "withheld" else facts.result_status


def _outcome(call: ToolCall, k: int, status: ToolStatus, ms: float, facts: _Facts) -> Line:
    if (
        facts.source is None
        and facts.ceiling is None
        and facts.truncated is None
        and facts.repeat is None
        and not facts.effects
        and facts.sub_run is None
    ):
        # = _tool_outcome(...) with none of its sparse fields but the status: a literal,
        # for the tool of every iteration (tests check it against the model's own dump)
        out = {
            "name": call.name,
            "k": k,
            "call_id": call.id,
            "status": status,
            "ms": round(ms * 1000) / 1000,  # = round_ms(ms)
        }
        reading = "denied" if status == "withheld" else facts.result_status
        if reading is not None:
            out["result_status"] = reading
        return out  # type: ignore[return-value]
    return _tool_outcome(
        name=call.name,
        k=k,
        call_id=call.id,
        status=status,
        ms=round_ms(ms),
        result_status=_reading(status, facts),
        source=facts.source,
        ceiling=facts.ceiling,
        truncated=facts.truncated,
        repeat=facts.repeat,
        effects=facts.effects,
        run=facts.sub_run,
    )


def _record_interrupted(
    run: RunState,
    jobs: list[tuple[ToolCall, int, str, Decided | None]],
    tasks: Sequence[asyncio.Task[_Outcome] | None],
    reply_key: str,
) -> None:
    """A stop came while tools ran: each call still running is answered by a result saying
    it did not finish, and committed as ``interrupted``, so the transcript stays whole."""
    rec = run.rec
    for (call, k, rsid, d), task in zip(jobs, tasks, strict=True):
        done = (
            task is not None and task.done() and not task.cancelled() and task.exception() is None
        )
        status: ToolStatus
        if task is not None and done:
            result, status, ms, _, facts = task.result()
        else:
            result, status, ms = _result(call, INTERRUPTED_TEXT, error=True), "interrupted", 0.0
            facts = _Facts("interrupted")
        write = run.remember(result, rsid, keep=status != "interrupted")
        rec.commit(
            rsid,
            f"tool:{call.name}",
            run.iteration,
            reads=(reply_key, *(d.reads if d is not None else ())),
            writes=[write],
            tool=_outcome(call, k, status, ms, facts),
        )


async def _run_tool(
    run: RunState, call: ToolCall, k: int, rsid: str, concurrent: bool, *, validated: bool
) -> _Outcome:
    result, status, ms, facts, served = await _dispatch(run, call, k, rsid, concurrent, validated)
    if served is not None:
        # A replay served the result as the result chain left it: the chain does not walk
        # it again, and what it decided then is written again.
        return result, status, ms, served.ruled, facts
    if not run.agent.governance.on_result:
        return result, status, ms, None, facts
    result, status, ruled = await govern_result(run, call, k, result, status)
    return result, status, ms, ruled, facts


async def _dispatch(
    run: RunState, call: ToolCall, k: int, rsid: str, concurrent: bool, validated: bool
) -> tuple[ToolResultMessage, ToolStatus, float, _Facts, Served | None]:
    agent = run.agent
    rec = run.rec
    clock = agent.recording.clock if agent.recording else time.perf_counter
    t0 = clock()
    visible = _visible(run)
    tool = visible.get(call.name)
    if tool is None:
        known = ", ".join(visible) or "none"
        text = f"There is no tool named {call.name!r}. The tools you can call: {known}."
        return (
            _result(call, text, error=True),
            "unknown_tool",
            (clock() - t0) * 1000,
            _Facts("invalid"),
            None,
        )
    facts = _Facts("success", source=tool.source)
    mode = agent.tool_arg_validation
    if mode != "off" and not validated:
        problems = validate_args(tool, call.args)
        if problems:
            if rec.enabled:
                rec.event(
                    _args_invalid(
                        rsid=rsid,
                        name=call.name,
                        call_id=call.id,
                        problems=[p.to_json() for p in problems],
                        enforced=mode == "enforce",
                    )
                )
            if mode == "enforce":
                facts.result_status = "invalid"
                return (
                    _result(call, correction(tool, problems), error=True),
                    "rejected",
                    (clock() - t0) * 1000,
                    facts,
                    None,
                )
    if agent.replayer is not None:
        served = agent.replayer.tool(call, k)
        if served is not None:  # the recorded result: the tool does not run
            facts = _served_facts(run, call, served, facts)
            return served.result, served.status, (clock() - t0) * 1000, facts, served
    sources, by = run.sources, f"tool:{call.name}#{k}"
    assert sources is not None
    args = dict(call.args)
    if tool.ask_or_assume:
        args, facts.assumed = fill_assumed(tool.name, tool.ask_or_assume, args)
    ctx = ToolContext(
        run_id=run.run_id,
        iteration=run.iteration,
        call_id=call.id,
        tool=call.name,
        state=run.state,
        _progress=_progress_reporter(run, rsid, call.name),
        redaction=rec.redactor if rec.enabled else None,
        _link=lambda ran: setattr(facts, "sub_run", _sub_run_of(rec, ran)),
        _now=lambda: sources.now(by),
        _random=lambda: sources.random(by),
    )
    try:
        value = await _execute(tool, args, ctx, in_thread=concurrent)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except RefusedError as e:
        # A declaration the tool could not honour: the model reads the refusal itself.
        facts.result_status = "failure"
        return _result(call, str(e), error=True), "error", (clock() - t0) * 1000, facts, None
    except Exception as e:
        facts.result_status = "failure"
        text = f"The tool {call.name} failed: {type(e).__name__}: {e}"
        return _result(call, text, error=True), "error", (clock() - t0) * 1000, facts, None
    text, is_error = _honest(run, tool, call, args, value, facts)
    return _result(call, text, error=is_error), "ok", (clock() - t0) * 1000, facts, None


def _sub_run_of(rec: Recorder, ran: Mapping[str, Any]) -> SubRun:
    """The link to a run a tool made, its file named relative to this one's folder (a
    recording names no path of the machine it was made on)."""
    path = ran.get("recording")
    where = None
    if path is not None:
        here = rec.path.parent if rec.path is not None else Path.cwd()
        where = Path(os.path.relpath(path, here)).as_posix()
    return _sub_run(
        run_id=str(ran["run_id"]), recording=where, agent=str(ran["agent"]), status=ran["status"]
    )


def _served_facts(run: RunState, call: ToolCall, served: Served, facts: _Facts) -> _Facts:
    """What the recorded run learned of a call whose result a replay serves: written again
    as recorded, its limits travelling with the answer as they did, and an instruction its
    envelope required pushed into the next call as it was (the served text already holds
    the ceiling's refusal, the cut and the notes the model read)."""
    outcome = served.outcome
    if outcome is None:  # a recording older than the fields: read from how the call went
        facts.result_status = "success" if served.status == "ok" else "failure"
        return facts
    facts.result_status = outcome.result_status or facts.result_status
    facts.source = outcome.source
    facts.ceiling, facts.truncated, facts.repeat = (
        outcome.ceiling,
        outcome.truncated,
        outcome.repeat,
    )
    facts.effects = list(outcome.effects)
    facts.sub_run = outcome.run
    for effect in facts.effects:
        if effect.outcome == "accepted" and effect.instruction_id is not None:
            _require(run, call, effect.instruction_id, effect.lease or "next-call")
    limits = served.limits or {}
    facts.limits = tuple(Limits.from_json(x) for x in limits.get("declared") or ())
    facts.assumed = tuple(
        Assumed(a["tool"], a["argument"], a["value"], sent=bool(a.get("sent")))
        for a in limits.get("assumed") or ()
    )
    return facts


def _require(run: RunState, call: ToolCall, instruction_id: str, lease: str) -> None:
    """Push a registered instruction into the next call, as a result's envelope required."""
    run.required.append(
        (
            instruction_id,
            f"required by {call.name} (call {call.id}) at iteration {run.iteration}, lease {lease}",
        )
    )


def _honest(
    run: RunState, tool: Tool, call: ToolCall, args: dict[str, Any], value: Any, facts: _Facts
) -> tuple[str, bool]:
    """What the model reads of a value a tool returned, by af's one rule: the served value
    (an envelope's content, record-only fields removed), refused over the tool's ceiling or
    cut at the agent's cap, then the notes the library adds (a refused effect, an assumed
    argument, the repeated-call nudge). Fills ``facts`` with what the record keeps."""
    reading = read_result(value)
    for warning in reading.warnings:
        # For the tool's author: what was dropped from a shape built by hand (said once).
        warnings.warn(f"tool {tool.name!r}: {warning}", UserWarning, stacklevel=1)
    text = as_text(reading.served)
    if reading.status is not None:
        facts.result_status = reading.status
    facts.limits = reading.limits
    is_error = False
    ceiling = tool.result_ceiling
    if over_ceiling(text, ceiling):
        assert ceiling is not None
        # Refused means refused everywhere: the data enters no channel, its limits neither.
        facts.ceiling = _ceiling(
            size=len(text),
            max_chars=ceiling.max_chars,
            narrow_by=list(ceiling.narrow_by or ()),
            declared_status=reading.status,
        )
        facts.result_status, facts.limits = "invalid", ()
        text, is_error = ceiling_refusal(tool.name, len(text), ceiling), True
    else:
        cap = run.agent.max_tool_result_chars
        if cap is not None and len(text) > cap:
            cut, kept = truncation(tool.name, text, cap)
            facts.truncated = _truncation(size=len(text), kept=kept)
            facts.result_status = "partial"
            text = cut
    notes = list(reading.refusals)
    notes += _effects(run, call, reading.effects, facts)
    for refusal in reading.refusals:
        facts.effects.append(_effect(kind=REQUIRE_INSTRUCTION, outcome="refused", why=refusal))
    notes += [n for n in (assumed_note(a) for a in facts.assumed) if n is not None]
    if run.repeats is not None:
        repeat = run.repeats.observe(call.name, args, text)
        if repeat is not None:
            facts.repeat = _repeat(
                occurrences=repeat.occurrences,
                args_fingerprint=repeat.args_fingerprint,
                result_fingerprint=repeat.result_fingerprint,
            )
            notes.append(repeat.note)
    for note in notes:
        text = with_note(text, note)
    return text, is_error


def _effects(
    run: RunState, call: ToolCall, effects: tuple[RequireInstruction, ...], facts: _Facts
) -> list[str]:
    """Judge the effects a result envelope asks for: an instruction the agent registered is
    pushed into the next call; anything else is refused in a sentence the model reads."""
    notes = []
    known = run.agent.engine.by_id
    for effect in effects:
        injection = known.get(effect.instruction_id)
        if injection is None or injection.flavor not in ("instruction", "skill"):
            why = (
                f"tool effect refused: no instruction {effect.instruction_id!r} is registered "
                "on this agent, so nothing was pushed."
            )
            notes.append(why)
            outcome: Literal["accepted", "refused"] = "refused"
        else:
            why = None
            outcome = "accepted"
            _require(run, call, effect.instruction_id, effect.lease)
        facts.effects.append(
            _effect(
                kind=REQUIRE_INSTRUCTION,
                instruction_id=effect.instruction_id,
                lease=effect.lease,
                outcome=outcome,
                why=why,
            )
        )
    return notes


async def _execute(tool: Tool, args: dict[str, Any], ctx: ToolContext, *, in_thread: bool) -> Any:
    if tool.is_async:
        return await tool.execute(args, ctx)
    # A lone sync tool runs on this thread when Ctrl-C can raise into it; the calls of one
    # reply run on daemon threads and overlap; either way a stop never waits for a tool
    # that blocks (see _interrupt).
    if not in_thread and can_inline():
        value = inline(tool.execute, args, ctx)
    else:
        value = await run_in_thread(tool.execute, args, ctx)
    if asyncio.iscoroutine(value):
        value = await value
    return value


PROGRESS_MESSAGE_CHARS = 120
"""The most of a progress report's ``message`` a person is shown."""


def progress_line(tool: str, payload: Any, count: int) -> str:
    """The line a person is shown for a progress report: its ``message`` field, trimmed and
    cut at 120 characters with the cut stated; for any other payload, the tool's name and
    how many times it reported (a payload is never printed into a sentence). A bare string
    is its own message."""
    message = payload.get("message") if isinstance(payload, Mapping) else payload
    if isinstance(message, str) and message.strip():
        message = " ".join(message.split())
        if len(message) > PROGRESS_MESSAGE_CHARS:
            more = len(message) - PROGRESS_MESSAGE_CHARS
            message = f"{message[:PROGRESS_MESSAGE_CHARS]}… (+{more} more)"
        return message
    times = "once" if count == 1 else f"{count} times"
    return f"{tool} reported progress ({times})"


def _progress_reporter(run: RunState, rsid: str, tool: str) -> Any:
    loop = asyncio.get_running_loop()
    count = 0

    def emit(payload: Any) -> None:
        nonlocal count
        count += 1
        if run.rec.enabled:
            try:
                data = orjson.loads(orjson.dumps(payload))
                line = progress_line(tool, data, count)
                # A bare string is the message itself: said once.
                kept = None if isinstance(data, str) else data
            except TypeError:  # not plain data: kept as its text, never its object
                line, kept = progress_line(tool, None, count), str(payload)
            run.rec.event(
                _tool_progress(rsid=rsid, message=line, payload=run.rec.redactor.redact(kept))
            )

    def report(payload: Any) -> None:
        if threading.get_ident() == run.loop_thread:
            emit(payload)
            return
        try:
            loop.call_soon_threadsafe(emit, payload)
        except RuntimeError:
            pass  # the run is over: a tool it abandoned reports to no one

    return report


def _visible(run: RunState) -> dict[str, Tool]:
    """The tools the model was shown at this iteration's call: the only ones it may call."""
    assert run.composition is not None
    return run.composition.tools_by_name


def _result(call: ToolCall, text: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=text, is_error=error)
