"""The scripted agent the session tests share, in this process and in worker processes.

Its model answers each user message with ``answer to: <the message>`` (so a test can check
that every message got its answer, and which), calls the ``slow`` tool when a message says
``run slow``, and waits ``delay`` seconds per call so that turns overlap in time with
messages sent meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afcore import Agent, AgentBuilder, RecordingConfig, define_tool, mock
from afcore.messages import Request, ToolResultMessage, UserMessage
from afcore.sessions import SessionStore

NAME = "session-bot"
SLOW = "run slow"


def respond(delay: float = 0.0, before: Callable[[], None] | None = None) -> Any:
    def reply(request: Request) -> dict[str, Any]:
        if before is not None:
            before()
        if delay:
            time.sleep(delay)
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            return {"content": f"after {last.name}: {last.content}"}
        assert isinstance(last, UserMessage)
        if SLOW in last.content and "[af-" not in last.content:
            return {
                "tool_calls": [{"id": f"slow-{len(request.messages)}", "name": "slow", "args": {}}]
            }
        return {"content": f"answer to: {last.content}"}

    return reply


def blocking_slow_tool(marker: Path | None, seconds: float) -> Any:
    """A tool that says it started (a file) and then blocks its thread."""

    def execute(args: dict[str, Any], ctx: Any) -> str:
        if marker is not None:
            marker.write_text("started")
        time.sleep(seconds)
        return "slow done"

    return define_tool("slow", "Takes its time.", {"type": "object"}, execute)


class AsyncSlow:
    """An async tool that waits until cancelled, and notes that it saw the cancellation."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.cancelled = threading.Event()

    def tool(self) -> Any:
        async def execute(args: dict[str, Any], ctx: Any) -> str:
            self.started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "slow done"

        return define_tool("slow", "Takes its time.", {"type": "object"}, execute)


def builder(
    store: SessionStore | str | Path,
    recordings: Path,
    *,
    delay: float = 0.0,
    slow: Any = None,
    before_reply: Callable[[], None] | None = None,
) -> AgentBuilder:
    b = Agent.create(
        provider=mock(respond=respond(delay, before_reply)),
        model="scripted",
        name=NAME,
        record=RecordingConfig(dir=recordings),
        sessions=store,
    ).system("You answer every message.")
    return b.tool(slow if slow is not None else blocking_slow_tool(None, 0))
