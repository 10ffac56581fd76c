"""A model call made as attempts, for agents with reliability rules.

Every attempt is a `call` record of the same `call-llm` stage (its own call number, an
`attempt` field saying which and where), followed by its outcome: an `error` event with the
decision taken, or a `reply`. A reply a rule refused is recorded too, with its decision; its
message is stored but joins no window. The accepted reply is written by the loop, as for any
agent.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

from afcore.errors import ProviderError, ReliabilityFailFastError
from afcore.loop._state import RunState, provider_error
from afcore.messages import AssistantMessage, Request, Response
from afcore.providers._base import StreamEvent, StreamHandler
from afcore.recording._models import (
    AttemptDecision,
    AttemptInfo,
    ErrorEvent,
    ErrorInfo,
    SkippedProvider,
    line,
    trusted,
)
from afcore.recording._writer import error_info, round_ms
from afcore.reliability._policy import (
    Attempt,
    Phase,
    Reliability,
    Target,
    Verdict,
    error_kind,
)

__all__ = ["attempt_call"]

_attempt = trusted(AttemptInfo)
_error = line(ErrorEvent)
_error_info = trusted(ErrorInfo)
_skipped = trusted(SkippedProvider)


async def attempt_call(
    run: RunState,
    policy: Reliability,
    rsid: str,
    request: Request,
    window: list[tuple[int, int]] | None,
    extra: list[int],
) -> tuple[int, Response, float, AttemptDecision | None]:
    """Make the iteration's call as the rules decide. Returns the accepted attempt's call
    number, its response, how long it took (ms) and the decision to record with its reply
    (None when no rule decided); raises the error that stands, or a
    ReliabilityFailFastError."""
    agent, rec = run.agent, run.rec
    clock = agent.recording.clock if agent.recording else time.perf_counter
    route = policy.route(agent.provider)
    index = 0
    target = route[0]
    made = 0
    """attempts made"""
    last: _Outcome | None = None
    skipped: list[SkippedProvider] = []
    while True:
        left = 0 if target.via == "fallback" else len(route) - 1 - index
        spare = policy.fallback is not None and target.via != "fallback"
        model = target.model or run.model
        before = _view(
            "pre_check",
            run,
            target,
            model,
            made + 1,
            run.calls + 1,
            last,
            policy.breaker_open(target.provider, clock()),
            left,
            spare,
        )
        verdict = policy.decide(before)
        if verdict.verb in ("retry_other", "fallback"):
            skipped.append(
                _skipped(
                    provider=target.provider.name,
                    model=model,
                    via=target.via,
                    decision=verdict.record(),
                )
            )
            if verdict.delay and _waits(run):
                rec.flush()  # nothing held back while the loop waits
                await asyncio.sleep(verdict.delay)
            if verdict.verb == "fallback":
                assert policy.fallback is not None
                target = policy.fallback
            else:
                index += 1
                target = route[index]
            continue
        attempt_info = _attempt(
            n=made + 1, provider=target.provider.name, via=target.via, skipped=skipped
        )
        if verdict.verb == "fail_fast":
            # No attempt is made: the event names the one that was not.
            rec.event(
                _error(
                    rsid=rsid,
                    iter=run.iteration,
                    error=_fail_fast_info(verdict),
                    decision=verdict.record(),
                    attempt=attempt_info,
                )
            )
            raise _fail_fast(run, verdict, made, None, last.error if last else None)
        made += 1
        run.calls += 1
        n = run.calls
        sent = request if model == request.model else replace(request, model=model)
        recorded = run.record_call(rsid, n, sent, window, extra, attempt=attempt_info)
        provider = target.provider
        if agent.replayer is not None:
            provider = agent.replayer.provider(provider, n, recorded, attempt_info)
        skipped = []
        watch = _Watch(run.stream)
        # Only a caller who asked for the stream gets one: a provider streams when asked to.
        handler: StreamHandler | None = watch if run.stream is not None else None
        t0 = clock()
        response: Response | None = None
        error: Exception | None = None
        try:
            response = await provider.complete(sent, on_stream=handler)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as e:
            error = e
        ms = (clock() - t0) * 1000
        policy.note(target.provider, failed=error is not None, now=clock())
        last = _Outcome(error, watch.streamed)
        after = _view(
            "post_decide",
            run,
            target,
            model,
            made,
            n,
            last,
            policy.breaker_open(target.provider, clock()),
            left,
            spare,
            response,
        )
        verdict = policy.decide(after)
        if error is not None:
            wrapped = provider_error(error, provider.name, n)
            rec.event(
                _error(
                    rsid=rsid,
                    iter=run.iteration,
                    call=n,
                    error=_attempt_error(wrapped, after),
                    ms=round_ms(ms),
                    decision=verdict.record(),
                )
            )
            if verdict.verb == "ok":
                if wrapped is error:
                    raise error
                raise wrapped from error
            if verdict.verb == "fail_fast":
                raise _fail_fast(run, verdict, made, n, wrapped) from wrapped
        else:
            assert response is not None
            if verdict.verb == "ok":
                return n, response, ms, verdict.record() if verdict.rule is not None else None
            _refused(run, rsid, n, response, ms, verdict)
            if verdict.verb == "fail_fast":
                raise _fail_fast(run, verdict, made, n, None)
        if verdict.delay and _waits(run):
            rec.flush()
            await asyncio.sleep(verdict.delay)
        if verdict.verb == "retry_other":
            index += 1
            target = route[index]
        elif verdict.verb == "fallback":
            assert policy.fallback is not None
            target = policy.fallback


def _waits(run: RunState) -> bool:
    """Whether a rule's delay is waited: not by a replay answering from its recording (the
    delay is recorded in the decision; nobody is asked again)."""
    replayer = run.agent.replayer
    return replayer is None or replayer.live


class _Watch:
    """Passes the stream on, noting whether any of it came: a failure after that is
    mid-stream, whatever the provider says."""

    __slots__ = ("outer", "streamed")

    def __init__(self, outer: StreamHandler | None) -> None:
        self.outer = outer
        self.streamed = False

    def __call__(self, event: StreamEvent) -> None:
        self.streamed = True
        if self.outer is not None:
            self.outer(event)


class _Outcome:
    """The last attempt's failure, for the rules of the next one."""

    __slots__ = ("error", "streamed")

    def __init__(self, error: Exception | None, streamed: bool) -> None:
        self.error = error
        self.streamed = streamed


def _view(
    phase: Phase,
    run: RunState,
    target: Target,
    model: str,
    attempt: int,
    call: int,
    last: _Outcome | None,
    breaker_open: bool,
    providers_left: int,
    fallback_left: bool,
    response: Response | None = None,
) -> Attempt:
    error = last.error if last is not None else None
    provider_failure = error if isinstance(error, ProviderError) else None
    return Attempt(
        phase=phase,
        attempt=attempt,
        iteration=run.iteration,
        call=call,
        provider=target.provider.name,
        model=model,
        via=target.via,
        error=error,
        error_kind=error_kind(error),
        status=provider_failure.status if provider_failure else None,
        retry_after=provider_failure.retry_after if provider_failure else None,
        # A failure after the provider called on_stream is mid-stream, whatever it says.
        mid_stream=error is not None
        and last is not None
        and (last.streamed or bool(provider_failure and provider_failure.mid_stream)),
        response=response,
        breaker_open=breaker_open,
        providers_left=providers_left,
        fallback_left=fallback_left,
    )


def _attempt_error(error: ProviderError, s: Attempt) -> ErrorInfo:
    return error_info(error, reason=s.error_kind, status=error.status, mid_stream=s.mid_stream)


def _fail_fast_info(verdict: Verdict) -> ErrorInfo:
    return _error_info(
        kind=ReliabilityFailFastError.__name__,
        message=_fail_fast_message(verdict),
        reason=verdict.kind,
    )


def _fail_fast_message(verdict: Verdict) -> str:
    return f"the model call failed fast ({verdict.kind}): {verdict.reason}"


def _fail_fast(
    run: RunState, verdict: Verdict, made: int, call: int | None, error: BaseException | None
) -> ReliabilityFailFastError:
    return ReliabilityFailFastError(
        _fail_fast_message(verdict),
        kind=verdict.kind or "fail_fast",
        reason=verdict.reason or "",
        call=call,
        attempts=made,
        error=error,
    )


def _refused(
    run: RunState, rsid: str, n: int, response: Response, ms: float, verdict: Verdict
) -> None:
    """Record an answer a rule refused: its message is stored (the file keeps what the
    model said) but joins neither the conversation nor any window; its tokens were spent."""
    rec = run.rec
    _, write = rec.message(AssistantMessage(response.content), history=False)
    if response.usage is not None:
        run.usage = run.usage + response.usage
    rec.reply(
        rsid,
        run.iteration,
        n,
        message_write=write,
        stop_reason=response.stop_reason,
        tool_calls=[],
        usage=response.usage,
        model=response.model,
        ms=ms,
        decision=verdict.record(),
        response_id=response.response_id,
        unsent_params=response.unsent_params,
    )
