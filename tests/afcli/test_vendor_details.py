"""What a vendor said besides the content, as af show and the Lens show it: the response id,
a cut or paused answer, redacted thinking, blocks kept for the vendor, params not sent,
strict tools, and an error's type, request id and details."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool
from afcore.errors import BadRequestError
from afcore.messages import (
    OpaqueBlock,
    Request,
    Response,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from afcore.providers import Provider
from tests.afcli.conftest import Invoke
from tests.conftest import fixed_recording


class Scripted(Provider):
    """Replies as a vendor would, with the fields the mock does not make."""

    name = "scripted"

    def __init__(self, replies: list[Response | Exception]) -> None:
        self.replies: Iterator[Response | Exception] = iter(replies)

    async def complete(self, request: Request, *, on_stream: Any = None) -> Response:
        reply = next(self.replies)
        if isinstance(reply, Exception):
            raise reply
        return reply


USAGE = Usage(input_tokens=10, output_tokens=5)
SEARCH = {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"q": "x"}}


def _agent(tmp_path: Path, replies: list[Response | Exception]) -> Agent:
    probe = define_tool(
        name="probe",
        description="Looks.",
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        execute=lambda args, ctx: "seen",
        strict=True,
    )
    return (
        Agent.create(
            provider=Scripted(replies), model="m", name="vendor", record=fixed_recording(tmp_path)
        )
        .tool(probe)
        .build()
    )


def answered_run(tmp_path: Path) -> Path:
    """A run whose replies carry what a vendor adds: ids, a pause, a cut, redacted
    thinking, a server tool's block, a param not sent."""
    agent = _agent(
        tmp_path,
        [
            Response(
                content=(
                    ThinkingBlock("", signature="sig", redacted=True),
                    OpaqueBlock("anthropic", SEARCH),
                    TextBlock("Paused while searching."),
                ),
                stop_reason="pause_turn",
                usage=USAGE,
                response_id="msg_01Paused",
            ),
            Response(
                content=(ToolCall("c1", "probe", {}),),
                stop_reason="tool_use",
                usage=USAGE,
                response_id="msg_02Tool",
                unsent_params=("thinking",),
            ),
            Response(
                content=(TextBlock("The answer was going to be lo"),),
                stop_reason="max_tokens",
                usage=USAGE,
                response_id="msg_03Cut",
            ),
        ],
    )
    agent.run("look it up")
    assert agent.last_recording is not None
    return agent.last_recording


@pytest.fixture
def answered(tmp_path: Path) -> Path:
    return answered_run(tmp_path)


def test_show_says_what_the_vendor_said(invoke: Invoke, answered: Path) -> None:
    ran = invoke("show", answered, env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    out = ran.out
    assert "msg_01Paused" in out and "msg_02Tool" in out and "msg_03Cut" in out
    assert "pause_turn (paused, continued)" in out
    assert "max_tokens (the answer was cut)" in out
    assert "(redacted thinking: the vendor sent it encrypted)" in out
    assert "(server_tool_use web_search, kept for anthropic)" in out
    assert "thinking not sent: the server has no way to say it" in out
    assert "(thinking, 0 chars)" not in out and '"srv_1"' not in out

    first = invoke("show", answered, "--call", "1", env={"COLUMNS": "200"})
    assert first.code == 0, first.err
    assert "probe()  strict" in first.out
    assert "pause_turn (paused, continued)" in first.out
    data = invoke("show", answered, "--call", "2", "--json").json()
    assert data["response"]["response_id"] == "msg_02Tool"
    assert data["response"]["unsent_params"] == ["thinking"]
    overview = invoke("show", answered, "--json").json()
    first_reply = overview["calls"][0]["response"]
    assert first_reply["redacted_thinking"] == 1 and first_reply["thinking_chars"] == 0
    assert first_reply["opaque"] == ["(server_tool_use web_search, kept for anthropic)"]


def test_show_gives_a_provider_errors_type_request_id_and_details(
    invoke: Invoke, tmp_path: Path
) -> None:
    refused = BadRequestError(
        "the server refused the request",
        provider="scripted",
        status=400,
        error_type="tool_use_failed",
        request_id="req_7Xq",
        details={"failed_generation": "<tool>probe</tool>"},
    )
    agent = _agent(tmp_path, [refused])
    with pytest.raises(BadRequestError):
        agent.run("look it up")
    assert agent.last_recording is not None
    ran = invoke("show", agent.last_recording, "--call", "1", env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    assert "error type tool_use_failed" in ran.out
    assert "request id req_7Xq" in ran.out
    assert 'failed_generation="<tool>probe</tool>"' in ran.out
