"""``af export`` and ``af report``, and every reading command opening a bundle directly."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool, mock
from tests.afcli.conftest import Invoke
from tests.afcore.secrets_corpus import KEY_SHAPES, rng
from tests.conftest import fixed_recording, runs_beside

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"
EMAIL = "ada@example.com"


@pytest.fixture(params=sorted(p.name for p in SAMPLES.glob("sample-*.jsonl")))
def bundle(request: pytest.FixtureRequest, tmp_path: Path, invoke: Invoke) -> Path:
    out = tmp_path / f"{Path(request.param).stem}.afz"
    ran = invoke("export", SAMPLES / request.param, "-o", out)
    assert ran.code == 0, ran.err
    assert "calls verify" in ran.err and f"wrote {out}" in ran.err.replace("\n", "")
    return out


def test_every_command_opens_a_bundle_of_every_sample(bundle: Path, invoke: Invoke) -> None:
    original = SAMPLES / f"{bundle.stem}.jsonl"

    ran = invoke("verify", bundle, "--json")
    assert ran.code == 0, ran.out
    assert ran.json()["ok"] is True
    assert ran.json()["path"] == str(bundle)

    shown, before = invoke("show", bundle, "--json"), invoke("show", original, "--json")
    assert shown.code == 0 and before.code == 0
    a, b = shown.json(), before.json()
    assert a.pop("path") == str(bundle) and b.pop("path") == str(original)
    assert a == b

    why = invoke("why", bundle, "answer", "--json")
    assert why.code == 0, why.err
    assert why.json() == invoke("why", original, "answer", "--json").json()

    call = invoke("show", bundle, "--call", "1", "--json")
    assert call.code == 0 and call.json()["verified"] is True


def test_the_lens_opens_a_bundle(tmp_path: Path, invoke: Invoke) -> None:
    import asyncio

    from tui.app import make_lens_app

    out = tmp_path / "trip.afz"
    assert invoke("export", SAMPLES / "sample-trip.jsonl", "-o", out).code == 0

    async def look() -> str:
        app = make_lens_app(out)
        async with app.run_test(size=(120, 40)) as pilot:
            from tests.tui.conftest import position, showing, until

            await until(pilot, lambda: app.screen.is_mounted, "the first screen")
            await pilot.press("right")
            await until(pilot, lambda: showing(app, 2), "call 2")
            return position(app)

    assert asyncio.run(look()).startswith("call 2/5")


def test_export_json_and_report_of_a_run_with_personal_data(tmp_path: Path, invoke: Invoke) -> None:
    agent = (
        Agent.create(
            provider=mock(
                replies=[
                    {"tool_calls": [{"id": "c1", "name": "who", "args": {"email": EMAIL}}]},
                    f"{EMAIL} is on the Pro plan.",
                ]
            ),
            model="mock-a",
            name="plans",
            record=fixed_recording(tmp_path, "plans-run"),
        )
        .tool(define_tool("who", "Who.", {"type": "object"}, lambda a, c: f"{EMAIL}: Pro"))
        .build()
    )
    agent.run(f"Which plan is {EMAIL} on?")
    out = tmp_path / "plans.afz"
    ran = invoke("export", agent.last_recording, "-o", out, "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["ok"] and data["bundle"] == str(out)
    assert data["manifest"]["redactions"] == data["report"]["rules"][0]["count"] >= 4
    assert EMAIL.encode() not in zipfile.ZipFile(out).read("recording.jsonl")

    report = invoke("report", out)
    assert report.code == 0, report.err
    md = report.out
    assert "### af run plans-run: answered" in md
    assert "| Verification | ✓ 2/2 calls rebuild to their hashes |" in md
    assert "values redacted at export" in md
    assert "[redacted:email:1] is on the Pro plan." in md
    assert "af lens plans.afz" in md
    assert EMAIL not in md

    # Of a plain recording, the report says how to make the bundle.
    plain = invoke("report", agent.last_recording)
    assert plain.code == 0
    assert "af export plans-run -o report.afz" in plain.out


def test_export_options_name_and_field_and_policy(tmp_path: Path, invoke: Invoke) -> None:
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"patterns": {"city": "Lisbon"}}))
    out = tmp_path / "t.afz"
    ran = invoke(
        "export",
        SAMPLES / "sample-trip.jsonl",
        "-o",
        out,
        "--policy",
        policy,
        "--redact",
        "museum=Gulbenkian",
        "--redact-field",
        "kind",
        "--json",
    )
    assert ran.code == 0, ran.err
    rules = {r["rule"]: r for r in ran.json()["report"]["rules"]}
    assert set(rules) == {"city", "museum", "field:kind"}
    text = zipfile.ZipFile(out).read("recording.jsonl").decode()
    assert "Lisbon" not in text and "Gulbenkian" not in text
    assert "[redacted:city:1]" in text
    assert invoke("verify", out).code == 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "say where to write"),
        (("-o", "x.afz", "--calls", "1-2"), "--calls is for --html"),
        (("--html", "x.html", "--calls", "3-1"), "A at most B"),
        (("-o", "x.afz", "--redact", "bad=("), "not a regular expression"),
        (("-o", "x.afz", "--keep", "phone"), "no built-in rule named 'phone'"),
        (("-o", "x.afz", "--redact-field", "..."), "not a field path"),
    ],
)
def test_export_usage_errors_are_one_sentence(
    args: tuple[str, ...], words: str, invoke: Invoke, tmp_path: Path
) -> None:
    ran = invoke("export", SAMPLES / "sample-trip.jsonl", *args)
    assert ran.code == 2
    assert words in ran.err
    assert "Traceback" not in ran.err


def test_a_secret_refuses_the_export_and_force_overrides(tmp_path: Path, invoke: Invoke) -> None:
    from afcore.recording import rewrite

    key = KEY_SHAPES["openai_project"](rng(1))
    planted = tmp_path / "planted.jsonl"
    rewrite(
        SAMPLES / "sample-trip.jsonl",
        planted,
        lambda v, leaf: v.replace("Lisbon", f"Lisbon {key}") if isinstance(v, str) else v,
    )
    out = tmp_path / "x.afz"
    ran = invoke("export", planted, "-o", out, "--html", tmp_path / "x.html")
    assert ran.code == 1
    assert not out.exists() and not (tmp_path / "x.html").exists()
    assert "refused" in ran.err and "openai_key" in ran.err
    assert re.search(r"line \d+", ran.err) and "call 1" in ran.err
    assert key[:10] not in ran.err + ran.out

    forced = invoke("export", planted, "-o", out, "--force", "--json")
    assert forced.code == 0
    data = forced.json()
    assert data["manifest"]["forced"] is True and data["report"]["secrets"]
    assert key[:10] not in forced.out
    report = invoke("report", out)
    assert "exported with \\-\\-force" in report.out or "exported with --force" in report.out


def test_report_cells_are_inert_markdown(tmp_path: Path, invoke: Invoke) -> None:
    nasty = "| x | <img src=x onerror=alert(1)> [link](javascript:alert(2)) ``` `code` \x1b[31m"
    agent = Agent.create(
        provider=mock(replies=[nasty]),
        model="m|<b>",
        name="<script>alert(3)</script>",
        record=fixed_recording(tmp_path, "nasty"),
    ).build()
    agent.run("hi")
    ran = invoke("report", agent.last_recording)
    assert ran.code == 0
    md = ran.out
    assert "\x1b" not in md
    head, fenced, tail = md.partition("````text\n" + nasty.replace("\x1b", "\\x1b") + "\n````")
    # The answer is whole, in a fence longer than any run of backticks in it.
    assert fenced
    for outside in (head, tail):
        assert "<img" not in outside and "<script>" not in outside and "<b>" not in outside
    # Every table row keeps its columns.
    for row in [line for line in (head + tail).splitlines() if line.startswith("|")]:
        assert len(re.findall(r"(?<!\\)\|", row)) in (3, 10), row


def test_a_bundle_replays_with_recorded_tools_and_diffs(
    bundle: Path, invoke: Invoke, tmp_path: Path
) -> None:
    """A bundle of each sample replays with its tools' results served from it exactly as the
    original does (a sample whose facts come from its tools' side effects departs at the
    same place either way), and af diff reads it against the original."""
    original = SAMPLES / f"{bundle.stem}.jsonl"
    ran = invoke("replay", bundle, "--tools", "recorded", "--out", tmp_path / "a", "--json")
    before = invoke("replay", original, "--tools", "recorded", "--out", tmp_path / "b", "--json")
    assert ran.code == before.code
    a, b = ran.json(), before.json()
    assert a["status"] == b["status"]
    if bundle.stem == "sample-trip":
        assert a["status"] == "identical"
    diff = invoke("diff", bundle, original, "--json")
    assert diff.code == 0, diff.err


def test_a_redacted_bundle_replays_where_the_redacted_value_does_not_steer(
    tmp_path: Path, invoke: Invoke
) -> None:
    out = tmp_path / "trip.afz"
    ran = invoke("export", SAMPLES / "sample-trip.jsonl", "-o", out, "--redact", "city=Lisbon")
    assert ran.code == 0
    assert b"Lisbon" not in zipfile.ZipFile(out).read("recording.jsonl")
    replayed = invoke("replay", out, "--tools", "recorded", "--out", tmp_path / "r", "--json")
    assert replayed.code == 0, replayed.err
    assert replayed.json()["status"] == "identical"


# -- a composed run (a flow's log) ----------------------------------------------------------

ROUTER = SAMPLES / "flow-router.jsonl"


def test_a_flow_s_composed_run_exports_whole_redacted_and_reads_everywhere(
    tmp_path: Path, invoke: Invoke
) -> None:
    out = tmp_path / "flow.afz"
    ran = invoke(
        "export", ROUTER, "-o", out, "--redact", "invoice=1042", "--redact-field", "intent",
        "--json",
    )  # fmt: skip
    assert ran.code == 0, ran.err
    data = ran.json()
    manifest, report = data["manifest"], data["report"]
    assert manifest["verify"] == {"ok": True, "calls": 2, "verified": 2}
    assert manifest["flow"]["status"] == "answer"
    assert [a["step"] for a in manifest["flow"]["agents"]] == ["route/billing"]
    assert manifest["agent"]["spec"] == "afcore.demos.router:build_flow"
    # One value, one placeholder, across the log and the agent's run: every byte of both.
    with zipfile.ZipFile(out) as z:
        member = z.read("recording.jsonl")
    assert b"1042" not in member and b"[redacted:invoice:1]" in member
    assert b'"intent":"billing"' not in member
    rules = {r["rule"]: r for r in report["rules"]}
    steps = {p.get("step") for p in rules["invoice"]["places"]}
    assert steps == {None, "route/billing"}  # in the log's records and in the agent's run
    assert any(p.get("call") for p in rules["invoice"]["places"] if p.get("step"))
    # Every reader opens it as the flow it holds, alone.
    checked = invoke("verify", out, "--json")
    assert checked.code == 0 and checked.json()["path"] == str(out)
    shown = invoke("show", out)
    assert shown.code == 0 and "[redacted:invoice:1]" in shown.out and "call 2" in shown.out
    assert "1042" not in shown.out
    why = invoke("why", out, "answer")
    assert why.code == 0 and "answer ← step route/billing" in why.out
    # A redacted value that steers the flow (the intent its router reads) stops the replay
    # at the step that writes it, named; one that does not (the invoice) replays identical.
    again = invoke("replay", out, "--tools", "recorded", "--out", tmp_path / "r", "--json")
    assert again.code == 1, again.err
    departed = again.json()["divergence"]
    assert departed["step"] == "triage" and departed["why_key"] == "state.intent"
    only = tmp_path / "invoice.afz"
    assert invoke("export", ROUTER, "-o", only, "--redact", "1042").code == 0
    again = invoke("replay", only, "--tools", "recorded", "--out", tmp_path / "r", "--json")
    assert again.code == 0 and again.json()["status"] == "identical", again.out
    assert again.json()["replay_of"] == str(only)  # the bundle, not where it was unpacked


def test_a_secret_in_a_flow_s_step_refuses_its_export(tmp_path: Path, invoke: Invoke) -> None:
    from afcore.recording import rewrite_flow

    key = KEY_SHAPES["openai_project"](rng(2))
    planted = tmp_path / "planted.jsonl"

    def plant(step: str | None) -> Any:
        # In the log's own records only (a step's output), not in the agent's run.
        def put(v: Any, leaf: Any) -> Any:
            if step is None and isinstance(v, str) and v.startswith("Invoice 1042"):
                return f"{v} {key}"
            return v

        return put

    rewrite_flow(ROUTER, planted, plant)
    assert invoke("verify", planted).code == 0  # planted, it is a flow that verifies
    out = tmp_path / "x.afz"
    ran = invoke("export", planted, "-o", out)
    assert ran.code == 1 and not out.exists()
    assert "refused" in ran.err and "openai_key" in ran.err and "step_start" in ran.err
    assert key[:10] not in ran.err + ran.out
    forced = invoke("export", planted, "-o", out, "--force", "--json")
    assert forced.code == 0 and forced.json()["manifest"]["forced"] is True


def test_export_html_of_a_flow_says_what_to_export_instead(tmp_path: Path, invoke: Invoke) -> None:
    ran = invoke("export", ROUTER, "--html", tmp_path / "x.html")
    assert ran.code == 2 and not (tmp_path / "x.html").exists()
    said = " ".join(ran.err.split())
    assert "is a flow's log" in said and "-o report.afz" in said


def test_a_run_cut_off_mid_write_is_exported_as_it_is_and_says_what_is_wrong(
    tmp_path: Path, invoke: Invoke
) -> None:
    data = (SAMPLES / "sample-trip.jsonl").read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(data[: len(data) * 2 // 3])  # mid-line, past the last seal it has
    assert invoke("verify", cut).code == 1

    out = tmp_path / "cut.afz"
    ran = invoke("export", cut, "-o", out)
    # A crashed run is what a bug report is for: written, exit 0, and no ✗ beside it.
    assert ran.code == 0, ran.err
    assert "✗" not in ran.err and "✓" not in ran.err
    said = " ".join(ran.err.split())
    checked = invoke("verify", out, "--json").json()
    assert checked["ok"] is False
    verdict = json.loads(zipfile.ZipFile(out).read("manifest.json"))["verify"]
    assert verdict["ok"] is False and verdict["problems"]
    calls = f"{checked['verified']}/{checked['calls']} calls verify"
    assert f"! exported as it is, though it does not verify whole ({calls}): " in said
    assert verdict["problems"][0] in said
    assert len(verdict["problems"]) == len(checked["problems"])
    if len(verdict["problems"]) > 1:
        assert f"af verify {out}" in said

    whole = invoke("export", SAMPLES / "sample-trip.jsonl", "-o", tmp_path / "whole.afz")
    assert (
        whole.code == 0
        and "✓ " in whole.err
        and "problems"
        not in json.loads(zipfile.ZipFile(tmp_path / "whole.afz").read("manifest.json"))["verify"]
    )


def test_a_flow_killed_mid_way_is_exported_as_it_is_and_says_what_is_wrong(
    tmp_path: Path, invoke: Invoke
) -> None:
    import shutil

    cut = runs_beside(Path(shutil.copy(ROUTER, tmp_path)))  # its runs, beside it
    data = ROUTER.read_bytes()
    cut.write_bytes(data[: len(data) // 5])  # before its end: no runs folded into it yet
    out = tmp_path / "cut.afz"
    ran = invoke("export", cut, "-o", out)
    assert ran.code == 0, ran.err
    assert "✗" not in ran.err
    said = " ".join(ran.err.split())
    verdict = json.loads(zipfile.ZipFile(out).read("manifest.json"))["verify"]
    assert verdict["ok"] is False and verdict["problems"]
    assert "! exported as it is, though it does not verify whole (" in said
    assert verdict["problems"][0] in said
    checked = invoke("verify", out, "--json").json()
    assert not checked["ok"] and len(checked["problems"]) == len(verdict["problems"])


def test_no_output_names_where_a_bundle_or_a_folded_run_was_unpacked(
    tmp_path: Path, invoke: Invoke
) -> None:
    """Bundles and the runs folded into a flow's log are read from temporary copies, gone
    once af exits: every output names the file the user gave, and a run as its log names it."""
    trip, flow = tmp_path / "trip.afz", tmp_path / "flow.afz"
    assert invoke("export", SAMPLES / "sample-trip.jsonl", "-o", trip).code == 0
    # The invoice redacted: the agent step's run differs from the original's.
    assert invoke("export", ROUTER, "-o", flow, "--redact", "invoice=1042").code == 0
    step = ["message:2", "--step", "route/billing"]
    commands = [
        ["diff", trip, SAMPLES / "sample-trip.jsonl"],
        ["diff", flow, ROUTER],
        ["diff", ROUTER, ROUTER],
        ["verify", trip],
        ["verify", flow],
        ["verify", ROUTER],
        ["why", trip, "answer"],
        ["why", flow, "answer"],
        ["why", flow, *step],
        ["why", ROUTER, *step],
        ["replay", trip, "--tools", "recorded", "--out", tmp_path / "r"],
        ["replay", flow, "--tools", "recorded", "--out", tmp_path / "r"],
        ["show", flow],
    ]
    for args in commands:
        for extra in ([], ["--json"]):
            ran = invoke(*args, *extra)
            assert ran.code in (0, 1), (args, ran.err)
            said = ran.out + ran.err
            assert "af-bundle-" not in said and "af-runs-" not in said, (args, extra, said)
    a = invoke("diff", trip, SAMPLES / "sample-trip.jsonl", "--json").json()["a"]
    assert a["path"] == str(trip)
    diffed = invoke("diff", flow, ROUTER, "--json").json()
    assert diffed["a"]["path"] == str(flow) and diffed["b"]["path"] == str(ROUTER)
    (billing,) = [s for s in diffed["steps"] if s["path"] == "route/billing"]
    named = "flow-router/001-route-billing.jsonl"
    assert billing["run"]["a"]["path"] == str(tmp_path / named)
    assert billing["run"]["b"]["path"] == str(SAMPLES / named)
    (run,) = invoke("verify", flow, "--json").json()["runs"]
    assert run == {"step": "route/billing", "run": str(tmp_path / named), "folded": True,
                   "ok": True, "calls": 2}  # fmt: skip


def test_report_of_a_flow_says_in_one_sentence_what_it_takes(
    tmp_path: Path, invoke: Invoke
) -> None:
    """A flow's recording, as a log or a bundle, is refused by name (it used to be called no
    af recording, and a bundle's by the path of its unpacked copy)."""
    log = Path(__file__).resolve().parents[2] / "recordings" / "flow-router.jsonl"
    bundle = tmp_path / "flow.afz"
    assert invoke("export", log, "--output", bundle).code == 0
    for path in (log, bundle):
        ran = invoke("report", path)
        assert ran.code == 2 and ran.out == ""
        assert f"{path} is a flow's recording" in ran.err and f"af show {path}" in ran.err
        assert "af-bundle-" not in ran.err and "is not an af recording" not in ran.err
