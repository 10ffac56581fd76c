"""Continuing a paused run, in this process or another, hours later: the run's state taken
up from its recording (the checkpoint and the messages it names), the person's answer
recorded, and the run appended to the same file, which then verifies as one run.

    resume                 who answered, when, with which af
    resume#k   (commit)    reads govern:<tool>#<k>; writes approval:<tool>#<k>
    govern:<tool>#k        approved: the asking link's chain goes on after it
    tool:<tool>#k ...      the reply's calls run (a declined one answered by a denial)

Values the recording holds redacted come back redacted: the continued run sends the model
the messages as the file holds them, which are the ones its hashes name.
"""

from __future__ import annotations

import getpass
import sys
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from afcore._version import __version__
from afcore.errors import NotPausedError, UsageError
from afcore.injections._engine import TurnState
from afcore.loop._conversation import Conversation
from afcore.loop._govern import ResumeAnswer
from afcore.loop._run import drive, iterate, open_sources, read_sources, run_tools
from afcore.loop._state import AgentParts, RunResult, RunState, RunStatus, last_value
from afcore.messages import Message, Source, SystemSegment, ToolCall, Usage, message_from_json
from afcore.providers._base import StreamHandler
from afcore.recording import _structs as structs
from afcore.recording._models import Approval, Checkpoint, Resume, line, trusted
from afcore.recording._reader import Recording, open_recording
from afcore.recording._writer import Recorder, RecordObserver
from afcore.tools._assume import Assumed
from afcore.tools._reading import Limits
from afcore.tools._repeats import RepeatedCalls
from afcore.window._live import LiveWindowState
from afcore.window._turns import LiveMessage

__all__ = ["paused_checkpoint", "resume_loop"]

_approval = trusted(Approval)
_resume = line(Resume)


def paused_checkpoint(rec: Recording) -> tuple[int, Checkpoint]:
    """The line and checkpoint of the pause a recording ends with; NotPausedError when it
    does not end paused."""
    end = rec.end
    name = rec.path.name
    if end is None or end.status != "paused":
        status = "unfinished" if end is None else end.status
        raise NotPausedError(f"the run in {name} is not paused (it is {status})")
    for line_no in range(rec.line_count, 0, -1):
        if rec.kind(line_no) != "other":
            continue
        raw = rec.raw(line_no)
        if isinstance(raw, dict) and raw.get("t") == "pause":
            try:
                checkpoint = Checkpoint.model_validate(raw.get("checkpoint"))
            except ValidationError as e:
                raise NotPausedError(
                    f"the run in {name} ends paused, but its checkpoint (line {line_no}) is "
                    f"not one this af reads: {e.errors()[0]['msg']}"
                ) from None
            if sum(1 for c in checkpoint.calls if c.state == "asked") != 1:
                raise NotPausedError(
                    f"the run in {name} ends paused, but its checkpoint (line {line_no}) names "
                    "no single call it asks about"
                )
            return line_no, checkpoint
    raise NotPausedError(f"the run in {name} ends paused, but holds no checkpoint")


async def resume_loop(
    agent: AgentParts,
    path: Path,
    *,
    approve: bool,
    why: str | None = None,
    by: str | None = None,
    state: dict[str, Any] | None = None,
    identity: Any = None,
    stream: StreamHandler | None = None,
    observe: RecordObserver | None = None,
    typed: bool = False,
) -> tuple[RunResult, BaseException | None]:
    """Continue the paused run recorded at ``path`` with a person's answer: ``approve``
    runs the call that was asked about (its chain goes on after the link that asked),
    otherwise the model reads that a person declined it."""
    if why is not None and not isinstance(why, str):
        raise UsageError("resume(why=...) takes the reason as a string")
    config = agent.recording
    if config is None:
        raise UsageError("resume() continues a recorded run; this agent records nothing")
    recorded = open_recording(path)
    try:
        _, checkpoint = paused_checkpoint(recorded)
        _check_agent(agent, recorded)
        run_id = recorded.header.run_id
        rec = Recorder.continuing(
            path,
            run_id=run_id,
            redactor=config.redaction.compile(agent.provider.secrets()),
            clock=config.clock,
            observers=(observe,) if observe else (),
            watchers=agent.watchers,
        )
    except BaseException:
        recorded.close()
        raise
    try:
        run = _restore(agent, rec, recorded, checkpoint, state, identity, stream, typed)
        asked = next(i for i, c in enumerate(checkpoint.calls) if c.state == "asked")
        pending = checkpoint.calls[asked]
        at = config.now().isoformat(timespec="milliseconds")
        who = by or _user()
        verb: Literal["approve", "decline"] = "approve" if approve else "decline"
        rec.event(
            _resume(
                verb=verb,
                by=who,
                at=at,
                why=why,
                af_version=__version__,
                python=".".join(map(str, sys.version_info[:3])),
            ),
            flush=False,
        )
        base = f"{pending.name}#{pending.k}"
        approval_key = f"approval:{base}"
        approval = _approval(
            verb=verb, by=who, at=at, why=why, link=checkpoint.link, question=checkpoint.question
        )
        rsid = rec.next_rsid("resume")
        rec.commit(
            rsid,
            "resume",
            run.iteration,
            reads=[f"govern:{base}"],
            writes=[rec.write(approval_key, approval)],
        )
        planned = _planned(recorded, checkpoint)
        answer = ResumeAnswer(approve, why, approval_key, asked)
        agent.provider.continue_after(checkpoint.model_calls)
    except BaseException:
        rec.close()
        recorded.close()
        raise
    try:
        return await drive(run, _continue(run, planned, f"reply:{checkpoint.reply}", answer))
    finally:
        recorded.close()


async def _continue(
    run: RunState, planned: list[tuple[ToolCall, int]], reply_key: str, answer: ResumeAnswer
) -> tuple[RunStatus, str]:
    await run_tools(run, planned, reply_key, answer)
    run.rec.sync()
    return await iterate(run)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def _check_agent(agent: AgentParts, recorded: Recording) -> None:
    """The agent continuing a run must be the one that ran it: the same name and tools."""
    header = recorded.header
    if header.agent.name != agent.name:
        raise UsageError(
            f"the run in {recorded.path.name} was made by agent {header.agent.name!r}, not "
            f"{agent.name!r}: continue it with the agent that ran it"
        )
    had = [t.name for t in header.config.tools]
    has = list(agent.tools)
    if had != has:
        raise UsageError(
            f"the run in {recorded.path.name} was made with the tools {had}; this agent has "
            f"{has}: continue it with the agent that ran it"
        )


def _message(recorded: Recording, n: int) -> Message:
    return message_from_json(recorded.message(n))


def _numbers(ranges: list[tuple[int, int]]) -> list[int]:
    return [n for a, b in ranges for n in range(a, b + 1)]


def _restore(
    agent: AgentParts,
    rec: Recorder,
    recorded: Recording,
    cp: Checkpoint,
    state: dict[str, Any] | None,
    identity: Any,
    stream: StreamHandler | None,
    typed: bool,
) -> RunState:
    """The run as it stood when it paused."""
    contract = agent.governance.contract
    tail = (contract.segment,) if contract is not None else ()
    base: tuple[SystemSegment, ...] = (*agent.system, *tail)
    if agent.configure_fn is not None:
        instructions = last_value(recorded, "instructions")
        if isinstance(instructions, str) and instructions != "\n\n".join(
            s.text for s in agent.system
        ):
            base = (SystemSegment(instructions, Source(kind="configure")), *tail)
    run = RunState(
        agent=agent,
        rec=rec,
        run_id=recorded.header.run_id,
        state=state if state is not None else {},
        identity=identity,
        loop_thread=threading.get_ident(),
        model=cp.model,
        base=base,
        stream=stream,
        typed=typed,
        repeats=RepeatedCalls() if agent.repeated_call_nudge else None,
    )
    run.recorded = recorded
    if _continues_a_conversation(recorded):
        # A run given history= lets its window strategy visit after the answer too.
        run.conversation = Conversation()
    run.iteration = cp.iteration
    run.calls = cp.model_calls
    u = cp.usage
    run.usage = Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_tokens,
        cache_write_tokens=u.cache_write_tokens,
        estimated=u.estimated,
    )
    run.tool_counts = dict(cp.tool_counts)
    run.last_text = cp.last_text
    run.folds = cp.folds
    run.last_call = cp.last_call
    if cp.last_usage is not None:
        lu = cp.last_usage
        run.last_usage = Usage(
            input_tokens=lu.input_tokens,
            output_tokens=lu.output_tokens,
            cache_read_tokens=lu.cache_read_tokens,
            cache_write_tokens=lu.cache_write_tokens,
            estimated=lu.estimated,
        )
    run.output_checks = cp.output_checks
    run.ms_before = cp.ms
    _declared_before(run, recorded)
    messages: dict[int, Message] = {}

    def message(n: int) -> Message:
        if n not in messages:
            messages[n] = _message(recorded, n)
        return messages[n]

    run.history = [message(n) for n in _numbers(cp.history)]
    if agent.window is not None:
        live = LiveWindowState()
        for n in _numbers(cp.live or cp.history):
            live.append(LiveMessage(n, message(n), recorded.message_writer(n)))
        live.folded = cp.folded
        run.live = live
        run.request = next((i for i in live.items if i.n == cp.request), None)
    user_message = last_value(recorded, "user_message")
    run.turn = TurnState(
        user_message=user_message if isinstance(user_message, str) else "",
        iteration=cp.iteration,
        history=tuple(run.history),
        state=run.state,
        identity=identity,
    )
    run.turn.active_skills = dict(cp.active_skills)
    # The same seed: each reader's numbers are the ones it would have drawn unpaused.
    run.sources = open_sources(run, recorded.header.seed)
    read_sources(run.sources, run.turn)
    for name, n in cp.last_tool_results.items():
        result = message(n)
        run.turn.last_tool_results[name] = getattr(result, "content", "")
        run.result_keys[name] = f"message:{n}"
    if agent.engine.trivial:
        run.fixed = agent.engine.compose(run.turn, run.base)
        run.composition = run.fixed
    else:
        run.composition = agent.engine.compose(run.turn, run.base)
    return run


def _continues_a_conversation(recorded: Recording) -> bool:
    first = recorded.seq_line(1)
    for _, record in recorded.records([first] if first is not None else []):
        return isinstance(record, structs.Commit) and record.stage == "history"
    return False


def _planned(recorded: Recording, cp: Checkpoint) -> list[tuple[ToolCall, int]]:
    """The paused reply's tool calls, as its message holds them, each with its k."""
    reply = recorded.reply(cp.reply)
    if reply is None or not reply.writes:
        raise NotPausedError(f"the run in {recorded.path.name} holds no reply {cp.reply}")
    message = message_from_json(recorded.value(reply.writes[0]))
    calls = {c.id: c for c in getattr(message, "tool_calls", ())}
    out = []
    for pending in cp.calls:
        call = calls.get(pending.id)
        if call is None:
            raise NotPausedError(
                f"the run in {recorded.path.name}: reply {cp.reply} holds no tool call {pending.id}"
            )
        out.append((call, pending.k))
    return out


def _declared_before(run: RunState, recorded: Recording) -> None:
    """The limits the tools declared before the pause, and the values their rules assumed:
    the answer's limits are the whole run's."""
    for commit in recorded.tool_commits():
        tool = commit.tool
        if tool is None:
            continue
        for write in commit.writes:
            if not write.key.startswith("limits:"):
                continue
            value = recorded.value(write)
            if not isinstance(value, dict):
                continue
            for declared in value.get("declared") or ():
                run.declared.append((tool.name, tool.call_id, Limits.from_json(declared)))
            for a in value.get("assumed") or ():
                run.assumed.append(
                    Assumed(a["tool"], a["argument"], a["value"], sent=bool(a.get("sent")))
                )
            run.limits_keys.append(write.key)
