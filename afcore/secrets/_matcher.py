"""One combined expression for every rule: the screen that looks at a value once.

All rules (literal secrets, credential shapes, ``key=value`` assignments, keywords beside
a random-looking word) are compiled into one RE2 expression, which runs in time linear in
the text whatever it holds: a value is looked at once, in its serialized JSON bytes, and
only a value with a candidate is walked. The same rules are compiled a second time for
plain text, to find and classify each match during the walk.

RE2 (google-re2) is used rather than Python's ``re``: an alternation of dozens of rules
costs ``re`` a try of every branch at every position (10 ms for 64 KB), and an
Aho-Corasick matcher finds only literal anchors, after which each hit needs its own
expression to confirm it. ``bench/redaction.py`` measures the three.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson
import re2

from afcore.secrets._rules import (
    KEY_QUALIFIERS,
    SHAPES,
    Shape,
    field_words_regex,
    is_placeholder,
    looks_like_key,
    looks_secret,
    norm_key,
)

__all__ = ["Candidate", "Matcher", "SecretRule", "judge"]

RuleKind = Literal["literal", "shape", "assignment", "keyword"]

_TEXT = {"{WS}": r"\s", "{Q}": "[\"']"}
# Inside JSON a quote is written \" and a newline \n: the JSON form accepts both spellings.
_JSON = {"{WS}": r"(?:\s|\\[nrtfb])", "{Q}": r"\\?[\"']"}

_VALUE = (
    # A quoted value (its quotes kept), a scheme and its token, or a bare word.
    r"""(?:"(?P<s>(?:[^"\\\n]|\\.){1,1000})"|'(?P<s>[^'\n]{1,1000})'"""
    r"""|(?P<s>(?i:bearer|basic|token|digest){WS}+[^\s"',;&]{1,1000})"""
    r"""|(?P<s>[^\s"',;&{}\[\]<>`]{1,1000}))"""
)
# A random-looking word holds a digit or a symbol: prose after "key" or "token" does not
# reach the walk.
_KEYWORD_VALUE = (
    r"(?P<s>[A-Za-z0-9+/=_\-.~!@#$%^&*]{0,500}[0-9+/=~!@#$%^&*][A-Za-z0-9+/=_\-.~!@#$%^&*]{0,500})"
)
_KEYWORD_GAP = r"(?:{WS}+(?i:is|was|are){WS}+|{WS}*[:=]{WS}*|{WS}+){Q}?"


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One way the matcher finds a secret: a literal, a shape, an assignment, a keyword."""

    kind: RuleKind
    name: str
    """The placeholder's name: ``env:NAME``, ``anthropic_key``, ``field``, ``near``..."""
    shape: Shape | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A match in plain text: which rule, the part to replace, and the key it names."""

    rule: SecretRule
    start: int
    end: int
    """The part to replace (byte offsets in the UTF-8 text)."""
    match_start: int
    match_end: int
    """The whole match."""
    key: str | None = None
    quoted_key: bool = False
    part: int = -1
    """Which of the rule's secret groups matched: for an assignment 0 and 1 are a quoted
    value, 2 a scheme and its token, 3 a bare word."""


def _compile(pattern: str, *, capture: bool) -> Any:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # bytes in, bytes out: UTF-8 untouched
    options.max_mem = 64 << 20
    options.log_errors = False
    options.never_capture = not capture
    return re2.compile(pattern.encode("utf-8"), options)


def _no_groups(pattern: str) -> str:
    return re.sub(r"[(][?]P<[A-Za-z0-9_]+>", "(?:", pattern)


def _fill(pattern: str, spelling: dict[str, str], kw: str) -> str:
    if spelling is _JSON:
        # In JSON a tab before a word is \t, and t is a word character: a word boundary
        # there would turn down what the text form finds. Without it the form only widens.
        pattern = pattern.replace(r"\b", "")
    for marker, text in spelling.items():
        pattern = pattern.replace(marker, text)
    return pattern.replace("{KW}", kw)


class Matcher:
    """Literals and rules compiled into two RE2 expressions: ``screen`` over a value's JSON
    bytes, ``rules`` over plain text (UTF-8 bytes), with named groups telling which rule
    matched and where its secret part is."""

    def __init__(
        self,
        literals: Sequence[tuple[str, str]],
        *,
        fields: tuple[str, ...] = (),
        shapes: Iterable[Shape] = SHAPES,
        keywords: bool = True,
    ) -> None:
        # Longest literals first: a secret containing another is replaced whole.
        literals = sorted(literals, key=lambda p: -len(p[1]))
        self.rules: list[SecretRule] = []
        text_parts: list[str] = []
        json_parts: list[str] = []
        for name, value in literals:
            self.rules.append(SecretRule("literal", name))
            text_parts.append(re.escape(value))
            json_parts.append(re.escape(orjson.dumps(value)[1:-1].decode()))
        for shape in shapes:
            self.rules.append(SecretRule("shape", shape.name, shape))
            text_parts.append(_fill(shape.pattern, _TEXT, ""))
            json_parts.append(_fill(shape.screen or shape.pattern, _JSON, ""))
        if fields:
            kw = field_words_regex(fields)
            assign = r"(?P<k>[A-Za-z0-9_.\-]{0,40}?{KW})(?P<q>{Q})?{WS}*[:=]{WS}*" + _VALUE
            self.rules.append(SecretRule("assignment", "field"))
            text_parts.append(_fill(assign, _TEXT, kw))
            # A key as norm_key reads it: separators anywhere, after the word too.
            json_parts.append(_fill(r"{KW}[-_. ]*(?:{Q})?{WS}*[:=]", _JSON, kw))
            if keywords:
                kw_all = field_words_regex((*fields, "key"))
                near = r"(?P<k>{KW})s?\b" + _KEYWORD_GAP + _KEYWORD_VALUE
                self.rules.append(SecretRule("keyword", "near"))
                text_parts.append(_fill(near, _TEXT, kw_all))
                json_parts.append(_fill(near, _JSON, kw_all))
        self._groups: dict[int, tuple[int, list[int], int | None, int | None]] = {}
        """A rule's own group -> its index, the groups of its secret part, of its key and
        of its quote."""
        text = self._name_groups(text_parts)
        self.empty = not text_parts
        self.text = _compile(text, capture=True) if text else None
        # Without groups RE2 answers from its DFA: fast. The text form is searched that way
        # first, and the groups are worked out only over a match found.
        self.first = _compile(_no_groups(text), capture=False) if text else None
        joined = "|".join(f"(?:{p})" for p in json_parts)
        self.screen = _compile(_no_groups(joined), capture=False) if joined else None
        self._screen = _spans(self.screen)

    def _name_groups(self, parts: list[str]) -> str:
        """Name each part's group ``r<i>`` and its inner groups uniquely; note their numbers
        (RE2 numbers groups in the order their parentheses open)."""
        out = []
        group = 0
        for i, part in enumerate(parts):
            letters: list[str] = []

            def rename(m: re.Match[str], i: int = i, letters: list[str] = letters) -> str:
                letters.append(m.group(1))
                return f"(?P<{m.group(1)}{i}_{len(letters)}>"

            out.append(f"(?P<r{i}>{re.sub(r'[(][?]P<([skq])>', rename, part)})")
            group += 1
            own, secret, key, quote = group, [], None, None
            for letter in letters:
                group += 1
                if letter == "s":
                    secret.append(group)
                elif letter == "k":
                    key = group
                else:
                    quote = group
            self._groups[own] = (i, secret, key, quote)
        return "|".join(out)

    def hits(self, raw: bytes) -> bool:
        """Whether the JSON bytes hold a candidate for any rule: the screen every value af
        writes goes through, so it asks RE2 for the first match's span alone, without the
        match object the module's ``search`` builds (half the cost on a short value)."""
        screen = self._screen
        if screen is not None:
            return bool(screen(_UNANCHORED, raw, 0, len(raw))[0][0] >= 0)
        return self.screen is not None and self.screen.search(raw) is not None

    def find(self, data: bytes, pos: int = 0) -> Candidate | None:
        """The first match in plain text (UTF-8 bytes) at or after ``pos``."""
        if self.first is None or self.text is None:
            return None
        found = self.first.search(data, pos)
        if found is None:
            return None
        m = self.text.match(data, found.start(), found.end())
        if m is None:  # cannot differ; kept safe rather than assumed
            m = self.text.search(data, pos)
            if m is None:
                return None
        # lastindex is the rule's own group: it closes after its inner ones.
        index, secret, key_group, quote_group = self._groups[m.lastindex]
        match_start, match_end = m.span(m.lastindex)
        start, end, part = match_start, match_end, -1
        for n, g in enumerate(secret):
            s, e = m.span(g)
            if s >= 0:
                start, end, part = s, e, n
                break
        key = None
        if key_group is not None:
            ks, ke = m.span(key_group)
            if ks >= 0:
                key = data[ks:ke].decode("utf-8", "replace")
        quoted = quote_group is not None and m.span(quote_group)[0] >= 0
        return Candidate(self.rules[index], start, end, match_start, match_end, key, quoted, part)

    def holds_known(self, data: bytes, c: Candidate) -> bool:
        """Whether the value of an assignment or keyword match holds a literal or a shape,
        which then names the secret instead (``key is sk-ant-...`` is an Anthropic key)."""
        if c.rule.kind not in ("assignment", "keyword"):
            return False
        inner = self.find(data, c.start)
        return (
            inner is not None
            and inner.match_start < c.end
            and inner.rule.kind
            in (
                "literal",
                "shape",
            )
        )


_JSON_WORDS = frozenset({"null", "true", "false"})


def judge(c: Candidate, secret: str, data: bytes, *, eager: bool) -> bool:
    """Whether a candidate is a secret. ``eager`` (redaction): a quoted value or a JSON
    scalar under a secret key is one whatever it looks like; otherwise (the scanner, which
    refuses a file on a hit) a value must also look like a credential."""
    rule = c.rule
    if rule.kind == "literal":
        return True
    if is_placeholder(secret) or not secret.strip():
        return False
    if rule.kind == "shape":
        return rule.shape is None or rule.shape.check is None or rule.shape.check(secret)
    if rule.kind == "assignment":
        if eager and (c.part in (0, 1, 2) or (c.quoted_key and secret not in _JSON_WORDS)):
            return True
        return looks_secret(secret.split()[-1])
    # A keyword beside a random-looking word; a public key is not a secret.
    before = data[max(0, c.match_start - 7) : c.match_start].lower().rstrip(b" _-.")
    if before.endswith(b"public"):
        return False
    word = norm_key(c.key or "")
    if word != "key":
        return looks_secret(secret)
    qualifier = data[max(0, c.match_start - 14) : c.match_start].lower().rstrip(b" _-.")
    if qualifier.endswith(tuple(q.encode() for q in KEY_QUALIFIERS)):
        return False  # a cache key, a sort key: a name for data
    return looks_like_key(secret)


try:
    _UNANCHORED: Any = re2._re2.RE2.Anchor.UNANCHORED
except AttributeError:  # another build of the module: its search() serves
    _UNANCHORED = None


def _spans(compiled: Any) -> Any:
    """The compiled RE2 program's own ``Match`` (spans only), when this build of google-re2
    has one; None otherwise."""
    regexp = getattr(compiled, "_regexp", None)
    match = getattr(regexp, "Match", None)
    return match if callable(match) and _UNANCHORED is not None else None
