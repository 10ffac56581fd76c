"""The provider-neutral vocabulary of a model call.

A :class:`Request` is what af sends: system segments, the message window, the visible
tools, the parameters and the cache breakpoints. A :class:`Response` is what comes back:
content blocks (text, thinking with its signature, tool calls), usage and the stop reason.
Every provider translates these to and from one vendor's wire format; the loop and the
recording only ever see these types.

Each type has a ``to_json`` giving its canonical JSON form: the form stored in recordings
and hashed to prove a call can be rebuilt exactly. Fields at their default are left out,
so adding a field with a default later does not change the bytes of old content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "AssistantMessage",
    "Block",
    "CacheBreakpoint",
    "Message",
    "OpaqueBlock",
    "Request",
    "Response",
    "Source",
    "SystemSegment",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "block_from_json",
    "message_from_json",
]

JSON: TypeAlias = Any


@dataclass(frozen=True, slots=True)
class TextBlock:
    """Text the model wrote."""

    text: str
    type: Literal["text"] = "text"

    def to_json(self) -> dict[str, JSON]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """The model's reasoning. Vendors that sign it need the signature sent back verbatim."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    type: Literal["thinking"] = "thinking"

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            out["signature"] = self.signature
        if self.redacted:
            out["redacted"] = True
        return out


@dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asks for a tool to run with these arguments."""

    id: str
    name: str
    args: dict[str, JSON]
    id_synthesized: bool = False
    """True when the vendor sent no id and af made one up (stable within the run)."""
    type: Literal["tool_call"] = "tool_call"

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"type": "tool_call", "id": self.id, "name": self.name}
        out["args"] = self.args
        if self.id_synthesized:
            out["id_synthesized"] = True
        return out


@dataclass(frozen=True, slots=True)
class OpaqueBlock:
    """Content a vendor sent that af has no type for (a server tool's call or its result, a
    content part of a kind af does not read), kept as the vendor sent it: the recording
    holds it, and the vendor whose wire it came from gets it back as it was."""

    wire: str
    """Whose wire format ``data`` is in: `anthropic` (the Messages API) or `openai` (Chat
    Completions)."""
    data: Mapping[str, JSON]
    """The block as the vendor sent it."""
    type: Literal["opaque"] = "opaque"

    @property
    def kind(self) -> str:
        """The vendor's name for the block's type."""
        return str(self.data.get("type", "?"))

    def to_json(self) -> dict[str, JSON]:
        return {"type": "opaque", "wire": self.wire, "data": dict(self.data)}


Block: TypeAlias = TextBlock | ThinkingBlock | ToolCall | OpaqueBlock


def block_from_json(data: Mapping[str, JSON]) -> Block:
    kind = data.get("type")
    if kind == "text":
        return TextBlock(text=data["text"])
    if kind == "thinking":
        return ThinkingBlock(
            thinking=data["thinking"],
            signature=data.get("signature"),
            redacted=bool(data.get("redacted", False)),
        )
    if kind == "tool_call":
        return ToolCall(
            id=data["id"],
            name=data["name"],
            args=dict(data["args"]),
            id_synthesized=bool(data.get("id_synthesized", False)),
        )
    if kind == "opaque":
        return OpaqueBlock(wire=data["wire"], data=dict(data["data"]))
    raise ValueError(f"unknown content block type {kind!r}")


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A message from the person (or the application) driving the agent."""

    content: str
    role: Literal["user"] = "user"

    def to_json(self) -> dict[str, JSON]:
        return {"role": "user", "content": self.content}


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model reply as it joins the history: its blocks in the order they came."""

    content: tuple[Block, ...]
    role: Literal["assistant"] = "assistant"

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]

    def to_json(self) -> dict[str, JSON]:
        return {"role": "assistant", "content": [b.to_json() for b in self.content]}


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    """What a tool returned (or the error it raised), answering one tool call."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    role: Literal["tool"] = "tool"

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "role": "tool",
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "content": self.content,
        }
        if self.is_error:
            out["is_error"] = True
        return out


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


def message_from_json(data: Mapping[str, JSON]) -> Message:
    role = data.get("role")
    if role == "user":
        return UserMessage(content=data["content"])
    if role == "assistant":
        return AssistantMessage(content=tuple(block_from_json(b) for b in data["content"]))
    if role == "tool":
        return ToolResultMessage(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown message role {role!r}")


@dataclass(frozen=True, slots=True)
class Source:
    """Where a piece of context came from: the provenance shown beside it."""

    kind: str
    """`base` (the builder's system text), `static` (its tools), an injection's flavor
    (`steering`, `instruction`, `fact`, `skill`, ...), or `provider` (a tool provider)."""
    id: str | None = None
    trigger: str | None = None
    reason: str | None = None
    cache: str | None = None
    """The cache policy it was placed under: `always`, `while_active` or `never`."""

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"kind": self.kind}
        if self.id is not None:
            out["id"] = self.id
        if self.trigger is not None:
            out["trigger"] = self.trigger
        if self.reason is not None:
            out["reason"] = self.reason
        if self.cache is not None:
            out["cache"] = self.cache
        return out


BASE = Source(kind="base")


@dataclass(frozen=True, slots=True)
class SystemSegment:
    """One piece of the system prompt. Segments are joined with a blank line when a vendor
    wants one string; vendors that take blocks get one block each."""

    text: str
    source: Source = BASE

    def to_json(self) -> dict[str, JSON]:
        # Provenance is not sent to the model, so it is not part of the segment's content.
        return {"text": self.text}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: Mapping[str, JSON]
    source: Source = BASE
    strict: bool = False
    """Ask the vendor to hold the model's arguments to the schema exactly (vendors that
    support it; the schema must then follow their rules for strict schemas)."""

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }
        if self.strict:
            out["strict"] = True
        return out


@dataclass(frozen=True, slots=True)
class CacheBreakpoint:
    """Content up to and including this item is stable: a provider may cache the prefix."""

    slot: Literal["system", "tools", "messages"]
    index: int

    def to_json(self) -> dict[str, JSON]:
        return {"slot": self.slot, "index": self.index}


@dataclass(frozen=True, slots=True)
class Request:
    """One model call, provider-neutral, exactly as the loop composed it."""

    model: str
    system: Sequence[SystemSegment]
    messages: Sequence[Message]
    tools: Sequence[ToolSpec]
    params: Mapping[str, JSON] = field(default_factory=dict)
    cache: Sequence[CacheBreakpoint] = ()

    @property
    def system_text(self) -> str:
        return "\n\n".join(s.text for s in self.system)

    def to_json(self) -> dict[str, JSON]:
        return {
            "model": self.model,
            "system": [s.to_json() for s in self.system],
            "messages": [m.to_json() for m in self.messages],
            "tools": [t.to_json() for t in self.tools],
            "params": dict(self.params),
            "cache": [c.to_json() for c in self.cache],
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used. ``estimated`` marks numbers af guessed rather than a provider
    reported; strategies that need counted tokens refuse estimates."""

    input_tokens: int = 0
    """Every input token of the request, whether the vendor's cache served it or not (so
    thresholds compare the same thing across vendors that count caching differently)."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    """The part of the input read from the vendor's prompt cache."""
    cache_write_tokens: int = 0
    """The part of the input written to the vendor's prompt cache."""
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            estimated=self.estimated or other.estimated,
        )

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.cache_read_tokens:
            out["cache_read_tokens"] = self.cache_read_tokens
        if self.cache_write_tokens:
            out["cache_write_tokens"] = self.cache_write_tokens
        if self.estimated:
            out["estimated"] = True
        return out


@dataclass(frozen=True, slots=True)
class Response:
    """A model's answer to one request."""

    content: tuple[Block, ...]
    stop_reason: str
    """Normalized: `end_turn`, `tool_use`, `max_tokens` (the answer was cut),
    `stop_sequence`, `refusal`, `pause_turn` (the vendor paused a long turn: send the reply
    back to continue it), or the vendor's own word when it has no equivalent."""
    usage: Usage | None = None
    model: str | None = None
    """The model the vendor says answered, when it says."""
    response_id: str | None = None
    """The vendor's id for this response (`msg_...`, `chatcmpl-...`), to find it in the
    vendor's logs."""
    unsent_params: tuple[str, ...] = ()
    """Request params the provider did not send, having no way to say them to this server
    (`thinking` to a server with no thinking parameter)."""

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [b for b in self.content if isinstance(b, ToolCall)]
