"""What a replay reads of the recording it replays, in one walk of the file: each call's hash
and attempt and what answered it, each tool call's result, the clock's readings, the seed,
and the message and conversation the run started from. Values stay in the file, read by
their hash when they are served.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afcore.errors import RecordingFormatError
from afcore.messages import Message, Source, message_from_json
from afcore.providers._replay import Outcome, recorded_error, recorded_response
from afcore.recording import (
    Call,
    ClockRead,
    Commit,
    ErrorEvent,
    Recording,
    Reply,
    RunEnd,
    ToolStatus,
    open_recording,
)

__all__ = ["RecordedCall", "Tape"]


@dataclass(slots=True)
class RecordedCall:
    """One model call as the recording holds it."""

    n: int
    hash: str
    rsid: str
    provider: str
    """The provider that was asked: the attempt's, or the run's own."""
    reply: Reply | None = None
    error: dict[str, Any] | None = None
    """The error event's ``error``, when the call failed."""


@dataclass
class Tape:
    """A recording, read for replaying it. Holds the file open (values are read from it as
    they are served); :meth:`close` lets it go."""

    rec: Recording
    calls: dict[int, RecordedCall] = field(default_factory=dict)
    tools: dict[str, tuple[ToolStatus, str]] = field(default_factory=dict)
    """`name#k` -> (its status, the hash of its result message)."""
    clock: dict[str, list[str]] = field(default_factory=dict)
    """Clock readings by reader, in the order they were read."""
    user_message: str | None = None
    history: list[tuple[Message, Source]] = field(default_factory=list)
    """The conversation the run continued, with where each message came from."""
    end: RunEnd | None = None

    @classmethod
    def read(cls, path: str | Path | Recording) -> Tape:
        rec = path if isinstance(path, Recording) else open_recording(path)
        tape = cls(rec)
        own = str(rec.header.provider.get("name", "provider"))
        try:
            tape._walk(own)
        except BaseException:
            if not isinstance(path, Recording):
                rec.close()
            raise
        return tape

    def _walk(self, own: str) -> None:
        calls, tools, clock = self.calls, self.tools, self.clock
        for _, record in self.rec.records(blobs=False):
            if isinstance(record, Call):
                who = record.attempt.provider if record.attempt is not None else own
                calls[record.call] = RecordedCall(record.call, record.hash, record.rsid, who)
            elif isinstance(record, Reply):
                found = calls.get(record.call)
                if found is not None:
                    found.reply = record
            elif isinstance(record, Commit):
                if record.tool is not None:
                    ref = next((w.ref for w in record.writes if w.key.startswith("message:")), "")
                    tools[f"{record.tool.name}#{record.tool.k}"] = (record.tool.status, ref or "")
                elif record.stage == "seed":
                    for w in record.writes:
                        if w.key == "user_message":
                            self.user_message = str(self.rec.value(w))
                elif record.stage == "history":
                    for w in record.writes:
                        if w.key.startswith("message:") and w.ref:
                            src = w.source
                            source = (
                                Source(kind=src.kind, id=src.id, reason=src.reason)
                                if src is not None
                                else Source(kind="history")
                            )
                            self.history.append((message_from_json(self.rec.blob(w.ref)), source))
            elif isinstance(record, ErrorEvent):
                if record.call is not None and record.call in calls:
                    calls[record.call].error = record.error.model_dump(exclude_none=True)
            elif isinstance(record, ClockRead):
                clock.setdefault(record.by, []).append(record.value)
            elif isinstance(record, RunEnd):
                self.end = record
        if self.user_message is None:
            raise RecordingFormatError(
                f"{self.rec.path.name} holds no user message (no seed stage): there is no "
                "run in it to replay",
                path=self.rec.path,
            )

    # -- what is served ------------------------------------------------------------------

    def outcome(self, n: int) -> Outcome | None:
        """What answered call ``n``: its reply, its error raised again, or None when the
        recording holds neither (the run stopped while it waited)."""
        found = self.calls.get(n)
        if found is None:
            return None
        reply = found.reply
        if reply is not None:
            ref = reply.writes[0].ref if reply.writes else None
            message = self.rec.blob(ref) if ref else {"content": []}
            return recorded_response(
                message,
                stop_reason=reply.stop_reason,
                usage=None if reply.usage is None else reply.usage.model_dump(),
                model=reply.model,
                response_id=reply.response_id,
                unsent_params=reply.unsent_params,
            )
        if found.error is not None:
            return recorded_error(found.error, provider=found.provider, call=n)
        return None

    def tool_result(self, key: str) -> tuple[ToolStatus, dict[str, Any]] | None:
        """The k-th call of a tool (``name#k``): its status and its result message."""
        found = self.tools.get(key)
        if found is None or not found[1]:
            return None
        value = self.rec.blob(found[1])
        return found[0], value if isinstance(value, dict) else {}

    @property
    def seed(self) -> int | None:
        return self.rec.header.seed

    @property
    def file(self) -> str:
        return self.rec.path.name

    @property
    def run_id(self) -> str:
        return self.rec.header.run_id

    @property
    def call_count(self) -> int:
        return max(self.calls, default=0)

    def close(self) -> None:
        self.rec.close()
