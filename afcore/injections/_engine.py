"""Evaluating every injection at every iteration and composing the three slots from what
fired (dynamic ReAct), with the evidence of each decision and the cache breakpoints."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from random import Random
from typing import Any, TypeAlias

from afcore.errors import UsageError
from afcore.injections._model import Injection, LLMActivated, OnToolReturn, RuleTrigger
from afcore.injections._view import MISSING, RunView, preview, token
from afcore.messages import CacheBreakpoint, Message, Source, SystemSegment, ToolSpec
from afcore.recording._models import (
    InjectionDecision,
    InjectionDecisions,
    InjectionInfo,
    trusted,
)
from afcore.secrets import shorten
from afcore.tools._providers import ToolProvider, ToolProviderContext
from afcore.tools._tool import Tool, ToolContext, define_tool

__all__ = ["READ_SKILL", "Composition", "Decision", "InjectionEngine", "changed_decisions"]

READ_SKILL = "read_skill"
_STATIC = Source(kind="static")
_decision = trusted(InjectionDecision)
_decisions = trusted(InjectionDecisions)
_info = trusted(InjectionInfo)


@dataclass(slots=True)
class Decision:
    """One injection's evaluation at one iteration. Treated as a value: never changed once
    made (not frozen only because frozen dataclasses are slow to build, and rules that read
    the iteration make one at every iteration)."""

    injection: Injection
    fired: bool
    reason: str
    reads: dict[str, Any] = field(default_factory=dict)
    """Key -> the value the rule saw (cut to a line). The iteration's value is not repeated
    (None): it is the iteration the decision was made at."""
    error: str | None = None
    recorded: InjectionDecision | None = field(default=None, init=False, compare=False, repr=False)
    """The decision as the recording holds it, once made (see :meth:`record`)."""

    def same_as_before(self, other: Decision) -> bool:
        """Whether ``other`` (the decision at the iteration before) says the same: then it is
        carried over, not written again."""
        return (
            self.injection is other.injection
            and self.fired == other.fired
            and self.reason == other.reason
            and self.reads == other.reads
            and self.error == other.error
        )

    def record(self) -> InjectionDecision:
        """The decision as the recording holds it (made once: a decision a rule takes again
        when it flips back is recorded again as it was)."""
        if self.recorded is not None:
            return self.recorded
        inj = self.injection
        self.recorded = _decision(
            id=inj.id,
            flavor=inj.flavor,
            trigger=inj.trigger.kind,
            fired=self.fired,
            reason=self.reason,
            reads=[(k,) if k == "iteration" else (k, v) for k, v in self.reads.items()],
            error=self.error,
        )
        return self.recorded


def changed_decisions(
    decisions: Sequence[Decision], previous: Sequence[Decision] | None
) -> InjectionDecisions | None:
    """The ``injections`` value an iteration writes: the decisions that differ from those of
    the iteration before (``previous``; None: there was none, and every decision is
    written), or None when none does. A decision the engine carried over is the very same
    object."""
    if previous is None or len(previous) != len(decisions):
        changed = [d.record() for d in decisions]
    else:
        changed = [
            d.record()
            for before, d in zip(previous, decisions, strict=True)
            if before is not d and not d.same_as_before(before)
        ]
        if not changed:
            return None
    return _decisions(
        evaluated=len(decisions), decisions=changed, unchanged=len(decisions) - len(changed)
    )


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

    @cached_property
    def reads(self) -> set[str]:
        """Every key the decisions read (user_message, last_tool_results.<tool>, ...)."""
        return set().union(*(d.reads for d in self.decisions))

    @cached_property
    def tools_by_name(self) -> dict[str, Tool]:
        return {t.name: t for t in self.tools}


@dataclass(slots=True)
class _Part:
    """What one injection contributed at an iteration: kept and reused while the values its
    rule read stay the same (``keys``; None: decide again at every iteration)."""

    decision: Decision
    group: int = 0
    segment: SystemSegment | None = None
    message: tuple[str, str, Source] | None = None
    tools: list[tuple[Tool, ToolSpec]] = field(default_factory=list)
    keys: frozenset[str] | None = None


@dataclass
class TurnState:
    """What the engine needs to know about the run at an iteration."""

    user_message: str
    iteration: int
    history: Sequence[Message]
    """The conversation so far (the loop's own list: a rule that reads it gets a copy)."""
    state: Mapping[str, Any]
    identity: Any
    last_tool_results: dict[str, str] = field(default_factory=dict)
    """Tool name -> result text, from the previous iteration."""
    active_skills: dict[str, int] = field(default_factory=dict)
    """Skill id -> the iteration read_skill activated it at."""
    memo: _Memo = field(default_factory=lambda: _Memo())
    """What the engine carries from one iteration of this run to the next."""
    clock: Callable[[], datetime] | None = None
    """The run's recorded clock, as the rules of this iteration read it (``s.now()``)."""
    random: Callable[[], Random] | None = None
    """The iteration's random source (``s.random``)."""


_Fired: TypeAlias = tuple[
    tuple[list[SystemSegment], list[SystemSegment], list[SystemSegment]],
    list[tuple[str, str, Source]],
    list[tuple[Tool, ToolSpec]],
]
"""What fired: the system groups (stable, stable while active, changing), the injected
messages and the tools."""


@dataclass
class _Memo:
    """The parts of the last iteration, and what would make each one be decided again."""

    parts: list[_Part] = field(default_factory=list)
    """By position in the engine's dynamic injections."""
    ids: list[int] = field(default_factory=list)
    """The ids of ``parts``, kept beside them: the key of what they gather to."""
    again: set[int] = field(default_factory=set)
    """Positions decided at every iteration."""
    by_key: dict[str, set[int]] = field(default_factory=dict)
    """Key -> positions whose last decision read it."""
    seen: dict[str, list[Any]] = field(default_factory=dict)
    """Key -> [key, the state's name for it or None, its value (as a token) when the
    engine last looked]; the same lists in ``watched``, the order they are looked at in."""
    watched: list[list[Any]] = field(default_factory=list)
    last: Composition | None = None
    fired: _Fired | None = None
    """What fired at the last iteration."""
    composed_from: tuple[Sequence[SystemSegment], _Fired] | None = None
    """The base prompt and what fired that ``last``'s slots were composed from."""
    provided: list[tuple[Tool, ToolSpec]] = field(default_factory=list)
    """The tool providers' tools at the last iteration."""
    todo: dict[frozenset[str], list[int]] = field(default_factory=dict)
    """The keys that changed -> the positions to decide again (emptied when ``again`` or
    ``by_key`` change)."""
    prior: dict[int, _Part] = field(default_factory=dict)
    """Position -> the part it had before its current one: a rule that flips back (a
    reminder every tenth iteration) takes its earlier part again, the same objects."""


_REMEMBERED = 32
"""How many sets of parts, of slots and of compositions an engine keeps: for a rule that
flips back, and for the next runs of the agent, which decide as the runs before did."""


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
        self.by_id: Mapping[str, Injection] = seen
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
        self._described: list[InjectionInfo] | None = None
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

        self._predicates: list[Callable[[RunView], Any]] = [
            inj.trigger.predicate if isinstance(inj.trigger, RuleTrigger) else _not_a_rule
            for inj in self._dynamic
        ]
        """By position in the dynamic injections: each rule's predicate."""
        # Decisions and what is made of them are values: the same verdict from the same
        # evidence is the same part, in this run and the next, and so are the lists and
        # compositions made of the same parts (each run's own state stays in its memo).
        self._plain = {
            id(inj)
            for inj in self._dynamic
            if isinstance(inj.trigger, RuleTrigger) and _fixed(inj) and not callable(inj.cache)
        }
        self._rule_parts: dict[tuple[Any, ...], _Part] = {}
        """(id, verdict, evidence and its types) -> the part, for rules in ``_plain``."""
        self._gathered: dict[tuple[int, ...], tuple[list[_Part], list[Decision], _Fired]] = {}
        """The ids of every part -> those parts, their decisions and what fired: the same
        parts again give the same lists, so the slots are known."""
        self._slotted: dict[tuple[int, int], tuple[Any, ...]] = {}
        """(base, what fired) -> the slots composed from them (with the providers' tools)."""
        self._compositions: dict[tuple[int, ...], Composition] = {}
        """The ids of a composition's decisions and slots -> the composition."""
        self._written: dict[tuple[int, int], tuple[Any, ...]] = {}
        """(decisions, the decisions written before) -> what an iteration writes of them."""
        self._fixed: tuple[Sequence[SystemSegment], Composition] | None = None
        """A trivial engine's base prompt and its composition (see :meth:`compose_fixed`)."""

    @property
    def trivial(self) -> bool:
        """No injections and no providers: the slots never change, nothing to evaluate."""
        return not self.injections and not self.providers

    def describe(self) -> list[InjectionInfo]:
        """The injections as the recording's header lists them: made once, as every run of
        the agent writes the same (the list and its entries are not to be changed)."""
        if self._described is None:
            self._described = self._describe()
        return self._described

    def _describe(self) -> list[InjectionInfo]:
        return [
            _info(
                id=inj.id,
                flavor=inj.flavor,
                trigger=inj.trigger.kind,
                after=inj.trigger.label if isinstance(inj.trigger, OnToolReturn) else None,
                slots=[
                    s
                    for s, v in (("system", inj.system), ("messages", inj.message))
                    if v is not None
                ]
                + (["tools"] if inj.tools else []),
                cache=inj.cache if isinstance(inj.cache, str) else "predicate",
                tools=[t.name for t in inj.tools],
            )
            for inj in self.injections
        ]

    def pushed(
        self, turn: TurnState, required: Sequence[tuple[str, str]]
    ) -> tuple[list[SystemSegment], list[tuple[str, str, Source]]]:
        """The content of registered injections a tool's result pushed into this call
        (``(id, why)`` each), whatever their own triggers say: system segments and injected
        messages, each with the push as its reason."""
        view = _view(turn)
        by_id = self.by_id
        segments: list[SystemSegment] = []
        messages: list[tuple[str, str, Source]] = []
        for id, why in dict(required).items():
            inj = by_id[id]
            source = Source(kind=inj.flavor, id=inj.id, trigger="tool_effect", reason=why)
            text = inj.render("system", view)
            message = inj.render("message", view)
            if text is not None:
                segments.append(self._segment(inj.id, text, source))
            if message is not None:
                messages.append((inj.role, message, source))
        view._release()
        return segments, messages

    def compose_fixed(self, turn: TurnState, base: Sequence[SystemSegment]) -> Composition:
        """:meth:`compose` for an engine with nothing to evaluate (:attr:`trivial`): its
        slots never change, so a base prompt's composition is made once and is every run's
        (the same object, as :meth:`compose` gives for the same parts)."""
        known = self._fixed
        if known is not None and known[0] is base:
            return known[1]
        comp = self.compose(turn, base)
        self._fixed = (base, comp)
        return comp

    # -- each iteration ------------------------------------------------------------------

    def compose(self, turn: TurnState, base: Sequence[SystemSegment] | None = None) -> Composition:
        """The slots for this iteration's call. When nothing was decided differently and the
        base prompt and the providers' tools are the same, the very Composition of the last
        iteration: its caller may take that as "nothing changed" without looking inside."""
        memo = turn.memo
        decided = self._decide_all(memo, turn)
        provided = self._provided(turn)
        base_segments = self.base if base is None else base
        last = memo.last
        if decided is None:
            assert last is not None and memo.fired is not None
            if memo.composed_from == (base_segments, memo.fired) and provided == memo.provided:
                return last
            decisions, fired = last.decisions, memo.fired
        else:
            decisions, fired = decided
        if (
            last is not None
            and memo.composed_from == (base_segments, fired)
            and provided == memo.provided
        ):
            # Same content as the last call: the same slot objects, which the recorder
            # recognizes without looking inside.
            system, specs, tools, cache = last.system, last.specs, last.tools, last.cache
            messages = last.messages
        else:
            key = (id(base_segments), id(fired))
            known = self._slotted.get(key)
            if known is not None and known[2] == provided:
                system, messages, tools, specs, cache = known[3:]
            else:
                system, messages, pairs, cache = self._slots(base_segments, fired, provided)
                specs = [s for _, s in pairs]
                tools = [t for t, _ in pairs]
                if len(self._slotted) >= _REMEMBERED:
                    self._slotted.clear()
                # The base and what fired are kept so that their ids cannot be reused.
                self._slotted[key] = (
                    base_segments,
                    fired,
                    provided,
                    system,
                    messages,
                    tools,
                    specs,
                    cache,
                )
        memo.composed_from = (base_segments, fired)
        memo.provided = provided
        # The same decisions and slots as an earlier iteration (a rule flipped back): the
        # same Composition, so that what its caller made of it can be taken again too.
        ids = (id(decisions), id(system), id(messages), id(tools), id(specs), id(cache))
        comp = self._compositions.get(ids)
        if comp is None:
            comp = Composition(
                system=system,
                messages=messages,
                tools=tools,
                specs=specs,
                cache=cache,
                decisions=decisions,
            )
            if len(self._compositions) >= _REMEMBERED:
                self._compositions.clear()
            self._compositions[ids] = comp  # it holds the parts: their ids stay theirs
        memo.last = comp
        return comp

    def _slots(
        self,
        base: Sequence[SystemSegment],
        fired: _Fired,
        provided: list[tuple[Tool, ToolSpec]],
    ) -> tuple[
        list[SystemSegment],
        list[tuple[str, str, Source]],
        list[tuple[Tool, ToolSpec]],
        list[CacheBreakpoint],
    ]:
        """The three slots from the base prompt, what fired, and the providers' tools, with
        cache breakpoints after the stable system groups and the fixed tools."""
        groups, messages, fired_tools = fired
        system = [*base, *groups[0], *groups[1], *groups[2]]
        cache: list[CacheBreakpoint] = []
        stable = len(base) + len(groups[0])
        if stable:
            cache.append(CacheBreakpoint("system", stable - 1))
        if groups[1]:
            cache.append(CacheBreakpoint("system", stable + len(groups[1]) - 1))
        tools = list(self.static)
        if self.read_skill is not None:
            tools.append(self.read_skill)
        if tools:
            cache.append(CacheBreakpoint("tools", len(tools) - 1))
        tools += fired_tools
        tools += provided
        _check_unique(tools)
        return system, messages, tools, cache

    def _decide_all(self, memo: _Memo, turn: TurnState) -> tuple[list[Decision], _Fired] | None:
        """Decide again what may have changed; carry the rest over. When the injections
        decided again put the same content in the slots, the slots are the last ones; when
        every one of them decided as before, None: the last iteration's decisions hold."""
        parts = memo.parts
        if memo.fired is None:  # the first iteration: decide everything
            view = _view(turn)
            parts[:] = [self._evaluate(inj, view, turn) for inj in self._dynamic]
            memo.ids[:] = map(id, parts)
            view._release()
            for i, part in enumerate(parts):
                _index(memo, i, part)
            return self._gather(memo)
        changed = _changed(memo.watched, turn)
        todo = memo.todo.get(changed)
        if todo is None:
            again = set(memo.again)
            for key in changed:
                again.update(memo.by_key.get(key, ()))
            todo = memo.todo[changed] = sorted(again)
        if not todo:
            return None  # nothing any decision rests on moved: no view to make
        view = _view(turn)
        try:
            return self._redecide(memo, view, turn, todo, changed)
        finally:
            view._release()

    def _redecide(
        self,
        memo: _Memo,
        view: RunView,
        turn: TurnState,
        todo: list[int],
        changed: frozenset[str],
    ) -> tuple[list[Decision], _Fired] | None:
        """Decide the injections at ``todo`` again (``changed``: the keys that moved)."""
        parts = memo.parts
        # Keys other than the iteration: a rule whose decision reads only that, and which
        # answers as before, stands (its evidence says `["iteration"]`, the stage's own).
        moved = _NOTHING if changed is _ITERATION else changed - _ITERATION
        dynamic, predicates = self._dynamic, self._predicates
        redone: list[int] = []
        same = True
        raw = view._reads
        for i in todo:
            old = parts[i]
            keys = old.keys
            if keys is not None:
                # A pure rule that read only what `keys` names: the common case, run inline.
                # Its reads go to ``raw``, the view's notes, emptied in place after each rule
                # that stands (replaced after one that does not: its part keeps them).
                try:
                    verdict = predicates[i](view)
                except Exception as e:  # a rule that raises is skipped and recorded
                    failure: Exception | None = e
                    verdict = None
                else:
                    if (
                        verdict is old.decision.fired
                        and keys == raw.keys()
                        and (not moved or moved.isdisjoint(raw))
                    ):
                        # The same verdict from the same evidence (the iteration aside).
                        raw.clear()
                        continue
                    failure = None
                reads, view._reads = raw, {}
                prior = memo.prior.get(i)
                if (
                    prior is not None
                    and verdict is prior.decision.fired
                    and failure is None
                    and prior.keys == reads.keys()
                    and prior.decision.reads == _evidence(reads)
                ):
                    # Decided as it was before its last change (a part with keys is a
                    # rule's plain verdict): that part again, no new decision made.
                    new = prior
                else:
                    new = self._rule_part(dynamic[i], view, turn, verdict, failure, reads)
                raw = view._reads
            else:
                new = self._evaluate(dynamic[i], view, turn, old, moved)
                raw = view._reads  # taken and replaced by the evaluation
                if new is old:
                    continue
            if _same_content(old, new):
                if new.decision.same_as_before(old.decision):
                    # Decided again, to the same effect: the old part stands, so the slots
                    # and the recorded decision are carried over as they are.
                    old.keys = new.keys
                    _index(memo, i, old)
                    continue
            else:
                same = False
            memo.prior[i] = old
            parts[i] = new
            memo.ids[i] = id(new)
            if new.keys is None or new.keys != old.keys:
                _index(memo, i, new)  # else indexed under these keys already, as ``old`` was
            redone.append(i)
        if not redone:
            return None
        last = memo.last
        if same and last is not None and memo.fired is not None:
            decisions = list(last.decisions)
            for i in redone:
                decisions[i] = parts[i].decision
            return decisions, memo.fired
        return self._gather(memo)

    def _gather(self, memo: _Memo) -> tuple[list[Decision], _Fired]:
        """The decisions and what fired, from every part."""
        key = tuple(memo.ids)
        known = self._gathered.get(key)
        if known is not None:  # the very parts of an earlier iteration (kept alive there)
            memo.fired = known[2]
            return known[1], known[2]
        decisions = []
        groups: tuple[list[SystemSegment], list[SystemSegment], list[SystemSegment]] = (
            list(self._fixed_groups[0]),
            list(self._fixed_groups[1]),
            list(self._fixed_groups[2]),
        )
        messages: list[tuple[str, str, Source]] = list(self._fixed_messages)
        fired_tools: list[tuple[Tool, ToolSpec]] = list(self._fixed_tools)
        for part in memo.parts:
            decisions.append(part.decision)
            if part.segment is not None:
                groups[part.group].append(part.segment)
            if part.message is not None:
                messages.append(part.message)
            if part.tools:
                fired_tools += part.tools
        memo.fired = (groups, messages, fired_tools)
        if len(self._gathered) >= _REMEMBERED:
            self._gathered.clear()
        self._gathered[key] = (list(memo.parts), decisions, memo.fired)
        return decisions, memo.fired

    def _evaluate(
        self,
        inj: Injection,
        view: RunView,
        turn: TurnState,
        old: _Part | None = None,
        changed: set[str] | frozenset[str] = frozenset(),
    ) -> _Part:
        """Decide one injection now and make its content if it fired. ``old``: its part at
        the last iteration, returned as it is when the decision comes out the same
        (``changed``: the keys, the iteration aside, whose values moved since)."""
        trigger = inj.trigger
        if not isinstance(trigger, RuleTrigger):
            return self._part(inj, view, turn, self._decide(inj, turn), {})
        failure: Exception | None = None
        try:
            verdict = trigger.predicate(view)
        except Exception as e:  # a rule that raises is skipped and recorded; the run goes on
            verdict, failure = None, e
        raw = view._take_reads()
        if (
            old is not None
            and old.keys is not None
            and failure is None
            and verdict is old.decision.fired
            and old.keys == raw.keys()
            and not any(k in changed for k in raw)
        ):
            # Same verdict from the same evidence (the iteration aside): nothing to redo.
            return old
        return self._rule_part(inj, view, turn, verdict, failure, raw)

    def written(
        self, decisions: Sequence[Decision], previous: Sequence[Decision] | None
    ) -> InjectionDecisions | None:
        """What an iteration writes of its ``decisions`` against the ones written last
        (:func:`changed_decisions`), worked out once for each pair: a rule flipping back and
        forth writes the same two values, and the next runs of the agent what the runs
        before wrote."""
        key = (id(decisions), id(previous))
        known = self._written.get(key)
        if known is not None and known[0] is decisions and known[1] is previous:
            kept: InjectionDecisions | None = known[2]
            return kept
        changed = changed_decisions(decisions, previous)
        if len(self._written) >= _REMEMBERED:
            self._written.clear()
        self._written[key] = (decisions, previous, changed)  # kept: their ids stay theirs
        return changed

    def _rule_part(
        self,
        inj: Injection,
        view: RunView,
        turn: TurnState,
        verdict: Any,
        failure: Exception | None,
        raw: dict[str, Any],
    ) -> _Part:
        """A rule's part from its verdict and what it read: the part made before for the
        same verdict from the same evidence when its content and cache policy are fixed."""
        if failure is not None or verdict.__class__ is not bool or id(inj) not in self._plain:
            return self._part(inj, view, turn, _rule_decision(inj, verdict, failure, raw), raw)
        evidence = _evidence(raw)
        # The types too: a rule that saw 1 did not see True (nor 1.0), as the record says.
        key = (
            inj.id,
            verdict,
            tuple(evidence.items()),
            tuple(v.__class__ for v in evidence.values()),
        )
        part = self._rule_parts.get(key)
        if part is not None and part.decision.injection is inj:
            _memo_keys(inj, part.decision, raw, turn.memo)  # this run notes what it read
            return part
        decision = Decision(inj, verdict, _TRUE if verdict else _FALSE, evidence)
        part = self._part(inj, view, turn, decision, raw)
        if len(self._rule_parts) >= _PARTS:
            self._rule_parts.clear()
        self._rule_parts[key] = part
        return part

    def _part(
        self,
        inj: Injection,
        view: RunView,
        turn: TurnState,
        decision: Decision,
        raw: dict[str, Any],
    ) -> _Part:
        """What one injection contributes, from its decision (``raw``: what its rule read)."""
        memo = turn.memo
        if not decision.fired:
            return _Part(decision, keys=_memo_keys(inj, decision, raw, memo))
        try:
            text = inj.render("system", view)
            message = inj.render("message", view)
            stable = self._stable(inj, view)
        except Exception as e:  # a content or cache function failed: skip, record, go on
            more = view._take_reads()
            return _Part(
                Decision(
                    inj, False, "its content could not be made", _evidence(raw | more), _error(e)
                )
            )
        more = view._take_reads()
        if more:
            # Content or a cache predicate read the run too: both decide what was sent.
            decision = replace(decision, reads=_evidence(raw | more))
        source = self._source(inj, stable, decision)
        return _Part(
            decision,
            group=stable,
            segment=None if text is None else self._segment(inj.id, text, source),
            message=None if message is None else (inj.role, message, source),
            tools=[(t, self._skill_specs[(inj.id, t.name)]) for t in inj.tools],
            keys=None if more else _memo_keys(inj, decision, raw, memo),
        )

    def _decide(self, inj: Injection, turn: TurnState) -> Decision:
        """The decision of a trigger that is not a rule."""
        trigger = inj.trigger
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
        if isinstance(trigger, RuleTrigger):
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


def _view(turn: TurnState) -> RunView:
    """The view the rules of this iteration read (made only when one is to be decided)."""
    return RunView(
        user_message=turn.user_message,
        iteration=turn.iteration,
        last_tool_results=turn.last_tool_results,
        active_skills=frozenset(turn.active_skills),
        history=turn.history,
        state=turn.state,
        clock=turn.clock,
        random=turn.random,
    )


def _not_a_rule(view: RunView) -> Any:
    raise AssertionError("only a rule's part has keys to decide it again by")


_TRUE, _FALSE = "rule returned true", "rule returned false"
_PARTS = 4096
"""How many rules' parts an engine keeps (a rule reading what differs from run to run, the
user's message, makes one for each value it saw)."""
_ITERATION = frozenset({"iteration"})
_NOTHING: frozenset[str] = frozenset()


def _rule_decision(
    inj: Injection, verdict: Any, failure: Exception | None, raw: dict[str, Any]
) -> Decision:
    if failure is not None:
        return Decision(inj, False, "its rule raised", _evidence(raw), _error(failure))
    if not isinstance(verdict, bool):
        return Decision(
            inj,
            False,
            "its rule returned a non-bool",
            _evidence(raw),
            f"TypeError: the rule returned {type(verdict).__name__} {preview(verdict)!r}, "
            "not True or False",
        )
    # The evidence is in `reads`; the reason says only what the rule answered.
    return Decision(inj, verdict, _TRUE if verdict else _FALSE, _evidence(raw))


def _evidence(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: None if k == "iteration" else preview(v) for k, v in raw.items()}


def _memo_keys(
    inj: Injection, decision: Decision, raw: dict[str, Any], memo: _Memo
) -> frozenset[str] | None:
    """The keys a pure rule's decision rests on, noting the values it saw; None when the
    decision must be made again at every iteration: not a pure rule, a rule that raised or
    read nothing of the run (then it reads something else), or content made by a function."""
    trigger = inj.trigger
    if not isinstance(trigger, RuleTrigger) or not trigger.pure or decision.error or not raw:
        return None
    if decision.fired and not _fixed(inj):
        return None
    seen = memo.seen
    for key, value in raw.items():
        if key not in seen:
            name = key[6:] if key.startswith("state.") else None
            entry = seen[key] = [key, name, token(value)]
            memo.watched.append(entry)
    return frozenset(raw)


def _now(turn: TurnState, key: str) -> Any:
    """A key's value at this iteration, as a token comparable with what a rule saw."""
    if key == "user_message":
        return turn.user_message
    if key == "iteration":
        return (int, turn.iteration)
    if key == "active_skills":
        return token(sorted(turn.active_skills))
    prefix, dot, name = key.partition(".")
    data: Mapping[str, Any] | None = (
        turn.state
        if prefix == "state"
        else turn.last_tool_results
        if prefix == "last_tool_results"
        else None
    )
    if data is None:
        return object()  # never the same twice: a rule that read the history runs again
    if not dot:
        return token(sorted(data))
    return token(data.get(name, MISSING))


def _index(memo: _Memo, i: int, part: _Part) -> None:
    """Note what would make the part at ``i`` be decided again. The positions worked out
    for sets of changed keys stand unless this changes what they are made of (a rule that
    flips back and forth on the same keys leaves them be)."""
    if part.keys is None:
        if i not in memo.again:
            memo.again.add(i)
            memo.todo.clear()
        return
    if i in memo.again:
        memo.again.discard(i)
        memo.todo.clear()
    by_key = memo.by_key
    for key in part.keys:
        positions = by_key.get(key)
        if positions is None:
            by_key[key] = {i}
            memo.todo.clear()
        elif i not in positions:
            positions.add(i)
            memo.todo.clear()


def _same_content(old: _Part, new: _Part) -> bool:
    """Whether two parts put the same things in the slots (decisions aside)."""
    return (
        old.segment is new.segment
        and old.group == new.group
        and old.message == new.message
        and old.tools == new.tools
    )


def _changed(watched: list[list[Any]], turn: TurnState) -> frozenset[str]:
    """The keys whose value differs from when the engine last looked (``_ITERATION`` when
    that is all, as at most iterations); notes the new values."""
    changed: list[str] | None = None
    state = turn.state
    for entry in watched:
        key, name, was = entry
        # The state's keys and the iteration are most of what rules read: compared here
        # without _now's walk, and without making a token when the value is the same.
        if name is not None:
            now = state.get(name, MISSING)
            if now is was:
                continue
            cls = now.__class__
            if cls is str:
                if now == was:
                    continue
            elif cls is int or cls is float or cls is bool:
                if was.__class__ is tuple and was[0] is cls and was[1] == now:
                    continue
                now = (cls, now)
            else:
                now = token(now)
        elif key == "iteration":
            if was[1] == turn.iteration:
                continue
            now = (int, turn.iteration)
        else:
            now = _now(turn, key)
        if now != was:
            entry[2] = now
            if changed is None:
                changed = [key]
            else:
                changed.append(key)
    if changed is None:
        return _NOTHING
    if len(changed) == 1 and changed[0] == "iteration":
        return _ITERATION
    return frozenset(changed)


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
    return shorten(f"{type(e).__name__}: {e}", 300)


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
