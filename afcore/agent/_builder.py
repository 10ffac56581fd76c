"""Building an agent: ``Agent.create(...)`` then ``.system()``, ``.tool()``, ``.build()``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar, get_args

from afcore.errors import UsageError
from afcore.governance._contract import NO_CANNED, OutputContract
from afcore.governance._rules import Governance
from afcore.governance._verbs import hooks_of, link_name
from afcore.injections._engine import InjectionEngine
from afcore.injections._model import (
    Cache,
    ConfigureContext,
    Content,
    Injection,
    Slot,
    fact,
    instruction,
    skill,
    skills_of,
    steering,
)
from afcore.injections._view import RunView
from afcore.messages import SystemSegment
from afcore.providers._base import Provider
from afcore.recording._config import RecordingConfig
from afcore.recording._writer import Watcher, Watchers
from afcore.reliability._policy import (
    MAX_ATTEMPTS,
    CircuitBreaker,
    ProviderSpec,
    Reliability,
    ReliabilityRule,
)
from afcore.reliability._policy import build as build_reliability
from afcore.tools._ceiling import truncate_result
from afcore.tools._providers import ToolProvider
from afcore.tools._tool import Tool, ToolValidation
from afcore.window._strategies import WindowStrategy, summarize_oldest

__all__ = ["AgentBuilder"]

MAX_ITERATIONS_CAP = 10_000

_A = TypeVar("_A")


class AgentBuilder(Generic[_A]):
    """Collects an agent's parts; ``build()`` checks them and returns the agent, made by
    ``make`` from them (``Agent.create(...)`` passes the class it was called on: a subclass of
    :class:`Agent` builds itself).

    Mistakes are caught here, where the developer can see them, rather than mid-run.
    """

    def __init__(
        self,
        *,
        make: Callable[..., _A],
        provider: Provider,
        model: str,
        max_iterations: int,
        record: bool | str | Path | RecordingConfig,
        name: str | None,
        tool_arg_validation: ToolValidation,
        params: Mapping[str, Any] | None,
        source: str | None,
        sessions: Any = None,
        max_tool_result_chars: int | None = None,
        repeated_call_nudge: bool = True,
    ) -> None:
        if not isinstance(provider, Provider):
            raise UsageError(
                f"Agent.create(provider=...) needs a provider such as mock(...), "
                f"got {type(provider).__name__}"
            )
        if not isinstance(model, str) or not model:
            raise UsageError("Agent.create(model=...) needs the model's name as a string")
        if (
            isinstance(max_iterations, bool)
            or not isinstance(max_iterations, int)
            or not 1 <= max_iterations <= MAX_ITERATIONS_CAP
        ):
            raise UsageError(
                f"Agent.create(max_iterations=...) must be an integer from 1 to "
                f"{MAX_ITERATIONS_CAP}, got {max_iterations!r}"
            )
        if tool_arg_validation not in get_args(ToolValidation):
            raise UsageError(
                "Agent.create(tool_arg_validation=...) must be 'enforce', 'warn' or 'off', "
                f"got {tool_arg_validation!r}"
            )
        if max_tool_result_chars is not None:
            truncate_result("", "", max_tool_result_chars)  # refuses a cap it cannot keep
        if not isinstance(repeated_call_nudge, bool):
            raise UsageError(
                "Agent.create(repeated_call_nudge=...) is True or False, "
                f"got {repeated_call_nudge!r}"
            )
        self._max_result = max_tool_result_chars
        self._nudge = repeated_call_nudge
        self._limits_travel = False
        self._make = make
        self._provider = provider
        self._model = model
        self._max_iterations = max_iterations
        self._recording = _recording_config(record)
        self._name = name
        self._validation = tool_arg_validation
        self._params = dict(params or {})
        self._source = source
        self._sessions = _sessions_spec(sessions)
        self._system: list[SystemSegment] = []
        self._tools: dict[str, Tool] = {}
        self._injections: list[Injection] = []
        self._providers: list[ToolProvider] = []
        self._configure: Callable[[ConfigureContext], Any] | None = None
        self._window: WindowStrategy | None = None
        self._reliability: Reliability | None = None
        self._tool_links: list[Any] = []
        self._message_links: list[Any] = []
        self._contract: OutputContract | None = None
        self._fallback: tuple[Callable[..., Any] | None, Any] | None = None
        self._watchers: list[Watcher] = []
        self._acted = False

    def name(self, name: str) -> Self:
        """The agent's name, shown in recordings and `af ls`."""
        if not isinstance(name, str) or not name.strip():
            raise UsageError("name(...) needs a non-empty string")
        self._name = name
        return self

    def system(self, text: str) -> Self:
        """Add a segment to the system prompt. Segments are sent in the order added."""
        if not isinstance(text, str):
            raise UsageError(f"system(...) takes a string, got {type(text).__name__}")
        self._system.append(SystemSegment(text))
        return self

    def tool(self, tool: Tool) -> Self:
        """Offer a tool to the model. A second tool with the same name is refused here."""
        if not isinstance(tool, Tool):
            raise UsageError(
                f"tool(...) takes a tool made by define_tool(...), got {type(tool).__name__}"
            )
        if tool.name in self._tools:
            raise UsageError(
                f"duplicate tool name {tool.name!r}: a tool by that name is already registered"
            )
        self._tools[tool.name] = tool
        return self

    def tools(self, tools: Iterable[Tool]) -> Self:
        """Offer several tools; each goes through :meth:`tool`."""
        for t in tools:
            self.tool(t)
        return self

    # -- context engineering: every door goes through injection() -------------------------

    def injection(self, injection: Injection) -> Self:
        """Register any injection: the general door the others go through. Ids are checked for
        uniqueness, and skills' tools against the static tools, at build()."""
        if not isinstance(injection, Injection):
            raise UsageError(f"injection(...) takes an Injection, got {type(injection).__name__}")
        self._injections.append(injection)
        return self

    def steering(self, text: Content, *, id: str | None = None, cache: Cache = "always") -> Self:
        """Always-on guidance in the system prompt."""
        return self.injection(steering(text, id=id, cache=cache))

    def instruction(
        self,
        text: Content,
        *,
        id: str,
        when: Callable[[RunView], bool] | None = None,
        after: str | re.Pattern[str] | None = None,
        slot: Slot = "messages",
        cache: Cache = "never",
        pure: bool = True,
    ) -> Self:
        """Guidance that lands when ``when(s)`` is true, or at the iteration after the tool
        named (or matched) by ``after`` returned. Exactly one of the two. A rule runs again
        only when a value it read through ``s`` changed; ``pure=False`` runs it at every
        iteration (for rules that also read a clock or a global)."""
        return self.injection(
            instruction(text, id=id, when=when, after=after, slot=slot, cache=cache, pure=pure)
        )

    def fact(
        self, text: Content, *, id: str, slot: Slot = "system", cache: Cache | None = None
    ) -> Self:
        """Data the model should see; a function is evaluated at every iteration."""
        return self.injection(fact(text, id=id, slot=slot, cache=cache))

    def skill(
        self,
        id: str,
        *,
        description: str,
        body: Content,
        tools: Sequence[Tool] = (),
        slot: Slot = "messages",
    ) -> Self:
        """A skill the model activates with read_skill(id): its body lands and its tools
        become visible from the next call, for the rest of the turn."""
        return self.injection(skill(id, description=description, body=body, tools=tools, slot=slot))

    def skills(self, registry: Iterable[Injection]) -> Self:
        """Register several skills made by ``skill(...)``."""
        for s in skills_of(registry):
            self.injection(s)
        return self

    def tool_provider(self, provider: ToolProvider) -> Self:
        """A source of tools consulted at every iteration (``static_tools``, ``gated_tools``,
        or anything with a ``name`` and ``tools(ctx)``)."""
        if not isinstance(provider, ToolProvider):
            raise UsageError(
                "tool_provider(...) takes an object with a name and tools(ctx), such as "
                f"static_tools(...) or gated_tools(...); got {type(provider).__name__}"
            )
        self._providers.append(provider)
        return self

    def limits_travel_with_the_answer(self) -> Self:
        """Append to the answer the limits the tools declared during the run (what they
        checked, did not check, cannot cover, found still running, the periods their reads
        covered, and the values their rules assumed), duplicates said once, under a heading
        that says the tools declared them, not the model. With an output schema the answer
        stays as the model sent it and the same limits come back as data
        (``result.answer_coverage``). The recording keeps every declaration either way."""
        self._limits_travel = True
        return self

    def configure(self, fn: Callable[[ConfigureContext], Any]) -> Self:
        """Decide each run's model and/or instructions when it starts: ``fn(ctx)`` returns
        None or ``{"model": ..., "instructions": ...}``. What it decided is committed to the
        recording before the first call. One per agent."""
        if not callable(fn):
            raise UsageError("configure(...) takes a function of the run's context")
        if self._configure is not None:
            raise UsageError("configure(...) was already given: an agent has one resolver")
        self._configure = fn
        return self

    def thinking(self, *, budget: int) -> Self:
        """Ask the model to think before it answers, with up to ``budget`` tokens (providers
        that support it; the thinking is recorded with its signature and sent back as the
        vendor requires). ``max_tokens`` is raised above the budget when it is not."""
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1024:
            raise UsageError(f"thinking(budget=...) takes a token count >= 1024, got {budget!r}")
        self._params["thinking"] = budget
        max_tokens = self._params.get("max_tokens")
        if not isinstance(max_tokens, int) or max_tokens <= budget:
            self._params["max_tokens"] = budget + 4096
        return self

    def window(self, strategy: WindowStrategy) -> Self:
        """Keep the live context window in budget with ``strategy``: ``sliding_window(...)``,
        ``token_budget(...)`` or ``summarize_oldest(...)``. One per agent. Messages that
        leave the window stay in the recording; each fold is recorded."""
        if not isinstance(strategy, WindowStrategy):
            raise UsageError(
                "window(...) takes a strategy made by sliding_window(...), token_budget(...) "
                f"or summarize_oldest(...), got {type(strategy).__name__}"
            )
        if self._window is not None:
            raise UsageError(
                f"this agent already keeps its window with {self._window.name}; an agent has "
                f"one window strategy, and {strategy.name} would be a second"
            )
        self._window = strategy
        return self

    def compaction(
        self,
        *,
        threshold_tokens: int,
        summarizer: Provider,
        model: str | None = None,
        keep_recent_turns: int = 2,
    ) -> Self:
        """Over ``threshold_tokens`` counted input tokens, fold the oldest turns into one
        summary written by ``summarizer``: ``window(summarize_oldest(...))``, spelled shorter,
        and the same agent to the byte."""
        return self.window(
            summarize_oldest(
                threshold_tokens=threshold_tokens,
                summarizer=summarizer,
                model=model,
                keep_recent_turns=keep_recent_turns,
            )
        )

    def reliability(
        self,
        *,
        pre_check: Sequence[ReliabilityRule] = (),
        post_decide: Sequence[ReliabilityRule] = (),
        providers: Sequence[ProviderSpec] = (),
        circuit_breaker: CircuitBreaker | None = None,
        fallback: ProviderSpec | None = None,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> Self:
        """Make each model call as a series of attempts, decided by rules made with
        ``rule(when, then)``: ``pre_check`` rules before each attempt, ``post_decide`` rules
        after it. ``providers`` are tried in turn after the agent's own (``retry_other``),
        ``fallback`` once (``fallback``); each is a provider, a ``provider:model`` id or a
        ``(provider, model)`` pair. ``circuit_breaker(...)`` skips a provider that keeps
        failing. A call takes at most ``max_attempts`` attempts. Every attempt is recorded
        as a call with its outcome. One per agent."""
        if self._reliability is not None:
            raise UsageError("reliability(...) was already given: an agent has one set of rules")
        self._reliability = build_reliability(
            pre_check=pre_check,
            post_decide=post_decide,
            providers=providers,
            breaker=circuit_breaker,
            fallback=fallback,
            max_attempts=max_attempts,
        )
        return self

    # -- governance: what the agent may do at each moment, and what its answer must be ---

    def tool_middleware(self, *links: Any) -> Self:
        """Wrap every tool call in a chain of links. A link has a ``name`` and
        ``on_tool_call(call)`` (before the tool runs: ``allow()``, ``allow(args, why)``,
        ``deny(reason)`` or ``ask(question)``) and/or ``on_tool_result(result)`` (before
        the model reads what it returned: ``allow()``, ``allow(value, why)`` or
        ``deny(reason)``). Calls walk the links in the order given, each seeing what the one
        before left, and the first answer other than ``allow`` wins; results walk them
        backwards, so the first link has the first word on a call and the last on its
        result. A denial's reason is what the model reads, and the run goes on; ``ask``
        pauses the run for a person. A link that raises denies, carrying the error. Every
        decision is recorded. Called again, the links are added after these."""
        for link in links:
            name = link_name(link, "tool_middleware(...)")
            hooks = hooks_of(link)
            if "on_tool_call" not in hooks and "on_tool_result" not in hooks:
                raise UsageError(
                    f"tool_middleware(...): link {name!r} has neither on_tool_call nor "
                    "on_tool_result"
                )
            if any(link is known for known in self._tool_links):
                continue  # the same link given twice is attached once
            self._tool_links.append(link)
        return self

    def message_middleware(self, *links: Any) -> Self:
        """Wrap the run's boundary in a chain of links, each with a ``name`` and
        ``on_message(text, phase)``: the user's message (``input``) before the run commits
        it, so that every later stage, call and slice sees what the chain left, and the
        answer (``output``) before the caller receives it. A link answers ``allow()``,
        ``allow(text, why)`` or ``deny(reason)``; a denial raises ``MessageDeniedError``
        (with the reason, the phase and the link's name, never the refused text), and a
        denied answer is never asked for again. Every decision is recorded."""
        for link in links:
            name = link_name(link, "message_middleware(...)")
            if "on_message" not in hooks_of(link):
                raise UsageError(f"message_middleware(...): link {name!r} has no on_message")
            if any(link is known for known in self._message_links):
                continue
            self._message_links.append(link)
        return self

    def act(
        self,
        *,
        input: Sequence[Any] = (),
        before_tool: Sequence[Any] = (),
        after_tool: Sequence[Any] = (),
        window: WindowStrategy | None = None,
        output: Sequence[Any] = (),
        **unknown: Any,
    ) -> Self:
        """Everything the agent does about its own loop, in one block, one key per moment of
        a turn: ``input`` (the user's message), ``before_tool`` (each call), ``after_tool``
        (each result), ``window`` (the live window), ``output`` (the answer). Sugar for
        ``message_middleware(*input, *output)``, ``tool_middleware(*before_tool,
        *after_tool)`` and ``window(window)``: the agent it builds sends and records the
        same bytes. A link runs where its hooks say, whichever key it was filed under, and
        a link filed under both tool keys is attached once; but a link without the hook its
        key names is refused, by name. Once per agent: the individual doors stay open for
        adding to it."""
        if unknown:
            raise UsageError(
                f"act(...) has no key {', '.join(map(repr, sorted(unknown)))}; its keys are "
                "input, before_tool, after_tool, window and output"
            )
        if self._acted:
            raise UsageError(
                "act(...) was already given: an agent's posture is said in one block (add a "
                "single link with tool_middleware(...) or message_middleware(...))"
            )
        needs = {
            "input": "on_message",
            "output": "on_message",
            "before_tool": "on_tool_call",
            "after_tool": "on_tool_result",
        }
        given = {"input": input, "before_tool": before_tool, "after_tool": after_tool}
        given["output"] = output
        for key, links in given.items():
            if isinstance(links, str | bytes) or not isinstance(links, Sequence):
                raise UsageError(f"act({key}=...) takes a list of links")
            for link in links:
                name = link_name(link, f"act({key}=...)")
                if needs[key] not in hooks_of(link):
                    raise UsageError(
                        f"act({key}=...): link {name!r} has no {needs[key]}, so it would never "
                        f"run at {key}"
                    )
        self._acted = True
        self.message_middleware(*input, *output)
        self.tool_middleware(*before_tool, *after_tool)
        if window is not None:
            self.window(window)
        return self

    def output_schema(
        self,
        schema: Any,
        *,
        retries: int = 0,
        instruction: str | None = None,
    ) -> Self:
        """Hold the final answer to a shape: a pydantic model class or a JSON Schema (a
        dict). The system prompt gets an instruction naming it (its source:
        ``output_schema``; ``instruction=`` replaces the text), each answer is checked in the
        loop and the check recorded, and a failed answer is sent back with its errors up to
        ``retries`` times. ``agent.run_typed(...)`` returns the validated value (or raises
        ``OutputSchemaError``); ``run()`` returns the answer as the model gave it, and its
        ``last_result.output`` says whether it met the schema. One per agent."""
        if self._contract is not None:
            raise UsageError("output_schema(...) was already given: an agent has one contract")
        self._contract = OutputContract(schema, retries=retries, instruction=instruction)
        return self

    def output_fallback(
        self, *, fallback: Callable[..., Any] | None = None, canned: Any = NO_CANNED
    ) -> Self:
        """What a typed run gets when the answer does not meet the output schema: the value
        of ``fallback(error, raw)`` (checked against the schema again), else ``canned``
        (checked now). Each tier taken is recorded. ``run()`` never takes them: it returns
        the model's answer. Needs ``output_schema(...)``, in either order."""
        if self._fallback is not None:
            raise UsageError("output_fallback(...) was already given")
        if fallback is None and canned is NO_CANNED:
            raise UsageError("output_fallback(...) takes fallback=, canned=, or both")
        self._fallback = (fallback, canned)
        return self

    def watch(self, *observers: Watcher) -> Self:
        """Observers that see each record of every run as it is written, typed as the
        reader gives them (``Commit``, ``Call``, ``Reply``, ``ToolStart``, ...), from the
        first run on. An observer that raises is recorded and sees no more of that run;
        the run goes on. ``agent.attach(observer)`` adds one to a built agent."""
        for observer in observers:
            if not callable(observer):
                raise UsageError(
                    f"watch(...) takes functions of a record, got {type(observer).__name__}"
                )
            self._watchers.append(observer)
        return self

    def build(self) -> _A:
        # A param a provider is known to be unable to send (a thinking budget to a server
        # that takes none) is refused now rather than at the first call, or dropped unsaid.
        self._provider.check_params(self._params)
        if self._reliability is not None:
            others = [*self._reliability.providers, self._reliability.fallback]
            for target in others:
                if target is not None:
                    target.provider.check_params(self._params)
        contract = self._contract
        if self._fallback is not None:
            if contract is None:
                raise UsageError(
                    "output_fallback(...) needs output_schema(...): the tiers stand in for an "
                    "answer that fails a schema, and this agent has none"
                )
            contract.set_fallback(*self._fallback)
        engine = InjectionEngine(
            base=self._system,
            tools=list(self._tools.values()),
            injections=self._injections,
            providers=self._providers,
        )
        return self._make(
            engine=engine,
            configure_fn=self._configure,
            provider=self._provider,
            model=self._model,
            name=self._name or "agent",
            source=self._source,
            system=tuple(self._system),
            tools=dict(self._tools),
            max_iterations=self._max_iterations,
            tool_arg_validation=self._validation,
            params=self._params,
            recording=self._recording,
            window=self._window,
            reliability=self._reliability,
            sessions=self._sessions,
            governance=Governance(
                tool_links=tuple(self._tool_links),
                message_links=tuple(self._message_links),
                contract=contract,
            ),
            watchers=Watchers(self._watchers),
            max_tool_result_chars=self._max_result,
            repeated_call_nudge=self._nudge,
            limits_travel=self._limits_travel,
        )


def _sessions_spec(sessions: Any) -> Any:
    """``Agent.create(sessions=...)``, checked now; the store itself opens at first use."""
    if sessions is None:
        return None
    from afcore.sessions import check_store_spec

    return check_store_spec(sessions)


def _recording_config(record: bool | str | Path | RecordingConfig) -> RecordingConfig | None:
    if record is False:
        return None
    if record is True:
        return RecordingConfig()
    if isinstance(record, RecordingConfig):
        return record
    if isinstance(record, str | Path):
        if not str(record):
            raise UsageError("Agent.create(record=...) was given an empty folder name")
        return RecordingConfig(dir=Path(record))
    raise UsageError(
        f"Agent.create(record=...) takes True, False, a folder or a RecordingConfig, got {record!r}"
    )
