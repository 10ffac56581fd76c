"""Who runs a turn, and whether they still can.

A turn's owner is ``host/pid/start/token``: the machine, the process id, when that process
started (so a process id used again by another process is not mistaken for the first), and a
token of the one ``send`` that runs the turn. A process on another machine is alive for as long
as its lease says; one on this machine is dead as soon as it is gone, so a turn killed here is
taken over by the next message at once instead of when its lease runs out.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading

__all__ = ["alive", "new_owner", "release"]

_active: set[str] = set()
"""The owners of this process's turns in flight (a turn of this process whose token is not
here was cut short without cleaning up, and is dead)."""
_lock = threading.Lock()
_me: tuple[int, str] | None = None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    # After the command: state is field 3, starttime field 22 (1-based).
    return fields[19].decode() if len(fields) > 19 else None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] in (b"Z", b"X")


def _prefix() -> str:
    global _me
    pid = os.getpid()
    if _me is None or _me[0] != pid:  # computed again in a forked child
        _me = (pid, f"{socket.gethostname()}/{pid}/{_start_time(pid) or '-'}")
    return _me[1]


def new_owner() -> str:
    """A fresh owner for a turn of this process; :func:`release` it when the turn is done."""
    owner = f"{_prefix()}/{secrets.token_hex(6)}"
    with _lock:
        _active.add(owner)
    return owner


def release(owner: str) -> None:
    with _lock:
        _active.discard(owner)


def alive(owner: str | None) -> bool:
    """Whether the owner may still be running its turn: False only when it surely is not."""
    if owner is None:
        return False
    parts = owner.split("/")
    if len(parts) != 4:
        return True  # not af's shape: only its lease can tell
    host, pid_text, start, _ = parts
    if host != socket.gethostname():
        return True
    if owner.startswith(_prefix() + "/"):
        with _lock:
            return owner in _active
    try:
        pid = int(pid_text)
    except ValueError:
        return True
    if pid <= 0:
        return True  # 0 and -1 would name process groups, not a process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    if _zombie(pid):
        return False
    now = _start_time(pid)
    return start == "-" or now is None or now == start
