"""The record models are the format: every line af writes is a model dumped, and reads back
as the model that dumps to the very same bytes. So are the values under the keys (folds,
injection decisions) and the slot lists."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from pydantic import BaseModel, TypeAdapter

from afcore import Agent, circuit_breaker, define_tool, mock, rule
from afcore import recording as rec
from afcore.errors import ReliabilityFailFastError, ServerError
from afcore.messages import (
    AssistantMessage,
    Message,
    Request,
    Response,
    TextBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from afcore.recording._models import (
    RECORD_ADAPTER,
    Blob,
    CallTool,
    Commit,
    ErrorInfo,
    Fold,
    InjectionDecisions,
    Reply,
    Segment,
    SlotDelta,
    UsageInfo,
    Write,
    as_json,
    dump,
    line,
    trusted,
)
from afcore.recording._writer import Recorder
from afcore.secrets import Redaction
from tests.conftest import fixed_recording

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "recordings").glob("sample-*.jsonl"))
FIXTURES = [ROOT / "tests" / "fixtures" / "v1.1" / f"{name}.jsonl" for name in ("valid", "torn")]


def lines(path: Path) -> Iterator[bytes]:
    """The file's complete, well-formed lines."""
    for raw in path.read_bytes().splitlines():
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # a torn tail
        yield raw


def assert_round_trips(path: Path) -> None:
    for raw in lines(path):
        record = RECORD_ADAPTER.validate_json(raw)
        assert dump(record) == raw, f"{path.name}: {raw[:200]!r}"


@pytest.mark.parametrize("path", SAMPLES + FIXTURES, ids=lambda p: p.name)
def test_every_line_is_its_record_dumped(path: Path) -> None:
    assert_round_trips(path)


def blobs(path: Path) -> dict[str, bytes]:
    """Blob id -> the bytes of its value, as written."""
    out = {}
    for raw in lines(path):
        if raw.startswith(b'{"t":"blob"'):
            blob = RECORD_ADAPTER.validate_json(raw)
            assert isinstance(blob, Blob)
            out[blob.id] = dump(blob.value, canonical=True)
    return out


def values(path: Path, prefix: str) -> Iterator[tuple[bytes, bool]]:
    """The bytes of every value written under a key starting with ``prefix``, and whether
    it was stored as a blob (canonical) rather than inline."""
    stored = blobs(path)
    for raw in lines(path):
        record = RECORD_ADAPTER.validate_json(raw)
        if not isinstance(record, Commit):
            continue
        for w in record.writes:
            if w.key.startswith(prefix):
                yield (stored[w.ref], True) if w.ref is not None else (dump(w.value), False)


def check_value(model: type[BaseModel], raw: bytes, canonical: bool) -> BaseModel:
    value = model.model_validate_json(raw)
    assert dump(value, canonical=canonical) == raw
    return value


def test_folds_and_injection_decisions_are_their_models() -> None:
    folds = decisions = 0
    for path in SAMPLES:
        for raw, canonical in values(path, "fold:"):
            fold = check_value(Fold, raw, canonical)
            assert isinstance(fold, Fold) and fold.count == sum(b - a + 1 for a, b in fold.messages)
            folds += 1
        for raw, canonical in values(path, "injections"):
            value = check_value(InjectionDecisions, raw, canonical)
            assert isinstance(value, InjectionDecisions)
            assert value.evaluated == len(value.decisions) + value.unchanged
            decisions += len(value.decisions)
    # The samples hold summaries, drops and refusals, and rules with their evidence.
    assert folds >= 4 and decisions >= 10


def test_slot_lists_are_lists_of_their_entries_or_deltas() -> None:
    entries: TypeAdapter[list[Segment] | list[CallTool] | SlotDelta] = TypeAdapter(
        list[Segment] | list[CallTool] | SlotDelta
    )
    seen = 0
    for path in SAMPLES:
        stored = blobs(path)
        for raw in lines(path):
            record = RECORD_ADAPTER.validate_json(raw)
            if record.t != "call" or not record.system:  # type: ignore[union-attr]
                continue  # not a call, or (1.1) one with the slots of the call before
            for ref in (record.system, record.tools):  # type: ignore[union-attr]
                value = entries.validate_json(stored[ref])
                assert dump(value, canonical=True) == stored[ref]
                seen += 1
    assert seen


def test_a_run_with_attempts_and_a_fail_fast_round_trips(tmp_path: Path) -> None:
    left: list[Any] = [ServerError("down", provider="mock", status=500)] * 2 + ["late"]

    def respond(request: Request) -> Any:
        out = left.pop(0)
        if isinstance(out, BaseException):
            raise out
        return out

    backup = mock(reply="from the backup")
    backup.name = "backup"
    agent = (
        Agent.create(provider=mock(respond=respond), model="m", record=fixed_recording(tmp_path))
        .reliability(
            post_decide=[rule(lambda s: s.error_kind == "server_error", "retry", kind="again")],
            providers=[(backup, "b-1")],
            circuit_breaker=circuit_breaker(failures=2, cooldown=30),
        )
        .build()
    )
    assert agent.run("hi") == "from the backup"
    assert agent.last_recording is not None
    assert_round_trips(agent.last_recording)
    text = agent.last_recording.read_text()
    assert '"skipped":[' in text and '"decision":{"verb":"retry","rule":"again"}' in text

    lonely = (
        Agent.create(
            provider=mock(respond=respond),
            model="m",
            record=dataclasses.replace(fixed_recording(tmp_path / "lonely"), run_id=None),
        )
        .reliability(circuit_breaker=circuit_breaker(failures=1, cooldown=30))
        .build()
    )
    left[:] = [ServerError("down", provider="mock", status=500)]
    with pytest.raises(ServerError):
        lonely.run("hi")
    with pytest.raises(ReliabilityFailFastError):
        lonely.run("again")  # the breaker is open, and no other provider is left
    assert lonely.last_recording is not None
    assert_round_trips(lonely.last_recording)
    written = lonely.last_recording.read_bytes().splitlines()
    ends = [orjson.loads(x) for x in written if not x.startswith(b'{"t":"seal"')][-2:]
    assert "call" not in ends[0] and ends[0]["attempt"] == {
        "n": 1,
        "provider": "mock",
        "via": "agent",
    }
    assert ends[1]["error"]["reason"] == "circuit-open"


def test_a_tool_loop_round_trips_line_by_line(tmp_path: Path) -> None:
    """The records of every iteration (the call, the reply, the tool's commit) are made as
    literals: each line is what its model dumps, its sparse fields only when they hold
    something, and a call that repeats its frame leaves it out."""
    replies: list[Any] = [
        Response(
            content=(ToolCall("c1", "echo", {"n": 1}),),
            stop_reason="tool_use",
            usage=Usage(3, 1),
            model="m-2024",
            response_id="resp_1",
            unsent_params=("thinking",),
        ),
        {"tool_calls": [{"id": "c2", "name": "echo", "args": {"n": 2}}]},
        "done",
    ]
    echo = define_tool(
        "echo",
        "Echo n.",
        {"type": "object", "properties": {"n": {"type": "integer"}}},
        lambda a, c: f"ok {a['n']}",
    )
    agent = (
        Agent.create(
            provider=mock(respond=lambda request: replies.pop(0)),
            model="m",
            params={"temperature": 0.1},
            record=fixed_recording(tmp_path),
        )
        .system("Count.")
        .tool(echo)
        .build()
    )
    assert agent.run("go") == "done"
    path = agent.last_recording
    assert path is not None
    assert_round_trips(path)
    records = [orjson.loads(x) for x in lines(path) if not x.startswith(b'{"t":"seal"')]
    calls = [r for r in records if r["t"] == "call"]
    assert "system" in calls[0] and all("system" not in c for c in calls[1:])
    first, *rest = [r for r in records if r["t"] == "reply"]
    assert first["model"] == "m-2024" and first["response_id"] == "resp_1"
    assert first["unsent_params"] == ["thinking"] and first["usage"]["input_tokens"] == 3
    assert all("model" not in r and "unsent_params" not in r for r in rest)
    tools = [r for r in records if r["t"] == "commit" and "tool" in r]
    assert [t["tool"]["call_id"] for t in tools] == ["c1", "c2"]


# -- the writer's side ---------------------------------------------------------------------


_MESSAGES: list[Message] = [
    ToolResultMessage("c1", "echo", "ok 1"),
    ToolResultMessage("c\u00e9", "na\u00efve", 'line\nnext "quoted" \u2028 \U0001f600'),
    ToolResultMessage("c2", "echo", "failed", is_error=True),
    AssistantMessage((ToolCall("c1", "echo", {"n": 1}),)),
    AssistantMessage((ToolCall("c2", "find", {"z": {"b": 2, "a": [3, {"y": 1, "x": 0}]}}),)),
    AssistantMessage((ToolCall("c3", "echo", {}, id_synthesized=True),)),
    AssistantMessage((TextBlock("thinking aloud"), ToolCall("c4", "echo", {"n": 4}))),
]


@pytest.mark.parametrize("message", _MESSAGES, ids=range(len(_MESSAGES)))
def test_a_message_is_written_as_its_canonical_json(tmp_path: Path, message: Message) -> None:
    """The writer spells the messages of every iteration (a tool's result, a reply asking
    for one tool) from literals rather than ``to_json()``: each must be the canonical JSON
    of the message (keys sorted at every depth), the bytes its id is taken over."""
    recorder = Recorder(tmp_path / "m.jsonl", run_id="m", redactor=Redaction().compile())
    try:
        _, write = recorder.message(message)
        canonical = orjson.dumps(message.to_json(), option=orjson.OPT_SORT_KEYS)
        assert orjson.dumps(write) == b'{"key":"message:1","value":' + canonical + b"}"
    finally:
        recorder.close()


def test_sparse_fields_are_written_only_when_they_hold_something() -> None:
    make = trusted(ErrorInfo)
    assert dump(make(kind="E", message="m")) == b'{"kind":"E","message":"m"}'
    assert (
        dump(make(kind="E", message="m", status=429, mid_stream=True))
        == b'{"kind":"E","message":"m","status":429,"mid_stream":true}'
    )
    # Fields that are not sparse are written whatever they hold; a reply's usage and model
    # are sparse since 1.1.
    reply = trusted(Reply)(
        seq=2,
        rsid="call-llm#1",
        iter=1,
        call=1,
        writes=[trusted(Write)(key="message:2", ref="ab")],
        stop_reason="end_turn",
        usage=None,
        model=None,
        ms=1.5,
    )
    assert dump(reply) == (
        b'{"t":"reply","seq":2,"rsid":"call-llm#1","iter":1,"call":1,'
        b'"writes":[{"key":"message:2","ref":"ab"}],"stop_reason":"end_turn","tool_calls":[],'
        b'"ms":1.5}'
    )


def test_trusted_makes_the_model_validation_makes() -> None:
    made = trusted(Commit)(seq=1, rsid="seed#0", stage="seed", iter=0)
    validated = Commit(seq=1, rsid="seed#0", stage="seed", iter=0)
    assert made == validated and dump(made) == dump(validated)
    assert made.t == "commit" and made.tool is None
    # Every field is the writer's decision: all are set, and copies do not share that set.
    assert made.model_fields_set == set(Commit.model_fields)
    copied = made.model_copy(update={"seq": 9})
    assert copied.seq == 9 and made.seq == 1 and made.model_fields_set == set(Commit.model_fields)
    # Default lists are each record's own.
    other = trusted(Commit)(seq=2, rsid="route#1", stage="route", iter=1)
    assert made.reads == [] and made.reads is not other.reads
    # Fields are written in their declared order, whatever the order of the call.
    usage = trusted(UsageInfo)(output_tokens=2, input_tokens=1)
    assert dump(usage) == b'{"input_tokens":1,"output_tokens":2}'


def test_line_writes_what_the_instance_dumps() -> None:
    seen = set()
    for path in SAMPLES + FIXTURES:
        for raw in lines(path):
            record = RECORD_ADAPTER.validate_json(raw)
            fields = {name: getattr(record, name) for name in type(record).model_fields}
            assert orjson.dumps(line(type(record))(**fields), default=as_json) == raw
            seen.add(record.t)
    assert {"header", "blob", "commit", "call", "reply", "run_end", "seal"} <= seen


def test_dump_refuses_what_is_not_json() -> None:
    with pytest.raises(TypeError):
        dump({"x": object()})


def test_the_records_are_exported_for_readers() -> None:
    # As the readers give them: the Structs made from the models.
    for name in ("Fold", "FoldRefusal", "FoldSummary", "InjectionDecision", "InjectionDecisions"):
        assert issubclass(getattr(rec, name), msgspec.Struct)
    verb = {f.name: f for f in msgspec.structs.fields(rec.AttemptDecision)}["verb"]
    assert verb.required
