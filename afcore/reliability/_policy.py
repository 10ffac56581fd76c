"""Reliability rules: what to do before each attempt at a model call, and after it.

An agent built with ``.reliability(...)`` makes each model call as a series of attempts.
Before an attempt its ``pre_check`` rules look at it (``continue``, ``retry_other``,
``fallback``, ``fail_fast``); after it its ``post_decide`` rules look at the outcome (``ok``,
``retry``, ``retry_other``, ``fallback``, ``fail_fast``). The first rule whose ``when`` is
true decides; when none does, an attempt goes ahead (unless its provider's circuit breaker
is open) and an outcome stands: an answer is kept, an error stops the run as it would
without rules. A few decisions are af's to override, whatever a rule says: an attempt that
failed after its reply began streaming is not sent again, a call takes at most
``max_attempts`` attempts, and ``retry_other`` needs a provider left.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from afcore.errors import ProviderError, UsageError
from afcore.messages import Response
from afcore.providers._base import Provider
from afcore.recording._models import (
    AttemptDecision,
    BreakerInfo,
    ReliabilityInfo,
    ReliabilityRuleInfo,
    TargetInfo,
    trusted,
)

__all__ = [
    "Attempt",
    "CircuitBreaker",
    "Reliability",
    "ReliabilityRule",
    "Target",
    "Verb",
    "Verdict",
    "circuit_breaker",
    "rule",
]

Verb = Literal["continue", "ok", "retry", "retry_other", "fallback", "fail_fast"]
VERBS: tuple[str, ...] = get_args(Verb)
PRE_VERBS = ("continue", "retry_other", "fallback", "fail_fast")
"""What a pre_check rule may decide: there is no outcome yet to accept or send again."""
POST_VERBS = ("ok", "retry", "retry_other", "fallback", "fail_fast")
MOVES = frozenset({"retry", "retry_other", "fallback"})
"""The verbs that lead to another attempt."""
Phase = Literal["pre_check", "post_decide"]

MAX_ATTEMPTS = 10
MAX_ATTEMPTS_CAP = 100

_decision = trusted(AttemptDecision)
_info = trusted(ReliabilityInfo)
_rule_info = trusted(ReliabilityRuleInfo)
_target_info = trusted(TargetInfo)
_breaker_info = trusted(BreakerInfo)


@dataclass(frozen=True, slots=True)
class ReliabilityRule:
    """A reliability rule: when ``when(s)`` is true of an attempt, it decides ``then``. Made
    by :func:`rule`."""

    when: Callable[[Attempt], bool]
    then: Verb
    kind: str = ""
    delay: float | Callable[[Attempt], float] = 0.0


def rule(
    when: Callable[[Attempt], bool],
    then: Verb,
    *,
    kind: str = "",
    delay: float | Callable[[Attempt], float] = 0.0,
) -> ReliabilityRule:
    """A rule that decides ``then`` when ``when(s)`` returns True; ``s`` is the
    :class:`Attempt`. ``kind`` names the rule in the recording (and is the ``kind`` of the
    :class:`ReliabilityFailFastError` a ``fail_fast`` rule raises); ``delay`` is the seconds
    to wait before the next attempt, or a function of ``s`` returning them (to honor
    ``s.retry_after``, say)."""
    if not callable(when):
        raise UsageError(f"rule(when, ...) takes a function of the attempt, got {when!r}")
    if then not in VERBS:
        raise UsageError(f"rule(..., then) takes one of {', '.join(VERBS)}; got {then!r}")
    if not isinstance(kind, str):
        raise UsageError(f"rule(kind=...) takes a word, got {kind!r}")
    if not callable(delay) and not _seconds(delay):
        raise UsageError(
            f"rule(delay=...) takes seconds (a number >= 0) or a function returning them, "
            f"got {delay!r}"
        )
    return ReliabilityRule(when=when, then=then, kind=kind, delay=delay)


def _seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


@dataclass(frozen=True, slots=True)
class CircuitBreaker:
    """Made by :func:`circuit_breaker`."""

    failures: int = 3
    cooldown: float = 30.0


def circuit_breaker(failures: int = 3, cooldown: float = 30.0) -> CircuitBreaker:
    """After ``failures`` failed attempts in a row on one provider, its circuit opens for
    ``cooldown`` seconds (of the recording's clock): attempts on it are skipped, to the
    next provider when one is left. The first attempt after the cooldown is a trial; it
    closes the circuit when it succeeds and opens it again when it fails. The counts belong
    to the agent, so they carry over from one run to the next."""
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
        raise UsageError(f"circuit_breaker(failures=...) takes a count >= 1, got {failures!r}")
    if not _seconds(cooldown):
        raise UsageError(f"circuit_breaker(cooldown=...) takes seconds >= 0, got {cooldown!r}")
    return CircuitBreaker(failures=failures, cooldown=float(cooldown))


@dataclass(frozen=True, slots=True)
class Target:
    """A provider an attempt can go to, with its model (None: the agent's model)."""

    provider: Provider
    model: str | None
    via: str
    """`agent` (the agent's own provider), `providers[i]`, or `fallback`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """What a reliability rule sees: one attempt at a model call. Read-only.

    For a ``pre_check`` rule it is the attempt about to be made, and ``error`` is the
    previous attempt's (None before the first); for a ``post_decide`` rule, the attempt
    just made and its outcome.
    """

    phase: Phase
    """`pre_check` or `post_decide`."""
    attempt: int
    """The attempt's number, from 1, counting every attempt of this call on any provider."""
    iteration: int
    """The loop iteration the call belongs to."""
    call: int
    """The attempt's call number in the run (the number it will take, for a pre_check)."""
    provider: str
    """The provider's name."""
    model: str
    """The model asked."""
    via: str
    """`agent` (the agent's own provider), `providers[i]`, or `fallback`."""
    error: BaseException | None = None
    """The failure, or None."""
    error_kind: str | None = None
    """A ProviderError's `kind` (`rate_limited`, `overloaded`, `server_error`, `bad_request`,
    `stream_cut`, `connection`, ...), `unknown` for another exception, None without one."""
    status: int | None = None
    """The HTTP status of the failure, when the vendor gave one."""
    retry_after: float | None = None
    """The seconds the vendor asked to wait, when it said."""
    mid_stream: bool = False
    """True when the failure came after the reply had begun streaming: only `ok` and
    `fail_fast` are honored then."""
    response: Response | None = None
    """The answer, for a post_decide rule after a success."""
    breaker_open: bool = False
    """Whether this provider's circuit breaker is open."""
    providers_left: int = 0
    """How many providers `retry_other` could still move to."""
    fallback_left: bool = False
    """Whether `fallback` could still move to the fallback provider."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What was decided about an attempt, as the recording says it."""

    verb: Verb
    rule: str | None = None
    """The rule that decided (its kind, or `pre_check[i]` / `post_decide[i]`); None when
    no rule did."""
    kind: str | None = None
    """For fail_fast: the kind of the ReliabilityFailFastError."""
    reason: str | None = None
    """Why, in words, when af decided (a default, or an override of a rule) or failed fast."""
    asked: Verb | None = None
    """The verb a rule (or a default) asked for, when af overrode it."""
    delay: float = 0.0
    """Seconds waited before the next attempt."""

    def record(self) -> AttemptDecision:
        """The verdict as the recording holds it."""
        return _decision(
            verb=self.verb,
            rule=self.rule,
            kind=self.kind,
            reason=self.reason,
            asked=self.asked,
            delay=round(self.delay, 3),
        )

    def overridden(self, kind: str, reason: str) -> Verdict:
        """This verdict turned into a fail_fast by af."""
        return Verdict("fail_fast", rule=self.rule, kind=kind, reason=reason, asked=self.verb)


def error_kind(error: BaseException | None) -> str | None:
    if error is None:
        return None
    return error.kind if isinstance(error, ProviderError) else "unknown"


class _Breaker:
    __slots__ = ("failures", "opened")

    def __init__(self) -> None:
        self.failures = 0
        self.opened: float | None = None


class Reliability:
    """An agent's reliability configuration, and its circuit breakers' state."""

    def __init__(
        self,
        *,
        pre_check: Sequence[ReliabilityRule],
        post_decide: Sequence[ReliabilityRule],
        providers: Sequence[Target],
        fallback: Target | None,
        breaker: CircuitBreaker | None,
        max_attempts: int,
    ) -> None:
        self.pre_check = tuple(pre_check)
        self.post_decide = tuple(post_decide)
        self.providers = tuple(providers)
        self.fallback = fallback
        self.breaker = breaker
        self.max_attempts = max_attempts
        # Keyed by the provider object: two providers of one kind keep separate counts.
        self._breakers: dict[int, tuple[Provider, _Breaker]] = {}

    def route(self, own: Provider) -> list[Target]:
        """The providers a call may try in turn: the agent's own, then ``providers``."""
        return [Target(own, None, "agent"), *self.providers]

    # -- the circuit breakers --------------------------------------------------------------

    def _state(self, provider: Provider) -> _Breaker:
        held = self._breakers.get(id(provider))
        if held is None or held[0] is not provider:
            held = self._breakers[id(provider)] = (provider, _Breaker())
        return held[1]

    def breaker_open(self, provider: Provider, now: float) -> bool:
        if self.breaker is None:
            return False
        opened = self._state(provider).opened
        return opened is not None and now - opened < self.breaker.cooldown

    def note(self, provider: Provider, *, failed: bool, now: float) -> None:
        """Count an attempt's outcome towards its provider's circuit breaker."""
        if self.breaker is None:
            return
        state = self._state(provider)
        if not failed:
            state.failures, state.opened = 0, None
            return
        state.failures += 1
        if state.failures >= self.breaker.failures:
            state.opened = now

    # -- deciding --------------------------------------------------------------------------

    def decide(self, s: Attempt) -> Verdict:
        """The verdict of the first rule of ``s.phase`` whose ``when`` is true, else the
        default; then af's overrides."""
        return self._settle(self._rules(s), s)

    def _rules(self, s: Attempt) -> Verdict:
        rules = self.pre_check if s.phase == "pre_check" else self.post_decide
        for i, r in enumerate(rules):
            label = r.kind or f"{s.phase}[{i}]"
            try:
                verdict = r.when(s)
                if not isinstance(verdict, bool):
                    raise _Broke(f"returned {type(verdict).__name__}, not a bool")
                if not verdict:
                    continue
                delay = 0.0
                if r.then in MOVES:
                    delay = r.delay(s) if callable(r.delay) else r.delay
                    if not _seconds(delay):
                        raise _Broke(f"gave a delay of {delay!r}, not seconds >= 0")
            except Exception as e:
                return Verdict(
                    "fail_fast",
                    rule=label,
                    kind="rule-failed",
                    reason=f"rule {label} {_failure(e)}",
                )
            if r.then == "fail_fast":
                return Verdict(
                    "fail_fast",
                    rule=label,
                    kind=r.kind or "rule",
                    reason=f"rule {label} decided to fail fast{_after(s)}",
                )
            return Verdict(r.then, rule=label, delay=float(delay))
        if s.phase == "pre_check" and s.breaker_open:
            if s.providers_left:
                return Verdict("retry_other", reason=f"the circuit breaker of {s.provider} is open")
            return Verdict(
                "fail_fast",
                kind="circuit-open",
                reason=f"the circuit breaker of {s.provider} is open and no other provider is left",
            )
        return Verdict("continue" if s.phase == "pre_check" else "ok")

    def _settle(self, v: Verdict, s: Attempt) -> Verdict:
        """Whatever a rule asked for, another attempt is not made when it cannot be the
        same call, when there is nowhere to make it, or when the call has taken enough."""
        if v.verb not in MOVES:
            return v
        if s.phase == "post_decide" and s.error is not None and s.mid_stream:
            return v.overridden(
                "mid-stream-not-retryable",
                f"{s.provider} failed with {s.error_kind} after its reply had begun streaming, "
                f"so {v.verb} would not send the same call again",
            )
        if v.verb == "retry_other" and not s.providers_left:
            return v.overridden(
                "no-provider-left",
                f"retry_other asked for a provider after {s.provider}; none is left",
            )
        if v.verb == "fallback" and not s.fallback_left:
            return v.overridden(
                "no-fallback-left",
                "fallback asked for the fallback provider, which was tried already",
            )
        if s.phase == "post_decide" and s.attempt >= self.max_attempts:
            return v.overridden(
                "attempts-exhausted",
                f"{s.attempt} attempts were made, the most a call may take; {v.verb} would "
                "make another",
            )
        return v

    def describe(self, provider_json: Callable[[Provider], dict[str, Any]]) -> ReliabilityInfo:
        """What the recording's header says about this configuration."""

        def rules(phase: str, listed: tuple[ReliabilityRule, ...]) -> list[ReliabilityRuleInfo]:
            out = []
            for i, r in enumerate(listed):
                delay: float | str | None
                if callable(r.delay):
                    # Worked out at each attempt (the decision records the seconds waited).
                    name = getattr(r.delay, "__qualname__", "")
                    delay = name if name and "<lambda>" not in name else "computed"
                else:
                    delay = r.delay or None
                out.append(_rule_info(rule=r.kind or f"{phase}[{i}]", then=r.then, delay=delay))
            return out

        def target(t: Target) -> TargetInfo:
            return _target_info(provider=provider_json(t.provider), model=t.model)

        breaker = self.breaker
        return _info(
            pre_check=rules("pre_check", self.pre_check),
            post_decide=rules("post_decide", self.post_decide),
            providers=[target(t) for t in self.providers],
            max_attempts=self.max_attempts,
            fallback=None if self.fallback is None else target(self.fallback),
            circuit_breaker=None
            if breaker is None
            else _breaker_info(failures=breaker.failures, cooldown=breaker.cooldown),
        )


class _Broke(Exception):
    """A rule that returned what a rule may not."""


def _failure(e: Exception) -> str:
    return str(e) if isinstance(e, _Broke) else f"raised {type(e).__name__}: {e}"


def _after(s: Attempt) -> str:
    if s.error is None:
        return f" on the answer of {s.provider} at attempt {s.attempt}"
    status = f" ({s.status})" if s.status is not None else ""
    return f" on {s.error_kind}{status} from {s.provider} at attempt {s.attempt}"


# -- building ------------------------------------------------------------------------------

ProviderSpec = Provider | str | tuple[Provider, str]
"""A provider as ``.reliability()`` takes it: a provider (asked for its own model, or the
agent's), a ``provider:model`` id, or a ``(provider, model)`` pair."""


def target(spec: object, via: str, where: str) -> Target:
    if isinstance(spec, Provider):
        model = getattr(spec, "model", None)
        return Target(spec, model if isinstance(model, str) and model else None, via)
    if isinstance(spec, str):
        from afcore.providers import from_model_id

        provider, model = from_model_id(spec)
        return Target(provider, model, via)
    if (
        isinstance(spec, tuple)
        and len(spec) == 2
        and isinstance(spec[0], Provider)
        and isinstance(spec[1], str)
        and spec[1]
    ):
        return Target(spec[0], spec[1], via)
    raise UsageError(
        f"reliability({where}=...) takes a provider, a provider:model id or a "
        f"(provider, model) pair; got {spec!r}"
    )


def build(
    *,
    pre_check: Sequence[ReliabilityRule],
    post_decide: Sequence[ReliabilityRule],
    providers: Sequence[ProviderSpec],
    breaker: CircuitBreaker | None,
    fallback: ProviderSpec | None,
    max_attempts: int,
) -> Reliability:
    """Check what ``.reliability(...)`` was given; mistakes are refused here, not mid-run."""
    checked: dict[str, list[ReliabilityRule]] = {}
    for phase, rules, allowed in (
        ("pre_check", pre_check, PRE_VERBS),
        ("post_decide", post_decide, POST_VERBS),
    ):
        if isinstance(rules, ReliabilityRule | str | Mapping) or not isinstance(rules, Sequence):
            raise UsageError(f"reliability({phase}=...) takes a list of rules made by rule(...)")
        for r in rules:
            if not isinstance(r, ReliabilityRule):
                raise UsageError(
                    f"reliability({phase}=...) takes rules made by rule(...), got {r!r}"
                )
            if r.then not in allowed:
                raise UsageError(
                    f"a {phase} rule decides {', '.join(allowed)}; "
                    f"rule {r.kind or '(no kind)'} decides {r.then}"
                )
        checked[phase] = list(rules)
    pair = (
        isinstance(providers, tuple)
        and len(providers) == 2
        and isinstance(providers[0], Provider)
        and isinstance(providers[1], str)
    )
    if pair or isinstance(providers, str | Provider) or not isinstance(providers, Sequence):
        raise UsageError(
            "reliability(providers=...) takes a list of providers, e.g. [(provider, model)]"
        )
    targets = [target(p, f"providers[{i}]", "providers") for i, p in enumerate(providers)]
    spare = None if fallback is None else target(fallback, "fallback", "fallback")
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise UsageError(
            f"reliability(circuit_breaker=...) takes circuit_breaker(...), got {breaker!r}"
        )
    if (
        isinstance(max_attempts, bool)
        or not isinstance(max_attempts, int)
        or not 1 <= max_attempts <= MAX_ATTEMPTS_CAP
    ):
        raise UsageError(
            f"reliability(max_attempts=...) takes an integer from 1 to {MAX_ATTEMPTS_CAP}, "
            f"got {max_attempts!r}"
        )
    every = checked["pre_check"] + checked["post_decide"]
    if spare is None and any(r.then == "fallback" for r in every):
        raise UsageError("a rule decides fallback, but reliability(fallback=...) names none")
    if not targets and any(r.then == "retry_other" for r in every):
        raise UsageError(
            "a rule decides retry_other, but reliability(providers=[...]) names no other provider"
        )
    return Reliability(
        pre_check=checked["pre_check"],
        post_decide=checked["post_decide"],
        providers=targets,
        fallback=spare,
        breaker=breaker,
        max_attempts=max_attempts,
    )
