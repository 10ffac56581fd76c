from __future__ import annotations

from typing import Any

import orjson
import pytest

from afcore import Agent, UsageError, define_tool, mock
from afcore.messages import Request
from afcore.tools import validate_args

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["C", "F"]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "stops": {
            "type": "array",
            "items": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}


def tool(execute: Any = None) -> Any:
    return define_tool("trip", "Plan a trip.", SCHEMA, execute or (lambda a, c: "planned"))


@pytest.mark.parametrize(
    "args, path, words",
    [
        ({}, "$", "missing required argument 'city'"),
        ({"city": 5}, "$.city", "expected string, got integer"),
        ({"city": "Rome", "days": 40}, "$.days", "maximum 14"),
        ({"city": "Rome", "unit": "K"}, "$.unit", 'one of ["C","F"]'),
        ({"city": "Rome", "code": "abc"}, "$.code", "matching '^[A-Z]{3}$'"),
        ({"city": "Rome", "stops": [{"n": 1}, {"n": "x"}]}, "$.stops[1].n", "expected integer"),
        ({"city": "Rome", "extra": 1}, "$", 'unexpected argument "extra"'),
        ({"city": "R"}, "$.city", "minLength 2"),
    ],
)
def test_problems_name_the_path_and_what_was_expected(args: Any, path: str, words: str) -> None:
    problems = validate_args(tool(), args)
    assert problems, args
    assert problems[0].path == path
    assert words in problems[0].message


def test_a_long_bad_value_is_never_echoed_beyond_a_short_prefix() -> None:
    secretish = "A" * 5000
    for args in (
        {"city": 12, "code": secretish},
        {"city": ["x" * 5000]},
        {"city": "Rome", "unit": secretish},
    ):
        text = " ".join(p.message for p in validate_args(tool(), args))
        assert "A" * 41 not in text and "x" * 41 not in text, text


def test_not_an_object() -> None:
    assert (
        validate_args(tool(), ["city"])[0].message == "expected an object of arguments, got array"
    )


def test_define_tool_refuses_a_broken_schema_naming_the_tool() -> None:
    with pytest.raises(UsageError, match=r"define_tool\('bad'\).*properties"):
        define_tool(
            "bad",
            "d",
            {"type": "object", "properties": {"x": {"type": "nonsense"}}},
            lambda a, c: "",
        )
    with pytest.raises(UsageError, match="must describe an object"):
        define_tool("bad", "d", {"type": "string"}, lambda a, c: "")
    with pytest.raises(UsageError, match="callable"):
        define_tool("bad", "d", {"type": "object"}, "not a function")  # type: ignore[arg-type]


def run_with(mode: str, args: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]], Any]:
    ran: list[Any] = []
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return {"tool_calls": [{"id": "t1", "name": "trip", "args": args}]}
        seen.append(request.messages[-1])
        return "ok"

    agent = (
        Agent.create(provider=mock(respond=respond), model="m", tool_arg_validation=mode)  # type: ignore[arg-type]
        .tool(tool(lambda a, c: ran.append(a) or "planned"))
        .build()
    )
    agent.run("go")
    assert agent.last_recording is not None
    lines = [orjson.loads(x) for x in agent.last_recording.read_bytes().splitlines()]
    return ran, lines, seen[0]


def test_enforce_refuses_the_call_and_tells_the_model() -> None:
    ran, lines, result = run_with("enforce", {"city": 7})
    assert ran == []
    assert result.is_error and "at $.city: expected string" in result.content
    assert "call trip again" in result.content
    event = next(r for r in lines if r["t"] == "args_invalid")
    assert event["enforced"] is True and event["problems"][0]["path"] == "$.city"
    assert next(r for r in lines if r.get("tool"))["tool"]["status"] == "rejected"


def test_warn_runs_the_call_and_records_the_problem() -> None:
    ran, lines, result = run_with("warn", {"city": 7})
    assert ran == [{"city": 7}] and result.content == "planned" and not result.is_error
    assert next(r for r in lines if r["t"] == "args_invalid")["enforced"] is False


def test_off_skips_validation() -> None:
    ran, lines, _ = run_with("off", {"city": 7})
    assert ran == [{"city": 7}]
    assert not any(r["t"] == "args_invalid" for r in lines)


def test_results_that_are_not_strings_reach_the_model_as_json() -> None:
    seen: list[Any] = []

    def respond(request: Request) -> Any:
        if len(request.messages) == 1:
            return {"tool_calls": [{"id": "t1", "name": "data", "args": {}}]}
        seen.append(request.messages[-1].content)  # type: ignore[union-attr]
        return "ok"

    data = define_tool("data", "d", {"type": "object"}, lambda a, c: {"rows": [1, 2], "ok": True})
    Agent.create(provider=mock(respond=respond), model="m").tool(data).build().run("go")
    assert orjson.loads(seen[0]) == {"rows": [1, 2], "ok": True}
