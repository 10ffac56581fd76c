"""The redaction rules, one by one (docs/recording-format.md, Redaction), and the screen's
promise: a value whose JSON bytes it passes is a value redaction would not change."""

from __future__ import annotations

import random
import string
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from afcore.secrets import Redaction, redact_url, screening, shorten, url_passwords
from tests.afcore.secrets_corpus import KEY_SHAPES, LOOK_ALIKES, rng


def redactor(**policy: Any) -> Any:
    return Redaction(environment=False, **policy).compile()


def dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


@pytest.mark.parametrize("shape", sorted(KEY_SHAPES))
def test_every_vendor_shape_is_replaced(shape: str) -> None:
    secret = KEY_SHAPES[shape](rng(3))
    out = redactor().redact({"content": f"key: {secret}\n", "list": [secret]})
    assert secret not in dumps(out)
    # The body of a private key goes too, not only its first line.
    assert secret.splitlines()[len(secret.splitlines()) // 2] not in dumps(out)


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_look_alikes_are_left_as_they_are(name: str) -> None:
    value = LOOK_ALIKES[name](rng(5))
    doc = {"id": value, "text": f"see {value} for details", "hash": value, "ref": value}
    assert redactor().redact(doc) == doc


def test_a_url_password_is_replaced_and_the_url_kept() -> None:
    r = redactor()
    out = r.redact("connect to postgres://app:s3cr3t-Pa55@db:5432/app?sslmode=require now")
    assert (
        out == "connect to postgres://app:[redacted:url_password]@db:5432/app?sslmode=require now"
    )
    # Up to the authority's last '@'; a port is not a password.
    assert "p@ss" not in r.redact("redis://:p@ss-w0rd@cache:6379/0")
    assert r.redact("http://host:8080/path@x") == "http://host:8080/path@x"
    assert url_passwords("a https://u:pw1@h/ b ftp://v:pw2@k") == ["pw1", "pw2"]
    assert redact_url("https://u:pw@h/x") == "https://u:[redacted:url_password]@h/x"


def test_a_password_inside_a_url_in_the_environment_is_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://app:Zq81-long-password@db/app")
    monkeypatch.setenv("HOME_PAGE", "https://example.com/")
    r = Redaction().compile()
    assert "DATABASE_URL" in r.env_names and "HOME_PAGE" not in r.env_names
    out = r.redact({"stdout": "the password is Zq81-long-password, keep it"})
    assert "Zq81-long-password" not in dumps(out)
    assert "[redacted:env:DATABASE_URL]" in dumps(out)


def test_json_inside_a_string_is_screened_where_it_stands() -> None:
    r = redactor()
    text = '{"user": "ada", "password": "abc", "nested": {"secret": {"pin": 99887766}}}'
    out = r.redact({"content": text})["content"]
    assert "abc" not in out and "99887766" not in out
    assert '"user": "ada"' in out  # the rest of the text keeps its spelling
    assert '"password": "[redacted:field:password]"' in out
    # A config file, a query string, an .env line.
    for line, secret in (
        ("password: Tr0ub4dor&3", "Tr0ub4dor&3"),
        ("https://api.example.com/v1?api_key=Xk39fZq0LmN2&x=1", "Xk39fZq0LmN2"),
        ("DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
        ("Authorization: Bearer abcdefghijklmnopqrstu", "abcdefghijklmnop"),
    ):
        assert secret not in r.redact(line), line


def test_numbers_and_nested_objects_under_a_secret_key() -> None:
    r = redactor()
    out = r.redact(
        {
            "pin_password": 12345678,
            "credentials": {"user": "ada", "otp": "551-Zq-77", "ttl": 30, "ok": True},
            "auth": None,
        }
    )
    assert out == {
        "pin_password": "[redacted:field:pin_password]",
        "credentials": {
            "user": "[redacted:field:credentials]",
            "otp": "[redacted:field:credentials]",
            "ttl": "[redacted:field:credentials]",
            "ok": True,
        },
        "auth": None,
    }
    assert "12345678" not in r.redact("your pin is 12345678")


def test_a_secret_as_a_key() -> None:
    r = redactor(secrets=("Zq81-long-password",))
    out = r.redact({"Zq81-long-password": 1, "other": 2, "sk-ant-api03-" + "a" * 30: 3})
    assert set(out) == {"[redacted:secret]", "other", "[redacted:anthropic_key]"}


def test_two_keys_that_redact_alike_both_stay() -> None:
    r = redactor(secrets=("first-secret-1", "second-secret-2"))
    out = r.redact({"first-secret-1": 1, "second-secret-2": 2})
    assert sorted(out.values()) == [1, 2]


def test_a_value_is_learned_before_anything_of_it_is_written() -> None:
    r = redactor()
    # The text says it before the arguments show it is a secret.
    message = {
        "content": [
            {"type": "text", "text": "Logging in with Qx7-unusual-word now."},
            {"type": "tool_use", "input": {"password": "Qx7-unusual-word"}},
        ]
    }
    assert "Qx7-unusual-word" not in dumps(r.redact(message))
    # learn() teaches without writing: what a run reads before it writes.
    r2 = redactor()
    r2.learn({"state": {"db": {"password": "Zz9-from-the-state"}}})
    assert r2.count == 0
    assert r2.redact("echo Zz9-from-the-state") == "echo [redacted:field:password]"


def test_plain_words_are_not_learned() -> None:
    r = redactor()
    r.redact({"auth": "disabled", "password": "required"})
    assert r.redact({"required": ["city"], "text": "auth disabled"}) == {
        "required": ["city"],
        "text": "auth disabled",
    }


def test_a_tools_schema_keeps_its_argument_names() -> None:
    spec = {
        "name": "login",
        "description": "Log in.",
        "input_schema": {
            "type": "object",
            "properties": {"password": {"type": "string", "description": "The password."}},
            "required": ["password"],
        },
    }
    assert redactor().redact(spec) == spec


def test_what_is_not_a_credential_stays() -> None:
    r = redactor()
    texts = [
        "token = tokenize(text)",
        "def f(token: str, password: Optional[str] = None): ...",
        "password = os.environ['DB_PASSWORD']",
        "The password is required. Your token expired.",
        "Key takeaways: the basic understanding of bearer bonds.",
        'export API_KEY="${API_KEY}"',
        "max_tokens: 1024, input_tokens=12",
        "the public key is MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA",
        "Basic information about the task-management-system-overview-12",
    ]
    for text in texts:
        assert r.redact(text) == text, text
    assert r.count == 0


def test_placeholders_are_not_redacted_again() -> None:
    r = redactor()
    value = {"api_key": "[redacted:field:api_key]", "text": "key=[redacted:env:X_TOKEN]"}
    assert r.redact(value) == value
    assert r.count == 0


def test_shorten_screens_the_whole_text_first() -> None:
    r = redactor(secrets=("hunter2-Sup3rS3cret-Passw0rd!",))
    long = '"hunter2-Sup3rS3cret-Passw0rd!"'
    assert shorten(long, 25).startswith('"hunter2-Sup3rS3cret-Pass')  # no run: cut as it is
    with screening(r):
        cut = shorten(long, 25)
    assert "hunter2" not in cut and cut.startswith('"[redacted:secret]"')
    assert shorten("short", 25) == "short"


# -- the screen ----------------------------------------------------------------------------


def _plant(draw: Any) -> Any:
    """Random JSON with secrets, near-misses and JSON-special characters in it."""
    pieces = st.sampled_from(
        [
            "password=Tr0ub4dor&3",
            '"token": "x"',
            "Bearer abcdefghijklmnopqrstu",
            "Basic dXNlcjpwYXNzd29yZA==",
            "postgres://u:p4ss-w0rd@h/db",
            "sk-ant-api03-" + "x" * 20,
            "the api key is Xk39fZq0LmN2pQ7r",
            "planted-secret-1",
            "key",
            "token",
            "\n",
            '"',
            "\\",
            "\t",
            " ",
            "é",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n",
        ]
    )
    text = st.lists(st.one_of(pieces, st.text(max_size=6)), max_size=8).map("".join)
    keys = st.one_of(st.sampled_from(["password", "api-key", "note", "Token", "x"]), text)
    return st.recursive(
        st.one_of(text, st.integers(), st.booleans(), st.none()),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=4)
        ),
        max_leaves=12,
    )


@settings(max_examples=400, deadline=None)
@given(_plant(None))
def test_the_screen_never_passes_a_value_redaction_would_change(value: Any) -> None:
    r = redactor(secrets=("planted-secret-1",))
    try:
        raw = orjson.dumps(value)
    except TypeError:
        return
    if not r.needs_redaction(raw):
        assert r._redact(value) == value  # noqa: SLF001 - the walk, bypassing the screen
    assert r.screen(raw) == r.needs_redaction(raw)


@pytest.mark.parametrize("patterns", [(), (("order_id", r"ORD-[0-9]{6}"),)])
def test_the_short_screen_says_what_the_whole_one_says_before_and_after_learning(
    patterns: tuple[tuple[str, str], ...],
) -> None:
    r = Redaction(patterns=patterns).compile()
    learned = b'{"note":"it is hunter2-long-secret"}'
    custom = b'{"note":"ORD-123456"}'
    plain = b'{"note":"nothing here"}'
    for raw in (learned, custom, plain):
        assert r.screen(raw) == r.needs_redaction(raw)
    assert not r.screen(learned)
    r.redact({"password": "hunter2-long-secret"})  # learned: a secret everywhere in the run
    assert r.screen(learned) and r.needs_redaction(learned)
    assert r.screen(custom) is bool(patterns)
    assert not r.screen(plain)


def test_the_screen_passes_ordinary_values() -> None:
    gen = random.Random(4)
    words = "the weather in Paris is sunny; flights, hotels and a refund policy".split()
    for _ in range(200):
        text = " ".join(gen.choice(words) for _ in range(30))
        value = {"role": "tool", "content": text, "tool_call_id": "call_" + str(gen.randint(1, 9))}
        assert not redactor().needs_redaction(orjson.dumps(value))
    record = {
        "t": "reply",
        "usage": {"input_tokens": 812, "output_tokens": 31},
        "writes": [{"key": "message:9", "ref": "a" * 64}],
    }
    assert not redactor().needs_redaction(orjson.dumps(record))


def test_compiling_is_shared_between_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Redaction()
    a, b = policy.compile(["provider-key-123"]), policy.compile(["provider-key-123"])
    assert a._base is b._base  # noqa: SLF001
    a.redact({"password": "learned-by-a-1"})
    assert b.redact("learned-by-a-1") == "learned-by-a-1"  # what a run learns stays its own
    monkeypatch.setenv("NEW_SERVICE_TOKEN", "".join(random.choices(string.ascii_letters, k=20)))
    assert policy.compile(["provider-key-123"])._base is not a._base  # noqa: SLF001
    # The environment is read again at each compile: a value changed under the same name,
    # is a secret of the next run, and one removed is not.
    monkeypatch.setenv("NEW_SERVICE_TOKEN", "second-value-Zx81q")
    assert policy.compile().redact("x second-value-Zx81q") == "x [redacted:env:NEW_SERVICE_TOKEN]"
    monkeypatch.delenv("NEW_SERVICE_TOKEN")
    assert policy.compile().redact("second-value-Zx81q") == "second-value-Zx81q"
