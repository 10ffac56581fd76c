"""``af sessions``: the conversations in a store with their turn state, inbox depth and last
activity, and one of them turn by turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from afcore import Agent, Principal, RecordingConfig, mock
from afcore.sessions import PostgresStore, SessionStore, SQLiteStore
from afcore.sessions._turns import claim, open_session, post
from tests.afcli.conftest import Invoke
from tests.afcore.sessions.conftest import fresh_database, postgres_server_url

__all__ = ["postgres_server_url"]  # the fixture, shared with the library's tests


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AF_RECORDINGS", str(tmp_path / "runs"))
    return tmp_path


def _talk(store: SessionStore, sid: str, *messages: str, name: str = "talker") -> None:
    agent = Agent.create(
        provider=mock(respond=lambda r: f"answer to: {r.messages[-1].content}"),
        model="mock",
        name=name,
        record=RecordingConfig(),
        sessions=store,
    ).build()
    session = agent.session(sid)
    for m in messages:
        session.send(m)


def test_no_store_yet_is_no_sessions(here: Path, invoke: Invoke) -> None:
    ran = invoke("sessions")
    assert ran.code == 0 and ran.out == ""
    assert "no sessions: there is no session store at" in ran.err
    assert invoke("sessions", "--json").json() == []
    assert not (here / ".af").exists()  # reading made no store


def test_sessions_with_their_state_inbox_and_activity(here: Path, invoke: Invoke) -> None:
    with SQLiteStore(here / ".af" / "sessions.db") as store:
        _talk(store, "older", "hi")
        _talk(store, "newer", "hi", "again", name="helper")
        with store.transaction("newer") as tx:  # a message waiting, a turn whose process died
            row = open_session(tx, "helper")
            post(tx, row, "queued", Principal(subject="u_1"), False)
            tx.save(row)
        with store.transaction("dead") as tx:
            row = open_session(tx, "talker")
            post(tx, row, "lost", None, False)
            claim(
                tx,
                row,
                owner="elsewhere/1/1/x",
                lease=-1,
                name_run=lambda n: (None, None),
                known=None,
            )
            tx.save(row)
    ran = invoke("sessions", "--json")
    assert ran.code == 0, ran.err
    listed = {s["id"]: s for s in ran.json()}
    assert [s["id"] for s in ran.json()] == ["dead", "newer", "older"]  # latest activity first
    assert {k: listed["newer"][k] for k in ("agent", "state", "turns", "inbox", "messages")} == {
        "agent": "helper",
        "state": "idle",
        "turns": 2,
        "inbox": 1,
        "messages": 4,
    }
    assert listed["dead"]["state"] == "stopped" and listed["dead"]["owner"] == "elsewhere/1/1/x"
    assert listed["older"]["last_activity"].endswith("+00:00")
    assert [s["id"] for s in invoke("sessions", "--json", "--agent", "helper").json()] == ["newer"]
    assert len(invoke("sessions", "--json", "-n", "1").json()) == 1
    table = invoke("sessions")
    assert table.code == 0
    head, *rows = table.out.splitlines()
    assert head.split() == ["SESSION", "AGENT", "STATE", "TURNS", "INBOX", "LAST", "ACTIVE", "UTC"]
    assert rows[0].split()[:5] == ["dead", "talker", "stopped", "1", "0"]
    assert "turn 1 lost its process: the next message closes it as interrupted" in rows[1]
    assert rows[2].split()[:5] == ["newer", "helper", "idle", "2", "1"]


def test_one_session_turn_by_turn(here: Path, invoke: Invoke) -> None:
    with SQLiteStore(here / ".af" / "sessions.db") as store:
        _talk(store, "chat-1", "hello", "again")
        with store.transaction("chat-1") as tx:
            row = open_session(tx, "talker")
            post(tx, row, "later\x1b[31m", Principal(subject="u_9"), True)
            tx.save(row)
    ran = invoke("sessions", "chat-1", "--json")
    assert ran.code == 0, ran.err
    data = ran.json()
    assert data["session"]["id"] == "chat-1" and data["session"]["inbox"] == 1
    assert [(t["turn"], t["status"], t["answer"]) for t in data["turns"]] == [
        (1, "answer", "answer to: hello"),
        (2, "answer", "answer to: again"),
    ]
    for t in data["turns"]:
        assert Path(t["recording"]).is_file() and t["run_id"] in t["recording"]
    (item,) = data["inbox"]
    assert (item["text"], item["principal"], item["interrupt"]) == (
        "later\x1b[31m",
        {"subject": "u_9"},
        True,
    )
    text = invoke("sessions", "chat-1")
    assert text.code == 0
    assert "answer to: again" in text.out
    assert "inbox: 1 message waiting" in text.out
    assert "\x1b" not in text.out and "later\\x1b[31m" in text.out  # shown, never acted on


def test_unknown_and_hostile_ids(here: Path, invoke: Invoke) -> None:
    with SQLiteStore(here / ".af" / "sessions.db") as store:
        _talk(store, "chat-1", "hello")
    ran = invoke("sessions", "nope")
    assert ran.code == 2 and "there is no session 'nope' in" in ran.err
    ran = invoke("sessions", "../../etc")
    assert ran.code == 2 and "a session id is 1 to 128 characters" in ran.err


def test_a_store_named_that_is_not_there(here: Path, invoke: Invoke) -> None:
    ran = invoke("sessions", "--store", here / "missing.db")
    assert ran.code == 2 and "there is no session store at" in ran.err
    assert not (here / "missing.db").exists()
    (here / "folder").mkdir()
    ran = invoke("sessions", "--store", here / "folder")
    assert ran.code == 2 and "is a folder" in ran.err
    ran = invoke("sessions", "--store", "redis://x")
    assert ran.code == 2 and "redis:// is not a store af knows" in ran.err


def test_a_postgres_store(here: Path, invoke: Invoke, postgres_server_url: str) -> None:
    url = fresh_database(postgres_server_url)
    with PostgresStore(url) as store:
        _talk(store, "pg-1", "hello")
    ran = invoke("sessions", "--store", url, "--json")
    assert ran.code == 0, ran.err
    assert [(s["id"], s["turns"]) for s in ran.json()] == [("pg-1", 1)]
