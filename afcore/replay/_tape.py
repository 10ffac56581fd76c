"""What a replay reads of the recording it replays, in one walk of the file: each call's hash
and attempt and what answered it, each tool call's result, the clock's readings, the seed,
and the message and conversation the run started from. Values stay in the file, read by
their hash when they are served.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from afcore.errors import RecordingFormatError
from afcore.messages import Message, Source, message_from_json
from afcore.providers._replay import Outcome, recorded_error, recorded_response
from afcore.recording import Problem, Recording, open_recording

# A replay runs the loop again: what it serves it is the loop's, the record models.
from afcore.recording._models import (
    ErrorEvent,
    MiddlewareDecision,
    Pause,
    Reply,
    Resume,
    RunEnd,
    ToolOutcome,
    ToolStatus,
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
    attempt: Any = None
    """The call's ``attempt``, as written (None: the run's own provider, first asked)."""
    answer: dict[str, Any] | None = None
    """Its reply as written, checked when it is served (:attr:`reply`)."""
    error: dict[str, Any] | None = None
    """The error event's ``error``, when the call failed."""

    @property
    def reply(self) -> Reply | None:
        """The reply to the call; None when there is none, or none that is a valid reply."""
        if self.answer is None:
            return None
        try:
            return Reply.model_validate(self.answer)
        except ValidationError:
            return None


_RARE: dict[str, type[RunEnd | Pause | Resume | ErrorEvent]] = {
    "run_end": RunEnd,
    "pause": Pause,
    "resume": Resume,
    "error": ErrorEvent,
}
"""Records met a few times a run, checked whole as they are read."""


@dataclass
class Tape:
    """A recording, read for replaying it. Holds the file open (values are read from it as
    they are served); :meth:`close` lets it go.

    The file is walked once, each line parsed once as the walk indexes it, and only the
    fields a replay uses are read: the many calls, replies and commits unchecked (a line
    that lacks what is read is passed over, as a reader passes over an invalid record), a
    reply checked when it is served, the few endings and pauses checked whole."""

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
        # A path is opened unindexed: the walk below builds the index as it parses each line.
        rec = path if isinstance(path, Recording) else open_recording(path, index=False)
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
        calls = self.calls
        for line, data in self.rec.raw_records():
            t = data.get("t") if isinstance(data, dict) else None
            try:
                if t == "call":
                    n, attempt = data["call"], data.get("attempt")
                    who = own
                    if isinstance(attempt, dict):
                        who = str(attempt.get("provider") or own)
                    if isinstance(n, int) and isinstance(data["hash"], str):
                        calls[n] = RecordedCall(n, data["hash"], data["rsid"], who, attempt)
                elif t == "reply":
                    found = calls.get(data["call"])
                    if found is not None:
                        found.answer = data
                elif t == "commit":
                    self._commit(data)
                elif t == "clock":
                    by, value = data["by"], data["value"]
                    if isinstance(by, str) and isinstance(value, str):
                        self.clock.setdefault(by, []).append(value)
                elif t in _RARE:
                    record = _RARE[t].model_validate(data)
                    if isinstance(record, ErrorEvent):
                        if record.call is not None and record.call in calls:
                            error = record.error.model_dump(exclude_none=True)
                            calls[record.call].error = error
                    elif isinstance(record, RunEnd):
                        self.end = record
                        self.ends.append(record)
                    elif isinstance(record, Pause):
                        self.pauses.append(record)
                    elif isinstance(record, Resume):
                        self.resumes.append(record)
            except (KeyError, TypeError, ValueError, AttributeError):
                # Not the record it says it is: passed over, as every reader passes over it.
                self.rec.problems.append(Problem(line, f"invalid {t} record"))
        if self.user_message is None:
            raise RecordingFormatError(
                f"{self.rec.path.name} holds no user message (no seed stage): there is no "
                "run in it to replay",
                path=self.rec.path,
            )

    def _commit(self, data: dict[str, Any]) -> None:
        writes: list[dict[str, Any]] = data.get("writes") or []
        tool = data.get("tool")
        if tool is not None:
            key = f"{tool['name']}#{tool['k']}"
            write = next((w for w in writes if w["key"].startswith("message:")), None)
            self.tools[key] = (tool["status"], write)
            self.outcomes[key] = ToolOutcome.model_validate(tool)
            ruled, limits = f"govern:{key}.result", f"limits:{key}"
            for w in writes:
                if w["key"] == ruled:
                    self.ruled[key] = w
                elif w["key"] == limits:
                    self.limits[key] = w
            reply = next((r[0] for r in data.get("reads") or () if r[0].startswith("reply:")), None)
            if reply is not None and reply[6:].isdecimal():
                self.asked[key] = (int(reply[6:]), tool["call_id"])
            return
        stage = data.get("stage") or str(data["rsid"]).partition("#")[0]
        if stage.startswith("govern:"):
            for w in writes:
                if w["key"].startswith("tool:") and w["key"].endswith(".args"):
                    self.args[w["key"][5:-5]] = w
        elif stage == "seed":
            for w in writes:
                if w["key"] == "user_message":
                    self.user_message = str(self.rec.value(w))
        elif stage == "history":
            for w in writes:
                if w["key"].startswith("message:"):
                    src = w.get("source")
                    source = (
                        Source(kind=src["kind"], id=src.get("id"), reason=src.get("reason"))
                        if src is not None
                        else Source(kind="history")
                    )
                    self.history.append((message_from_json(self.rec.value(w)), source))

    # -- what is served ------------------------------------------------------------------

    def outcome(self, n: int) -> Outcome | None:
        """What answered call ``n``: its reply, its error raised again, or None when the
        recording holds neither (the run stopped while it waited)."""
        found = self.calls.get(n)
        if found is None:
            return None
        answer = found.answer
        if answer is not None:
            # Read as written, no model between: a reply that lacks what is read is no reply.
            try:
                writes = answer.get("writes") or ()
                message = self.rec.value(writes[0]) if writes else {"content": []}
                usage = answer.get("usage")
                return recorded_response(
                    message,
                    stop_reason=str(answer["stop_reason"]),
                    usage=usage if isinstance(usage, dict) else None,
                    model=answer.get("model"),
                    response_id=answer.get("response_id"),
                    unsent_params=answer.get("unsent_params") or (),
                )
            except (KeyError, TypeError, ValueError, AttributeError, IndexError):
                pass
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
        asker = self.calls.get(found[0]) if found is not None else None
        reply = asker.answer if asker is not None else None
        if found is None or reply is None or not reply.get("writes"):
            return None
        message = message_from_json(self.rec.value(reply["writes"][0]))
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
