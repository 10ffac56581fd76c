"""A flow's recording in the Lens: the tree of its steps with the decisions taken, and one
scrubber of every agent's calls in the order they happened, each call's slots as any run's;
``w`` on a call as in any run, on a decision the values its predicate read; hostile text in
a step or a model's reply stays text; a torn log or a missing agent's run is said."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore import Agent, RecordingConfig, mock
from afcore.flows import Conditional, Parallel, Sequence
from afcore.readmodel import flow_timeline, step_starts
from afcore.recording import open_flow
from afcore.tools import define_tool
from tests.conftest import reseal, runs_beside, without_folded_runs
from tests.tui.conftest import (
    GUARD,
    SAMPLES,
    lens,
    on_top,
    open_search,
    position,
    screen_text,
    until,
)
from tui.screens.flow import AgentRunScreen, FlowScreen
from tui.screens.flow_why import FlowWhyScreen
from tui.screens.why import WhyScreen

ROUTER = SAMPLES / "flow-router.jsonl"


def flow_screen(app: Any) -> FlowScreen:
    screen = app.screen_stack[0]
    assert isinstance(screen, FlowScreen)
    return screen


def where(app: Any) -> str:
    """The scrubber's position line."""
    return flow_screen(app).query_one("FlowScrubber").status.plain  # type: ignore[attr-defined]


def at(app: Any, index: int) -> bool:
    """Whether the flow's screen has the call at ``index`` selected and drawn, on top."""
    screen = flow_screen(app)
    return app.screen is screen and screen.index == index and screen.shown == index


async def scrub(pilot: Any, app: Any) -> list[str]:
    """Each call's position, from the first to the last, moved to with the arrow."""
    seen = []
    for k in range(len(flow_screen(app).timeline.calls)):
        if k:
            await pilot.press("right")
            await until(pilot, lambda: at(app, k), f"call {k + 1}")  # noqa: B023
        seen.append(where(app).split(" · ")[1])
    return seen


async def research(folder: Path) -> Path:
    """A Parallel of two agents, each calling a tool that takes its time (on a clock that
    ticks a millisecond a reading, spent by the tools: the file is the same every run),
    then a writer: alpha looks three things up, each for 20 ms; beta two, each for 50 ms."""
    ticks = itertools.count()

    def clock() -> float:
        return next(ticks) / 1000

    def spend(ms: int) -> Callable[..., Any]:
        async def look(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
            for _ in range(ms):
                clock()
            return {"q": args["q"], "found": True}

        return look

    def researcher(name: str, asks: list[str], ms: int) -> Agent:
        tool = define_tool(
            f"look_{name}",
            "Look something up.",
            {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            spend(ms),
        )
        replies: list[Any] = [
            {
                "content": f"looking {q}",
                "tool_calls": [{"id": q, "name": tool.name, "args": {"q": q}}],
            }
            for q in asks
        ]
        replies.append(f"{name} is done")
        return (
            Agent.create(provider=mock(replies=replies), model="mock", name=name).tool(tool).build()
        )

    flow = (
        Sequence.create(
            "research", record=RecordingConfig(dir=folder, run_id="research", clock=clock)
        )
        .step(
            "find",
            Parallel.create("find")
            .branch("alpha", researcher("alpha", ["a1", "a2", "a3"], 20))
            .branch("beta", researcher("beta", ["b1", "b2"], 50))
            .build(),
        )
        .step(
            "write",
            Agent.create(provider=mock(reply="The report."), model="mock", name="writer").build(),
        )
        .build()
    )
    await flow.arun("go")
    assert flow.last_result is not None and flow.last_result.recording is not None
    return flow.last_result.recording


async def test_a_flow_opens_on_its_steps_its_decisions_and_its_first_call() -> None:
    async with lens(ROUTER) as (app, _):
        assert isinstance(app.screen, FlowScreen)
        text = screen_text(app)
        assert "flow-router  support  sequence  answer · 1 agent · 2 calls" in text
        assert "answer from route/billing" in text
        for piece in ("triage function ok", "route conditional ok", "billing agent ok"):
            assert piece in text, piece
        assert "⤷ chose billing" in text
        assert 'read state.intent = "billing"' in text
        assert where(app).startswith("call 1/2 · route/billing (billing) call 1/2")
        # The call's three slots and its response, as any run's call view shows them.
        for piece in ("SYSTEM", "MESSAGES", "TOOLS", "RESPONSE", "lookup_invoice"):
            assert piece in text, piece


def without_at(log: Path) -> None:
    """Make ``log`` and its agents' runs as a writer before ``at`` wrote them: durations
    only (each file resealed), the log without its folded runs (read from beside it)."""
    log.write_bytes(without_folded_runs(runs_beside(log).read_bytes()))
    for file in [log, *(log.parent / log.stem).glob("*.jsonl")]:
        lines = []
        for raw in file.read_bytes().splitlines(keepends=True):
            if raw.startswith((b'{"t":"call"', b'{"t":"step_start"')):
                record = orjson.loads(raw)
                assert "at" in record
                del record["at"]
                raw = orjson.dumps(record) + b"\n"
            lines.append(raw)
        file.write_bytes(reseal(b"".join(lines)))


async def test_scrubbing_crosses_parallel_agents_in_the_order_their_calls_were_sent(
    tmp_path: Path,
) -> None:
    """Each branch's tools wait for the other branch (so which call goes first is forced,
    whatever the machine's load): the calls are in the order they were sent, read from
    their ``at``, and the flow's steps start where their ``step_start`` says."""
    pinged, ponged = asyncio.Event(), asyncio.Event()

    async def ping(args: dict[str, Any], ctx: Any) -> str:
        await pinged.wait()  # beta's first tool has run: beta's first call was sent
        ponged.set()
        return "pong"

    async def pong(args: dict[str, Any], ctx: Any) -> str:
        pinged.set()
        await ponged.wait()  # alpha's second tool has run: alpha's third call is coming
        await asyncio.sleep(0.01)
        return "ping"

    def player(name: str, fn: Any, turns: int) -> Agent:
        tool = define_tool(f"{name}_tool", "Wait for the other side.", {"type": "object"}, fn)
        replies: list[Any] = [
            {"content": f"{name} {i}", "tool_calls": [{"id": f"{name}{i}", "name": tool.name}]}
            for i in range(turns)
        ]
        replies.append(f"{name} is done")
        return (
            Agent.create(provider=mock(replies=replies), model="mock", name=name).tool(tool).build()
        )

    flow = (
        Parallel.create("rally", record=RecordingConfig(dir=tmp_path, run_id="rally"))
        .branch("alpha", player("alpha", ping, 2))
        .branch("beta", player("beta", pong, 1))
        .build()
    )
    await flow.arun("go")
    path = tmp_path / "rally.jsonl"
    async with lens(path) as (app, pilot):
        calls = flow_screen(app).timeline.calls
        order = [(c.run.agent, c.n) for c in calls]
        assert not any(c.placed for c in calls)
        assert [c.at_ms for c in calls] == sorted(c.at_ms for c in calls)
        # alpha 2 waits for beta 1's tool; beta 2 waits for alpha 2's tool.
        assert order.index(("beta", 1)) < order.index(("alpha", 2)) < order.index(("beta", 2))
        assert order.index(("alpha", 3)) < order.index(("beta", 2))  # beta's tool slept
        seen = await scrub(pilot, app)
        assert seen == [f"{a} ({a}) call {n}/{3 if a == 'alpha' else 2}" for a, n in order]
    # Without the times (a file written before them), the order is placed from durations.
    starts = step_starts(open_flow(path))
    assert starts[""] <= starts["alpha"] and starts[""] <= starts["beta"]
    without_at(path)
    with flow_timeline(open_flow(path)) as estimated:
        assert all(c.placed for c in estimated.calls)
        assert {(c.run.agent, c.n) for c in estimated.calls} == set(order)


async def test_a_file_without_send_times_places_the_calls_from_durations(
    tmp_path: Path,
) -> None:
    path = await research(tmp_path)
    without_at(path)
    async with lens(path) as (app, pilot):
        screen = flow_screen(app)
        calls = screen.timeline.calls
        order = [(c.run.agent, c.n) for c in calls]
        # Each agent's calls in their own order, the branches interleaved by the durations:
        # beta's second call after alpha's third (alpha's tools are quicker), the writer last.
        assert sorted(order) == sorted(
            [("alpha", n) for n in range(1, 5)]
            + [("beta", n) for n in range(1, 4)]
            + [("writer", 1)]
        )
        assert order[-1] == ("writer", 1)
        assert order.index(("alpha", 3)) < order.index(("beta", 2)) < order.index(("alpha", 4))
        assert [c.at_ms for c in calls] == sorted(c.at_ms for c in calls)
        seen = await scrub(pilot, app)
        assert seen == [
            f"find/{a} ({a}) call {n}/{4 if a == 'alpha' else 3}"
            if a != "writer"
            else "write (writer) call 1/1"
            for a, n in order
        ]
        assert "The report." in screen_text(app)


async def test_enter_on_a_step_goes_to_its_first_call(tmp_path: Path) -> None:
    path = await research(tmp_path)
    async with lens(path) as (app, pilot):
        screen = flow_screen(app)
        rows = [p for p, k in screen.rows_of]
        steps = screen.query_one("#steps")
        assert app.focused is steps
        steps.highlighted = rows.index("write")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: at(app, 7), "the writer's call")
        assert where(app).startswith("call 8/8 · write (writer) call 1/1")
        steps.highlighted = rows.index("find/beta")  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: "find/beta (beta) call 1/3" in where(app), "beta's call")


async def test_slash_searches_every_agent_s_run_and_enter_goes_to_that_call(
    tmp_path: Path,
) -> None:
    from tests.tui.test_lens import _searched
    from tui.widgets.item_list import ItemList

    path = await research(tmp_path)
    async with lens(path) as (app, pilot):
        search = await open_search(pilot)
        await pilot.press(*"looking b2")
        await until(pilot, lambda: _searched(search, "looking b2"), "the search ended")
        found = list(search.matches.values())
        assert {search.sources[m.source].name for m in found} == {"find/beta (beta)"}
        # Any agent's text: alpha's, beta's and the writer's, each named by step and agent.
        await pilot.press(*["backspace"] * 3)
        await until(pilot, lambda: _searched(search, "looking"), "the search ended")
        names = {search.sources[m.source].name for m in search.matches.values()}
        assert names == {"find/alpha (alpha)", "find/beta (beta)"}
        assert "find/beta (beta) · call 2" in screen_text(app)
        results = search.query_one(ItemList)
        await pilot.press("enter")  # to the results
        await until(pilot, lambda: app.focused is results, "the results have the focus")
        target = next(
            (k, m)
            for k, m in search.matches.items()
            if search.sources[m.source].name == "find/beta (beta)" and m.place.call == 2
        )
        results.highlighted = list(results.items).index(target[0])
        await pilot.press("enter")
        await until(
            pilot,
            lambda: app.screen is flow_screen(app) and "find/beta (beta) call 2/3" in where(app),
            "beta's second call",
        )
        # The query is kept for the next search.
        again = await open_search(pilot)
        assert again.query_text == "looking"


async def test_w_on_a_call_asks_why_of_that_agent_s_run() -> None:
    async with lens(ROUTER) as (app, pilot):
        await pilot.press("right")
        await until(pilot, lambda: at(app, 1), "call 2")
        slots = app.screen.query_one("#slots")
        slots.focus()
        await until(pilot, lambda: app.focused is slots, "the slots have the focus")
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, WhyScreen), "why opened")
        assert isinstance(app.screen, WhyScreen)
        assert app.screen.key == "call:2"
        assert "call 2" in screen_text(app)


async def test_w_on_a_decision_shows_what_its_predicate_read_and_who_wrote_it() -> None:
    async with lens(ROUTER) as (app, pilot):
        screen = flow_screen(app)
        steps = screen.query_one("#steps")
        at = next(i for i, (_, k) in enumerate(screen.rows_of) if k == "decision:route#1")
        assert app.focused is steps
        steps.highlighted = at  # type: ignore[attr-defined]
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, FlowWhyScreen), "why opened")
        text = screen_text(app)
        assert "route chose billing" in text
        assert "✓ billing: predicate returned true" in text
        assert "read state.intent = 'billing'" in text
        assert "← read state.intent = billing" in text
        assert "← produced by triage (function) ok" in text


async def test_w_on_the_top_step_explains_the_answer_down_to_the_call() -> None:
    async with lens(ROUTER) as (app, pilot):
        await pilot.press("w")  # the steps have the focus, on the top step
        await until(pilot, lambda: on_top(app, FlowWhyScreen), "why opened")
        assert "← produced by billing call 2 (route/billing)" in screen_text(app)
        tree = app.screen.query_one("Tree")
        line = next(
            n
            for n in tree._tree_lines
            if "billing call 2" in str(n.node.label)  # type: ignore[attr-defined]
        )
        tree.cursor_line = tree._tree_lines.index(line)  # type: ignore[attr-defined]
        await pilot.press("enter")
        await until(pilot, lambda: at(app, 1), "call 2")
        assert where(app).startswith("call 2/2")


async def test_o_opens_the_agent_s_run_and_b_comes_back() -> None:
    async with lens(ROUTER) as (app, pilot):
        await pilot.press("right", "o")
        await until(pilot, lambda: on_top(app, AgentRunScreen), "the agent's run")
        await pilot.press("b")
        await until(pilot, lambda: app.screen is flow_screen(app), "back on the flow")


async def test_escape_sequences_and_markup_in_a_step_and_a_reply_stay_text(
    tmp_path: Path,
) -> None:
    hostile = "\x1b[2J\x1b[31mred[/bold] [link=x]y[/link]"
    speaker = Agent.create(provider=mock(reply=hostile), model="mock", name="[b]x[/b]").build()
    flow = (
        Sequence.create("h", record=tmp_path)
        .step("say[b]\x1b[1m", lambda s: hostile)
        .step(
            "pick",
            Conditional.create("pick")
            .when("[i]x", lambda s: s["say[b]\x1b[1m"] == hostile, speaker)
            .build(),
        )
        .build()
    )
    await flow.arun("m")
    assert flow.last_result is not None and flow.last_result.recording is not None
    async with lens(flow.last_result.recording) as (app, _):
        text = screen_text(app)
        assert "\\x1b[2J\\x1b[31mred[/bold] [link=x]y[/link]" in text
        assert "say[b]\\x1b[1m" in text
        assert 'read state.say[b]\\x1b[1m = "' in text  # the decision's evidence, cut
        assert "\x1b" not in text
        assert "pick/[i]x ([b]x[/b]) call 1/1" in where(app)


async def test_the_log_alone_shows_the_runs_folded_into_it(tmp_path: Path) -> None:
    alone = tmp_path / "elsewhere.jsonl"
    shutil.copy(ROUTER, alone)
    async with lens(alone) as (app, pilot):
        text = screen_text(app)
        assert "billing agent ok" in text and "cannot be read" not in text
        assert where(app).startswith("call 1/2 · route/billing (billing) call 1/2")
        await pilot.press("right", "o")
        await until(pilot, lambda: on_top(app, AgentRunScreen), "the agent's run")


async def test_a_flow_s_bundle_opens_as_the_flow(tmp_path: Path) -> None:
    from afcore.bundle import export_bundle

    out = export_bundle(ROUTER, tmp_path / "flow.afz").path
    async with lens(out) as (app, _):
        assert isinstance(app.screen, FlowScreen)
        text = screen_text(app)
        assert "billing agent ok" in text and "cannot be read" not in text
        assert where(app).startswith("call 1/2 · route/billing (billing) call 1/2")


async def test_a_torn_log_and_a_missing_agent_run_are_said(tmp_path: Path) -> None:
    # The log alone, without the folder of its agent's run, as a writer that did not fold
    # the runs into it left it.
    (tmp_path / "flow-router.jsonl").write_bytes(without_folded_runs(ROUTER.read_bytes()))
    async with lens(tmp_path / "flow-router.jsonl") as (app, pilot):
        text = screen_text(app)
        assert "✗ route/billing: 001-route-billing.jsonl cannot be read" in text
        assert "no agent's calls in this flow's recording" in text
        # Nothing to scrub: nothing breaks, and w on the top step still says why.
        await pilot.press("right", "left", "o", "w")
        await until(pilot, lambda: on_top(app, FlowWhyScreen), "why opened")
    # Cut in the middle of the agent step's start: the rest is shown, the tear said.
    shutil.copy(ROUTER, tmp_path / "flow-router.jsonl")
    runs_beside(tmp_path / "flow-router.jsonl")  # as a flow killed mid-way leaves them
    lines = ROUTER.read_bytes().splitlines(keepends=True)
    at = next(i for i, b in enumerate(lines) if b.startswith(b'{"t":"step_start","path":"route/'))
    (tmp_path / "flow-router.jsonl").write_bytes(b"".join(lines[:at]) + lines[at][:30])
    async with lens(tmp_path / "flow-router.jsonl") as (app, pilot):
        text = screen_text(app)
        assert "unfinished: no flow_end" in text
        assert "torn: cut off mid-write" in text
        assert "route conditional unfinished" in text
        await pilot.press("w")
        await until(pilot, lambda: on_top(app, FlowWhyScreen), "why opened")


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "wide"])
def test_the_flow_screen(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    from tui.app import make_lens_app

    async def second(pilot: Any) -> None:
        await until(pilot, lambda: pilot.app.screen.is_mounted, "the flow's screen")
        await pilot.press("right")
        await until(pilot, lambda: at(pilot.app, 1), "call 2")

    assert snap_compare(make_lens_app(ROUTER), run_before=second, terminal_size=size)


async def test_the_debate_example_scrubs_both_sides_then_the_judge() -> None:
    from tests.test_examples import load

    debate = load("debate").debate
    await debate.arun("Should the city build a second bridge?")
    assert debate.last_result is not None and debate.last_result.recording is not None
    async with lens(debate.last_result.recording) as (app, pilot):
        said = await scrub(pilot, app)
        assert said == [
            "sides/pro (pro) call 1/1",
            "sides/con (con) call 1/1",
            "judge (judge) call 1/1",
        ]
        text = screen_text(app)
        assert "⤶ merge pro=ok con=ok" in text
        assert "PRO: Yes: traffic on the old bridge" in text  # what the judge was given


# -- a Lens open while the flow runs: its folder of runs goes when it ends ----------------------


class Gate:
    """Where a running flow waits for the test: ``reached`` once it waits, until ``open``."""

    def __init__(self) -> None:
        self.reached, self.open = threading.Event(), threading.Event()

    def wait(self) -> None:
        self.reached.set()
        assert self.open.wait(GUARD), "the test never let the flow go on"


def _held_flow(folder: Path, in_tool: Gate | None, after: Gate | None) -> Sequence:
    """An agent whose tool waits at ``in_tool`` (its run half written), a function that
    waits at ``after`` (the first run whole, the flow not ended), a second agent."""

    def check(args: dict[str, Any], ctx: Any) -> str:
        if in_tool is not None:
            in_tool.wait()
        return "checked"

    tool = define_tool("check", "Check it.", {"type": "object"}, check)
    first = (
        Agent.create(
            provider=mock(replies=[{"tool_calls": [{"id": "t", "name": "check"}]}, "it is fine"]),
            model="mock",
            name="checker",
        )
        .tool(tool)
        .build()
    )
    then = Agent.create(provider=mock(reply="Thanks."), model="mock", name="thanker").build()
    return (
        Sequence.create("held", record=RecordingConfig(dir=folder, run_id="held"))
        .step("check", first)
        .step("wait", lambda s: after.wait() if after is not None else None)
        .step("thank", then)
        .build()
    )


def _finish(gate: Gate, ran: threading.Thread, runs: Path) -> None:
    from afcore.recording import wait_for_syncs

    gate.open.set()
    ran.join(GUARD)
    assert not ran.is_alive()
    wait_for_syncs()
    assert not runs.exists()  # the flow ended: one file, its runs folded into its log


async def test_a_lens_following_a_flow_s_agent_run_reads_its_end_from_the_log(
    tmp_path: Path,
) -> None:
    gate = Gate()
    ran = threading.Thread(target=_held_flow(tmp_path, gate, None).run, args=("go",))
    ran.start()
    try:
        assert gate.reached.wait(GUARD)
        run = tmp_path / "held" / "001-check.jsonl"
        async with lens(run, follow=True) as (app, pilot):
            assert "call 1/1" in position(app)
            assert "following: the run is still going" in screen_text(app)
            _finish(gate, ran, run.parent)
            # The rest of the run (its last call, its end) is read from the flow's log.
            await until(pilot, lambda: "call 2/2" in position(app), "the run's last call")
            await until(pilot, lambda: "it is fine" in screen_text(app), "the answer")
            assert "still going" not in screen_text(app)
    finally:
        gate.open.set()
        ran.join(GUARD)


async def test_a_flow_s_lens_opened_while_it_ran_works_once_its_runs_are_folded(
    tmp_path: Path,
) -> None:
    gate = Gate()
    ran = threading.Thread(target=_held_flow(tmp_path, None, gate).run, args=("go",))
    ran.start()
    try:
        assert gate.reached.wait(GUARD)
        async with lens(tmp_path / "held.jsonl") as (app, pilot):
            assert "unfinished: no flow_end" in screen_text(app)
            assert where(app).startswith("call 1/2 · check (checker) call 1/2")
            _finish(gate, ran, tmp_path / "held")
            await pilot.press("right")
            await until(pilot, lambda: at(app, 1), "call 2")
            assert where(app).startswith("call 2/2 · check (checker) call 2/2")
            assert "it is fine" in screen_text(app)
            await pilot.press("o")  # its run, from the copy in the log now
            await until(pilot, lambda: isinstance(app.screen, AgentRunScreen), "the run")
            await until(pilot, lambda: "call 2/2" in position(app), "its call")
            await pilot.press("b")
            await until(pilot, lambda: app.screen is flow_screen(app), "back on the flow")
            await open_search(pilot)
            await pilot.press(*"fine")
            await until(pilot, lambda: "check (checker)" in screen_text(app), "a match")
    finally:
        gate.open.set()
        ran.join(GUARD)


# -- / searches the flow's own log ------------------------------------------------------------

HOSTILE = "[bold red]boom[/] \x1b[31mred\x1b[0m \x1b]0;title\x07 the needle "


def _hostile_flow(folder: Path) -> Path:
    """A flow whose function step gives hostile text (markup, escape sequences, a line of
    200,000 characters), a decision reading it, and an agent answering on it."""
    from tests.conftest import fixed_recording

    def fetch(s: Any) -> str:
        return HOSTILE + "x" * 200_000

    answerer = Agent.create(
        provider=mock(reply="done with the needle"), model="mock", name="answerer"
    ).build()
    flow = (
        Sequence.create("hostile", record=fixed_recording(folder, "hostile"))
        .step("fetch", fetch)
        .step(
            "route",
            Conditional.create("route")
            .when("sharp", lambda s: "needle" in s["fetch"], answerer)
            .build(),
        )
        .build()
    )
    # Run on a thread of its own: a pilot test's event loop is running on this one.
    ran = threading.Thread(target=flow.run, args=("find [i]the needle[/i]",))
    ran.start()
    ran.join(GUARD)
    assert flow.last_result is not None and flow.last_result.recording is not None
    return flow.last_result.recording


async def test_slash_searches_the_flow_s_own_log_and_a_match_names_its_step(
    tmp_path: Path,
) -> None:
    from textual.widgets import OptionList

    from tests.tui.test_lens import _searched
    from tui.screens.search import LogMatch
    from tui.widgets.item_list import ItemList

    async with lens(_hostile_flow(tmp_path)) as (app, pilot):
        screen = flow_screen(app)
        steps = screen.query_one("#steps", OptionList)
        assert app.focused is steps  # from the start: the rows below are waited for, not it
        search = await open_search(pilot)
        await pilot.press(*"needle")
        await until(pilot, lambda: _searched(search, "needle"), "the search ended")
        found = list(search.matches.values())
        logged = [(m.text.step, m.text.what) for m in found if isinstance(m, LogMatch)]
        # The flow's input, the function's output, the decision that read it, the agent's
        # answer, the flow's answer: each named by its step.
        assert logged == [
            ("", "input"),
            ("fetch", "output"),
            ("route", "decision"),
            ("route/sharp", "output"),
            ("", "answer"),
        ]
        assert any(not isinstance(m, LogMatch) for m in found)  # the agent's run too
        text = screen_text(app)
        assert "fetch · output · the flow's log" in text
        assert "route · decision · the flow's log" in text
        assert "route/sharp (answerer) · call 1" in text
        # Markup shown as text, not applied; escape sequences shown as their escapes.
        assert "red]boom[/] \\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 the needle" in text
        assert "\x1b" not in text and "\x07" not in text
        # Enter on the function's output: its step's row in the tree.
        results = search.query_one(ItemList)
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is results, "the results have the focus")
        results.highlighted = logged.index(("fetch", "output"))
        await pilot.press("enter")

        def on_row(row: tuple[str, str | None]) -> bool:
            return (
                app.screen is screen
                and app.focused is steps
                and steps.highlighted is not None
                and screen.rows_of[steps.highlighted] == row
            )

        await until(pilot, lambda: on_row(("fetch", None)), "the function's row")
        # On the decision: its row (w asks why of it from there).
        search = await open_search(pilot)
        await until(pilot, lambda: _searched(search, "needle"), "the search ended")
        results = search.query_one(ItemList)
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is results, "the results have the focus")
        results.highlighted = logged.index(("route", "decision"))
        await pilot.press("enter")
        await until(pilot, lambda: on_row(("route", "decision:route#1")), "the decision's row")
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, FlowWhyScreen), "why opened")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "wide"])
def test_the_flow_s_search_with_hostile_text(
    snap_compare: Callable[..., bool], size: tuple[int, int], tmp_path: Path
) -> None:
    from tests.tui.test_lens import _searched
    from tui.app import make_lens_app

    log = _hostile_flow(tmp_path)

    async def searched(pilot: Any) -> None:
        search = await open_search(pilot)
        await pilot.press(*"needle")
        await until(pilot, lambda: _searched(search, "needle"), "the search")
        await pilot.press("enter")  # to the results: no blinking cursor in the picture
        results = search.query_one("#results")
        await until(pilot, lambda: pilot.app.focused is results, "the results have the focus")

    assert snap_compare(make_lens_app(log), run_before=searched, terminal_size=size)
