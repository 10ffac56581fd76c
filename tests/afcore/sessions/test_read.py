"""A session read back from its turns' recordings alone (``afcore.readmodel.session_runs``):
in order by the links their headers hold, with what is missing said, and a message a turn
continued from followed back to the turn that wrote it (``history_origin``)."""

from __future__ import annotations

from pathlib import Path

from afcore.readmodel import history_origin, session_runs, turn_header
from afcore.recording import open_recording
from afcore.sessions import SQLiteStore
from tests.afcore.sessions.agents import builder


def _talk(store: Path, recordings: Path, sid: str, *said: str) -> list[str]:
    with SQLiteStore(store) as opened:
        session = builder(opened, recordings).build().session(sid)
        return [str(session.send(text).run_id) for text in said]


def test_turns_in_order_by_their_links(tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    runs = _talk(tmp_path / "a.db", recordings, "t-1", "one", "two", "three")
    # Another store's session of the same id, its recordings in the same folder.
    others = _talk(tmp_path / "b.db", recordings, "t-1", "elsewhere")
    (recordings / "notes.jsonl").write_text("not a recording\n")
    (recordings / "huge.jsonl").write_bytes(b"x" * (2 << 20))

    found = session_runs(recordings / f"{runs[1]}.jsonl")
    assert found is not None and found.id == "t-1"
    assert [(t.turn, t.run_id, t.previous) for t in found.turns] == [
        (1, runs[0], None),
        (2, runs[1], runs[0]),
        (3, runs[2], runs[1]),
    ]
    assert found.gaps == [
        f"1 other recording in {recordings} name session 't-1' but are not linked to these turns"
    ]
    # By id: the chain of the furthest turn; the other store's turn is said, not mixed in.
    by_id = session_runs("t-1", recordings)
    assert by_id is not None and [t.run_id for t in by_id.turns] == runs
    assert len(by_id.gaps) == 1 and others[0] not in [t.run_id for t in by_id.turns]
    assert session_runs("nobody", recordings) is None
    assert turn_header(recordings / "notes.jsonl") is None
    assert turn_header(recordings / "huge.jsonl") is None

    (recordings / f"{runs[0]}.jsonl").unlink()
    found = session_runs(recordings / f"{runs[2]}.jsonl")
    assert found is not None and [t.turn for t in found.turns] == [2, 3]
    assert f"turn 1's recording (run {runs[0]}) is not in {recordings}" in found.gaps


def test_a_message_continued_from_is_followed_to_the_turn_that_wrote_it(tmp_path: Path) -> None:
    recordings = tmp_path / "recordings"
    runs = _talk(tmp_path / "a.db", recordings, "t-2", "one", "two")
    with open_recording(recordings / f"{runs[1]}.jsonl") as rec:
        first = history_origin(rec, 1)
        second = history_origin(rec, 2)
        own = history_origin(rec, 3)  # the user's message of this turn: not continued from
    assert first is not None and (first.turn, first.key, first.closed) == (1, "message:1", False)
    assert second is not None and (second.turn, second.key) == (1, "message:2")
    assert first.run is not None and first.run.run_id == runs[0]
    assert own is None
