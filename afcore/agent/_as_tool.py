"""An agent as another agent's tool: one call runs it once, on the message the model wrote.

The inner run is a run of its own, with its own recording; the outer call's record links
to it (its run id and file), so ``af show``, the Lens and ``af why`` follow the link. The
calling run's redaction is handed on: whatever it keeps out of its file stays out of the
inner one's too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from afcore.errors import UsageError
from afcore.tools._tool import Tool, ToolContext, define_tool

if TYPE_CHECKING:
    from afcore.agent._agent import Agent
    from afcore.loop._state import RunResult

__all__ = ["agent_tool"]

_SCHEMA = {
    "type": "object",
    "properties": {
        "message": {
            "type": "string",
            "description": "What to ask, in full: the agent sees this message and nothing else.",
        }
    },
    "required": ["message"],
    "additionalProperties": False,
}


def agent_tool(agent: Agent, *, name: str, description: str) -> Tool:
    """``agent`` as a tool: a call runs it once on ``message`` and returns its answer.

    The model reads the answer; a run that ends another way (an error, its iteration
    limit, a pause, which does not cross the tool's boundary) is an error result saying
    so. One run at a time per agent instance: a second call while one runs is refused
    with :class:`~afcore.RunInFlightError` (build one agent per caller that can reach it
    at once). The inner run's recording is linked from the outer call's record.
    """
    from afcore.agent._agent import Agent

    if not isinstance(agent, Agent):
        raise UsageError(f"agent_tool(...) takes a built agent, got {type(agent).__name__}")

    async def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        before = agent.last_result
        try:
            result = await agent.arun_result(str(args["message"]), redaction=ctx.redaction)
        except Exception:
            ran = agent.last_result
            if ran is not None and ran is not before:
                ctx._link(_link_of(agent, ran))  # it ran, and stopped on an error
            raise
        ctx._link(_link_of(agent, result))
        if result.paused is not None:
            raise RuntimeError(
                f"agent {agent.name!r} paused to ask a person ({result.paused.question}); a "
                "pause does not cross a tool's boundary"
            )
        if result.status != "answer":
            raise RuntimeError(
                f"agent {agent.name!r} ended {result.status.replace('_', ' ')} without an answer"
            )
        return result.answer

    return define_tool(name, description, _SCHEMA, execute, source=f"agent:{agent.name}")


def _link_of(agent: Agent, result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "recording": result.recording,
        "agent": agent.name,
        "status": result.status,
    }
