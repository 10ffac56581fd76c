"""Causal questions answered from a recording alone: which stages, rules and values
produced a key. ``why(recording, key)`` returns the backward slice; ``keys(recording)`` the
keys one can ask about."""

from afcore.why._flow import cross_flow, state_writers
from afcore.why._slice import (
    Edge,
    Inner,
    KeyInfo,
    NeverWrittenError,
    Node,
    Slice,
    UnknownPositionError,
    keys,
    why,
)
from afcore.why._summary import SummaryLine, key_words, rest_text, summary

__all__ = [
    "Edge",
    "Inner",
    "KeyInfo",
    "NeverWrittenError",
    "Node",
    "Slice",
    "SummaryLine",
    "UnknownPositionError",
    "cross_flow",
    "key_words",
    "keys",
    "rest_text",
    "state_writers",
    "summary",
    "why",
]
