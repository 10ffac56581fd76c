"""Evaluating every injection at every iteration and composing the three slots from what
fired (dynamic ReAct), with the evidence of each decision and the cache breakpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from afcore.errors import UsageError
from afcore.injections._model import Injection, LLMActivated, OnToolReturn, Rule
from afcore.injections._view import RunView, preview
from afcore.messages import CacheBreakpoint, Message, Source, SystemSegment, ToolSpec
from afcore.tools._providers import ToolProvider, ToolProviderContext
from afcore.tools._tool import Tool, ToolContext, define_tool

__all__ = ["READ_SKILL", "Composition", "Decision", "InjectionEngine"]

READ_SKILL = "read_skill"
_STATIC = Source(kind="static")


@dataclass(frozen=True, slots=True)
class Decision:
    """One injection's evaluation at one iteration."""

    injection: Injection
    fired: bool
    reason: str
    reads: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def same_as_before(self) -> tuple[Any, ...]:
        """What must differ from the iteration before for the decision to be written again.
        The iteration a rule read is the inject commit's own `iter`, so it is not stored
        (a rule reading only the iteration is restated when its verdict changes)."""
        return (
            self.fired,
            tuple((k, None if k == "iteration" else v) for k, v in self.reads.items()),
            self.error,
        )

    def to_json(self) -> dict[str, Any]:
        inj = self.injection
        out: dict[str, Any] = {
            "id": inj.id,
            "flavor": inj.flavor,
            "trigger": inj.trigger.kind,
            "fired": self.fired,
            "reason": self.reason,
        }
        if self.reads:
            out["reads"] = [[k] if k == "iteration" else [k, v] for k, v in self.reads.items()]
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass
class Composition:
    """The three slots for one call, and how they came to be."""

    system: list[SystemSegment]
    messages: list[tuple[str, str, Source]]
    """Injected messages: (role, text, source), sent after the conversation."""
    tools: list[Tool]
    specs: list[ToolSpec]
    cache: list[CacheBreakpoint]
    decisions: list[Decision]
    """Every decision that could differ between iterations (rules, tool returns, skills,
    content functions); always-on injections with fixed text are not restated."""
    reads: set[str]
    """Every key the decisions read (user_message, last_tool_results.<tool>, ...)."""

    @cached_property
    def tools_by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}


@dataclass
class TurnState:
    """What the engine needs to know about the run at an iteration."""

    user_message: str
    iteration: int
    history: tuple[Message, ...]
    state: Mapping[str, Any]
    identity: Any
    last_tool_results: dict[str, str] = field(default_factory=dict)
    """Tool name -> result text, from the previous iteration."""
    active_skills: dict[str, int] = field(default_factory=dict)
    """Skill id -> the iteration read_skill activated it at."""


class InjectionEngine:
    """The injections, tools and tool providers of one agent, checked once at build."""

    def __init__(
        self,
        *,
        base: Sequence[SystemSegment],
        tools: Sequence[Tool],
        injections: Sequence[Injection],
        providers: Sequence[ToolProvider],
    ) -> None:
        self.base = list(base)
        self.injections = list(injections)
        self.providers = list(providers)
        seen: dict[str, Injection] = {}
        for inj in self.injections:
            if inj.id in seen:
                raise UsageError(
                    f"two injections share the id {inj.id!r}: a {seen[inj.id].flavor} and a "
                    f"{inj.flavor}; ids must be unique"
                )
            seen[inj.id] = inj
        static = {t.name: t for t in tools}
        self.skills = [i for i in self.injections if isinstance(i.trigger, LLMActivated)]
        if self.skills and READ_SKILL in static:
            raise UsageError(
                f"a static tool is named {READ_SKILL!r}, the name af gives skills' reader"
            )
        owners: dict[str, str] = {}
        for inj in self.injections:
            for t in inj.tools:
                if t.name in static:
                    raise UsageError(
                        f"{inj.flavor} {inj.id!r} brings a tool named {t.name!r}, and a static "
                        f"tool has that name already"
                    )
                if t.name == READ_SKILL:
                    raise UsageError(f"{inj.flavor} {inj.id!r} brings a tool named {READ_SKILL!r}")
                if t.name in owners and owners[t.name] != inj.id:
                    raise UsageError(
                        f"{inj.flavor} {inj.id!r} and {owners[t.name]!r} both bring a tool named "
                        f"{t.name!r}"
                    )
                owners[t.name] = inj.id
        # Specs carry their source; made once so that unchanged slots are the same objects
        # from call to call (the recorder then stores and hashes them once).
        self.static = [(t, replace(t.spec, source=_STATIC)) for t in tools]
        self.read_skill = _read_skill_tool(self.skills) if self.skills else None
        self._skill_specs = {
            (inj.id, t.name): replace(t.spec, source=Source(kind="skill", id=inj.id))
            for inj in self.injections
            for t in inj.tools
        }
        self._segments: dict[tuple[str, str, str, str], SystemSegment] = {}
        self._sources: dict[tuple[str, int, str], Source] = {}
        self._provider_specs: dict[tuple[int, str], tuple[Tool, ToolSpec]] = {}
        # Always-on injections with fixed text and a fixed cache policy decide nothing: their
        # part of the slots is worked out here, once, and shared by every iteration.
        self._fixed_groups: tuple[list[SystemSegment], list[SystemSegment], list[SystemSegment]]
        self._fixed_groups = ([], [], [])
        self._fixed_messages: list[tuple[str, str, Source]] = []
        self._fixed_tools: list[tuple[Tool, ToolSpec]] = []
        self._dynamic: list[Injection] = []
        for inj in self.injections:
            if inj.trigger.kind != "always" or not _fixed(inj) or callable(inj.cache):
                self._dynamic.append(inj)
                continue
            stable = {"always": 0, "while_active": 1}.get(str(inj.cache), 2)
            source = self._source(inj, stable, Decision(inj, True, "always"))
            if isinstance(inj.system, str):
                self._fixed_groups[stable].append(SystemSegment(inj.system, source))
            if isinstance(inj.message, str):
                self._fixed_messages.append((inj.role, inj.message, source))
            self._fixed_tools += [(t, self._skill_specs[(inj.id, t.name)]) for t in inj.tools]

    @property
    def trivial(self) -> bool:
        """No injections and no providers: the slots never change, nothing to evaluate."""
        return not self.injections and not self.providers

    def describe(self) -> list[dict[str, Any]]:
        """The injections as the recording's header lists them."""
        out = []
        for inj in self.injections:
            entry: dict[str, Any] = {
                "id": inj.id,
                "flavor": inj.flavor,
                "trigger": inj.trigger.kind,
            }
            if isinstance(inj.trigger, OnToolReturn):
                entry["after"] = inj.trigger.label
            entry["slots"] = [
                s for s, v in (("system", inj.system), ("messages", inj.message)) if v is not None
            ] + (["tools"] if inj.tools else [])
            entry["cache"] = inj.cache if isinstance(inj.cache, str) else "predicate"
            if inj.tools:
                entry["tools"] = [t.name for t in inj.tools]
            out.append(entry)
        return out

    # -- each iteration ------------------------------------------------------------------

    def compose(self, turn: TurnState, base: Sequence[SystemSegment] | None = None) -> Composition:
        view = RunView(
            user_message=turn.user_message,
            iteration=turn.iteration,
            last_tool_results=turn.last_tool_results,
            active_skills=frozenset(turn.active_skills),
            history=turn.history,
            state=turn.state,
        )
        decisions: list[Decision] = []
        reads: set[str] = set()
        groups: tuple[list[SystemSegment], list[SystemSegment], list[SystemSegment]] = (
            list(self._fixed_groups[0]),
            list(self._fixed_groups[1]),
            list(self._fixed_groups[2]),
        )
        messages: list[tuple[str, str, Source]] = list(self._fixed_messages)
        fired_tools: list[tuple[Tool, ToolSpec]] = list(self._fixed_tools)
        for inj in self._dynamic:
            decision = self._decide(inj, view, turn)
            if not decision.fired:
                decisions.append(decision)
                reads.update(decision.reads)
                continue
            try:
                text = inj.render("system", view)
                message = inj.render("message", view)
                stable = self._stable(inj, view)
            except Exception as e:  # a content or cache function failed: skip, record, go on
                decision = Decision(
                    inj, False, "its content could not be made", view._take_reads(), _error(e)
                )
                decisions.append(decision)
                reads.update(decision.reads)
                continue
            content_reads = view._take_reads()
            if content_reads:
                decision = replace(decision, reads={**decision.reads, **content_reads})
            decisions.append(decision)
            reads.update(decision.reads)
            source = self._source(inj, stable, decision)
            if text is not None:
                groups[stable].append(self._segment(inj.id, text, source))
            if message is not None:
                messages.append((inj.role, message, source))
            fired_tools += [(t, self._skill_specs[(inj.id, t.name)]) for t in inj.tools]
        base_segments = list(self.base if base is None else base)
        system = base_segments + groups[0] + groups[1] + groups[2]
        cache: list[CacheBreakpoint] = []
        if base_segments or groups[0]:
            cache.append(CacheBreakpoint("system", len(base_segments) + len(groups[0]) - 1))
        if groups[1]:
            cache.append(
                CacheBreakpoint("system", len(base_segments) + len(groups[0]) + len(groups[1]) - 1)
            )
        tools = list(self.static)
        if self.read_skill is not None:
            tools.append(self.read_skill)
        if tools:
            cache.append(CacheBreakpoint("tools", len(tools) - 1))
        tools += fired_tools
        tools += self._provided(turn)
        _check_unique(tools)
        return Composition(
            system=system,
            messages=messages,
            tools=[t for t, _ in tools],
            specs=[s for _, s in tools],
            cache=cache,
            decisions=decisions,
            reads=reads,
        )

    def _decide(self, inj: Injection, view: RunView, turn: TurnState) -> Decision:
        trigger = inj.trigger
        if isinstance(trigger, Rule):
            try:
                verdict = trigger.predicate(view)
            except Exception as e:  # a rule that raises is skipped and recorded; the run goes on
                return Decision(inj, False, "its rule raised", view._take_reads(), _error(e))
            evidence = view._take_reads()
            if not isinstance(verdict, bool):
                return Decision(
                    inj,
                    False,
                    "its rule returned a non-bool",
                    evidence,
                    f"TypeError: the rule returned {type(verdict).__name__} {preview(verdict)!r}, "
                    "not True or False",
                )
            # The evidence is in `reads`; the reason says only what the rule answered.
            return Decision(inj, verdict, f"rule returned {str(verdict).lower()}", evidence)
        if isinstance(trigger, OnToolReturn):
            hits = {n: r for n, r in turn.last_tool_results.items() if trigger.matches(n)}
            evidence = {f"last_tool_results.{n}": preview(r) for n, r in hits.items()}
            if hits:
                names = ", ".join(sorted(hits))
                return Decision(
                    inj, True, f"{names} returned at iteration {turn.iteration - 1}", evidence
                )
            return Decision(inj, False, f"{trigger.label} did not return at the last iteration")
        if isinstance(trigger, LLMActivated):
            at = turn.active_skills.get(inj.id)
            if at is None:
                return Decision(inj, False, "not activated")
            return Decision(inj, True, f"activated by read_skill at iteration {at}")
        return Decision(inj, True, "always")

    def _source(self, inj: Injection, stable: int, decision: Decision) -> Source:
        """The provenance a fired injection's content carries. Its reason is the stable part
        of why (the evidence, which may change every iteration, is in the decisions), so
        unchanged content keeps the same source and is not stored again."""
        trigger = inj.trigger
        if isinstance(trigger, Rule):
            reason = "its rule returned true"
        elif isinstance(trigger, OnToolReturn):
            reason = f"{trigger.label} returned"
        else:
            reason = decision.reason
        key = (inj.id, stable, reason)
        source = self._sources.get(key)
        if source is None:
            policy = ("always", "while_active", "never")[stable]
            source = self._sources[key] = Source(
                kind=inj.flavor, id=inj.id, trigger=trigger.kind, reason=reason, cache=policy
            )
        return source

    def _stable(self, inj: Injection, view: RunView) -> int:
        """0: stable (cache it), 1: stable while active, 2: changes."""
        policy = inj.cache
        if policy == "always":
            return 0
        if policy == "while_active":
            return 1
        if policy == "never":
            return 2
        assert callable(policy)
        done = policy(view)
        if not isinstance(done, bool):
            raise TypeError(f"the cache predicate returned {type(done).__name__}, not a bool")
        return 2 if done else 0

    def _segment(self, id: str, text: str, source: Source) -> SystemSegment:
        key = (id, text, source.reason or "", source.cache or "")
        seg = self._segments.get(key)
        if seg is None:
            if len(self._segments) > 4096:
                self._segments.clear()
            seg = self._segments[key] = SystemSegment(text, source)
        return seg

    def _provided(self, turn: TurnState) -> list[tuple[Tool, ToolSpec]]:
        out: list[tuple[Tool, ToolSpec]] = []
        if not self.providers:
            return out
        ctx = ToolProviderContext(
            iteration=turn.iteration,
            active_skills=frozenset(turn.active_skills),
            identity=turn.identity,
        )
        for provider in self.providers:
            for t in provider.tools(ctx):
                key = (id(t), provider.name)
                cached = self._provider_specs.get(key)
                if cached is None or cached[0] is not t:
                    spec = replace(t.spec, source=Source(kind="provider", id=provider.name))
                    cached = self._provider_specs[key] = (t, spec)
                out.append(cached)
        return out


def _check_unique(tools: list[tuple[Tool, ToolSpec]]) -> None:
    names: dict[str, ToolSpec] = {}
    for t, spec in tools:
        if t.name in names:
            first = names[t.name].source
            raise UsageError(
                f"two tools named {t.name!r} are visible at once: from {_where(first)} and from "
                f"{_where(spec.source)}"
            )
        names[t.name] = spec


def _where(source: Source) -> str:
    return f"{source.kind} {source.id!r}" if source.id else source.kind


def _fixed(inj: Injection) -> bool:
    return (inj.system is None or isinstance(inj.system, str)) and (
        inj.message is None or isinstance(inj.message, str)
    )


def _error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= 300 else text[:300] + "…"


def _read_skill_tool(skills: list[Injection]) -> tuple[Tool, ToolSpec]:
    ids = [s.id for s in skills]
    catalog = "\n".join(f"- {s.id}: {s.description}" for s in skills)

    def execute(args: dict[str, Any], ctx: ToolContext) -> str:
        # Activation itself is the loop's to record (it sees the call succeed); the model
        # reads a confirmation, and the skill's body and tools arrive with the next call.
        return (
            f"Skill {args['id']!r} is active: its instructions and tools come with the next step."
        )

    tool = define_tool(
        READ_SKILL,
        "Read a skill's instructions and unlock its tools. Call it when a skill fits the task. "
        f"Skills:\n{catalog}",
        {
            "type": "object",
            "properties": {"id": {"type": "string", "enum": ids, "description": "The skill's id."}},
            "required": ["id"],
            "additionalProperties": False,
        },
        execute,
    )
    return tool, replace(tool.spec, source=Source(kind="skill", id=READ_SKILL))
