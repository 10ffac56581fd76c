"""Replaying a recorded run: the agent's code runs again, every model call answered from the
recording, and the first place it departs from the recording is found and named."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from afcore.errors import AfError, RecordingError, ReplayDivergedError, ReplayEndedError, UsageError
from afcore.loop import Conversation
from afcore.loop._sync import run_sync
from afcore.recording import Recording, RecordingConfig
from afcore.recording._models import Resume
from afcore.replay._replayer import Replayer, ToolsMode
from afcore.replay._report import ReplayReport
from afcore.replay._tape import Tape

if TYPE_CHECKING:
    from afcore.agent import Agent
    from afcore.providers import StreamHandler
    from afcore.recording._writer import RecordObserver

_R = TypeVar("_R", bound=Any)  # an Agent or a Flow: both have recording, replayer, last_result

__all__ = ["areplay", "replay", "replaying"]


def replaying(
    agent: Agent,
    recording: str | Path | Recording | Tape,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
) -> Agent:
    """A copy of ``agent`` whose runs replay ``recording``: every model call is answered
    from it (no provider is asked, no key is needed), each request is compared with the
    recorded one, and the first difference raises :class:`ReplayDivergedError` where it is
    (``then_live``: the agent's own providers answer from there on). ``tools``: ``run``
    (they run again, and their results are compared), or ``recorded`` (the recorded
    results are served, and no tool runs). Each run writes its own recording (``out``, or
    the agent's folder), whose header's ``replay_of`` names the one replayed."""
    if tools not in ("run", "recorded"):
        raise UsageError(f"tools= is 'run' or 'recorded', not {tools!r}")
    tape = recording if isinstance(recording, Tape) else Tape.read(recording)
    return replaying_copy(agent, Replayer(tape, tools=tools, then_live=then_live), out)


def replaying_copy(runnable: _R, replayer: Any, out: str | Path | None) -> _R:
    """A copy of an agent or a flow that ``replayer`` answers, recording under a fresh id
    (a replay never writes over what it replays; its runs take their recorded seeds), in
    ``out`` or the original's folder."""
    replayed = copy.copy(runnable)
    config = runnable.recording or RecordingConfig()
    config = dataclasses.replace(config, run_id=None, seed=None)
    if out is not None:
        config = dataclasses.replace(config, dir=Path(out))
    replayed.recording = config
    replayed.replayer = replayer
    replayed.last_result = None
    return replayed


def replay(
    recording: str | Path | Recording,
    agent: Agent,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
    state: dict[str, Any] | None = None,
    identity: Any = None,
    stream: StreamHandler | None = None,
    observe: RecordObserver | None = None,
) -> ReplayReport:
    """Run ``agent`` again on the message (and the conversation) ``recording`` started
    from, with every model call answered from it, and say whether the run is the recorded
    one: :class:`ReplayReport` (``identical``, or ``diverged`` with where, or ``failed``).
    ``state`` and ``identity`` are what the recorded run was given (the recording holds
    what its rules read of them, not the values). See :func:`replaying`."""
    return run_sync(
        areplay(
            recording,
            agent,
            tools=tools,
            then_live=then_live,
            out=out,
            state=state,
            identity=identity,
            stream=stream,
            observe=observe,
        ),
        "replay",
    )


async def areplay(
    recording: str | Path | Recording,
    agent: Agent,
    *,
    tools: ToolsMode = "run",
    then_live: bool = False,
    out: str | Path | None = None,
    state: dict[str, Any] | None = None,
    identity: Any = None,
    stream: StreamHandler | None = None,
    observe: RecordObserver | None = None,
) -> ReplayReport:
    """The async form of :func:`replay`."""
    where = recording.path if isinstance(recording, Recording) else Path(recording)
    try:
        tape = Tape.read(recording)
    except RecordingError as e:
        return ReplayReport("failed", 0, 0, where, error=str(e))
    try:
        replayed = replaying(agent, tape, tools=tools, then_live=then_live, out=out)
        replayer = replayed.replayer
        assert isinstance(replayer, Replayer)
        history = None
        if tape.history:
            history = Conversation(
                history=tuple(m for m, _ in tape.history),
                sources=tuple(s for _, s in tape.history),
            )
        assert tape.user_message is not None
        failure: BaseException | None = None
        try:
            await replayed.arun_result(
                tape.user_message,
                state=state,
                identity=identity,
                history=history,
                stream=stream,
                observe=observe,
            )
        except (ReplayDivergedError, ReplayEndedError):
            pass
        except AfError as e:  # the run ended on an error: recorded, and compared below
            failure = e
        except Exception as e:
            failure = e
        result = replayed.last_result
        if result is None:  # refused before the run began (a folder it cannot write, ...)
            return ReplayReport(
                "failed", 0, 0, where, error=str(failure) if failure else "the run did not start"
            )
        answered: list[Resume] = []
        while result.paused is not None and replayer.answer is not None and failure is None:
            # Paused where the recorded run paused, with the same question: answered as the
            # person answered it then, and the run goes on in the replay's own file.
            answer, replayer.answer = replayer.answer, None
            answered.append(answer)
            try:
                await replayed.aresume_result(
                    result.paused,
                    approve=answer.verb == "approve",
                    why=answer.why,
                    by=answer.by,
                    state=state,
                    identity=identity,
                    stream=stream,
                    observe=observe,
                )
            except (ReplayDivergedError, ReplayEndedError):
                pass
            except Exception as e:
                failure = e
            result = replayed.last_result
            assert result is not None
        replayer.settle()
        try:
            replayer.ended(result.status)
        except ReplayDivergedError:
            pass
        divergence = replayer.divergence
        report = ReplayReport(
            status="diverged" if divergence is not None else "identical",
            calls=result.calls,
            identical_calls=replayer.identical,
            replay_of=where,
            recording=result.recording,
            divergence=divergence,
            live_from=replayer.live_from,
            ended_at=replayer.ended_at,
            error=None if failure is None else f"{type(failure).__name__}: {failure}",
            answer=result.answer or None,
            resumed=[f"{a.verb}d by {a.by}" + (f": {a.why}" if a.why else "") for a in answered],
            paused=result.paused.question if result.status == "paused" and result.paused else None,
            finished=replayer.recorded_finished,
        )
        if report.status == "identical" and report.ended_at is None:
            report.identical_calls = result.calls
        return report
    finally:
        tape.close()
