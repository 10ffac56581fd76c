"""A recording's summary from its first and last lines only, for ``af ls``.

The header says what ran; a finished run's last line is its ``run_end``. Both reads are
bounded, so listing a folder of huge or hostile files costs the same as listing small ones.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from afcore.recording import InvalidRecord, beyond_defaults, dump, typed

__all__ = ["HEAD_LIMIT", "TAIL_LIMIT", "peek"]

HEAD_LIMIT = 1024 * 1024
"""A header is a few hundred bytes; a first line longer than this is not one."""
TAIL_LIMIT = 64 * 1024
"""A run_end is a few hundred bytes (a long answer is stored as a blob before it)."""


class _Unreadable(Exception):
    pass


def peek(path: Path) -> dict[str, Any]:
    """``{"run_id", "path", "started_at", "agent", "model", "status", "iterations", "calls",
    "usage", "tokens", "reason"}``; status is the run's, ``incomplete`` when the file has no
    run_end, ``unreadable`` when it is not a recording (``reason`` says why)."""
    entry: dict[str, Any] = {
        "run_id": None,
        "path": str(path),
        "started_at": None,
        "agent": None,
        "model": None,
        "status": "unreadable",
        "iterations": None,
        "calls": None,
        "usage": None,
        "tokens": None,
        "reason": None,
    }
    try:
        with path.open("rb") as f:
            header = _header(f.readline(HEAD_LIMIT + 1))
            if header["t"] == "flow":  # a flow's log: its agents' runs are in its folder
                entry.update(
                    run_id=header["run_id"],
                    started_at=header["started_at"],
                    agent=f"flow {header['flow']['name']}",
                    model="",
                )
            else:
                entry.update(
                    run_id=header["run_id"],
                    started_at=header["started_at"],
                    agent=header["agent"]["name"],
                    model=header["model"],
                )
            _tail(f, entry, end_type="flow_end" if header["t"] == "flow" else "run_end")
    except _Unreadable as e:
        entry["reason"] = str(e)
    except OSError as e:
        entry["reason"] = f"cannot read the file: {e.strerror or e}"
    return entry


def _header(first: bytes) -> dict[str, Any]:
    from afcore.recording import FORMAT, FORMAT_VERSION

    if not first:
        raise _Unreadable("the file is empty")
    if len(first) > HEAD_LIMIT:
        raise _Unreadable(f"line 1 is longer than {HEAD_LIMIT // 1024:,} KB: not an af header")
    try:
        data = orjson.loads(first)
    except orjson.JSONDecodeError:
        raise _Unreadable("line 1 is not JSON: not an af recording") from None
    kind = data.get("t") if isinstance(data, dict) else None
    if kind not in ("header", "flow") or data.get("format") != FORMAT:
        raise _Unreadable("line 1 is not an af.recording header")
    version = str(data.get("version", ""))
    major = version.split(".")[0]
    if not major.isdecimal():
        raise _Unreadable(f"line 1: the format version {version!r} is not major.minor")
    supported = int(FORMAT_VERSION.split(".")[0])
    if int(major) > supported:
        raise _Unreadable(
            f"format version {version} is newer than this af reads ({supported}.x); upgrade af"
        )
    try:
        return dict(dump(_record("FlowHeader" if kind == "flow" else "Header", data)))
    except _Invalid as e:
        raise _Unreadable(f"line 1 is not a valid header ({e})") from None


class _Invalid(Exception):
    pass


def _record(model: str, data: Any) -> Any:
    """The record as its Struct, or _Invalid saying why not."""
    import afcore.recording

    try:
        return typed(getattr(afcore.recording, model), data)
    except InvalidRecord as e:
        raise _Invalid(f"{e.where or 'header'}: {e.msg}") from None


def _tail(f: Any, entry: dict[str, Any], *, end_type: str = "run_end") -> None:
    size = os.fstat(f.fileno()).st_size
    start = max(0, size - TAIL_LIMIT)
    f.seek(start)
    chunk: bytes = f.read(TAIL_LIMIT)
    entry["status"] = "incomplete"
    if not chunk.endswith(b"\n"):
        entry["reason"] = "the last line is torn: the run was cut off mid-write"
        return
    body = chunk[:-1]
    cut = body.rfind(b"\n")
    if cut == -1 and start > 0:
        entry["reason"] = "no run_end record: the run was cut off or is still running"
        return
    last = body[cut + 1 :]
    if last.startswith(b'{"t":"seal",') and cut > 0:
        # 1.1 closes every write with a seal: the run_end is the line before it.
        body = body[:cut]
        cut = body.rfind(b"\n")
        if cut == -1 and start > 0:
            entry["reason"] = "no run_end record: the run was cut off or is still running"
            return
        last = body[cut + 1 :]
    try:
        data = orjson.loads(last)
    except orjson.JSONDecodeError:
        entry["reason"] = "the last line is not JSON"
        return
    if not isinstance(data, dict) or data.get("t") != end_type:
        entry["reason"] = f"no {end_type} record: the run was cut off or is still running"
        return
    try:
        end = _record("FlowEnd" if end_type == "flow_end" else "RunEnd", data)
    except _Invalid:
        entry["reason"] = f"the {end_type} record is malformed"
        return
    u = end.usage
    # Token counts always; cache counts and the estimate flag only when they say something.
    usage: dict[str, Any] = {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens}
    usage |= beyond_defaults(u)
    entry.update(
        status=end.status,
        iterations=end.iterations,
        calls=end.calls,
        usage=usage,
        tokens=u.input_tokens + u.output_tokens,
    )
    if end.error is not None:
        entry["reason"] = f"{end.error.kind}: {end.error.message}"
