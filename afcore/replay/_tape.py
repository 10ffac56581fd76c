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
    MiddlewareDecision,
    Pause,
    Recording,
    Reply,
    Resume,
    RunEnd,
    ToolOutcome,
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
    tools: dict[str, tuple[ToolStatus, Any]] = field(default_factory=dict)
    """`name#k` -> (its status, the write of its result message)."""
    asked: dict[str, tuple[int, str]] = field(default_factory=dict)
    """`name#k` -> the call whose reply asked for it, and the tool call's id."""
    args: dict[str, Any] = field(default_factory=dict)
    """`name#k` -> the write of the arguments a tool middleware link changed them to."""
    ruled: dict[str, Any] = field(default_factory=dict)
    """`name#k` -> the write of what the result chain decided (agents with result links)."""
    outcomes: dict[str, ToolOutcome] = field(default_factory=dict)
    """`name#k` -> the tool commit's outcome (the result's status and what became of it)."""
    limits: dict[str, Any] = field(default_factory=dict)
    """`name#k` -> the write of the limits it declared and the values assumed for it."""
    clock: dict[str, list[str]] = field(default_factory=dict)
    """Clock readings by reader, in the order they were read."""
    user_message: str | None = None
    history: list[tuple[Message, Source]] = field(default_factory=list)
    """The conversation the run continued, with where each message came from."""
    end: RunEnd | None = None
    """How the run ended last (after its last resume)."""
    ends: list[RunEnd] = field(default_factory=list)
    """Each ending, in order: a paused run that was resumed ends once per pause, then once."""
    pauses: list[Pause] = field(default_factory=list)
    """Each pause for a person, in order."""
    resumes: list[Resume] = field(default_factory=list)
    """Each person's answer to a pause, in order."""

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
                    key = f"{record.tool.name}#{record.tool.k}"
                    write = next((w for w in record.writes if w.key.startswith("message:")), None)
                    tools[key] = (record.tool.status, write)
                    self.outcomes[key] = record.tool
                    ruled, limits = f"govern:{key}.result", f"limits:{key}"
                    for w in record.writes:
                        if w.key == ruled:
                            self.ruled[key] = w
                        elif w.key == limits:
                            self.limits[key] = w
                    reply = next((r for r, _ in record.reads if r.startswith("reply:")), None)
                    if reply is not None and reply[6:].isdigit():
                        self.asked[key] = (int(reply[6:]), record.tool.call_id)
                elif record.stage.startswith("govern:"):
                    for w in record.writes:
                        if w.key.startswith("tool:") and w.key.endswith(".args"):
                            self.args[w.key[5:-5]] = w
                elif record.stage == "seed":
                    for w in record.writes:
                        if w.key == "user_message":
                            self.user_message = str(self.rec.value(w))
                elif record.stage == "history":
                    for w in record.writes:
                        if w.key.startswith("message:"):
                            src = w.source
                            source = (
                                Source(kind=src.kind, id=src.id, reason=src.reason)
                                if src is not None
                                else Source(kind="history")
                            )
                            self.history.append((message_from_json(self.rec.value(w)), source))
            elif isinstance(record, ErrorEvent):
                if record.call is not None and record.call in calls:
                    calls[record.call].error = record.error.model_dump(exclude_none=True)
            elif isinstance(record, ClockRead):
                clock.setdefault(record.by, []).append(record.value)
            elif isinstance(record, RunEnd):
                self.end = record
                self.ends.append(record)
            elif isinstance(record, Pause):
                self.pauses.append(record)
            elif isinstance(record, Resume):
                self.resumes.append(record)
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
            message = self.rec.value(reply.writes[0]) if reply.writes else {"content": []}
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
        if found is None or found[1] is None:
            return None
        value = self.rec.value(found[1])
        return found[0], value if isinstance(value, dict) else {}

    def tool_args(self, key: str) -> tuple[dict[str, Any], str] | None:
        """The arguments the k-th call of a tool (``name#k``) ran with, and the key that
        says why (the reply that asked, or a link's change); None when not recorded."""
        changed = self.args.get(key)
        if changed is not None:
            value = self.rec.value(changed)
            return (value if isinstance(value, dict) else {}), f"tool:{key}.args"
        found = self.asked.get(key)
        reply = self.rec.reply(found[0]) if found is not None else None
        if found is None or reply is None or not reply.writes:
            return None
        message = message_from_json(self.rec.value(reply.writes[0]))
        for call in getattr(message, "tool_calls", ()):
            if call.id == found[1]:
                return dict(call.args), f"reply:{found[0]}"
        return None

    def result_decision(self, key: str) -> MiddlewareDecision | None:
        """What the result chain decided about the k-th call of a tool (``name#k``)."""
        found = self.ruled.get(key)
        if found is None:
            return None
        return MiddlewareDecision.model_validate(self.rec.value(found))

    def tool_facts(self, key: str) -> tuple[ToolOutcome | None, dict[str, Any] | None]:
        """The k-th call of a tool (``name#k``): its recorded outcome, and the value of its
        ``limits:`` write (None where it wrote none)."""
        found = self.limits.get(key)
        value = self.rec.value(found) if found is not None else None
        return self.outcomes.get(key), value if isinstance(value, dict) else None

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
