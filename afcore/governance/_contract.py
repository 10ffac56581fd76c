"""The answer's contract: the shape the final answer must have (a pydantic model or a JSON
Schema), the instruction that tells the model so, the check of an answer against it, and
the fallback tiers of a typed run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter, ValidationError

from afcore.errors import OutputSchemaError, UsageError
from afcore.messages import Source, SystemSegment
from afcore.recording._models import OutputSchemaInfo, trusted

__all__ = ["NO_CANNED", "OutputContract"]

_info = trusted(OutputSchemaInfo)
SOURCE = Source(kind="output_schema", id="output_schema")
"""Where the instruction comes from, as the recording names it."""
NO_CANNED: Any = object()

Problems = list[dict[str, str]]


class OutputContract:
    """What ``.output_schema()`` and ``.output_fallback()`` declared."""

    def __init__(
        self,
        schema: type[BaseModel] | Mapping[str, Any],
        *,
        retries: int,
        instruction: str | None,
    ) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise UsageError(f"output_schema(retries=...) takes 0 to 100, got {retries!r}")
        if instruction is not None and (not isinstance(instruction, str) or not instruction):
            raise UsageError("output_schema(instruction=...) takes the instruction's text")
        self.model: type[BaseModel] | None = None
        self._validator: Any = None
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            self.model = schema
            self._adapter: TypeAdapter[Any] = TypeAdapter(schema)
            self.json_schema: dict[str, Any] = schema.model_json_schema()
            self.name = schema.__name__
        elif isinstance(schema, Mapping):
            import jsonschema

            self.json_schema = dict(schema)
            try:
                cls = jsonschema.validators.validator_for(self.json_schema)
                cls.check_schema(self.json_schema)
            except jsonschema.SchemaError as e:
                raise UsageError(
                    f"output_schema(...) was given an invalid JSON Schema: {e.message}"
                ) from None
            self._validator = cls(self.json_schema)
            title = self.json_schema.get("title")
            self.name = title if isinstance(title, str) and title else "output"
        else:
            raise UsageError(
                "output_schema(...) takes a pydantic model class or a JSON Schema (a dict), "
                f"got {type(schema).__name__}"
            )
        self.retries = retries
        self.instruction = instruction or _instruction(self.json_schema)
        self.segment = SystemSegment(self.instruction, SOURCE)
        self.fallback: Callable[[OutputSchemaError, str], Any] | None = None
        self.canned: Any = NO_CANNED

    def set_fallback(self, fallback: Callable[..., Any] | None, canned: Any) -> None:
        """``.output_fallback(...)``: the canned value is checked now, so a net that would
        fail exactly when it is needed is refused where it is written."""
        if fallback is None and canned is NO_CANNED:
            raise UsageError("output_fallback(...) takes fallback=, canned=, or both")
        if fallback is not None and not callable(fallback):
            raise UsageError("output_fallback(fallback=...) takes a function (error, raw)")
        if canned is not NO_CANNED:
            value, problems = self.validate(canned)
            if problems:
                said = "; ".join(f"{p['path']}: {p['message']}" for p in problems[:3])
                raise UsageError(
                    f"output_fallback(canned=...) does not hold to the schema {self.name}: {said}"
                )
            canned = value
        self.fallback, self.canned = fallback, canned

    def describe(self) -> OutputSchemaInfo:
        return _info(
            name=self.name,
            json_schema=self.json_schema,
            retries=self.retries,
            fallback=self.fallback is not None,
            canned=self.canned is not NO_CANNED,
        )

    def check(self, text: str) -> tuple[Any, Problems]:
        """The typed value of an answer, or the problems that keep it from being one."""
        parsed = _parse(text)
        if parsed is _NOT_JSON:
            return None, [{"path": "$", "message": "the answer is not JSON"}]
        return self.validate(parsed)

    def validate(self, value: Any) -> tuple[Any, Problems]:
        """``value`` (JSON, or a model instance) as the schema types it, or its problems."""
        if self.model is not None:
            try:
                if isinstance(value, BaseModel):
                    value = value.model_dump(mode="json")
                return self._adapter.validate_python(value), []
            except ValidationError as e:
                return None, [
                    {"path": _path(err["loc"]), "message": err["msg"]} for err in e.errors()
                ]
        try:
            plain = orjson.loads(orjson.dumps(value))
        except (TypeError, orjson.JSONEncodeError):
            return None, [{"path": "$", "message": f"{type(value).__name__} is not JSON"}]
        problems = [
            {"path": _path(err.absolute_path), "message": err.message}
            for err in sorted(self._validator.iter_errors(plain), key=lambda e: list(e.path))
        ]
        return (None, problems) if problems else (plain, [])

    def correction(self, problems: Problems) -> str:
        """What a failed answer is sent back with."""
        listed = "\n".join(f"- {p['path']}: {p['message']}" for p in problems[:20])
        more = f"\n- ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        return (
            f"Your answer does not match the required JSON Schema ({self.name}):\n"
            f"{listed}{more}\nAnswer again with only the corrected JSON."
        )

    async def call_fallback(self, error: OutputSchemaError, raw: str) -> Any:
        assert self.fallback is not None
        value = self.fallback(error, raw)
        if inspect.isawaitable(value):
            value = await value
        return value


@dataclass(frozen=True)
class _NotJson:
    pass


_NOT_JSON = _NotJson()


def _parse(text: str) -> Any:
    """An answer's JSON: the whole text, or the one fenced block it consists of."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```") and body.count("```") == 2:
        body = body[3:-3]
        first, _, rest = body.partition("\n")
        body = rest if first.strip().isalpha() or not first.strip() else body
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _NOT_JSON


def _path(loc: Any) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _instruction(schema: dict[str, Any]) -> str:
    text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode()
    return (
        "Give your final answer as a single JSON value that matches this JSON Schema, with "
        f"no other text before or after it:\n{text}"
    )
