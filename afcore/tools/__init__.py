"""Tools: definitions, argument validation and the correction the model reads."""

from afcore.tools._providers import ToolProvider, ToolProviderContext, gated_tools, static_tools
from afcore.tools._tool import Tool, ToolContext, ToolValidation, define_tool
from afcore.tools._validation import ArgProblem, correction, validate_args

__all__ = [
    "ArgProblem",
    "Tool",
    "ToolContext",
    "ToolProvider",
    "ToolProviderContext",
    "ToolValidation",
    "correction",
    "define_tool",
    "gated_tools",
    "static_tools",
    "validate_args",
]
