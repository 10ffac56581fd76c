from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, define_tool, mock
from afcore import recording as rec
from afcore.why import NeverWrittenError, UnknownPositionError, keys, why
from tests.conftest import fixed_recording

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"
RAIN = SAMPLES / "sample-trip-rain.jsonl"
TRIP = SAMPLES / "sample-trip.jsonl"


def edge(s: Any, source: str, target: str, key: str) -> Any:
    found = [e for e in s.edges if (e.source, e.target, e.key) == (source, target, key)]
    assert found, f"no edge {source} -> {target} ({key}) in {[e.to_json() for e in s.edges]}"
    return found[0]


def by_stage(s: Any, prefix: str) -> list[str]:
    return [rsid for rsid in s.nodes if rsid.startswith(prefix)]


def test_an_on_tool_return_instruction_back_to_the_user_message() -> None:
    # The forecast instruction landed because weather returned; weather ran because reply 1
    # asked for it; reply 1 answered the user's message.
    with rec.open_recording(RAIN) as r:
        s = why(r, "message:6")
    assert s.writer.startswith("inject#")
    assert any(
        "forecast fired: weather returned at iteration 1" in d for d in s.nodes[s.writer].decisions
    )
    (weather,) = by_stage(s, "tool:weather#")
    control = edge(s, weather, s.writer, "message:4")
    assert control.kind == "control" and "forecast fired" in control.label
    (asked,) = [e.source for e in s.edges if e.target == weather]
    assert asked.startswith("call-llm#") and edge(s, asked, weather, "reply:1").kind == "data"
    edge(s, "seed#0", asked, "message:1")


def test_a_rule_triggered_instruction_rests_on_the_user_message() -> None:
    with rec.open_recording(RAIN) as r:
        s = why(r, "message:2")
    control = edge(s, "seed#0", s.writer, "user_message")
    assert control.kind == "control"
    assert control.label.startswith("rule currency fired: user_message = 'Where can I go")
    assert control.label.endswith("-> true")
    assert s.nodes["seed#0"].value.startswith("'Where can I go")
    assert s.nodes["seed#0"].label == "the user's message"


def test_a_skill_in_the_prompt_goes_back_to_its_activation() -> None:
    with rec.open_recording(RAIN) as r:
        s = why(r, "system:prices")
        with pytest.raises(NeverWrittenError):
            why(r, "system:prices", at="call:2")  # not yet in the prompt then
    (reader,) = by_stage(s, "tool:read_skill#")
    (activation,) = [e for e in s.edges if e.source == reader]
    assert activation.kind == "control" and activation.key == "active_skills"
    assert activation.target.startswith("inject#")
    assert activation.label == "skill prices fired: activated by read_skill at iteration 3"


def test_answer_follows_what_bears_on_it_and_counts_the_rest() -> None:
    with rec.open_recording(TRIP) as r:
        thin = why(r, "answer")
        full = why(r, "answer", full=True)
    assert thin.writer.startswith("finalize#")
    (call,) = [e.source for e in thin.edges if e.target == thin.writer]
    assert thin.nodes[call].rest == {"messages": 4, "folded": 0}
    assert len(full.nodes) >= len(thin.nodes) and full.nodes[call].rest is None
    assert by_stage(thin, "tool:convert_currency#")  # the tool results it read


def test_limits_say_what_they_cut() -> None:
    with rec.open_recording(TRIP) as r:
        s = why(r, "answer", depth=1)
        assert s.truncated["by_depth"] > 0 and len(s.nodes) <= 1 + 8
        s = why(r, "answer", max_nodes=3)
        assert len(s.nodes) == 3 and s.truncated["by_nodes"] > 0


def test_every_data_edge_was_written_by_its_parent_and_read_by_its_child() -> None:
    for path in (TRIP, RAIN):
        with rec.open_recording(path) as r:
            for info in keys(r):
                s = why(r, info.key, full=True, max_nodes=10_000, depth=50)
                for e in s.edges:
                    if e.kind != "data":
                        continue
                    parent, child = (
                        _records(r, s.nodes[e.source].line),
                        _records(r, s.nodes[e.target].line),
                    )
                    assert any(_wrote(d, e.key) for d in parent), (info.key, e)
                    assert any(_read(d, e.key) for d in child), (info.key, e)


def _records(r: Any, line: int) -> list[dict[str, Any]]:
    """Every record of the stage on ``line``."""
    rsid = r.raw(line).get("rsid")
    return [r.raw(i) for i in range(1, r.line_count + 1) if _rsid(r, i) == rsid]


def _rsid(r: Any, line: int) -> Any:
    try:
        return r.raw(line).get("rsid")
    except Exception:
        return None


def _wrote(d: dict[str, Any], key: str) -> bool:
    keys = {w["key"] for w in d.get("writes") or ()}
    if d.get("t") == "reply":
        keys.add(f"reply:{d['call']}")
    return key in keys


def _read(d: dict[str, Any], key: str) -> bool:
    if key in {k for k, _ in d.get("reads") or ()}:
        return True
    # A call reads its window as `messages`: each message in it is read.
    if d.get("t") == "call" and key.startswith("message:"):
        n = int(key[8:])
        return any(a <= n <= b for a, b in d.get("window") or ())
    return False


def test_json_shape() -> None:
    with rec.open_recording(TRIP) as r:
        data = why(r, "answer").to_json()
    assert set(data) == {"key", "writer", "nodes", "edges", "truncated"}
    assert set(data["truncated"]) == {"by_depth", "by_nodes"}
    for node in data["nodes"].values():
        assert {"stage", "iteration", "line", "wrote", "value"} <= set(node)
    for e in data["edges"]:
        assert set(e) == {"from", "to", "kind", "key", "label"} and e["kind"] in ("data", "control")
        assert e["from"] in data["nodes"] and e["to"] in data["nodes"]
    orjson.dumps(data)


def test_questions_that_cannot_be_answered_say_why() -> None:
    with rec.open_recording(TRIP) as r:
        with pytest.raises(
            NeverWrittenError, match="anwser was never written; nearest keys: answer"
        ):
            why(r, "anwser")
        with pytest.raises(UnknownPositionError, match=r"calls 1\.\.5"):
            why(r, "answer", at="call:9")
        with pytest.raises(UnknownPositionError, match="from seed#0 to finalize#"):
            why(r, "answer", at="route#999")
        with pytest.raises(NeverWrittenError, match="before that position"):
            why(r, "answer", at="call:5")
        # Since 1.1 the reply writes where the loop went: the route is its call-llm stage's.
        assert why(r, "route", at="call:3").writer == "call-llm#6"


def test_a_stage_whose_reads_were_not_recorded_says_so(tmp_path: Path) -> None:
    lines = TRIP.read_bytes().splitlines()
    out = []
    for line in lines:
        record = orjson.loads(line)
        if str(record.get("rsid")).startswith("finalize#"):
            record["reads"] = []
        out.append(orjson.dumps(record))
    path = tmp_path / "no-reads.jsonl"
    path.write_bytes(b"\n".join(out) + b"\n")
    with rec.open_recording(path) as r:
        s = why(r, "answer")
    assert s.nodes[s.writer].notes == ["reads not recorded here: the slice may be incomplete"]
    assert not s.edges


def test_a_fold_is_explained_by_its_measurement_refusals_and_summary(tmp_path: Path) -> None:
    steps = iter(range(1, 100))

    def respond(request: Any) -> Any:
        k = next(steps)
        if k <= 8:
            return {
                "content": f"step {k}",
                "tool_calls": [{"id": f"c{k}", "name": "search", "args": {"q": f"q{k}"}}],
            }
        return "done"

    search = define_tool(
        "search", "Search.", {"type": "object"}, lambda a, c: "found " + "lorem " * 60
    )
    agent = (
        Agent.create(
            provider=mock(respond=respond, authoritative=True),
            model="m",
            record=fixed_recording(tmp_path),
        )
        .tool(search)
        .compaction(
            threshold_tokens=500, summarizer=mock(reply="Searched a lot."), keep_recent_turns=1
        )
        .build()
    )
    agent.run("go")
    with rec.open_recording(agent.last_recording) as r:
        s = why(r, "fold:1")
    root = s.nodes[s.writer]
    assert s.writer.startswith("window#") and "tokens measured, threshold 500" in root.value
    assert "kept message 1: the current request" in root.decisions and root.label == "fold 1"
    measured = [e for e in s.edges if e.target == s.writer and e.source.startswith("call-llm#")]
    assert measured and measured[0].key.startswith("reply:")
    (summarizer,) = by_stage(s, "summarize#")
    edge(s, summarizer, s.writer, next(e.key for e in s.edges if e.source == summarizer))
    # The summarizer read the messages that left.
    assert any(e.target == summarizer and e.key.startswith("message:") for e in s.edges)


def test_what_a_call_leaves_out_is_counted_in_words() -> None:
    from afcore.why import rest_text

    assert rest_text(None) == ""
    assert rest_text({"messages": 0, "folded": 0}) == ""
    assert rest_text({"messages": 1, "folded": 0}) == "+ 1 message of the model's own, not followed"
    assert rest_text({"messages": 2, "folded": 1}) == (
        "+ 2 messages of the model's own, not followed; 1 message folded out of the window before"
    )
