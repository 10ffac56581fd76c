"""``af sessions``: the conversations in a session store, or one of them turn by turn."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from afcli._errors import EXIT_FAILED, EXIT_USAGE, CliError, command
from afcli._stores import StoreOption

if TYPE_CHECKING:
    from afcore.sessions import InboxItem, SessionInfo, SessionStore, TurnInfo

__all__ = ["sessions"]


@command
def sessions(
    session: Annotated[
        str | None,
        typer.Argument(
            metavar="[ID]",
            help="A session's id: list its turns and its inbox.",
            show_default=False,
        ),
    ] = None,
    store: StoreOption = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            metavar="NAME",
            help="Only sessions of the agent of this name.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", "-n", min=1, help="Show at most this many.", show_default=False),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> None:
    """List the sessions in a store, the most recently active first: agent, turn state,
    turns, inbox depth, last activity. With an ID: that session's turns (status, run id,
    answer) and the messages waiting in its inbox.

    A turn marked running whose process is gone (or whose lease ran out) shows as stopped:
    the next message sent to the session closes it as interrupted.
    """
    from afcli._render import err_console, print_json
    from afcli._stores import open_store, store_path
    from afcore.errors import SessionError

    opened = open_store(store, create=False)
    if opened is None:
        where = store_path(store)
        if session is not None:
            raise CliError(f"there is no session {session!r}: no session store at {where}")
        if json_output:
            print_json([])
        else:
            err_console().print(f"no sessions: there is no session store at {where}")
        return
    try:
        with opened:
            if session is not None:
                _one(opened, session, json_output, limit)
                return
            listed = [s for s in opened.sessions() if agent is None or s.agent == agent]
    except SessionError as e:
        raise CliError(str(e), EXIT_FAILED) from None
    if limit is not None:
        listed = listed[:limit]
    if json_output:
        print_json([_info_json(s) for s in listed])
    elif not listed:
        what = f" of the agent {agent!r}" if agent is not None else ""
        err_console().print(f"no sessions{what} in {opened.name}")
    else:
        _table(listed)


def _one(store: SessionStore, session_id: str, json_output: bool, limit: int | None) -> None:
    from afcore.errors import UsageError
    from afcore.sessions import check_session_id

    try:
        check_session_id(session_id)
    except UsageError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    with store.transaction(session_id, write=False) as tx:
        row = tx.session()
        turns = tx.turns() if row is not None else []
        inbox = tx.pending() if row is not None else []
    info = store.info(session_id) if row is not None else None
    if info is None:
        raise CliError(f"there is no session {session_id!r} in {store.name}", EXIT_USAGE)
    if limit is not None:
        turns = turns[-limit:]
    if json_output:
        from afcli._render import print_json

        print_json(
            {
                "session": _info_json(info),
                "turns": [_turn_json(t) for t in turns],
                "inbox": [_item_json(i) for i in inbox],
            }
        )
        return
    _print_one(info, turns, inbox)


# -- JSON ------------------------------------------------------------------------------------


def _when(seconds: float | None) -> str | None:
    """A store's time (seconds since the epoch) as recordings write theirs: ISO 8601, UTC."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")


def _state(info: SessionInfo) -> str:
    return "stopped" if info.stopped else info.state


def _info_json(s: SessionInfo) -> dict[str, Any]:
    return {
        "id": s.id,
        "agent": s.agent,
        "state": _state(s),
        "owner": s.owner,
        "since": _when(s.since),
        "turns": s.turns,
        "inbox": s.inbox,
        "messages": s.messages,
        "created": _when(s.created),
        "last_activity": _when(s.last_activity),
    }


def _turn_json(t: TurnInfo) -> dict[str, Any]:
    return {
        "turn": t.n,
        "status": t.status,
        "started": _when(t.started),
        "ended": _when(t.ended),
        "run_id": t.run_id,
        "recording": t.recording,
        "messages": list(t.messages),
        "answer": t.answer,
        "note": t.note,
        "owner": t.owner,
    }


def _item_json(i: InboxItem) -> dict[str, Any]:
    return {
        "id": i.id,
        "position": i.seq,
        "text": i.text,
        "principal": i.principal.to_json() if i.principal is not None else None,
        "posted": _when(i.posted),
        "interrupt": i.interrupt,
    }


# -- text ------------------------------------------------------------------------------------


def _minute(seconds: float | None) -> str:
    when = _when(seconds)
    return when[:16].replace("T", " ") if when else ""


def _ago(seconds: float | None, now: float) -> str:
    if seconds is None:
        return ""
    age = max(now - seconds, 0.0)
    if age < 90:
        return f"{age:.0f} s"
    if age < 5400:
        return f"{age / 60:.0f} min"
    return f"{age / 3600:.1f} h"


def _state_cell(s: SessionInfo, now: float) -> tuple[str, str]:
    if s.stopped:
        return "stopped", "bold yellow"
    if s.state == "running":
        return f"running {_ago(s.since, now)}", "bold cyan"
    return "idle", "dim"


def _table(listed: list[SessionInfo]) -> None:
    import time

    from rich.text import Text

    from afcli._render import columns, out_console
    from afcore.readmodel import line

    now = time.time()
    rows = [
        (
            line(s.id, 40),
            line(s.agent, 24),
            _state_cell(s, now)[0],
            str(s.turns),
            str(s.inbox),
            _minute(s.last_activity),
        )
        for s in listed
    ]
    heads = ("SESSION", "AGENT", "STATE", "TURNS", "INBOX", "LAST ACTIVE UTC")
    cells = columns(heads, rows, right={3, 4})

    console = out_console()
    console.print(Text("  ".join(cells(heads)).rstrip(), "bold"), soft_wrap=True)
    for s, row in zip(listed, rows, strict=True):
        sid, agent, state, turns, inbox, last = cells(row)
        text = Text.assemble(
            (sid, "bold"),
            "  ",
            agent,
            "  ",
            (state, _state_cell(s, now)[1]),
            "  ",
            turns,
            "  ",
            (inbox, "bold yellow" if s.inbox else ""),
            "  ",
            (last, "dim"),
        )
        text.rstrip()
        console.print(text, soft_wrap=True)
        if s.stopped:
            console.print(
                Text(
                    f"  └ turn {s.turns} lost its process: the next message closes it as "
                    "interrupted",
                    "dim",
                )
            )


def _print_one(info: SessionInfo, turns: list[TurnInfo], inbox: list[InboxItem]) -> None:
    import time

    from rich.text import Text

    from afcli._render import out_console
    from afcore.readmodel import line, plural, safe, status_style

    console = out_console()
    width = max(console.width, 60)
    now = time.time()
    state, style = _state_cell(info, now)
    console.print(
        Text.assemble(
            ("session ", "dim"),
            (safe(info.id), "bold"),
            "  ",
            (safe(info.agent), "bold"),
            "  ",
            (state, style),
            (
                f"  {plural(info.turns, 'turn')} · {plural(info.messages, 'message')} · "
                f"inbox {info.inbox}",
                "dim",
            ),
        ),
        soft_wrap=True,
    )
    console.print(
        Text(
            f"created {_minute(info.created)} UTC · last active {_minute(info.last_activity)} UTC",
            "dim",
        )
    )
    if info.stopped:
        console.print(
            Text(
                f"turn {info.turns} lost its process: the next message closes it as interrupted",
                "yellow",
            )
        )
    if turns:
        console.print()
        heads = ("TURN", "STATUS", "STARTED UTC", "RUN")
        rows = [
            (
                str(t.n),
                t.status.replace("_", " "),
                (_when(t.started) or "")[:19].replace("T", " "),
                t.run_id or "(not recorded)",
            )
            for t in turns
        ]
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
        console.print(
            Text("  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)), "bold"),
            soft_wrap=True,
        )
        for t, row in zip(turns, rows, strict=True):
            n, status, started, run = (v.ljust(w) for v, w in zip(row, widths, strict=True))
            head = Text.assemble(
                n, "  ", (status, status_style(t.status)), "  ", (started, "dim"), "  ", run
            )
            head.rstrip()
            console.print(head, soft_wrap=True)
            said = t.answer if t.status in ("answer", "max_iterations") else t.note or ""
            if said:
                indent = " " * (widths[0] + 2)
                style = "" if t.status == "answer" else "dim"
                console.print(Text(indent + line(said, width - len(indent)), style))
    if inbox:
        console.print()
        console.print(Text(f"inbox: {plural(len(inbox), 'message')} waiting", "bold yellow"))
        for i in inbox:
            who = ""
            if i.principal is not None:
                who = (
                    f" from {i.principal.subject}"
                    if i.principal.authenticated
                    else " from an unauthenticated caller"
                )
            head = Text.assemble(
                (f"  #{i.seq} ", "dim"),
                (f"{_minute(i.posted)}{safe(who)}", "dim"),
                (" interrupt" if i.interrupt else "", "yellow"),
                "  ",
            )
            head.append(line(i.text, max(width - len(head.plain), 20)))
            console.print(head, soft_wrap=True)
