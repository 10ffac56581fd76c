"""A provider closes the HTTP client it made, and with it the connection it keeps between
calls, on the event loop the client belongs to; a client it was given stays open. Against a
local server speaking both vendors' APIs, through the real SDK's client and httpx2's."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest

from afcore import Agent, UsageError, mock
from afcore.loop._sync import run_sync
from afcore.providers import (
    AnthropicProvider,
    OpenAICompatibleProvider,
    Provider,
    anthropic,
    openai_compatible,
)

Peer = tuple[str, int]

_ANSWERS = {
    "/v1/messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "/v1/chat/completions": {
        "id": "cmpl_1",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    },
}


class Server:
    """Which connections each request came on, and which connections the client ended."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.peers: list[Peer] = []
        self.ended: list[Peer] = []
        self.changed = threading.Condition()

    def wait_ended(self, peer: Peer) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: peer in self.ended, timeout=30)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_state: Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.server_state.peers.append(self.client_address)
        body = json.dumps(_ANSWERS[self.path]).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def finish(self) -> None:
        super().finish()
        state = self.server_state
        with state.changed:
            state.ended.append(self.client_address)
            state.changed.notify_all()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Server]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    state = Server(f"http://127.0.0.1:{httpd.server_address[1]}")
    httpd.RequestHandlerClass = type("Handler", (_Handler,), {"server_state": state})
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


def _anthropic(url: str, client: httpx2.AsyncClient | None = None) -> Provider:
    return anthropic("m", api_key="sk-test", base_url=url, http_client=client)


def _openai(url: str, client: httpx2.AsyncClient | None = None) -> Provider:
    return openai_compatible(url + "/v1", "m", "sk-test", http_client=client)


VENDORS = pytest.mark.parametrize("make", [_anthropic, _openai], ids=["anthropic", "openai"])


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every client the providers make: the SDK's AsyncAnthropic, httpx2's AsyncClient."""
    out: list[Any] = []
    for cls in (AnthropicProvider, OpenAICompatibleProvider):
        original = cls._make_client

        def spy(self: Any, original: Callable[[Any], Any] = original) -> Any:
            client = original(self)
            out.append(client)
            return client

        monkeypatch.setattr(cls, "_make_client", spy)
    return out


def _is_closed(client: Any) -> bool:
    closed = client.is_closed
    return bool(closed() if callable(closed) else closed)  # the SDK's is a method


def _agent(provider: Provider) -> Agent:
    return Agent.create(provider=provider, model="m", record=False).build()


@VENDORS
def test_close_closes_the_client_the_provider_made_and_its_connection(
    server: Server, made: list[Any], make: Callable[..., Provider]
) -> None:
    provider = make(server.url)
    agent = _agent(provider)
    assert agent.run("one") == "hi" and agent.run("two") == "hi"
    assert len(made) == 1 and len(server.peers) == 2 and server.peers[0] == server.peers[1]
    assert not _is_closed(made[0]) and server.ended == []

    provider.close()
    assert _is_closed(made[0])
    assert server.wait_ended(server.peers[0])
    provider.close()  # twice: nothing more to close

    # A later call opens a new client, on a new connection.
    assert agent.run("three") == "hi"
    assert len(made) == 2 and server.peers[2] != server.peers[0]
    provider.close()
    assert _is_closed(made[1]) and server.wait_ended(server.peers[2])


@VENDORS
def test_a_client_given_to_the_provider_stays_open(
    server: Server, made: list[Any], make: Callable[..., Provider]
) -> None:
    client = httpx2.AsyncClient()
    provider = make(server.url, client)
    agent = _agent(provider)
    assert agent.run("one") == "hi"
    provider.close()
    assert not client.is_closed and not any(_is_closed(c) for c in made)
    assert agent.run("two") == "hi"
    assert server.peers[1] == server.peers[0]  # the same pooled connection
    run_sync(client.aclose(), "close")  # its owner's to close, on the loop it belongs to
    assert server.wait_ended(server.peers[0])


@VENDORS
def test_a_with_block_closes_the_provider_at_its_end(
    server: Server, made: list[Any], make: Callable[..., Provider]
) -> None:
    with make(server.url) as provider:
        assert _agent(provider).run("one") == "hi"
        assert not _is_closed(made[0])
    assert _is_closed(made[0]) and server.wait_ended(server.peers[0])


@VENDORS
def test_async_code_awaits_aclose_and_close_there_says_so(
    server: Server, made: list[Any], make: Callable[..., Provider]
) -> None:
    async def main() -> None:
        async with make(server.url) as provider:
            assert await _agent(provider).arun("one") == "hi"
            with pytest.raises(UsageError, match=r"await aclose\(\)"):
                provider.close()
            assert not _is_closed(made[0])
        assert _is_closed(made[0])

    asyncio.run(main())
    assert server.wait_ended(server.peers[0])


@VENDORS
def test_aclose_closes_a_client_of_another_loop_on_its_own(
    server: Server, made: list[Any], make: Callable[..., Provider]
) -> None:
    # Made by a sync run, on this thread's loop; closed from async code on another loop.
    provider = make(server.url)
    assert _agent(provider).run("one") == "hi"
    asyncio.run(provider.aclose())
    assert _is_closed(made[0]) and server.wait_ended(server.peers[0])


def test_a_provider_with_nothing_open_closes_as_a_no_op() -> None:
    with mock(replies=[{"content": "hi"}]) as provider:
        assert _agent(provider).run("one") == "hi"
    provider.close()
    asyncio.run(provider.aclose())
