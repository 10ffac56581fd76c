"""Agents: the builder and the built agent."""

from afcore.agent._agent import Agent
from afcore.agent._builder import AgentBuilder

__all__ = ["Agent", "AgentBuilder"]
