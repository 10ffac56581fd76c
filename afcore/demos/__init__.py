"""Agents that run offline, to try af without a model or a key."""

from afcore.demos.trip import DEFAULT_MESSAGE, build_agent

__all__ = ["DEFAULT_MESSAGE", "build_agent"]
