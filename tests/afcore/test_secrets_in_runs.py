"""Secrets planted in every place a run touches never reach the bytes of its recording.

One run carries them all: the agent's name, the system text, an injection's text and the
evidence its rule read, the user message, the run's state, tool arguments and argument
keys, a rejected argument, tool results (one tool's and two at once), a tool's error, the
params, the model's text. Another run fails on a provider whose URL holds a password. No
8-character piece of any secret may be in the file, which still verifies and scans clean.
"""

from __future__ import annotations

import random
import string
from pathlib import Path
from typing import Any

import httpx2
import orjson
import pytest

from afcore import Agent, RecordingConfig, define_tool, mock, openai_compatible
from afcore.errors import ConnectionFailedError
from afcore.recording import open_recording, verify
from afcore.secrets import scan_recording
from tests.afcore.secrets_corpus import KEY_SHAPES


def _word(rng: random.Random, n: int = 20) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(rng.choice(alphabet) for _ in range(n - 2)) + "-9"


def _no_piece_of(secret: str, data: bytes, *, width: int = 8) -> list[str]:
    """The 8-character pieces of ``secret`` found in ``data``."""
    text = data.decode("utf-8", "replace")
    return [
        secret[i : i + width]
        for i in range(len(secret) - width + 1)
        if secret[i : i + width] in text
    ]


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    rng = random.Random(2026)
    secrets = {
        "env_password": "hunter2-Sup3rS3cret-Passw0rd!",  # 29 characters, as in the report
        "db_url_password": _word(rng, 24),
        "state_password": _word(rng),
        "anthropic_key": KEY_SHAPES["anthropic"](rng),
        "github_token": KEY_SHAPES["github_classic"](rng),
        "tool_arg_secret": _word(rng),
        "tool_arg_int": "".join(rng.choice(string.digits[1:]) for _ in range(12)),
        "nested_secret": _word(rng),
        "json_in_text": _word(rng),
        "parallel_secret": _word(rng),
        "reply_secret": _word(rng),
        "jwt": KEY_SHAPES["jwt"](rng),
    }
    monkeypatch.setenv("APP_PASSWORD", secrets["env_password"])
    monkeypatch.setenv(
        "DATABASE_URL", f"postgres://app:{secrets['db_url_password']}@db.internal:5432/app"
    )
    return secrets


def _tools(s: dict[str, str]) -> list[Any]:
    def login(args: dict[str, Any], ctx: Any) -> str:
        # Echoes what it was given: the worst case.
        return f"logged in as {args.get('user')} with {orjson.dumps(args).decode()}"

    def env(args: dict[str, Any], ctx: Any) -> str:
        return (
            f"DATABASE_URL=postgres://app:{s['db_url_password']}@db.internal:5432/app\n"
            f"the db password alone: {s['db_url_password']}\n"
            f'config: {{"password": "{s["json_in_text"]}", "port": 5432}}\n'
            f"token: {s['github_token']}"
        )

    def first(args: dict[str, Any], ctx: Any) -> str:
        return f"the vault said {s['parallel_secret']} (keep it)"

    def second(args: dict[str, Any], ctx: Any) -> str:
        return f"secret_key={s['parallel_secret']}"

    def broken(args: dict[str, Any], ctx: Any) -> str:
        raise RuntimeError(
            f"cannot connect with {s['env_password']} (password={s['state_password']})"
        )

    obj = {"type": "object"}
    return [
        define_tool("login", "Log in.", obj, login),
        define_tool("env", "Show the environment.", obj, env),
        define_tool("first", "One.", obj, first),
        define_tool("second", "Two.", obj, second),
        define_tool("broken", "Fails.", obj, broken),
        define_tool(
            "lookup",
            "Look up an order.",
            {"type": "object", "properties": {"code": {"type": "integer"}}, "required": ["code"]},
            lambda args, ctx: f"order {args['code']}",
        ),
    ]


def test_no_secret_planted_anywhere_in_a_run_reaches_the_recording(
    tmp_path: Path, planted: dict[str, str]
) -> None:
    s = planted
    replies: list[Any] = [
        {
            # The text names the secret before the arguments say it is one.
            "content": f"I will log in with {s['reply_secret']} now.",
            "tool_calls": [
                {
                    "id": "c1",
                    "name": "login",
                    "args": {
                        "user": "ada",
                        "password": s["reply_secret"],
                        "api_password": int(s["tool_arg_int"]),
                        "credentials": {"otp": s["nested_secret"], "note": "x"},
                        # A secret as a key of the arguments.
                        s["env_password"]: True,
                        "note": f"apikey={s['tool_arg_secret']}",
                    },
                }
            ],
        },
        {"tool_calls": [{"id": "c2", "name": "env", "args": {}}]},
        {
            "tool_calls": [
                {"id": "c3", "name": "first", "args": {}},
                {"id": "c4", "name": "second", "args": {}},
            ]
        },
        # A rejected argument: the value is quoted back, cut short, in the event and the
        # message the model reads.
        {"tool_calls": [{"id": "c5", "name": "lookup", "args": {"code": s["env_password"]}}]},
        {"tool_calls": [{"id": "c6", "name": "broken", "args": {}}]},
        f"Done. Your key {s['anthropic_key']} and jwt {s['jwt']} and {s['tool_arg_secret']}.",
    ]
    # The user message puts a secret across the 200th character, where evidence is cut.
    padding = "I want a refund. " * 11
    message = f"{padding}{s['state_password']} is what I use; also {s['env_password']}."
    assert len(padding) < 200 < len(padding) + len(s["state_password"])
    agent = (
        Agent.create(
            provider=mock(replies=replies),
            model="m",
            name=f"agent-{s['github_token']}",
            record=RecordingConfig(dir=tmp_path),
            params={"metadata": {"note": f"deploy key {s['anthropic_key']}"}},
        )
        .system(f"Connect with postgres://app:{s['db_url_password']}@db.internal/app.")
        .instruction(
            f"Quote the refund policy; the admin password is {s['env_password']}.",
            id="refunds",
            when=lambda st: "refund" in st.user_message,
        )
        .instruction(
            "Mind the vault.",
            id="vault",
            when=lambda st: st.state.get("vault", {}).get("password") is not None,
        )
        .tools(_tools(s))
        .build()
    )
    agent.run(message, state={"vault": {"password": s["state_password"]}})
    assert agent.last_recording is not None
    data = agent.last_recording.read_bytes()
    leaks = {name: _no_piece_of(value, data) for name, value in s.items()}
    assert {k: v for k, v in leaks.items() if v} == {}
    assert b"[redacted:" in data
    with open_recording(agent.last_recording) as rec:
        assert verify(rec).ok
    assert scan_recording(agent.last_recording) == []


def test_a_password_in_the_providers_url_reaches_neither_file_nor_error(tmp_path: Path) -> None:
    password = "pr0vider-Passw0rd-7731"

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    provider = openai_compatible(
        f"http://svc:{password}@127.0.0.1:9/v1",
        api_key="local-key-000111",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)),
    )
    agent = Agent.create(provider=provider, model="m", record=tmp_path).build()
    with pytest.raises(ConnectionFailedError) as info:
        agent.run("hello")
    assert password not in str(info.value)
    assert "[redacted:url_password]" in str(info.value)
    files = list(tmp_path.glob("*.jsonl"))
    assert len(files) == 1
    data = files[0].read_bytes()
    assert _no_piece_of(password, data) == []
    header = orjson.loads(data.splitlines()[0])
    assert header["provider"]["base_url"] == "http://svc:[redacted:url_password]@127.0.0.1:9/v1"
    assert b"could not be reached" in data  # the error itself is recorded


def test_a_segment_screened_clean_in_one_run_is_screened_again_once_a_run_learns_a_secret(
    tmp_path: Path,
) -> None:
    """The runs of one policy share what its screen found nothing in (an agent's segments
    are screened once, not at every run); a run that learned a secret from its inputs
    screens them again, and the secret does not reach its file."""
    rng = random.Random(7)
    secret = _word(rng, 24)  # nothing the policy's shapes catch: only learning names it
    long_tail = " and keep the ledger in order" * 12  # over the inline limit: a blob
    agent = (
        Agent.create(
            provider=mock(replies=["one", "two", "three"]),
            model="m",
            record=RecordingConfig(dir=tmp_path),
        )
        .system("You keep books.")
        .steering(f"The vault phrase is {secret}.", id="short")
        .steering(f"The vault phrase is {secret}{long_tail}.", id="long")
        .build()
    )
    agent.run("hello")
    first = agent.last_recording
    assert first is not None
    assert secret in first.read_text()  # not a secret to this run: written as it is
    agent.run("hello", state={"password": secret})  # learned before anything is written
    second = agent.last_recording
    assert second is not None and second != first
    assert _no_piece_of(secret, second.read_bytes()) == []
    agent.run("hello")
    third = agent.last_recording
    assert third is not None
    with open_recording(first) as a, open_recording(third) as b:
        assert verify(a).ok and verify(b).ok
        # The store gave the third run what the first made: the same segments, each long
        # one's blob in its own file.
        assert a.call(1).system == b.call(1).system
        assert a.request(1) == b.request(1)
