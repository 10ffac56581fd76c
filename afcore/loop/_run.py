"""The agent loop: call the model, run the tools it asks for, repeat until it answers.

Every stage commits what it read and wrote to the recording:

    seed#0                 writes user_message, message:1
    call-llm#k   (call)    reads messages, writes call:<n>            as the request is sent
                 (reply)   writes reply:<n>, message:<m>              when the answer is in
    route#k                reads reply:<n>, writes route (tools | answer)
    tool:<name>#k          reads reply:<n>, writes message:<m> (the result)  one per tool call
    finalize#k             reads reply:<n>, writes answer
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from afcore._version import __version__
from afcore.errors import AfError, ProviderError, RunError
from afcore.messages import (
    AssistantMessage,
    Message,
    Request,
    Response,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from afcore.recording._hashing import content_hash
from afcore.recording._writer import Recorder
from afcore.tools._tool import Tool, ToolContext
from afcore.tools._validation import correction, validate_args

if TYPE_CHECKING:
    from afcore.agent._agent import Agent

__all__ = ["RunResult", "RunStatus", "run_loop"]

RunStatus = Literal["answer", "error", "max_iterations", "interrupted", "paused"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended."""

    status: RunStatus
    answer: str
    """The final answer; for `max_iterations`, the last text the model wrote (maybe empty)."""
    iterations: int
    calls: int
    usage: Usage
    run_id: str
    recording: Path | None
    error: BaseException | None = field(default=None, repr=False)


@dataclass
class _Run:
    agent: Agent
    rec: Recorder
    run_id: str
    state: dict[str, Any]
    history: list[Message] = field(default_factory=list)
    iteration: int = 0
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_counts: dict[str, int] = field(default_factory=dict)
    loop_thread: int = 0
    last_text: str = ""


async def run_loop(
    agent: Agent, message: str, rec: Recorder, run_id: str, state: dict[str, Any]
) -> RunResult:
    """Run one turn of ``agent`` on ``message``, writing to ``rec``. Closes ``rec``."""
    run = _Run(agent=agent, rec=rec, run_id=run_id, state=state, loop_thread=threading.get_ident())
    clock = agent.recording.clock if agent.recording else time.perf_counter
    started = clock()
    status: RunStatus = "error"
    answer: str | None = None
    failure: BaseException | None = None
    error_info: dict[str, str] | None = None
    try:
        _start(run, message)
        while True:
            if run.iteration >= agent.max_iterations:
                status, answer = "max_iterations", run.last_text
                break
            run.iteration += 1
            reply_seq_key, response, ks = await _call_model(run)
            calls = response.tool_calls
            route_rsid = rec.next_rsid("route")
            rec.commit(
                route_rsid,
                "route",
                run.iteration,
                reads=(reply_seq_key,),
                writes=[rec.write("route", "tools" if calls else "answer", trusted=True)],
            )
            if not calls:
                answer = response.text
                fin = rec.next_rsid("finalize")
                rec.commit(
                    fin,
                    "finalize",
                    run.iteration,
                    reads=(reply_seq_key,),
                    writes=[rec.write("answer", answer)],
                )
                status = "answer"
                break
            await _run_tools(run, list(zip(calls, ks, strict=True)), reply_seq_key)
            rec.sync()
            # Let the event loop in once an iteration: a Ctrl-C (or a cancel) then stops even
            # a run whose provider and tools never wait on anything.
            await asyncio.sleep(0)
    except (asyncio.CancelledError, KeyboardInterrupt) as e:
        status, failure = "interrupted", e
        raise
    except AfError as e:
        failure, error_info = e, {"kind": type(e).__name__, "message": str(e)}
        raise
    except Exception as e:  # an error of ours or of the application's: record it, then raise
        failure, error_info = e, {"kind": type(e).__name__, "message": str(e)}
        raise RunError(f"the run stopped on {type(e).__name__}: {e}", recording=rec.path) from e
    finally:
        end: dict[str, Any] = {
            "t": "run_end",
            "status": status,
            "iterations": run.iteration,
            "calls": run.calls,
            "usage": run.usage.to_json(),
        }
        if answer:
            end["answer"] = rec.write("answer", answer) if rec.enabled else None
        if error_info is not None:
            end["error"] = error_info
        end["ms"] = round((clock() - started) * 1000, 3)
        if rec.enabled:
            end["redactions"] = rec.redactor.count
            rec.event(end)
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
        )
        agent._finished(result)
    return result


def _start(run: _Run, message: str) -> None:
    agent, rec = run.agent, run.rec
    if rec.enabled:
        redactor = rec.redactor
        tools = [
            {"name": t.name, "ref": content_hash(redactor.redact(t.spec.to_json()))}
            for t in agent.tools.values()
        ]
        rec.header(
            {
                "t": "header",
                "format": "af.recording",
                "version": "1.0",
                "run_id": run.run_id,
                "started_at": agent.recording.now().isoformat(timespec="milliseconds")
                if agent.recording
                else "",
                "af_version": __version__,
                "python": ".".join(map(str, sys.version_info[:3])),
                "hash": "sha256",
                "agent": {"name": agent.name, "source": agent.source},
                "provider": redactor.redact(agent.provider.describe()),
                "model": agent.model,
                "config": {
                    "max_iterations": agent.max_iterations,
                    "tool_arg_validation": agent.tool_arg_validation,
                    "tools": tools,
                    "params": redactor.redact(dict(agent.params)),
                },
                "redaction": {
                    "fields": list(redactor.policy.fields),
                    "patterns": [name for name, _ in redactor.policy.patterns],
                    "env": redactor.env_names,
                },
            }
        )
        for t in agent.tools.values():
            rec.tool_ref(t.spec)
    user = UserMessage(message)
    run.history.append(user)
    _, write = rec.message(user)
    rec.commit(rec.next_rsid("seed"), "seed", 0, writes=[rec.write("user_message", message), write])


async def _call_model(run: _Run) -> tuple[str, Response, list[int]]:
    agent, rec = run.agent, run.rec
    run.calls += 1
    n = run.calls
    rsid = rec.next_rsid("call-llm")
    request = Request(
        model=agent.model,
        system=agent.system,
        messages=list(run.history),
        tools=agent.tool_specs,
        params=agent.params,
    )
    rec.call(
        rsid,
        run.iteration,
        n,
        model=request.model,
        system=request.system,
        window=[(1, len(run.history))],
        tools=request.tools,
        params=dict(request.params),
        cache=[c.to_json() for c in request.cache],
    )
    clock = agent.recording.clock if agent.recording else time.perf_counter
    t0 = clock()
    try:
        response = await agent.provider.complete(request)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:
        error = (
            e
            if isinstance(e, ProviderError)
            else ProviderError(
                f"{agent.provider.name} failed on call {n}: {type(e).__name__}: {e}",
                provider=agent.provider.name,
                call=n,
            )
        )
        if isinstance(error, ProviderError) and error.call is None:
            error.call = n
        rec.event(
            {
                "t": "error",
                "rsid": rsid,
                "iter": run.iteration,
                "call": n,
                "error": {"kind": type(error).__name__, "message": str(error)},
            }
        )
        if error is e:
            raise
        raise error from e
    ms = (clock() - t0) * 1000
    assistant = AssistantMessage(response.content)
    run.history.append(assistant)
    run.last_text = response.text or run.last_text
    if response.usage is not None:
        run.usage = run.usage + response.usage
    _, write = rec.message(assistant)
    tool_calls: list[dict[str, Any]] = []
    for call in response.tool_calls:
        k = run.tool_counts.get(call.name, 0) + 1
        run.tool_counts[call.name] = k
        tool_calls.append({"id": call.id, "name": call.name, "k": k})
    rec.reply(
        rsid,
        run.iteration,
        n,
        message_write=write,
        stop_reason=response.stop_reason,
        tool_calls=tool_calls,
        usage=response.usage,
        model=response.model,
        ms=ms,
    )
    return f"reply:{n}", response, [c["k"] for c in tool_calls]


async def _run_tools(run: _Run, planned: list[tuple[ToolCall, int]], reply_key: str) -> None:
    rec = run.rec
    jobs = []
    for call, k in planned:
        rsid = rec.next_rsid(f"tool:{call.name}")
        rec.event(
            {
                "t": "tool_start",
                "rsid": rsid,
                "iter": run.iteration,
                "name": call.name,
                "k": k,
                "call_id": call.id,
            }
        )
        jobs.append((call, k, rsid))
    concurrent = len(jobs) > 1
    if concurrent:
        outcomes = await asyncio.gather(
            *(_run_tool(run, c, rsid, concurrent) for c, _, rsid in jobs)
        )
    else:
        outcomes = [await _run_tool(run, jobs[0][0], jobs[0][2], concurrent)]
    # Results join the history in call order, whatever order they finished in.
    for (call, k, rsid), (result, status, ms) in zip(jobs, outcomes, strict=True):
        run.history.append(result)
        _, write = rec.message(result)
        rec.commit(
            rsid,
            f"tool:{call.name}",
            run.iteration,
            reads=(reply_key,),
            writes=[write],
            tool={
                "name": call.name,
                "k": k,
                "call_id": call.id,
                "status": status,
                "ms": round(ms, 3),
            },
        )


async def _run_tool(
    run: _Run, call: ToolCall, rsid: str, concurrent: bool
) -> tuple[ToolResultMessage, str, float]:
    agent, rec = run.agent, run.rec
    clock = agent.recording.clock if agent.recording else time.perf_counter
    t0 = clock()
    tool = agent.tools.get(call.name)
    if tool is None:
        known = ", ".join(agent.tools) or "none"
        text = f"There is no tool named {call.name!r}. The tools you can call: {known}."
        return _result(call, text, error=True), "unknown_tool", (clock() - t0) * 1000
    mode = agent.tool_arg_validation
    if mode != "off":
        problems = validate_args(tool, call.args)
        if problems:
            rec.event(
                {
                    "t": "args_invalid",
                    "rsid": rsid,
                    "name": call.name,
                    "call_id": call.id,
                    "problems": [p.to_json() for p in problems],
                    "enforced": mode == "enforce",
                }
            )
            if mode == "enforce":
                return (
                    _result(call, correction(tool, problems), error=True),
                    "rejected",
                    (clock() - t0) * 1000,
                )
    ctx = ToolContext(
        run_id=run.run_id,
        iteration=run.iteration,
        call_id=call.id,
        tool=call.name,
        state=run.state,
        _progress=_progress_reporter(run, rsid),
    )
    try:
        value = await _execute(tool, dict(call.args), ctx, in_thread=concurrent)
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:
        text = f"The tool {call.name} failed: {type(e).__name__}: {e}"
        return _result(call, text, error=True), "error", (clock() - t0) * 1000
    return _result(call, _as_text(value)), "ok", (clock() - t0) * 1000


async def _execute(tool: Tool, args: dict[str, Any], ctx: ToolContext, *, in_thread: bool) -> Any:
    if tool.is_async:
        return await tool.execute(args, ctx)
    # A sync tool alone runs inline (no thread hop); beside others it runs in a thread so
    # that the calls of one reply overlap.
    value = (
        await asyncio.to_thread(tool.execute, args, ctx) if in_thread else tool.execute(args, ctx)
    )
    if asyncio.iscoroutine(value):
        value = await value
    return value


def _progress_reporter(run: _Run, rsid: str) -> Any:
    loop = asyncio.get_running_loop()

    def emit(message: str) -> None:
        run.rec.event({"t": "tool_progress", "rsid": rsid, "message": message})

    def report(message: str) -> None:
        if threading.get_ident() == run.loop_thread:
            emit(message)
        else:
            loop.call_soon_threadsafe(emit, message)

    return report


def _result(call: ToolCall, text: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call.id, name=call.name, content=text, is_error=error)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return orjson.dumps(value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)
