"""The corpus of secrets the redaction policy has always caught: every one of them must
stay caught, whatever the screen is made of. Only the public policy API is used
(``Redaction(...).compile(...)``, ``redact``), so the same file runs against any version.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from afcore import Redaction
from tests.afcore.secrets_corpus import KEY_SHAPES, rng

SHAPES_CAUGHT_SINCE_1_0 = [
    "anthropic",
    "openai_project",
    "openai_legacy",
    "aws_access_key",
    "github_classic",
    "github_oauth",
    "slack_bot",
    "private_key_rsa",
    "private_key_openssh",
    "private_key_pkcs8",
]

PLACES: dict[str, Callable[[str], Any]] = {
    "alone": lambda s: s,
    "in prose": lambda s: f"Here it is: {s} (keep it safe).",
    "in a message": lambda s: {"role": "tool", "content": f"config loaded\nkey={s}\nok"},
    "in a tool call": lambda s: {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "login", "input": {"text": s}}],
    },
    "deep in a list": lambda s: [[{"notes": ["a", f"x {s} y"]}]],
    "after a quote": lambda s: f'he said "{s}"',
}


def _leaks(secret: str, value: Any) -> bool:
    return secret in orjson.dumps(value).decode()


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("shape", SHAPES_CAUGHT_SINCE_1_0)
def test_vendor_shapes_are_caught_wherever_they_are(shape: str, place: str) -> None:
    secret = KEY_SHAPES[shape](rng(hash((shape, place)) & 0xFFFF))
    redactor = Redaction(environment=False).compile()
    value = PLACES[place](secret)
    out = redactor.redact(value)
    assert not _leaks(secret, out)
    assert "[redacted:" in orjson.dumps(out).decode()


def test_bearer_tokens_are_caught() -> None:
    redactor = Redaction(environment=False).compile()
    for text in (
        "Authorization: Bearer abcdefghijklmnopqrstu",
        "curl -H 'authorization: bearer abc.def-ghi_jkl~mno/pqr+stu='",
        {"headers": ["BEARER abcdefghijklmnopqrstu"]},
    ):
        assert "abcdefghijklmnop" not in orjson.dumps(redactor.redact(text)).decode()


FIELDS = [
    "api_key",
    "apikey",
    "x-api-key",
    "authorization",
    "proxy-authorization",
    "access_token",
    "refresh_token",
    "client_secret",
    "secret_key",
]


@pytest.mark.parametrize("field", FIELDS + [f.upper() for f in FIELDS] + ["Authorization"])
def test_secret_fields_are_replaced_and_learned(field: str) -> None:
    secret = "plain-value-8f3Kq2"
    redactor = Redaction(environment=False).compile()
    out = redactor.redact({"request": {"headers": {field: secret, "accept": "json"}}})
    assert not _leaks(secret, out)
    assert out["request"]["headers"]["accept"] == "json"
    # Seen under a secret field once, it is a secret everywhere after.
    assert not _leaks(secret, redactor.redact(f"the tool echoed {secret} back"))
    assert not _leaks(secret, redactor.redact({"content": [secret]}))


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "MY_APIKEY",
        "SERVICE_TOKEN",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "LDAP_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "BASIC_AUTH",
        "lowercase_token",
    ],
)
def test_secret_looking_environment_values_are_caught(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "env-7Hq-" + name.lower()[::-1]
    monkeypatch.setenv(name, secret)
    redactor = Redaction().compile()
    for value in (secret, f"value is {secret}.", {"out": {"stdout": f"{name}={secret}"}}):
        assert not _leaks(secret, redactor.redact(value))


def test_literals_with_json_special_characters_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    tricky = 'p"a\\ss\nword-Zq8'
    monkeypatch.setenv("APP_PASSWORD", tricky)
    redactor = Redaction(secrets=("tab\tin-the-middle",)).compile()
    for secret in (tricky, "tab\tin-the-middle"):
        out = redactor.redact({"content": f"[{secret}]"})
        assert secret not in out["content"]
        # Replaced by a placeholder, the text around it kept.
        assert re.fullmatch(r"\[\[redacted:[a-z_:A-Z]+\]\]", out["content"]), out


def test_provider_and_policy_secrets_are_caught() -> None:
    redactor = Redaction(environment=False, secrets=("corp-gw-7fQ2xLm9",)).compile(
        ["vendor-key-Pq81zz0x"]
    )
    out = redactor.redact(
        {"a": "corp-gw-7fQ2xLm9 and vendor-key-Pq81zz0x", "b": ["vendor-key-Pq81zz0x"]}
    )
    text = orjson.dumps(out).decode()
    assert "corp-gw-7fQ2xLm9" not in text and "vendor-key-Pq81zz0x" not in text
    assert out == {"a": "[redacted:secret] and [redacted:secret]", "b": ["[redacted:secret]"]}


def test_a_secret_containing_another_is_replaced_whole() -> None:
    redactor = Redaction(environment=False, secrets=("abcd1234", "abcd1234efgh5678")).compile()
    out = redactor.redact("x abcd1234efgh5678 y")
    assert out == "x [redacted:secret] y"


def test_custom_patterns_are_caught() -> None:
    redactor = Redaction(patterns=(("ticket", r"TCK-\d+"),), environment=False).compile()
    assert redactor.redact({"t": "see TCK-991"}) == {"t": "see [redacted:ticket]"}


def test_what_is_not_secret_is_left_alone() -> None:
    redactor = Redaction(environment=False).compile()
    value = {
        "role": "user",
        "content": "Plan a trip to Paris; the task-list has 3 items, max_tokens=100.",
        "usage": {"input_tokens": 10, "output_tokens": 3},
    }
    assert redactor.redact(value) == value
