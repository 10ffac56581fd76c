"""An injection: what lands in which slot of a model call (system, messages, tools), when
its trigger fires, and how stable it is for prompt caching.

Every flavor (steering, instruction, fact, skill, and any an application invents) is an
:class:`Injection`; the factories below only fill in its fields.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from afcore.errors import UsageError
from afcore.tools._tool import Tool

if TYPE_CHECKING:
    from afcore.injections._view import RunView

__all__ = [
    "Always",
    "ConfigureContext",
    "Cache",
    "Content",
    "Injection",
    "LLMActivated",
    "OnToolReturn",
    "RuleTrigger",
    "Trigger",
    "fact",
    "instruction",
    "skill",
    "steering",
]

Content: TypeAlias = str | Callable[..., str]
"""Text, or a function returning it: called each iteration, with the run view ``s`` when it
takes an argument."""
Slot: TypeAlias = Literal["system", "messages"]
CachePolicy: TypeAlias = Literal["always", "never", "while_active"]
Cache: TypeAlias = CachePolicy | Callable[["RunView"], bool]
"""`always` (stable), `never`, `while_active` (stable while the injection stays active), or a
predicate: stable until it returns true."""


@dataclass(frozen=True)
class ConfigureContext:
    """What ``configure(ctx)`` sees when a run starts: the message, who it is for, and the
    defaults the agent was built with (so it can decide relative to them)."""

    message: str
    identity: Any
    model: str
    """The model the agent was built with."""
    instructions: str
    """The system text the agent was built with (its segments joined by blank lines)."""


@dataclass(frozen=True)
class Always:
    """Fires at every iteration."""

    kind: Literal["always"] = "always"


@dataclass(frozen=True)
class RuleTrigger:
    """An injection's trigger that fires when its rule, a predicate of the run view ``s``,
    returns True (``instruction(when=...)`` makes one).

    A pure rule (the default) decides from what it reads through ``s`` alone, which is also
    what its recorded evidence claims: af runs it again only when a value it read changed,
    and carries its decision over otherwise. A rule that also looks elsewhere (a clock, a
    global, a service) says ``pure=False`` and runs at every iteration."""

    predicate: Callable[[RunView], bool]
    kind: Literal["rule"] = "rule"
    pure: bool = True


@dataclass(frozen=True)
class OnToolReturn:
    """Fires at the iteration after a matching tool returned."""

    tool: str | re.Pattern[str]
    kind: Literal["on_tool_return"] = "on_tool_return"

    def matches(self, name: str) -> bool:
        if isinstance(self.tool, str):
            return name == self.tool
        return self.tool.fullmatch(name) is not None

    @property
    def label(self) -> str:
        return self.tool if isinstance(self.tool, str) else f"/{self.tool.pattern}/"


@dataclass(frozen=True)
class LLMActivated:
    """Fires from the iteration after the model called ``read_skill`` with this id, for the
    rest of the turn."""

    kind: Literal["llm_activated"] = "llm_activated"


Trigger: TypeAlias = Always | RuleTrigger | OnToolReturn | LLMActivated


@dataclass(frozen=True)
class Injection:
    """Content for one or more slots, a trigger, and a cache policy."""

    id: str
    flavor: str
    """What kind of context this is: `steering`, `instruction`, `fact`, `skill`, or your own."""
    trigger: Trigger
    system: Content | None = None
    """Text for the system prompt."""
    message: Content | None = None
    """Text for the messages slot, sent after the conversation so far."""
    role: Literal["user", "assistant"] = "user"
    """The role the injected message is sent with."""
    tools: tuple[Tool, ...] = ()
    """Tools made visible while the injection is active."""
    cache: Cache = "never"
    description: str = ""
    """For skills: what the model reads in read_skill's catalog."""
    _takes_view: dict[str, bool] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise UsageError(f"an injection needs a non-empty string id, got {self.id!r}")
        for slot in ("system", "message"):
            content = getattr(self, slot)
            if content is None:
                continue
            if isinstance(content, str):
                continue
            if not callable(content):
                raise UsageError(
                    f"injection {self.id!r}: content must be a string or a function returning "
                    f"one, got {type(content).__name__}"
                )
            self._takes_view[slot] = _arity(content, self.id) == 1
        if self.system is None and self.message is None and not self.tools:
            raise UsageError(f"injection {self.id!r} puts nothing in any slot")
        if not (self.cache in ("always", "never", "while_active") or callable(self.cache)):
            raise UsageError(
                f"injection {self.id!r}: cache must be 'always', 'never', 'while_active' or a "
                f"predicate, got {self.cache!r}"
            )
        if self.role not in ("user", "assistant"):
            raise UsageError(f"injection {self.id!r}: role must be 'user' or 'assistant'")
        for t in self.tools:
            if not isinstance(t, Tool):
                raise UsageError(
                    f"injection {self.id!r}: tools must be made by define_tool(...), "
                    f"got {type(t).__name__}"
                )

    def render(self, slot: Literal["system", "message"], view: RunView) -> str | None:
        """The slot's text for this iteration. Raises what a content function raises."""
        content = getattr(self, slot)
        if content is None or isinstance(content, str):
            return content
        text = content(view) if self._takes_view.get(slot) else content()
        if not isinstance(text, str):
            raise TypeError(f"content function returned {type(text).__name__}, not a string")
        return text


def _arity(fn: Callable[..., Any], id: str) -> int:
    try:
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        return 1
    if len(params) > 1:
        raise UsageError(f"injection {id!r}: a content function takes no argument or the view s")
    return len(params)


def _check_predicate(fn: object, what: str) -> None:
    if not callable(fn):
        raise UsageError(f"{what} must be a function of the run view s, got {type(fn).__name__}")


def steering(text: Content, *, id: str | None = None, cache: Cache = "always") -> Injection:
    """Always-on guidance in the system prompt."""
    return Injection(
        id=id or _auto_id("steering", text),
        flavor="steering",
        trigger=Always(),
        system=text,
        cache=cache,
    )


def instruction(
    text: Content,
    *,
    id: str,
    when: Callable[[RunView], bool] | None = None,
    after: str | re.Pattern[str] | None = None,
    slot: Slot = "messages",
    cache: Cache = "never",
    pure: bool = True,
) -> Injection:
    """Guidance that lands when a rule says so (``when``) or after a tool returned (``after``).
    ``pure=False`` marks a rule that depends on more than the run view (see
    :class:`RuleTrigger`)."""
    if (when is None) == (after is None):
        raise UsageError(
            f"instruction {id!r} takes exactly one of when= (a rule) or after= (a tool name or "
            "compiled regex)"
        )
    trigger: Trigger
    if when is not None:
        _check_predicate(when, f"instruction {id!r}: when=")
        trigger = RuleTrigger(when, pure=pure)
    else:
        if not isinstance(after, str | re.Pattern) or not after:
            raise UsageError(f"instruction {id!r}: after= takes a tool name or a compiled regex")
        trigger = OnToolReturn(after)
    return Injection(
        id=id, flavor="instruction", trigger=trigger, cache=cache, **_slot(slot, text, id)
    )


def fact(text: Content, *, id: str, slot: Slot = "system", cache: Cache | None = None) -> Injection:
    """Data the model should see: text, or a function evaluated each iteration."""
    policy: Cache = cache if cache is not None else ("always" if isinstance(text, str) else "never")
    return Injection(id=id, flavor="fact", trigger=Always(), cache=policy, **_slot(slot, text, id))


def skill(
    id: str,
    *,
    description: str,
    body: Content,
    tools: Sequence[Tool] = (),
    slot: Slot = "messages",
) -> Injection:
    """Guidance the model asks for: listed in read_skill's catalog; on activation its body
    lands and its tools become visible, for the rest of the turn."""
    if not isinstance(description, str) or not description.strip():
        raise UsageError(f"skill {id!r} needs a description: it is what the model chooses by")
    return Injection(
        id=id,
        flavor="skill",
        trigger=LLMActivated(),
        tools=tuple(tools),
        cache="while_active",
        description=description,
        **_slot(slot, body, id),
    )


def _slot(slot: str, text: Content, id: str) -> dict[str, Any]:
    if slot == "system":
        return {"system": text}
    if slot == "messages":
        return {"message": text}
    raise UsageError(f"injection {id!r}: slot must be 'system' or 'messages', got {slot!r}")


def _auto_id(prefix: str, text: Content) -> str:
    if isinstance(text, str):
        words = re.findall(r"[a-z0-9]+", text.lower())[:4]
        if words:
            return f"{prefix}:{'-'.join(words)}"
    return f"{prefix}:{getattr(text, '__name__', 'text')}"


def skills_of(registry: Iterable[Injection]) -> list[Injection]:
    out = list(registry)
    for s in out:
        if not isinstance(s, Injection) or s.flavor != "skill":
            raise UsageError(f"skills(...) takes skills made by skill(...), got {s!r}")
    return out
