"""The window stage: after a reply that asks for tools, before they run, the agent's window
strategy may cut the live window. It runs there so the next call is sent a window already
in budget, measured by the call just made.

    summarize#k   (commit)  reads the folded messages; writes the transcript message
                  (call)    the summarizer's call, a model call like any other
                  (reply)   writes reply:<n> and the summarizer's answer
    window#k      (commit)  reads messages, reply:<n> (what was measured), the summary's
                            reply; writes fold:<f> and the framed summary message
    context_evicted         one event per message that left, with its content hash

Nothing is written when the strategy has nothing to do (under its threshold, or nothing old
enough to leave). A token-triggered strategy over its threshold that can fold nothing still
records its fold, with the refusals that kept everything in.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from afcore.errors import CompactionUnmeasurableError
from afcore.loop._state import RunState
from afcore.messages import (
    AssistantMessage,
    Request,
    Source,
    SystemSegment,
    UserMessage,
)
from afcore.recording._models import (
    ErrorEvent,
    Fold,
    FoldRefusal,
    FoldSummary,
    Line,
    line,
)
from afcore.recording._writer import error_info, ranges
from afcore.secrets import shorten
from afcore.window._live import LiveWindowState
from afcore.window._strategies import WindowStrategy
from afcore.window._summary import SUMMARIZER_SYSTEM, frame, message_chars, transcript
from afcore.window._turns import LiveMessage, old_turns

__all__ = ["visit"]

_SUMMARIZER_SOURCE = Source(kind="summarizer")
# The summarizer's slots are the same objects at every fold: the writer knows them.
_SUMMARIZER_SEGMENTS = (SystemSegment(SUMMARIZER_SYSTEM, _SUMMARIZER_SOURCE),)
_NO_PARAMS: Mapping[str, Any] = MappingProxyType({})
_error = line(ErrorEvent)
# The fold's value as the write takes it: a plain line, not a model made to be dumped, its
# refusals and summary given as lines too (the refusal of the run's request, the same at
# every visit, is made once).
_fold: Any = line(Fold, plain=True)
_refused = line(FoldRefusal)
_summary = line(FoldSummary)


async def visit(run: RunState, strategy: WindowStrategy) -> None:
    """One visit of the window strategy; may change ``run.live``."""
    window = run.live
    assert window is not None
    live = window.items
    rec = run.rec
    measured: int | None = None
    if strategy.threshold_tokens is not None:
        measured = _measured(run, strategy)
        if measured <= strategy.threshold_tokens:
            return
    seed = run.request
    # Looked for from the end: the run's own messages follow its request, so a long
    # conversation's window is not walked from its oldest turn at every visit.
    request = (
        0
        if live and live[0] is seed
        else next((i for i in range(len(live) - 1, -1, -1) if live[i] is seed), None)
    )
    turns = old_turns(
        live,
        window.sizes,
        keep_recent_turns=strategy.keep_recent_turns,
        request=request,
        last_result=window.newest_result(),
    )
    # The spans of turns that may leave (a summarizer folds the oldest only), as positions.
    blocks: list[tuple[int, int]] = []
    refusals: list[Line] = []
    begin = -1
    for start, end, reason in turns:
        if reason is None:
            if begin < 0:
                begin = start
            continue
        refusals.append(_refused_turn(window, start, end, reason))
        if begin >= 0:
            blocks.append((begin, start - 1))
            begin = -1
    if begin >= 0:
        blocks.append((begin, turns[-1][1]))
    summarizes = strategy.summarizer is not None
    if summarizes:
        del blocks[1:]
    if not blocks and measured is None:
        return  # nothing old enough to leave: nothing to record
    run.folds += 1
    fold = run.folds
    reads = ["messages"] + ([f"reply:{run.last_call}"] if measured is not None else [])
    writes: list[Line] = []
    summary: Line | None = None
    summary_item: LiveMessage | None = None
    rsid = ""
    if summarizes and blocks:
        first, last = blocks[0]
        items = live[first : last + 1]
        outcome = await _summarize(run, strategy, items, fold)
        if isinstance(outcome, str):  # the summarizer failed: the span stays
            refusals.append(_refusal(items, "summarizer_failed", error=outcome))
            blocks = []
        else:
            text, call, by = outcome
            framed = frame(text, items, by=by, fold=fold)
            if len(framed) >= message_chars(items):
                refusals.append(_refusal(items, "summary_not_smaller"))
                blocks = []
            else:
                rsid = rec.next_rsid("window")
                message = UserMessage(framed)
                source = Source(
                    kind="summary", id=strategy.name, reason=f"fold {fold}: {len(items)} messages"
                )
                n, write = rec.message(message, history=False, source=source)
                writes.append(write)
                reads.append(f"reply:{call}")
                summary_item = LiveMessage(n, message, rsid)
                summary = _summary(message=n, call=call, by=by)
    rsid = rsid or rec.next_rsid("window")
    if len(blocks) == 1:
        first, last = blocks[0]
        left = live[first : last + 1]
    else:
        left = [item for first, last in blocks for item in live[first : last + 1]]
    before = len(live)
    # The newest block first, so the positions of the older ones stay put.
    for first, last in reversed(blocks):
        window.remove(first, last, summary_item if (first, last) == blocks[0] else None)
    if not rec.enabled:
        return
    numbers = [item.n for item in left]
    iteration = run.iteration
    value = _fold(
        strategy=strategy.name,
        iteration=iteration,
        folded=_writers(left),
        messages=ranges(numbers),
        count=len(left),
        before=before,
        after=len(live),  # the window's own list, cut in place
        keep_recent_turns=strategy.keep_recent_turns,
        refusals=refusals,
        measured=measured,
        measured_at=None if measured is None else run.last_call,
        threshold=None if measured is None else strategy.threshold_tokens,
        summary=summary,
    )
    rec.fold(rsid, iteration, fold, value, reads=reads, writes=writes, left=numbers)
    # Not written here: the fold goes out with the reply before it, by the loop's own rule
    # (before the tools run when the reply took long enough to matter, else with the next
    # call), so a fold at every iteration costs no write of its own.


def _measured(run: RunState, strategy: WindowStrategy) -> int:
    """The input tokens the provider counted for the agent's last call."""
    usage = run.last_usage
    if usage is not None and not usage.estimated:
        return usage.input_tokens
    provider = run.agent.provider.name
    what = "no usage" if usage is None else "only an estimate of its tokens"
    hint = (
        " (a mock's estimates count when it is made with mock(..., authoritative=True))"
        if provider == "mock" and usage is not None
        else ""
    )
    error = CompactionUnmeasurableError(
        f"{strategy.name} compares the input tokens the provider counted for call "
        f"{run.last_call} with its threshold of {strategy.threshold_tokens:,}, but {provider} "
        f"reported {what}{hint}; counted, never guessed",
        strategy=strategy.name,
        call=run.last_call,
    )
    run.rec.event(
        _error(
            rsid=run.rec.next_rsid("window"),
            iter=run.iteration,
            call=run.last_call,
            error=error_info(error),
        )
    )
    raise error


async def _summarize(
    run: RunState, strategy: WindowStrategy, items: list[LiveMessage], fold: int
) -> tuple[str, int, str] | str:
    """Ask the summarizer for a summary of ``items``: (text, its call number, who wrote it),
    or why it could not (a string). The call is recorded like any other."""
    rec = run.rec
    summarizer = strategy.summarizer
    assert summarizer is not None
    model = strategy.model or run.model
    by = f"{summarizer.name}:{model}"
    rsid = rec.next_rsid("summarize")
    ask = UserMessage(transcript(items))
    n, write = rec.message(ask, history=False, source=Source(kind="transcript", id=f"fold:{fold}"))
    rec.commit(
        rsid,
        "summarize",
        run.iteration,
        reads=[f"message:{item.n}" for item in items if rec.enabled],
        writes=[write],
    )
    system = _SUMMARIZER_SEGMENTS
    run.calls += 1
    call = run.calls
    sent = rec.call(
        rsid,
        run.iteration,
        call,
        model=model,
        system=system,
        window=[(n, n)] if rec.enabled else [],
        tools=(),
        params=_NO_PARAMS,
        cache=(),
        reads=[f"message:{n}"],
    )
    clock = run.agent.recording.clock if run.agent.recording else time.perf_counter
    t0 = clock()
    request = Request(
        model=model, system=system, messages=[ask], tools=(), params=_NO_PARAMS, cache=()
    )
    if run.agent.replayer is not None:
        summarizer = run.agent.replayer.provider(summarizer, call, sent, None)
    try:
        response = await summarizer.complete(request)
    except Exception as e:  # a failed summary refuses the fold; the run goes on
        reason = f"{type(e).__name__}: {e}"
        rec.event(_error(rsid=rsid, iter=run.iteration, call=call, error=error_info(e)))
        return shorten(reason, 300)
    if response.usage is not None:
        run.usage = run.usage + response.usage
    answer = AssistantMessage(response.content)
    _, reply_write = rec.message(answer, history=False)
    rec.reply(
        rsid,
        run.iteration,
        call,
        message_write=reply_write,
        stop_reason=response.stop_reason,
        tool_calls=[],
        usage=response.usage,
        model=response.model,
        ms=(clock() - t0) * 1000,
    )
    if response.tool_calls or not response.text.strip():
        return "the summarizer answered with no text" + (
            " but a tool call" if response.tool_calls else ""
        )
    return response.text.strip(), call, by


def _refused_turn(window: LiveWindowState, start: int, end: int, reason: str) -> Line:
    """The refusal of the turn at positions ``start``..``end``: the same turn refusing for
    the same reason at every visit (the run's request) is described once."""
    live = window.items
    first, last = live[start], live[end]
    key = (id(first), id(last), end - start, reason)
    known = window.refusals.get(key)
    if known is not None and known[0] is first and known[1] is last:
        kept: Line = known[2]
        return kept
    refusal = _refusal(live[start : end + 1], reason)
    if len(window.refusals) >= 64:
        window.refusals.clear()
    window.refusals[key] = (first, last, refusal)
    return refusal


def _refusal(items: list[LiveMessage], reason: str, *, error: str | None = None) -> Line:
    return _refused(
        reason=reason,
        messages=ranges([item.n for item in items]),
        writers=_writers(items),
        error=error,
    )


def _writers(items: list[LiveMessage]) -> list[str]:
    """The stages that wrote ``items``, each once, in order."""
    return list(dict.fromkeys(item.writer for item in items))
