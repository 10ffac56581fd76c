"""Agents: the builder, the built agent, and an agent called as another agent's tool."""

from afcore.agent._agent import Agent
from afcore.agent._as_tool import agent_tool
from afcore.agent._builder import AgentBuilder

__all__ = ["Agent", "AgentBuilder", "agent_tool"]
