"""The replay's hold on a run: what the loop asks where it chooses a provider and where it
runs a tool (the loop's ``Replayer``), answered from a :class:`Tape`.

At each model call the request the run built, already recorded, is compared with the
recorded one by hash; when they differ, the two recordings are compared part by part at
that call (``afcore.readmodel.diff_call``) and the first difference stops the replay, or,
with ``then_live``, hands the run to the agent's own providers from that call on. A tool
result is compared when the tool ends; a difference there stops the replay at the next
call (or at the end), so the replay's recording holds the result that differed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from afcore.errors import RecordingError, ReplayDivergedError, ReplayEndedError
from afcore.governance import Paused
from afcore.loop._state import RunStatus, Served
from afcore.messages import ToolCall, ToolResultMessage
from afcore.providers._base import Provider
from afcore.providers._replay import ReplayProvider
from afcore.readmodel import Change, diff_call, first_difference
from afcore.recording import open_recording
from afcore.recording._hashing import V11
from afcore.recording._models import (
    AttemptInfo,
    ReplayLink,
    ResultStatus,
    Resume,
    RunEnd,
    ToolStatus,
)
from afcore.replay._report import Divergence
from afcore.replay._tape import Tape
from afcore.secrets import as_recorded

__all__ = ["Replayer", "ToolsMode"]

ToolsMode = Literal["run", "recorded"]

_REQUEST = ("model", "system", "messages", "tools", "params", "cache", "attempt")
"""The parts of a call a request's difference can be in."""


class Replayer:
    """See the module. One per replaying agent; each run of it replays the recording from
    its start."""

    def __init__(self, tape: Tape, *, tools: ToolsMode = "run", then_live: bool = False) -> None:
        self.tape = tape
        self.tools_mode = tools
        self.then_live = then_live
        self.link = ReplayLink(run_id=tape.run_id, file=tape.file, tools=tools, then_live=then_live)
        self.seed = tape.seed
        self.clock: MutableMapping[str, deque[str]] = {}
        self.live = False
        self.start(None)

    def start(self, recording: Path | None) -> None:
        """A run begins, recording to ``recording``: the recording is replayed from its start."""
        self.path = recording
        self.clock = {by: deque(values) for by, values in self.tape.clock.items()}
        self.live = False
        self.live_from: int | None = None
        self.divergence: Divergence | None = None
        self.pending: Divergence | None = None
        """a tool result's difference, raised at the next call or at the end"""
        self.ended_at: int | None = None
        self.calls = 0
        """calls made"""
        self.identical = 0
        """calls sent exactly as recorded before any difference"""
        self.segment = 0
        """pauses answered so far: the run is in the recording's part after as many"""
        self.answer: Resume | None = None
        """the answer to the pause the run just made, as the recorded run was given it"""

    # -- model calls ---------------------------------------------------------------------

    def provider(
        self, provider: Provider, call: int, hash: str, attempt: AttemptInfo | None
    ) -> Provider:
        self.calls = call
        if self.live:
            return provider
        if self.pending is not None:
            held, self.pending = self.pending, None
            self._diverge(held)
            return provider
        end = self._segment_end()
        if end is not None and end.status == "paused" and call > end.calls:
            self._diverge(self._pause_missed(end))
            return provider
        recorded = self.tape.calls.get(call)
        if recorded is None:
            if end is None:
                self._ends(call, f"the recording ends after call {call - 1}")
            self._diverge(
                Divergence(
                    call=call,
                    slot="run",
                    path="call",
                    kind="added",
                    recorded=None,
                    replayed=f"call {call}",
                    why_key="answer"
                    if end is not None and end.status == "answer"
                    else f"call:{call - 1}",
                    where={"call": call},
                )
            )
            return provider
        if recorded.hash != hash or not self._same_attempt(call, attempt):
            found = self._request_divergence(call, recorded.hash, hash)
            if found is not None:
                self._diverge(found)
                return provider
        self.identical = call  # sent as recorded, whether or not an answer was recorded
        outcome = self.tape.outcome(call)
        if outcome is None:
            self._ends(call, f"the recording ends at call {call}, before its answer")
        assert outcome is not None
        return ReplayProvider([outcome], name=provider.name, describe=provider.describe())

    def _same_attempt(self, call: int, attempt: AttemptInfo | None) -> bool:
        found = self.tape.calls.get(call)
        written = found.attempt if found is not None else None
        if written is None or attempt is None:  # the usual case: no attempts on either side
            return written is None and attempt is None
        try:
            recorded = AttemptInfo.model_validate(written)
        except ValidationError:
            return False
        return bool(_attempt_json(recorded) == _attempt_json(attempt))

    def _request_divergence(self, call: int, recorded: str, replayed: str) -> Divergence | None:
        """The first difference of call ``call``, compared part by part in the two files.
        None: there is none, and the hashes differ only because the recording's are made
        another way (a 1.0 file's ids and hashes are 64 hex digits)."""
        changes: list[Change] = []
        compared = False
        if self.path is not None:
            try:
                with open_recording(self.path) as mine:
                    changes = [
                        c
                        for c in diff_call(self.tape.rec, mine, call).changes
                        if c.slot in _REQUEST
                    ]
                compared = True
            except (RecordingError, OSError, KeyError, IndexError, ValueError):
                changes = []
        if not changes and compared and self.tape.rec.scheme is not V11:
            return None
        if not changes:  # the parts could not be read: the hashes say it all the same
            return Divergence(
                call=call,
                slot="request",
                path="hash",
                kind="changed",
                recorded=recorded,
                replayed=replayed,
                why_key=f"call:{call}",
            )
        return Divergence.of(call, changes[0], len(changes) - 1)

    # -- tools ---------------------------------------------------------------------------

    def tool(self, call: ToolCall, k: int) -> Served | None:
        if self.live or self.tools_mode != "recorded":
            return None
        key = f"{call.name}#{k}"
        found = self.tape.tool_result(key)
        if found is None:
            return None  # past what the recording holds: tool_done says so
        status, message = found
        ran_with = self.tape.tool_args(key)
        if ran_with is not None and not _same_args(ran_with[0], call.args):
            # Not the call the result answered: no result to serve.
            self._hold(self._args_divergence(call, k, ran_with[0], ran_with[1]))
            if self.live:
                return None
        if status in ("rejected", "unknown_tool", "denied"):
            # It did not run in the recorded run, and is not to run now: nothing to serve.
            text = f"not run: the recording holds no result for {call.name} (it was {status})"
            return Served(ToolResultMessage(call.id, call.name, text, is_error=True), "error")
        outcome, limits = self.tape.tool_facts(key)
        return Served(
            _result(call, message),
            status,
            self.tape.result_decision(key),
            outcome=outcome,
            limits=limits,
        )

    def _args_divergence(
        self, call: ToolCall, k: int, recorded: dict[str, Any], why_key: str
    ) -> Divergence:
        key = f"{call.name}#{k}"
        path, a, b = f"tool:{key}: args", recorded, dict(call.args)
        inside = first_difference(recorded, dict(call.args))
        if inside is not None and inside[0]:
            path, a, b = f"{path}.{inside[0]}", inside[1], inside[2]
        return Divergence(
            call=self.calls,
            slot="tool_args",
            path=path,
            kind="changed",
            recorded=a,
            replayed=b,
            why_key=why_key,
            where={"tool": call.name, "k": k, "field": "args"},
        )

    def tool_done(
        self,
        call: ToolCall,
        k: int,
        result: ToolResultMessage,
        status: ToolStatus,
        result_status: ResultStatus | None = None,
    ) -> ToolResultMessage:
        if self.live:
            return result
        key = f"{call.name}#{k}"
        found = self.tape.tool_result(key)
        at = self.calls
        if found is None:
            if self._segment_end() is None and at >= self.tape.call_count:
                self._ends(at, f"the recording ends at call {at}, before the result of {key}")
            self._hold(
                Divergence(
                    call=at,
                    slot="tool_result",
                    path=f"tool:{key}",
                    kind="added",
                    recorded=None,
                    replayed=result.content,
                    why_key=None,
                    where={"tool": call.name, "k": k},
                )
            )
            return result
        recorded_status, message = found
        recorded_text = message.get("content")
        outcome = self.tape.outcomes.get(key)
        reading = (outcome.result_status if outcome is not None else None, result_status)
        if (
            recorded_status == status
            and recorded_text == result.content
            and bool(message.get("is_error")) == result.is_error
        ):
            self._reading(call, k, at, *reading)
            return result
        text = as_recorded(result.content)
        if recorded_status == status and bool(message.get("is_error")) == result.is_error:
            if recorded_text == text:
                self._reading(call, k, at, *reading)
                return result  # the same, once redacted as the recording is
            if _same_json(recorded_text, text):
                # The same value, its keys in another order: the recorded bytes are kept, so
                # the next request is the recorded one.
                self._reading(call, k, at, *reading)
                return _result(call, message)
        where: dict[str, Any] = {"tool": call.name, "k": k}
        if recorded_status != status:
            where["field"] = "status"
            self._hold(
                Divergence(
                    call=at,
                    slot="tool_result",
                    path=f"tool:{key}: status",
                    kind="changed",
                    recorded=recorded_status,
                    replayed=status,
                    why_key=f"tool:{key}.result",
                    where=where,
                )
            )
        else:
            path, recorded_value, replayed_value = f"tool:{key}", recorded_text, text
            inside = _json_difference(recorded_text, text)
            if inside is not None:
                path += f": {inside[0]}"
                where["field"] = inside[0]
                recorded_value, replayed_value = inside[1], inside[2]
            self._hold(
                Divergence(
                    call=at,
                    slot="tool_result",
                    path=path,
                    kind="changed",
                    recorded=recorded_value,
                    replayed=replayed_value,
                    why_key=f"tool:{key}.result",
                    where=where,
                )
            )
        return result

    def _reading(
        self,
        call: ToolCall,
        k: int,
        at: int,
        recorded: ResultStatus | None,
        replayed: ResultStatus | None,
    ) -> None:
        """The same result, read otherwise: the tool now says it is partial, or pending, or
        that nothing was found. (A recording older than ``result_status`` says nothing.)"""
        if recorded is None or replayed is None or recorded == replayed:
            return
        key = f"{call.name}#{k}"
        self._hold(
            Divergence(
                call=at,
                slot="tool_result",
                path=f"tool:{key}: result_status",
                kind="changed",
                recorded=recorded,
                replayed=replayed,
                why_key=f"tool:{key}.result",
                where={"tool": call.name, "k": k, "field": "result_status"},
            )
        )

    # -- the end -------------------------------------------------------------------------

    def finished(self, status: RunStatus) -> None:
        if self.live:
            return
        if self.pending is not None:
            held, self.pending = self.pending, None
            self._diverge(held)
            return
        end = self._segment_end()
        if end is not None and end.status == "paused":
            self._diverge(self._pause_missed(end))
            return
        count = self.tape.call_count
        if self.calls < count:
            self._diverge(
                Divergence(
                    call=self.calls + 1,
                    slot="run",
                    path="call",
                    kind="removed",
                    recorded=f"call {self.calls + 1}",
                    replayed=None,
                    why_key=f"call:{self.calls + 1}",
                    where={"call": self.calls + 1},
                )
            )
            return
        end = self._segment_end()
        if end is not None and end.status != status:
            self.ended(status)

    def ended(self, status: str) -> None:
        """The run ended as ``status``: a difference when the recorded run ended otherwise."""
        end = self._segment_end()
        if self.live or self.divergence is not None or self.ended_at is not None or end is None:
            return
        if end.status != status:
            self._diverge(
                Divergence(
                    call=self.calls,
                    slot="run",
                    path="status",
                    kind="changed",
                    recorded=end.status,
                    replayed=status,
                    why_key="answer" if end.status == "answer" else f"call:{self.calls}",
                )
            )

    # -- a pause for a person ------------------------------------------------------------

    def paused(self, asked: Paused) -> None:
        """The run paused with ``asked`` (the loop says so as it records the pause): a
        difference unless the recorded run paused here with the same question, held until
        the run goes on or the replay ends. When it is the recorded pause, :attr:`answer`
        is what the person answered then, for the replay to resume with (None: the
        recording ends paused here)."""
        self.answer = None
        if self.live or self.divergence or self.pending or self.ended_at is not None:
            return
        end = self._segment_end()
        pause = self.tape.pauses[self.segment] if self.segment < len(self.tape.pauses) else None
        key = f"govern:{asked.tool}#{asked.k}"
        where = {"tool": asked.tool, "k": asked.k, "link": asked.link}
        if end is None and pause is None:  # every part of a run ends: this one was cut
            self.ended_at = self.calls
            return
        if pause is None or (end is not None and end.status != "paused"):
            self._hold(
                Divergence(
                    call=self.calls,
                    slot="run",
                    path=f"pause: {asked.link} asks",
                    kind="added",
                    recorded=None,
                    replayed=asked.question,
                    why_key=key,
                    where=where,
                )
            )
            return
        cp = pause.checkpoint
        recorded = next((c for c in cp.calls if c.state == "asked"), None)
        theirs = (cp.link, recorded.name if recorded else "", recorded.k if recorded else 0)
        found = next(
            (
                (f, x, y)
                for f, x, y in (
                    ("call", cp.model_calls, self.calls),
                    ("link", cp.link, asked.link),
                    ("tool", f"{theirs[1]}#{theirs[2]}", f"{asked.tool}#{asked.k}"),
                    ("question", cp.question, asked.question),
                )
                if x != y
            ),
            None,
        )
        if found is not None:
            self._hold(
                Divergence(
                    call=self.calls,
                    slot="run",
                    path=f"pause: {found[0]}",
                    kind="changed",
                    recorded=found[1],
                    replayed=found[2],
                    why_key=f"govern:{theirs[1]}#{theirs[2]}" if recorded else key,
                    where=where,
                )
            )
            return
        self.identical = self.calls
        if self.segment < len(self.tape.resumes):
            self.answer = self.tape.resumes[self.segment]
            self.segment += 1

    def settle(self) -> None:
        """The replay is over: a difference still held is the one it found."""
        if self.pending is not None and self.divergence is None:
            self.divergence, self.pending = self.pending, None

    @property
    def recorded_finished(self) -> bool:
        """The recording holds how the part of the run the replay ended in ended (a torn
        file, or a run killed, has no ending there)."""
        return self._segment_end() is not None

    def _pause_missed(self, end: RunEnd) -> Divergence:
        """The recorded run paused here for a person; the replay went on without asking."""
        pause = self.tape.pauses[self.segment] if self.segment < len(self.tape.pauses) else None
        question, key, where = "a question", None, {}
        if pause is not None:
            cp = pause.checkpoint
            question = cp.question
            asked = next((c for c in cp.calls if c.state == "asked"), None)
            if asked is not None:
                key = f"govern:{asked.name}#{asked.k}"
                where = {"tool": asked.name, "k": asked.k, "link": cp.link}
        return Divergence(
            call=end.calls,
            slot="run",
            path="pause" if pause is None else f"pause: {pause.checkpoint.link} asks",
            kind="removed",
            recorded=question,
            replayed=None,
            why_key=key,
            where=where,
        )

    def _segment_end(self) -> RunEnd | None:
        """How the recorded run ended the part the replay is in (None: it did not end)."""
        ends = self.tape.ends
        return ends[self.segment] if self.segment < len(ends) else None

    # -- stopping ------------------------------------------------------------------------

    def _hold(self, divergence: Divergence) -> None:
        if self.then_live:
            self._diverge(divergence)
        elif self.pending is None and self.divergence is None:
            self.pending = divergence

    def _diverge(self, divergence: Divergence) -> None:
        """The first difference: stop here, or go on live."""
        if self.divergence is None:
            self.divergence = divergence
        if self.then_live:
            if not self.live:
                self.live = True
                # A tool's difference shows after its call; the next call is the first live.
                self.live_from = (
                    divergence.call + 1 if divergence.slot == "tool_result" else divergence.call
                )
                self.clock.clear()  # from now on the clock is the clock
            return
        raise ReplayDivergedError(
            f"the replay of {self.tape.file} departed from it at {divergence.describe()}"
            + _values(divergence),
            divergence=divergence,
        )

    def _ends(self, call: int, why: str) -> None:
        self.ended_at = call
        raise ReplayEndedError(f"{why}: its run stopped there", call=call)


def _result(call: ToolCall, message: dict[str, Any]) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call.id,
        name=call.name,
        content=str(message.get("content", "")),
        is_error=bool(message.get("is_error", False)),
    )


def _same_args(recorded: dict[str, Any], args: Any) -> bool:
    """The arguments a tool is called with now, and the recorded ones: the same once
    redacted as the recording is."""
    now = dict(args)
    return recorded == now or recorded == as_recorded(now)


def _attempt_json(attempt: AttemptInfo | None) -> Any:
    if attempt is None:
        return None
    return orjson.loads(orjson.dumps(attempt.model_dump(exclude_defaults=True)))


def _same_json(a: Any, b: Any) -> bool:
    """Two texts holding the same JSON value (objects' keys in any order)."""
    if not isinstance(a, str) or not isinstance(b, str) or a[:1] not in "{[" or not a:
        return False
    try:
        return bool(orjson.loads(a) == orjson.loads(b))
    except orjson.JSONDecodeError:
        return False


def _json_difference(a: Any, b: Any) -> tuple[str, Any, Any] | None:
    """Where two texts holding JSON values first differ, inside them (None: they are not
    both JSON, or differ as wholes)."""
    if not isinstance(a, str) or not isinstance(b, str) or a[:1] not in ("{", "["):
        return None
    try:
        found = first_difference(orjson.loads(a), orjson.loads(b))
    except orjson.JSONDecodeError:
        return None
    return found if found is not None and found[0] else None


def _values(d: Divergence) -> str:
    from afcore.readmodel import line

    def shown(value: Any) -> str:
        if value is None:
            return "nothing"
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return repr(line(text, 80)) if isinstance(value, str) else line(text, 80)

    return f" (recorded: {shown(d.recorded)}; replayed: {shown(d.replayed)})"
