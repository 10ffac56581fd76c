"""The recorded API exchanges in ``../shared/wire/`` beside the repository, for replaying
through the providers' transport hooks. Tests that need them skip, saying why, where the
folder is absent; nothing af ships reads them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

WIRE = Path(__file__).resolve().parents[2].parent / "shared" / "wire"
"""``shared/wire/`` next to the repository root."""


def load(vendor: str, name: str) -> list[dict[str, Any]]:
    """The interactions of one recorded conversation, or a skip when it is not here."""
    path = WIRE / vendor / f"{name}.yaml"
    if not path.is_file():
        pytest.skip(f"the recorded exchange {vendor}/{name}.yaml is absent (looked in {WIRE})")
    yaml = pytest.importorskip("yaml", reason="pyyaml reads the recorded exchanges")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    interactions: list[dict[str, Any]] = data["interactions"]
    return interactions


def names(vendor: str) -> list[Any]:
    """The recorded conversations of one vendor, as test parameters; where the folder is
    absent, one parameter that skips and says so."""
    folder = WIRE / vendor
    found = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
    if found:
        return found
    reason = f"no recorded {vendor} exchanges: {folder} is absent or empty"
    return [pytest.param("absent", marks=pytest.mark.skip(reason=reason))]


def recorded_response(interaction: dict[str, Any]) -> httpx2.Response:
    """The recorded answer, as the vendor's server sent it: the JSON body or the event
    stream byte for byte, with its status and content type."""
    response = interaction["response"]
    status = response["status"]["code"]
    if "parsed_body" in response:
        return httpx2.Response(
            status, headers={"content-type": "application/json"}, json=response["parsed_body"]
        )
    content_type = response["headers"].get("content-type", ["text/event-stream"])[0]
    return httpx2.Response(
        status,
        headers={"content-type": content_type},
        content=response["body"]["string"].encode(),
    )


class Replay:
    """A transport that answers each request with the next recorded response and keeps
    what was sent, so a test can compare it with the recorded request."""

    def __init__(self, responses: Iterable[httpx2.Response]) -> None:
        self.responses = list(responses)
        self.sent: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.sent.append(request)
        if len(self.sent) > len(self.responses):
            raise AssertionError(f"request {len(self.sent)} has no recorded response")
        return self.responses[len(self.sent) - 1]

    def body(self, n: int = -1) -> dict[str, Any]:
        result: dict[str, Any] = orjson.loads(self.sent[n].content)
        return result

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self))


def client_for(handler: Callable[[httpx2.Request], httpx2.Response]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


def sse(events: Iterable[str]) -> str:
    return "".join(f"{e}\n\n" for e in events)


async def broken_after(chunks: list[bytes]) -> AsyncIterator[bytes]:
    """A body that sends ``chunks`` and then loses the connection."""
    for chunk in chunks:
        yield chunk
    raise httpx2.ReadError("connection reset by peer")
