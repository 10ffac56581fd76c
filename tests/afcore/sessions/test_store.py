"""The stores themselves: what they keep, losslessly, and what they refuse."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from afcore import Agent, RecordingConfig, SessionError, UsageError, mock
from afcore.messages import (
    AssistantMessage,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from afcore.sessions import (
    Principal,
    SessionStore,
    SQLiteStore,
    check_store_spec,
    default_store_path,
    open_store,
)
from afcore.sessions._store import StoredMessage
from afcore.sessions._turns import claim, open_session, post

AWKWARD = [
    UserMessage("plain"),
    UserMessage("nul \x00 byte, escape \x1b[31m, surrogate-free emoji 🙂, rtl \u202e, CRLF\r\n"),
    AssistantMessage(
        (
            ThinkingBlock("let me think", signature="EqQBCkYIBxgCKkDk+/=="),
            ThinkingBlock("", signature="opaque", redacted=True),
            TextBlock("I'll look."),
            ToolCall("toolu_01", "search", {"q": "x", "n": 3, "deep": {"a": [1, 2.5, None]}}),
            ToolCall("af-syn-1", "search", {}, id_synthesized=True),
        )
    ),
    ToolResultMessage("toolu_01", "search", "found", is_error=False),
    ToolResultMessage("af-syn-1", "search", "boom", is_error=True),
    AssistantMessage(()),
]


def test_a_transcript_comes_back_exactly_as_it_was_stored(store: SessionStore) -> None:
    with store.transaction("lossless") as tx:
        row = open_session(tx, "agent")
        tx.append(
            1, [StoredMessage(m, 1, "note" if i == 2 else None) for i, m in enumerate(AWKWARD)]
        )
        row.messages = len(AWKWARD)
        tx.save(row)
    with store.transaction("lossless", write=False) as tx:
        back = tx.transcript()
    assert [m.message for m in back] == AWKWARD
    assert [m.note for m in back] == [None, None, "note", None, None, None]


def test_the_inbox_keeps_order_ids_and_who_sent_what(store: SessionStore) -> None:
    with store.transaction("inbox") as tx:
        row = open_session(tx, "agent")
        a = post(tx, row, "first", Principal(subject="u1", roles=("r",)), False)
        b = post(tx, row, "second", Principal.anonymous(), True)
        c = post(tx, row, "third", None, False)
        tx.save(row)
    with store.transaction("inbox", write=False) as tx:
        pending = tx.pending()
    assert [(i.id, i.seq, i.text) for i in pending] == [
        (a.id, 1, "first"),
        (b.id, 2, "second"),
        (c.id, 3, "third"),
    ]
    assert [i.principal for i in pending] == [
        Principal(subject="u1", roles=("r",)),
        Principal.anonymous(),
        None,
    ]
    assert [i.interrupt for i in pending] == [False, True, False]
    assert len({a.id, b.id, c.id}) == 3


def test_sessions_lists_each_with_its_state_and_inbox(store: SessionStore) -> None:
    for sid, queued in (("one", 2), ("two", 0)):
        with store.transaction(sid) as tx:
            row = open_session(tx, "agent")
            for k in range(queued):
                post(tx, row, f"m{k}", None, False)
            tx.save(row)
    listed = {s.id: s for s in store.sessions()}
    assert set(listed) == {"one", "two"}
    assert (listed["one"].inbox, listed["two"].inbox) == (2, 0)
    assert listed["one"].state == "idle" and listed["one"].agent == "agent"


def test_sessions_tell_a_turn_whose_process_is_gone(store: SessionStore) -> None:
    """A turn marked running whose process died on this machine, or whose lease ran out, is
    said to be stopped; a live one elsewhere is running."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = f"{socket.gethostname()}/{gone.stdout.strip()}/1/abc"
    for sid, owner, lease in (
        ("dead-here", dead, 30.0),
        ("live-elsewhere", "elsewhere/42/1/abc", 30.0),
        ("expired-elsewhere", "elsewhere/42/1/abc", -1.0),
    ):
        with store.transaction(sid) as tx:
            row = open_session(tx, "agent")
            post(tx, row, "hi", None, False)
            claim(tx, row, owner=owner, lease=lease, name_run=lambda n: (None, None), known=None)
            tx.save(row)
    listed = {s.id: (s.state, s.stopped) for s in store.sessions()}
    assert listed == {
        "dead-here": ("running", True),
        "live-elsewhere": ("running", False),
        "expired-elsewhere": ("running", True),
    }
    info = store.info("dead-here")
    assert info is not None and info.stopped


def test_a_store_written_by_a_newer_af_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        store.sessions()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA user_version = 99")
    with SQLiteStore(path) as store, pytest.raises(SessionError, match="newer af"):
        store.sessions()


def test_a_store_that_cannot_be_opened_says_where(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with SQLiteStore(blocker / "s.db") as store, pytest.raises(SessionError, match=str(blocker)):
        store.sessions()


def test_the_default_store_is_beside_the_recordings_folder(tmp_path: Path) -> None:
    assert default_store_path(RecordingConfig(dir=tmp_path / "recs")) == (
        tmp_path / ".af" / "sessions.db"
    )
    agent = Agent.create(
        provider=mock(reply="hi"), model="m", record=RecordingConfig(dir=tmp_path / "recs")
    ).build()
    agent.session("x").send("hello")
    assert (tmp_path / ".af" / "sessions.db").is_file()
    assert agent.session("x").store is agent.session("y").store
    agent.session("x").store.close()


@pytest.mark.parametrize(
    ("spec", "kind"),
    [("state/s.db", "SQLiteStore"), ("postgresql://u@h/db", "PostgresStore")],
)
def test_sessions_takes_a_path_or_a_url(spec: str, kind: str, tmp_path: Path) -> None:
    store = open_store(spec if "://" in spec else str(tmp_path / spec))
    assert type(store).__name__ == kind
    store.close()


@pytest.mark.parametrize("bad", ["mysql://h/db", "", 5, b"bytes"])
def test_sessions_refuses_what_is_not_a_store(bad: object) -> None:
    with pytest.raises(UsageError):
        check_store_spec(bad)
    with pytest.raises(UsageError):
        Agent.create(provider=mock(reply="x"), model="m", sessions=bad)  # type: ignore[arg-type]


def test_a_postgres_url_keeps_its_password_out_of_messages() -> None:
    from afcore.sessions import PostgresStore

    store = PostgresStore("postgresql://af:s3cret@127.0.0.1:1/none", connect_timeout=1)
    assert "s3cret" not in store.name and "s3cret" not in repr(store)
    with pytest.raises(SessionError) as caught:
        store.sessions()
    assert "s3cret" not in str(caught.value)
    store.close()


def test_many_stores_opening_a_new_file_at_once_all_get_in(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "fresh.db"
    errors: list[BaseException] = []
    go = threading.Barrier(16)

    def one(k: int) -> None:
        agent = Agent.create(provider=mock(reply="hi"), model="m", sessions=path).build()
        session = agent.session(f"s{k}")
        go.wait()
        try:
            for _ in range(5):
                session.send("hello")
        except BaseException as e:  # collected, then asserted on
            errors.append(e)
        finally:
            session.store.close()

    threads = [threading.Thread(target=one, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with SQLiteStore(path) as store:
        assert sorted(s.turns for s in store.sessions()) == [5] * 16
