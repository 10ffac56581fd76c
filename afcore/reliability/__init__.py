"""Reliability: retries, other providers, a fallback and circuit breakers for model calls,
decided by rules and recorded attempt by attempt."""

from afcore.errors import ReliabilityFailFastError
from afcore.reliability._policy import (
    Attempt,
    CircuitBreaker,
    Reliability,
    ReliabilityRule,
    Verb,
    Verdict,
    circuit_breaker,
    rule,
)

__all__ = [
    "Attempt",
    "CircuitBreaker",
    "Reliability",
    "ReliabilityFailFastError",
    "ReliabilityRule",
    "Verb",
    "Verdict",
    "circuit_breaker",
    "rule",
]
