"""Keeping secrets out of recordings.

Every value goes through the policy before it is hashed and written, so a recording can be
attached to a bug report as it is. The rules (docs/recording-format.md, Redaction):

- **literals**: the values of secret-looking environment variables, the password of any
  URL held by an environment variable (``DATABASE_URL``), the values providers
  authenticate with, the policy's own ``secrets``, and every value learned during the run:
  replaced wherever they occur, in text and in object keys;
- **fields**: an object key that ends with one of the policy's field words (``password``,
  ``token``, ``apikey``, ``secret``, ...): whatever it holds (a string, a number, every
  leaf of a nested object) is replaced, and learned;
- **shapes**: vendors' key formats, private key blocks, bearer and basic credentials, JWTs,
  the password of a URL (``scheme://user:password@host``);
- **assignments** in text: ``password=...``, ``"api_key": "..."`` (JSON inside a string),
  ``Authorization: Bearer ...``; the value is replaced, and learned;
- **keywords**: a random-looking word right after *password*, *token*, *secret*, *key*...
  (``the api key is ...``).

A value is looked at once: its JSON bytes go through one combined expression
(``_matcher``), and only a value with a candidate is walked. A match becomes
``[redacted:<rule>]``.

The file is append-only, so a value can only be learned before it is written: the run
learns from its inputs (the user message, the state) before anything is written, from a
model reply before any of it is written, and from all the tool results of one step before
the first of them is written. A value first written elsewhere, in an earlier step, before
it appears under a secret key, stays in that earlier record: only rules that recognize it
on sight (shapes, assignments) can catch it there.

Setting up a policy (reading the environment, compiling the expression) is done once per
policy, provider secrets and environment, and shared by the runs that follow; what a run
learns stays with that run.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import orjson

from afcore.secrets._matcher import Candidate, Matcher, judge
from afcore.secrets._rules import (
    DEFAULT_FIELDS,
    SHAPES,
    is_placeholder,
    is_secret_key,
    learnable,
    norm_key,
)

__all__ = [
    "DEFAULT_FIELDS",
    "DEFAULT_PATTERNS",
    "Redaction",
    "Redactor",
    "as_recorded",
    "redact_url",
    "screening",
    "shorten",
    "url_passwords",
]

DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = tuple((s.name, s.pattern) for s in SHAPES)
"""The built-in credential shapes (name, RE2 pattern). They always apply."""
_BUILTIN = frozenset(DEFAULT_PATTERNS)

_SECRET_ENV = re.compile(
    r"API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|(?:^|_)(?:KEY|PASS|DSN)$", re.I
)
_MIN_SECRET = 8
"""Shorter values are too likely to occur by chance (`true`, a port number) to replace."""

_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:([^\s/?#]+)@")


def url_passwords(text: str) -> list[str]:
    """The passwords of the URLs in ``text`` (``scheme://user:password@host``)."""
    return [m.group(1) for m in _URL_PASSWORD.finditer(text)]


def redact_url(url: str) -> str:
    """``url`` with the password of its user info replaced, for messages and headers."""
    return _URL_PASSWORD.sub(
        lambda m: m.group(0).replace(f":{m.group(1)}@", ":[redacted:url_password]@"), url
    )


@dataclass(frozen=True)
class Redaction:
    """A redaction policy. The built-in rules always apply; add field words, patterns of
    your own or literal secrets, or leave the environment out."""

    fields: tuple[str, ...] = DEFAULT_FIELDS
    """Words a secret object key ends with (compared lower-cased, without ``-_.``)."""
    patterns: tuple[tuple[str, str], ...] = ()
    """More shapes to replace: (name, Python regular expression) pairs."""
    secrets: tuple[str, ...] = ()
    """Literal values to replace wherever they occur."""
    environment: bool = True
    """Also replace the values of secret-looking environment variables, and the passwords
    of URLs the environment holds."""

    def compile(self, provider_secrets: Iterable[str] = ()) -> Redactor:
        """A redactor for one run. Cheap after the first with the same policy, provider
        secrets and environment: the compiled part is shared."""
        return Redactor(self, provider_secrets)


def _environ() -> Mapping[Any, Any]:
    """The environment as ``os.environ`` stores it (reading it through ``os.environ``
    decodes every name and value: ~30 us a run)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else dict(os.environ)


def _env_literals(environ: Mapping[Any, Any]) -> tuple[tuple[str, str], ...]:
    """The secrets the environment holds: worked out again only when it changed."""
    return _env_secrets(tuple(environ.items()))


@functools.lru_cache(maxsize=8)
def _env_secrets(
    environ: tuple[tuple[str | bytes, str | bytes], ...],
) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    text = [(os.fsdecode(k), os.fsdecode(v)) for k, v in environ]
    for name, value in sorted(text):
        if _is_secret_env(name):
            if len(value) >= _MIN_SECRET:
                out.append((f"env:{name}", value))
        elif "://" in value:
            out += [(f"env:{name}", p) for p in url_passwords(value) if len(p) >= _MIN_SECRET]
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _is_secret_env(name: str) -> bool:
    return _SECRET_ENV.search(name) is not None


class _Compiled:
    """What every run of one policy shares: the literals, the combined expression, the
    policy's own patterns."""

    def __init__(self, policy: Redaction, literals: tuple[tuple[str, str], ...]) -> None:
        self.fields = tuple(sorted({norm_key(f) for f in policy.fields if f}))
        self.env_names = sorted({name[4:] for name, _ in literals if name.startswith("env:")})
        self.literals = frozenset(v for _, v in literals)
        self.matcher = Matcher(literals, fields=self.fields)
        custom = [(n, rx) for n, rx in policy.patterns if (n, rx) not in _BUILTIN]
        self.custom = [(n, re.compile(rx), re.compile(rx.encode())) for n, rx in custom]
        self.pattern_names = [s.name for s in SHAPES] + [n for n, _ in custom]
        self.clean: dict[Any, Any] = {}
        """What a writer made of values this policy screened and found nothing in, kept for
        the next runs (see :attr:`Redactor.clean`)."""


_CLEAN_MAX = 8192


@functools.lru_cache(maxsize=32)
def _compiled(policy: Redaction, literals: tuple[tuple[str, str], ...]) -> _Compiled:
    return _Compiled(policy, literals)


_LAST: dict[int, tuple[Redaction, tuple[str, ...], dict[Any, Any] | None, _Compiled]] = {}
"""id of a policy -> it, the provider secrets and the environment (a copy) it was last
compiled with, and the compiled part."""


def _base(policy: Redaction, provider_secrets: Iterable[str]) -> _Compiled:
    """The compiled part for a run of ``policy``: the last one while the policy is the same
    object, the provider's secrets equal and the environment equal to what it was (one
    comparison of two dicts, where working out its secrets again hashes every variable).
    A variable set, changed or removed since is read at the next run, as at the first."""
    secrets = tuple(provider_secrets)
    environ = _environ() if policy.environment else None
    last = _LAST.get(id(policy))
    if last is not None and last[0] is policy and last[1] == secrets and last[2] == environ:
        return last[3]
    literals = _env_literals(environ) if environ is not None else ()
    literals += tuple(("secret", v) for v in (*policy.secrets, *secrets) if len(v) >= _MIN_SECRET)
    base = _compiled(policy, literals)
    if len(_LAST) >= 32:
        _LAST.clear()
    _LAST[id(policy)] = (policy, secrets, None if environ is None else dict(environ), base)
    return base


class Redactor:
    """A compiled policy for one run. ``redact(value)`` returns the value with every match
    replaced; ``count`` says how many replacements were made."""

    def __init__(self, policy: Redaction, provider_secrets: Iterable[str] = ()) -> None:
        self._base = _base(policy, provider_secrets)
        self.policy = policy
        self.count = 0
        self.env_names = self._base.env_names
        """Names (never values) of the environment variables whose values are replaced."""
        self.pattern_names = self._base.pattern_names
        self._learned: list[tuple[str, str]] = []
        self._learned_matcher: Matcher | None = None
        self.screen: Callable[[bytes], bool] = (
            self.needs_redaction if self._base.custom else self._base.matcher.hits
        )
        """:meth:`needs_redaction`, called the shortest way: the compiled screen itself
        while the policy has no expressions of its own and the run learned no secret (the
        writer screens every value it writes through it)."""

    @property
    def clean(self) -> dict[Any, Any] | None:
        """A store shared by the runs of this policy, for what a writer made of fixed values
        (an agent's system segments) that the screen found nothing in: the same value is
        clean again in the next run, unless this run learned a secret (then None: screen
        again). Bounded: cleared when it grows past a few thousand entries."""
        if self._learned:
            return None
        clean = self._base.clean
        if len(clean) > _CLEAN_MAX:
            clean.clear()
        return clean

    def handed_on(self, policy: Redaction) -> Redaction:
        """``policy`` (another run's own) with this run's added: its field words, patterns
        and literal secrets, and the secrets this run learned. It only adds: nothing
        ``policy`` replaces is left out. For a run this one starts (an agent called as a
        tool), so the names this run keeps out of its file stay out of that one's."""
        mine = self.policy
        secrets = (*policy.secrets, *mine.secrets, *(v for _, v in self._learned))
        return Redaction(
            fields=tuple(dict.fromkeys((*policy.fields, *mine.fields))),
            patterns=tuple(dict.fromkeys((*policy.patterns, *mine.patterns))),
            secrets=tuple(dict.fromkeys(secrets)),
            environment=policy.environment or mine.environment,
        )

    @property
    def shape(self) -> tuple[Any, ...]:
        """What decides what this redactor replaces (its compiled policy and the secrets it
        learned): two redactors of the same shape replace the same."""
        return (self._base, *self._learned)

    # -- the screen ----------------------------------------------------------------------

    def needs_redaction(self, raw: bytes) -> bool:
        """Whether the JSON bytes of a value may hold anything the policy replaces: one
        pass of one expression (two once the run learned secrets). Never says no to a
        value ``redact`` would change; may say yes when the walk then finds nothing."""
        if self._base.matcher.hits(raw):
            return True
        learned = self._learned_matcher
        if learned is not None and learned.hits(raw):
            return True
        custom = self._base.custom
        return bool(custom) and any(rx.search(raw) is not None for _, _, rx in custom)

    def redact(self, value: Any) -> Any:
        """``value`` with every match replaced (the same object when nothing matched)."""
        try:
            raw = orjson.dumps(value)
        except TypeError:  # not JSON as it is (a lone surrogate, a big int): walk it
            return self._redact(value)
        return self._redact(value) if self.screen(raw) else value

    def learn(self, value: Any) -> None:
        """Learn the secrets ``value`` names (under secret keys, in assignments) without
        writing it: for what a run reads before it writes (its inputs), or for several
        values about to be written one after another."""
        count = self.count
        self.redact(value)
        self.count = count

    def redact_text(self, text: str) -> str:
        """``text`` with every match replaced."""
        return self._redact(text)  # type: ignore[no-any-return]

    # -- the walk ------------------------------------------------------------------------

    def _redact(self, value: Any) -> Any:
        learned, count = len(self._learned), self.count
        out = self._walk(value, False)
        if len(self._learned) != learned:
            # A secret learned part way: the parts walked before it may hold it too.
            self.count = count
            out = self._walk(value, False)
        return out

    def _walk(self, value: Any, schema: bool) -> Any:
        if isinstance(value, str):
            return self._text(value)
        if isinstance(value, Mapping):
            out: dict[Any, Any] = {}
            fields = self._base.fields
            for k, v in value.items():
                if not isinstance(k, str):
                    out[k] = self._walk(v, schema)
                    continue
                key = self._key(k, out)
                if not schema and is_secret_key(k, fields) and _holds_value(v):
                    out[key] = self._secret(k, v)
                else:
                    # A tool's JSON Schema names its arguments: `password` there is a name.
                    out[key] = self._walk(v, schema or k == "input_schema")
            return out
        if isinstance(value, list | tuple):
            return [self._walk(v, schema) for v in value]
        return value

    def _key(self, key: str, out: dict[Any, Any]) -> str:
        """An object key, screened like any text: a secret can be a key too."""
        new = self._text(key)
        if new != key:
            n = 2
            while new in out:
                new = f"{new}#{n}"
                n += 1
        return new

    def _secret(self, key: str, value: Any) -> Any:
        """What stands under a secret key: every leaf replaced (and learned), the shape of
        the value kept."""
        if isinstance(value, str):
            if is_placeholder(value) and value.startswith("[redacted"):
                return value  # redacted already
            self._learn(f"field:{key}", value)
        elif isinstance(value, Mapping):
            return {k: self._secret(key, v) if _holds_value(v) else v for k, v in value.items()}
        elif isinstance(value, list | tuple):
            return [self._secret(key, v) if _holds_value(v) else v for v in value]
        elif isinstance(value, int | float):
            self._learn(f"field:{key}", str(value))
        self.count += 1
        return f"[redacted:field:{key}]"

    def _learn(self, name: str, value: str) -> None:
        """A value found under a secret key is a secret everywhere else in the run too
        (a tool that echoes its arguments would otherwise leak it)."""
        if not learnable(value) or value in self._base.literals:
            return
        if any(v == value for _, v in self._learned):
            return
        self._learned.append((name, value))
        self._learned_matcher = Matcher(self._learned, shapes=())
        self.screen = self.needs_redaction

    def _text(self, text: str) -> str:
        stripped = text.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            self._learn_json(stripped)
        for matcher in (self._learned_matcher, self._base.matcher):
            if matcher is not None and not matcher.empty:
                text = self._apply(matcher, text)
        for name, rx, _ in self._base.custom:
            text, n = rx.subn(f"[redacted:{name}]", text)
            self.count += n
        return text

    def _learn_json(self, text: str) -> None:
        """JSON inside a string: the secrets its object keys name are learned, so the text
        pass replaces them where they stand (the text keeps its spelling)."""
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        if isinstance(value, dict | list):
            for key, leaf in _secret_leaves(value, self._base.fields):
                self._learn(f"field:{key}", leaf)

    def _apply(self, matcher: Matcher, text: str) -> str:
        data = text.encode("utf-8", "surrogatepass")
        pieces: list[bytes] = []
        last = pos = 0
        while (c := matcher.find(data, pos)) is not None:
            secret = data[c.start : c.end].decode("utf-8", "surrogatepass")
            if matcher.holds_known(data, c) or not judge(c, secret, data, eager=True):
                # Turned down: look again inside it (a shape within a rejected value).
                pos = c.start if c.start > c.match_start else c.match_start + 1
                continue
            name = self._placeholder(c, secret)
            pieces += [data[last : c.start], f"[redacted:{name}]".encode()]
            self.count += 1
            last = c.end
            pos = max(c.end, c.match_end)
        if not pieces:
            return text
        pieces.append(data[last:])
        return b"".join(pieces).decode("utf-8", "surrogatepass")

    def _placeholder(self, c: Candidate, secret: str) -> str:
        rule = c.rule
        if rule.kind in ("literal", "shape"):
            return rule.name
        key = c.key or rule.name
        if rule.kind == "assignment":
            self._learn(f"field:{key}", secret.split()[-1])
            return f"field:{key}"
        self._learn(f"near:{norm_key(key)}", secret)
        return f"near:{norm_key(key)}"


def _holds_value(value: Any) -> bool:
    """Anything but null, booleans and the empty string, which say nothing secret."""
    return value is not None and value != "" and not isinstance(value, bool)


def _secret_leaves(
    value: Any, fields: tuple[str, ...], key: str | None = None
) -> Iterator[tuple[str, str]]:
    """(secret key, text of a leaf under it) for every leaf under a secret key."""
    if isinstance(value, dict):
        for k, v in value.items():
            inner = key if key is not None else (k if is_secret_key(str(k), fields) else None)
            yield from _secret_leaves(v, fields, inner)
    elif isinstance(value, list):
        for v in value:
            yield from _secret_leaves(v, fields, key)
    elif key is not None and _holds_value(value):
        yield key, value if isinstance(value, str) else str(value)


# -- screening text before it is shortened -----------------------------------------------

_ACTIVE: ContextVar[Redactor | None] = ContextVar("af_redactor", default=None)


class screening:  # noqa: N801 - used as the function it was: ``with screening(r):``
    """Within this block (a run), :func:`shorten` screens text before it cuts it. A class,
    not a generator: entered once per run, it costs two calls, not four and a generator."""

    __slots__ = ("_redactor", "_token")

    def __init__(self, redactor: Redactor | None) -> None:
        self._redactor = redactor

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(self._redactor)

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.reset(self._token)


def as_recorded(value: Any) -> Any:
    """``value`` as the recording of the run in progress holds it, redacted by its policy
    (as it is outside a run): what a replay compares with the recorded value. Counts no
    replacement: nothing is written."""
    redactor = _ACTIVE.get()
    if redactor is None:
        return value
    count = redactor.count
    try:
        return redactor.redact(value)
    finally:
        redactor.count = count


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut stated. Within a run the text is
    screened first, whole: a secret cut in two is no longer recognizable, and its first
    part would reach the recording (and the model) as it is."""
    if len(text) <= limit:
        return text
    redactor = _ACTIVE.get()
    if redactor is not None:
        text = redactor.redact_text(text)
        if len(text) <= limit:
            return text
    return f"{text[:limit]}… ({len(text) - limit} more chars)"
