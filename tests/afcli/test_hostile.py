"""Bad and hostile recordings through `af ls`, `af show` and `af verify`: each says what is
wrong and where, exits with a code, and never prints a traceback or hangs. Text from models
and tools reaches the terminal literally."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from afcore.recording import MAX_LINE
from tests.afcli.conftest import Invoke, Ran
from tests.conftest import reseal


def lines_of(demo: dict[str, Any]) -> list[bytes]:
    return Path(demo["recording"]).read_bytes().splitlines(keepends=True)


def no_traceback(ran: Ran) -> None:
    assert "Traceback" not in ran.err and "Traceback" not in ran.out


@pytest.fixture
def bad(tmp_path: Path, demo: dict[str, Any]) -> Path:
    """A folder of broken recordings, each made from a real one."""
    folder = tmp_path / "bad"
    folder.mkdir()
    lines = lines_of(demo)
    # The last write (run_end, then its seal) cut off in its first line.
    (folder / "torn.jsonl").write_bytes(b"".join(lines[:-2]) + lines[-2][:25])
    malformed = list(lines)
    malformed[5] = b'{"t": "commit", "seq": oops\n'
    (folder / "malformed.jsonl").write_bytes(b"".join(malformed))
    unknown = list(lines)
    unknown.insert(6, b'{"t": "telemetry", "cpu": 0.5}\n')
    # As a newer minor version would write it: sealed with the rest.
    (folder / "unknown.jsonl").write_bytes(reseal(b"".join(unknown)))
    header = json.loads(lines[0])
    header["version"] = "2.0"
    (folder / "future.jsonl").write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    (folder / "garbage.jsonl").write_bytes(bytes(range(256)) * 64 + os.urandom(4096))
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "text.jsonl").write_bytes(b"just some notes\nnot a recording\n")
    return folder


def test_ls_reports_each_bad_file_without_failing(invoke: Invoke, bad: Path) -> None:
    ran = invoke("ls", bad, "--json")
    assert ran.code == 0, ran.err
    by_name = {Path(e["path"]).name: e for e in ran.json()}
    assert by_name["unknown.jsonl"]["status"] == "answer"
    assert by_name["malformed.jsonl"]["status"] == "answer"  # ls reads only head and tail
    assert by_name["torn.jsonl"]["status"] == "incomplete"
    assert "torn" in by_name["torn.jsonl"]["reason"]
    expected = {
        "future.jsonl": "format version 2.0 is newer than this af reads",
        "garbage.jsonl": "line 1 is not JSON",
        "empty.jsonl": "empty",
        "text.jsonl": "line 1 is not JSON",
    }
    for name, reason in expected.items():
        assert by_name[name]["status"] == "unreadable", name
        assert reason in by_name[name]["reason"], name
    human = invoke("ls", bad)
    assert human.code == 0
    no_traceback(human)
    assert "unreadable" in human.out and "└ format version 2.0" in human.out


def test_verify_torn_tail(invoke: Invoke, bad: Path, demo: dict[str, Any]) -> None:
    ran = invoke("verify", bad / "torn.jsonl", "--json")
    assert ran.code == 1
    report = ran.json()
    assert report["ok"] is False and report["torn_tail"]["bytes"] == 25
    # Every complete call still checks.
    assert report["verified"] == report["calls"] == demo["calls"]
    human = invoke("verify", bad / "torn.jsonl")
    assert human.code == 1
    assert f"line {report['torn_tail']['line']}: torn (25 bytes)" in human.out


def test_show_torn_tail_shows_what_there_is(
    invoke: Invoke, bad: Path, demo: dict[str, Any]
) -> None:
    ran = invoke("show", bad / "torn.jsonl", "--json")
    assert ran.code == 0, ran.err
    view = ran.json()
    assert view["status"] == "incomplete" and view["torn_tail"]["bytes"] == 25
    assert len(view["calls"]) == demo["calls"]
    human = invoke("show", bad / "torn.jsonl")
    assert "incomplete: the recording has no run_end" in human.out


def test_malformed_line_is_named_by_its_number(invoke: Invoke, bad: Path) -> None:
    ran = invoke("verify", bad / "malformed.jsonl", "--json")
    assert ran.code == 1
    problems = ran.json()["problems"]
    assert {"line": 6, "message": problems[0]["message"]} == problems[0]
    assert problems[0]["message"].startswith("not valid JSON")
    show = invoke("show", bad / "malformed.jsonl", "--json")
    assert show.code == 0
    assert show.json()["problems"][0]["line"] == 6
    human = invoke("show", bad / "malformed.jsonl")
    assert "line 6: not valid JSON" in human.out
    no_traceback(human)


def test_unknown_record_types_are_kept_and_counted(invoke: Invoke, bad: Path) -> None:
    ran = invoke("verify", bad / "unknown.jsonl", "--json")
    assert ran.code == 0, ran.out
    assert ran.json()["unknown_records"] == 1 and ran.json()["ok"] is True
    show = invoke("show", bad / "unknown.jsonl", "--json")
    assert show.code == 0 and show.json()["unknown_records"] == 1
    assert show.json()["status"] == "answer"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("future.jsonl", "format version 2.0, newer than this af reads"),
        ("garbage.jsonl", "is not an af recording: line 1"),
        ("empty.jsonl", "is empty"),
        ("text.jsonl", "is not an af recording: line 1"),
    ],
)
def test_files_that_cannot_be_read_fail_with_one_sentence(
    invoke: Invoke, bad: Path, name: str, message: str
) -> None:
    for command in ("show", "verify"):
        ran = invoke(command, bad / name)
        assert ran.code == 1, command
        no_traceback(ran)
        assert ran.out == ""
        (line,) = ran.err.strip().splitlines()
        assert line.startswith("error: ") and message in line
    report = invoke("verify", bad / name, "--json")
    assert report.code == 1
    assert report.json()["ok"] is False and message in report.json()["problems"][0]["message"]


def test_a_50_mb_line_is_skipped_not_loaded(
    invoke: Invoke, tmp_path: Path, demo: dict[str, Any]
) -> None:
    lines = lines_of(demo)
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.writelines(lines[:6])
        f.write(b'{"t": "blob", "id": "x", "value": "' + b"a" * (50 * 1024 * 1024) + b'"}\n')
        f.writelines(lines[6:])
    ran = invoke("verify", path, "--json")
    assert ran.code == 1
    problem, *rest = ran.json()["problems"]
    assert problem["line"] == 7 and "50.0 MB" in problem["message"]
    # A line that was not written with the rest: the seal of its write says so too.
    assert len(rest) == 1 and "do not match their seal" in rest[0]["message"]
    assert ran.json()["verified"] == demo["calls"]
    show = invoke("show", path, "--json")
    assert show.code == 0 and show.json()["status"] == "answer"
    listed = invoke("ls", tmp_path, "--json")
    assert listed.code == 0
    assert {e["status"] for e in listed.json()} == {"answer"}
    # The same line first: not a header, and ls does not read past its first megabyte.
    first = tmp_path / "huge-first.jsonl"
    first.write_bytes(b"a" * (50 * 1024 * 1024) + b"\n" + b"".join(lines))
    entry = next(e for e in invoke("ls", tmp_path, "--json").json() if "first" in e["path"])
    assert entry["status"] == "unreadable" and "longer than" in entry["reason"]
    ran = invoke("show", first)
    assert ran.code == 1 and "50.0 MB" in ran.err


# -- text shown literally ----------------------------------------------------------------

HOSTILE = "\x1b[31mRED\x1b[0m [bold red]x[/] :smile: \x07\x9b2J\u202egnp.exe"

AGENT = f"""
from afcore import Agent, define_tool, mock

probe = define_tool(
    name="probe",
    description="Returns what it was told to.",
    input_schema={{"type": "object"}},
    execute=lambda args, ctx: {HOSTILE!r},
)
agent = (
    Agent.create(
        provider=mock(replies=[
            {{
                "content": "[link=http://x]see[/link]",
                "tool_calls": [{{"name": "probe", "args": {{}}}}],
            }},
            {{"content": "done \\x1b]0;title\\x07 [red]ok[/]"}},
        ]),
        model="m",
    )
    .tool(probe)
    .build()
)
"""


def assert_literal(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "\u202e" not in text


def test_model_and_tool_text_is_shown_literally(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "hostile.py"
    path.write_text(AGENT)
    ran = invoke("run", path, "go", "--out", tmp_path / "runs", env={"COLUMNS": "200"})
    assert ran.code == 0, ran.err
    assert_literal(ran.err)
    # Not a terminal: the answer is the model's text exactly, for a program to read.
    assert ran.out == "done \x1b]0;title\x07 [red]ok[/]\n"
    # A terminal would act on it: there it is shown escaped.
    on_terminal = invoke(
        "run", path, "go", "--out", tmp_path / "tty", env={"COLUMNS": "200", "TTY_COMPATIBLE": "1"}
    )
    assert on_terminal.code == 0, on_terminal.err
    # (streamed on the terminal already, so not printed twice)
    both = on_terminal.out + on_terminal.err
    assert "\x1b]0;title" not in both and "\x07" not in both and "\x9b" not in both
    assert "done \\x1b]0;title\\x07 [red]ok[/]" in both
    assert "\\x1b[31mRED\\x1b[0m [bold red]x[/] :smile: \\x07\\x9b2J\\u202egnp.exe" in ran.err
    assert "[link=http://x]see[/link]" in ran.err
    (recorded,) = (tmp_path / "runs").glob("*.jsonl")

    show = invoke("show", recorded, env={"COLUMNS": "200"})
    assert show.code == 0, show.err
    assert_literal(show.out + show.err)
    assert "\\x1b[31mRED\\x1b[0m [bold red]x[/] :smile:" in show.out
    assert "[link=http://x]see[/link]" in show.out
    assert "done \\x1b]0;title\\x07 [red]ok[/]" in show.out

    call = invoke("show", recorded, "--call", "2", env={"COLUMNS": "200"})
    assert call.code == 0, call.err
    assert_literal(call.out)
    assert "\\x1b[31mRED\\x1b[0m [bold red]x[/] :smile: \\x07\\x9b2J\\u202egnp.exe" in call.out

    # JSON keeps the exact text (escaped the JSON way).
    data = invoke("show", recorded, "--json").json()
    assert data["calls"][0]["results"][0]["content"] == HOSTILE


def test_a_hostile_agent_name_and_path_in_ls(invoke: Invoke, tmp_path: Path) -> None:
    line = {
        "t": "header",
        "format": "af.recording",
        "version": "1.0",
        "run_id": "r\x1b[2Jid",
        "started_at": "2026-01-01T00:00:00.000+00:00",
        "af_version": "0",
        "python": "3",
        "agent": {"name": "[bold]\x1b[5mblink"},
        "provider": {"name": "mock"},
        "model": "m",
        "config": {"max_iterations": 1, "tool_arg_validation": "enforce"},
        "redaction": {},
    }
    (tmp_path / "odd.jsonl").write_text(json.dumps(line) + "\n")
    ran = invoke("ls", tmp_path)
    assert ran.code == 0, ran.err
    assert_literal(ran.out)
    assert "[bold]\\x1b[5mblink" in ran.out and "incomplete" in ran.out


# -- records that are valid JSON but break the format ------------------------------------

_ODD_VALUES: list[Any] = [None, -1, 0, 10**30, "", "x", [], {}, [[5, 1]], [None], 1.5, True]


def _mangle(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """``value`` with one field, somewhere inside, replaced by a value of the wrong shape."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        out = dict(value)
        if depth > 3 or rng.random() < 0.35:
            out[key] = rng.choice(_ODD_VALUES)
        else:
            out[key] = _mangle(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        out_list = list(value)
        out_list[i] = (
            rng.choice(_ODD_VALUES) if rng.random() < 0.4 else _mangle(value[i], rng, depth + 1)
        )
        return out_list
    return rng.choice(_ODD_VALUES)


@pytest.fixture(params=["trip", "compaction"])
def any_demo(request: pytest.FixtureRequest, invoke: Invoke, tmp_path: Path) -> dict[str, Any]:
    """A run of a built-in demo: the trip, and the research run whose window folds."""
    ran = invoke("run", "--demo", request.param, "--json", "--out", tmp_path / "runs")
    assert ran.code == 0, ran.err
    outcome: dict[str, Any] = ran.json()
    return outcome


def _window_line(record: dict[str, Any]) -> bool:
    """A record of the window's: a fold, its summarizer's stage or call, an eviction."""
    return record.get("t") == "context_evicted" or str(record.get("rsid", "")).startswith(
        ("window#", "summarize#")
    )


def test_records_of_the_wrong_shape_never_crash_a_command(
    invoke: Invoke, tmp_path: Path, any_demo: dict[str, Any]
) -> None:
    rng = random.Random(20260101)
    lines = [json.loads(line) for line in lines_of(any_demo)]
    # The folds' own records are few among many: mangle one of them in every other file.
    window = [i for i, r in enumerate(lines) if _window_line(r)]
    path = tmp_path / "odd" / "mangled.jsonl"
    path.parent.mkdir()
    for round in range(40):
        mangled = list(lines)
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(mangled))
            mangled[i] = _mangle(mangled[i], rng)
        if window and round % 2:
            i = rng.choice(window)
            mangled[i] = _mangle(mangled[i], rng)
        path.write_text("".join(json.dumps(r) + "\n" for r in mangled))
        for args in (
            ("show", path),
            ("show", path, "--json"),
            ("show", path, "--call", str(rng.randint(1, any_demo["calls"]))),
            ("verify", path, "--json"),
            ("ls", path.parent, "--json"),
        ):
            ran = invoke(*args)
            assert ran.code in (0, 1, 2), args
            assert "unexpectedly" not in ran.err, (args, ran.err)
            no_traceback(ran)


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def test_numbers_in_keys_that_int_refuses_never_crash_a_command(
    invoke: Invoke, tmp_path: Path, any_demo: dict[str, Any]
) -> None:
    """Superscript digits are digits to ``str.isdigit`` and no number to ``int``: in a write's
    key (``fold:²``, ``message:³``), a read's and a stage's counter they are keys like any
    other, reported where they break the log, never an error of af's."""
    text = Path(any_demo["recording"]).read_text()
    for key in ('"key": "fold:', '"key": "message:', '["reply:', "#"):
        for spaced in (key, key.replace(": ", ":")):
            at = text.find(spaced)
            if at >= 0:
                end = at + len(spaced)
                text = text[:end] + text[end].translate(_SUPERSCRIPT) + text[end + 1 :]
    assert any(c in text for c in "⁰¹²³⁴⁵⁶⁷⁸⁹")
    path = tmp_path / "odd" / "superscript.jsonl"
    path.parent.mkdir()
    path.write_text(text)
    for args in (
        ("show", path),
        ("show", path, "--json"),
        ("show", path, "--call", "2"),
        ("verify", path, "--json"),
        ("why", path, "answer"),
        ("why", path, "fold:²"),
        ("why", path, "message:²"),
        ("ls", path.parent, "--json"),
    ):
        ran = invoke(*args)
        assert ran.code in (0, 1, 2), (args, ran.err)
        assert "unexpectedly" not in ran.err, (args, ran.err)
        no_traceback(ran)


def test_a_tool_commit_that_is_no_valid_record_is_named_by_its_line_in_why_and_diff(
    invoke: Invoke, tmp_path: Path, demo: dict[str, Any]
) -> None:
    """A tool's commit indexed by its key and tool, then found invalid when a command reads it
    whole: ``af why`` says which line in one sentence, ``af diff`` shows it as a difference."""
    lines = lines_of(demo)
    at = next(i for i, x in enumerate(lines) if x.startswith(b'{"t":"commit"') and b'"tool":' in x)
    tool = json.loads(lines[at])["tool"]
    lines[at] = lines[at].replace(b'"status":"ok"', b'"status":"fine"', 1)
    path = tmp_path / "bad-status.jsonl"
    path.write_bytes(b"".join(lines))
    ran = invoke("why", path, f"tool:{tool['name']}#{tool['k']}.result")
    assert ran.code == 1 and f"line {at + 1} is not a valid commit record" in ran.err, ran.err
    ran = invoke("diff", demo["recording"], path)
    assert ran.code in (0, 1) and "unexpectedly" not in ran.err, ran.err
    assert "unreadable" in ran.out
    no_traceback(ran)


def test_a_window_naming_a_trillion_messages_neither_hangs_show_nor_verify(
    invoke: Invoke, tmp_path: Path, demo: dict[str, Any]
) -> None:
    lines = [json.loads(line) for line in lines_of(demo)]
    for record in lines:
        if record.get("t") == "call" and record.get("call") == 2:
            record["window"] = [[1, 10**12]]
    path = tmp_path / "huge-window.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    for args in (("show", path, "--call", "2"), ("show", path, "--call", "3"), ("verify", path)):
        ran = invoke(*args)
        assert ran.code in (0, 1), (args, ran.err)
        assert "unexpectedly" not in ran.err
    assert "outside messages" in invoke("verify", path).out


# -- every command that reads a recording, on each hostile file -----------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "recordings" / "sample-trip.jsonl"

COMMANDS: dict[str, Any] = {
    "show": lambda f, out: ("show", f),
    "verify": lambda f, out: ("verify", f),
    "why": lambda f, out: ("why", f, "answer"),
    "replay": lambda f, out: ("replay", f, "--out", out),
    "diff (a)": lambda f, out: ("diff", f, SAMPLE),
    "diff (b)": lambda f, out: ("diff", SAMPLE, f),
    "export": lambda f, out: ("export", f, "-o", out / "x.afz"),
    "export --html": lambda f, out: ("export", f, "--html", out / "x.html"),
    "report": lambda f, out: ("report", f),
    "resume": lambda f, out: ("resume", f, "--approve"),
    "lens": lambda f, out: ("lens", f),
    "lens --diff": lambda f, out: ("lens", SAMPLE, "--diff", f),
}
"""Each command with the file in the place it reads a recording."""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files no command can read as a recording, and files it must read what it can of."""
    folder = tmp_path_factory.mktemp("hostile")
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "folder.jsonl").mkdir()
    (folder / "binary.jsonl").write_bytes(bytes(range(256)) * 64 + b"\x00" * 512)
    # One line longer than a record may be: nothing to read a header from.
    (folder / "huge.jsonl").write_bytes(b"{" * (MAX_LINE + 1024) + b"\n")
    unknown = list(lines)
    unknown.insert(3, b'{"t": "telemetry", "cpu": 0.5}\n')
    unknown.insert(9, b'{"t": "future_thing", "nested": {"a": [1, "\\u001b[31m"]}}\n')
    (folder / "unknown.jsonl").write_bytes(reseal(b"".join(unknown)))
    (folder / "torn.jsonl").write_bytes(b"".join(lines[:-3]) + lines[-3][:40])
    return folder


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("empty.jsonl", "is empty, not an af recording"),
        ("folder.jsonl", "is a folder, not a recording"),
        ("binary.jsonl", "is not an af recording: line 1: not valid JSON"),
        ("huge.jsonl", "is not an af recording: line 1: line is 32.0 MB"),
    ],
)
def test_every_command_refuses_what_is_no_recording_in_one_sentence(
    invoke: Invoke, hostile: Path, tmp_path: Path, command: str, name: str, said: str
) -> None:
    ran = invoke(*COMMANDS[command](hostile / name, tmp_path))
    no_traceback(ran)
    assert ran.code in (1, 2), (ran.code, ran.out, ran.err)
    (line,) = ran.err.strip().splitlines()
    assert line.startswith("error: ") and said in line and name in line, line
    assert line.count(". ") == 0 and not line.endswith("skipped"), line


# What each command does with the clean sample: the file with unknown records must do the same.
READ_AS_CLEAN = {c: c != "resume" for c in COMMANDS if not c.startswith("lens")}


@pytest.mark.parametrize("command", READ_AS_CLEAN)
def test_every_command_reads_unknown_records_as_the_format_promises(
    invoke: Invoke, hostile: Path, tmp_path: Path, command: str
) -> None:
    clean = invoke(*COMMANDS[command](SAMPLE, tmp_path / "clean"))
    ran = invoke(*COMMANDS[command](hostile / "unknown.jsonl", tmp_path / "unknown"))
    no_traceback(ran)
    assert ran.code == clean.code, (ran.out, ran.err)
    if READ_AS_CLEAN[command]:
        assert ran.code == 0, ran.err
    assert "\x1b[31m" not in ran.out + ran.err


@pytest.mark.parametrize("command", READ_AS_CLEAN)
def test_every_command_reads_a_torn_file_up_to_its_tear(
    invoke: Invoke, hostile: Path, tmp_path: Path, command: str
) -> None:
    ran = invoke(*COMMANDS[command](hostile / "torn.jsonl", tmp_path))
    no_traceback(ran)
    said = " ".join((ran.out + ran.err).split())
    assert said, "a torn file is read and something is said of it"
    assert "1 line that are" not in said, said
    assert ran.err.count("error: ") <= 1, ran.err


@pytest.mark.parametrize("command", ["run", "chat"])
@pytest.mark.parametrize(
    ("write", "said"),
    [
        (lambda p: p.write_text("from afcore import Agent\nagent = Agent.create(\n"), "line 2"),
        (lambda p: p.write_text(""), "defines no Agent"),
        (lambda p: p.write_bytes(bytes(range(256)) * 8), "null bytes"),
        (lambda p: p.mkdir(), "is a folder"),
    ],
    ids=["torn", "empty", "binary", "folder"],
)
def test_an_agent_file_that_is_no_agent_is_refused_in_one_sentence(
    invoke: Invoke, tmp_path: Path, command: str, write: Any, said: str
) -> None:
    agent = tmp_path / "bot.py"
    write(agent)
    ran = invoke(command, agent, *(["hi"] if command == "run" else []), input="hi\n")
    no_traceback(ran)
    assert ran.code == 2
    (line,) = ran.err.strip().splitlines()
    assert line.startswith("error: ") and said in line and "None" not in line, line


@pytest.mark.parametrize(
    "command",
    [
        ("sessions",),
        ("chat", "afcore.demos.trip:build_agent"),
        ("lens", "--session", "x"),
    ],
    ids=["sessions", "chat", "lens"],
)
@pytest.mark.parametrize(
    ("store", "said"),
    [
        (b"\x00\x01 not sqlite" * 100, "file is not a database"),
        (b"SQLite format 3\x00" + bytes(range(256)) * 8, "file is not a database"),
        (None, "is a folder"),
    ],
    ids=["binary", "torn", "folder"],
)
def test_a_session_store_that_is_no_database_is_refused_in_one_sentence(
    invoke: Invoke, tmp_path: Path, command: tuple[str, ...], store: bytes | None, said: str
) -> None:
    path = tmp_path / "store.db"
    if store is None:
        path.mkdir()
    else:
        path.write_bytes(store)
    ran = invoke(*command, "--store", path, input="hi\n")
    no_traceback(ran)
    assert ran.code in (1, 2)
    (line,) = ran.err.strip().splitlines()
    assert line.startswith("error: ") and said in line and "store.db" in line, line
    assert line.count("session store") <= 1, line


@pytest.mark.parametrize(
    ("edit", "into"),
    [
        # The reply's message: not an object, then an object whose content is no list.
        (
            '"value":{"content":[{"text":"Let me check',
            '"value":"a text","x":{"content":[{"text":"Let',
        ),
        ('"value":{"content":[{"text":"Let me check', '"value":{"content":7,"x":[{"text":"Let'),
        # A decision's reads: a number where a list of reads goes.
        ('"id":"currency","reads":[', '"id":"currency","reads":1.5,"was":['),
    ],
    ids=["message-a-text", "content-a-number", "reads-a-number"],
)
def test_why_reads_any_json_where_a_list_or_an_object_goes(
    invoke: Invoke, tmp_path: Path, edit: str, into: str
) -> None:
    # A value the file wrote is followed only as far as its shape allows: these stopped
    # af why with "af failed unexpectedly" (an attribute or iteration error).
    data = SAMPLE.read_bytes()
    assert data.count(edit.encode()) == 1
    path = tmp_path / "edited.jsonl"
    path.write_bytes(reseal(data.replace(edit.encode(), into.encode())))
    for key in ("answer", "tool:weather#1.args", "tool:weather#1.result"):
        ran = invoke("why", path, key)
        assert ran.code == 0, (key, ran.err)
        assert key.partition(".")[0] in ran.out or key == "answer"
