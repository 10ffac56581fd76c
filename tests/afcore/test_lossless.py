"""Values JSON cannot carry as they are (an integer past 64 bits, a lone surrogate) do not
end a run: the model reads them as JSON writes them, the recording holds them in its
documented lossless form, and every call verifies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from afcore import Agent, define_tool, mock
from afcore import recording as rec
from afcore.recording._lossless import lossless
from tests.conftest import fixed_recording

BIG = 2**70


def _run(tmp_path: Path, execute: Any, args: dict[str, Any]) -> Path:
    tool = define_tool("odd", "Odd values.", {"type": "object"}, execute)
    replies = [{"tool_calls": [{"id": "c1", "name": "odd", "args": args}]}, {"content": "done"}]
    agent = (
        Agent.create(provider=mock(replies=replies), model="m", record=fixed_recording(tmp_path))
        .tool(tool)
        .build()
    )
    assert agent.run("go") == "done"
    assert agent.last_recording is not None
    return Path(agent.last_recording)


def test_a_tool_returning_a_big_integer_and_a_lone_surrogate(tmp_path: Path) -> None:
    got: list[Any] = []

    def odd(args: Any, ctx: Any) -> Any:
        got.append(args)
        return {"n": BIG, "name": "a\ud800b"}

    path = _run(tmp_path, odd, {"x": BIG, "s": "q\udc80"})
    assert got == [{"x": BIG, "s": "q\udc80"}], "the tool gets the model's values as they are"
    with rec.open_recording(path) as r:
        report = rec.verify(r)
        assert report.ok, report.problems
        assert report.verified == 2
        # The model read the result as JSON text writes it: the integer whole, the escape.
        result = r.message(3)
        assert result["role"] == "tool"
        assert f'"n": {BIG}' in result["content"] and "a\\ud800b" in result["content"]
        # The model's arguments, in the lossless form.
        (reply,) = [b for b in r.message(2)["content"] if b.get("type") == "tool_call"]
        assert reply["args"] == {"x": {"$af:int": str(BIG)}, "s": {"$af:str": ["q", 0xDC80]}}


def test_the_lossless_form() -> None:
    assert lossless({"a": [BIG, -BIG, 2**64 - 1, -(2**63)]}) == {
        "a": [{"$af:int": str(BIG)}, {"$af:int": str(-BIG)}, 2**64 - 1, -(2**63)]
    }
    assert lossless("\ud800x\udfff") == {"$af:str": [0xD800, "x", 0xDFFF]}
    # An object of the value's own that looks like one of the forms is wrapped, not taken.
    assert lossless({"$af:int": "7"}) == {"$af:obj": {"$af:int": "7"}}
    assert lossless({"k": 1, "$af:int": "7"}) == {"k": 1, "$af:int": "7"}
    # Plain JSON is left as it is, and the result is always JSON.
    plain = {"a": [1, "b", None, True, 1.5]}
    assert lossless(plain) == plain
    orjson.dumps(lossless({"x": [BIG, "\udc80", {"\ud800": 1}]}))
