"""Tools: a schema the model sees and a function that runs when the model calls it."""

from __future__ import annotations

import inspect
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

import jsonschema
import orjson
from jsonschema.protocols import Validator

from afcore.errors import UsageError
from afcore.messages import ToolSpec
from afcore.tools._assume import check_ask_or_assume, served_schema
from afcore.tools._ceiling import ResultCeiling
from afcore.tools._quick_check import quick_check

__all__ = ["Tool", "ToolContext", "ToolValidation", "define_tool"]

ToolValidation: TypeAlias = Literal["enforce", "warn", "off"]
Execute: TypeAlias = Callable[[dict[str, Any], "ToolContext"], Any | Awaitable[Any]]


@dataclass
class ToolContext:
    """What a running tool knows about the call it answers."""

    run_id: str
    iteration: int
    call_id: str
    tool: str
    state: dict[str, Any]
    """Values the application shares across the run (the same dict for every tool call)."""
    _progress: Callable[[Any], None] = field(repr=False, default=lambda _m: None)
    redaction: Any = None
    """The redaction policy the calling run is covered by (a compiled policy), to hand on to
    anything the tool records of its own (an agent called as a tool)."""
    _link: Callable[[Any], None] = field(repr=False, default=lambda _r: None)
    _now: Callable[[], datetime] = field(repr=False, default=lambda: datetime.now(UTC))
    _random: Callable[[], random.Random] = field(repr=False, default=random.Random)

    def progress(self, payload: Any) -> None:
        """Report progress of a long-running tool: ``payload`` is plain JSON (a dict, a
        string, ...), recorded verbatim as a ``tool_progress`` event between the tool's
        start and its end. A top-level ``message`` string is what a person is shown (cut at
        120 characters). Never part of what the model reads; never raises."""
        try:
            self._progress(payload)
        except Exception:  # a report is telemetry: it never changes what the tool does
            pass

    def now(self) -> datetime:
        """The time, in UTC, from the run's recorded clock: written to the recording when
        read, and served back by a replay (``time.time()`` would make a replay differ)."""
        return self._now()

    @property
    def random(self) -> random.Random:
        """This call's random source, seeded from the run's recorded seed: a replay draws
        the same numbers (the global ``random`` would make it differ)."""
        return self._random()


@dataclass(frozen=True)
class Tool:
    """A tool the agent can offer the model. Build one with :func:`define_tool`."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    execute: Execute
    is_async: bool
    validator: Validator = field(repr=False, compare=False)
    spec: ToolSpec = field(repr=False, compare=False)
    source: str | None = None
    """Where the tool comes from when it is not this program's code (``mcp:<server>``)."""
    result_ceiling: ResultCeiling | None = None
    """The most result text the model may be served; over it, a refusal, never a cut."""
    ask_or_assume: Mapping[str, Any] = field(default_factory=dict)
    """Argument -> the value a call that leaves it out runs with, recorded as assumed."""
    quick_check: Callable[[Any], bool] | None = field(default=None, repr=False, compare=False)
    """Says quickly that arguments hold to the schema, for the schemas it can (None: the
    validator judges every call)."""


def define_tool(
    name: str,
    description: str,
    input_schema: Mapping[str, Any],
    execute: Execute,
    *,
    strict: bool = False,
    result_ceiling: ResultCeiling | None = None,
    ask_or_assume: Mapping[str, Any] | None = None,
    source: str | None = None,
) -> Tool:
    """Define a tool.

    ``execute(args, ctx)`` may be sync or async; what it returns is what the model reads
    (a string as it is, anything else as JSON). An exception it raises becomes an error
    result the model reads, and the run goes on; a refusal from ``absent()``,
    ``coverage()`` or ``described_result()`` is read as it is, starting ``refused:``.
    ``input_schema`` is a JSON Schema that the arguments are validated against before
    ``execute`` runs.

    ``strict=True`` asks the vendor to make the model's arguments follow the schema
    exactly (``strict`` on the tool, for Anthropic and OpenAI-compatible servers); the
    vendor then holds the schema to its rules for strict schemas (OpenAI's want
    ``additionalProperties: false`` and every property required) and refuses the call
    when it breaks them. af validates the arguments either way.

    ``result_ceiling``: :class:`ResultCeiling` (``max_chars``, ``narrow_by``), the size
    over which the model reads a refusal naming the arguments to narrow by.
    ``ask_or_assume``: ``{argument: {"assume": value}}``, a default for an argument the
    model may leave out: the library fills it, records it as assumed, and tells the model
    in one note; the model is served the schema with that argument optional, and
    arguments are validated against ``input_schema`` as written. ``source`` names where a
    tool not written here comes from.
    """
    if not isinstance(name, str) or not name or len(name) > 128:
        raise UsageError(f"define_tool(): name must be a non-empty string, got {name!r}")
    if not isinstance(description, str):
        raise UsageError(f"define_tool({name!r}): description must be a string")
    if not isinstance(input_schema, Mapping):
        raise UsageError(f"define_tool({name!r}): input_schema must be a JSON Schema object")
    if not callable(execute):
        raise UsageError(f"define_tool({name!r}): execute must be callable as execute(args, ctx)")
    if not isinstance(strict, bool):
        raise UsageError(f"define_tool({name!r}): strict is True or False, got {strict!r}")
    schema = dict(input_schema)
    try:
        orjson.dumps(schema)
    except TypeError as e:
        raise UsageError(f"define_tool({name!r}): input_schema is not JSON ({e})") from None
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        raise UsageError(
            f"define_tool({name!r}): input_schema is not a valid JSON Schema at {where}: "
            f"{e.message[:200]}"
        ) from None
    if schema.get("type", "object") != "object":
        raise UsageError(f"define_tool({name!r}): input_schema must describe an object")
    if result_ceiling is not None:
        if not isinstance(result_ceiling, ResultCeiling):
            raise UsageError(
                f"define_tool({name!r}): result_ceiling takes ResultCeiling(max_chars=..., "
                f"narrow_by=[...]), got {type(result_ceiling).__name__}"
            )
        result_ceiling.check_against(name, schema)
    rules = check_ask_or_assume(name, schema, ask_or_assume) if ask_or_assume else {}
    if source is not None and (not isinstance(source, str) or not source):
        raise UsageError(f"define_tool({name!r}): source names where the tool comes from")
    return Tool(
        name=name,
        description=description,
        input_schema=schema,
        execute=execute,
        is_async=inspect.iscoroutinefunction(execute)
        or inspect.iscoroutinefunction(getattr(execute, "__call__", None)),  # noqa: B004
        validator=cls(schema),
        quick_check=quick_check(schema) if cls is jsonschema.Draft202012Validator else None,
        spec=ToolSpec(
            name=name,
            description=description,
            input_schema=served_schema(schema, rules) if rules else schema,
            strict=strict,
        ),
        source=source,
        result_ceiling=result_ceiling,
        ask_or_assume=rules,
    )
