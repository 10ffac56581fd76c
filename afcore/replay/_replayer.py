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

from afcore.errors import RecordingError, ReplayDivergedError, ReplayEndedError
from afcore.loop._state import RunStatus
from afcore.messages import ToolCall, ToolResultMessage
from afcore.providers._base import Provider
from afcore.providers._replay import ReplayProvider
from afcore.readmodel import Change, diff_call, first_difference
from afcore.recording import AttemptInfo, ReplayLink, ToolStatus, open_recording
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
        recorded = self.tape.calls.get(call)
        if recorded is None:
            end = self.tape.end
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
            self._diverge(self._request_divergence(call, recorded.hash, hash))
            return provider
        outcome = self.tape.outcome(call)
        if outcome is None:
            self._ends(call, f"the recording ends at call {call}, before its answer")
        self.identical = call
        assert outcome is not None
        return ReplayProvider([outcome], name=provider.name, describe=provider.describe())

    def _same_attempt(self, call: int, attempt: AttemptInfo | None) -> bool:
        recorded = self.tape.rec.call(call).attempt
        return bool(_attempt_json(recorded) == _attempt_json(attempt))

    def _request_divergence(self, call: int, recorded: str, replayed: str) -> Divergence:
        """The first difference of call ``call``, compared part by part in the two files."""
        changes: list[Change] = []
        if self.path is not None:
            try:
                with open_recording(self.path) as mine:
                    changes = [
                        c
                        for c in diff_call(self.tape.rec, mine, call).changes
                        if c.slot in _REQUEST
                    ]
            except (RecordingError, OSError, KeyError, IndexError, ValueError):
                changes = []
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

    def tool(self, call: ToolCall, k: int) -> tuple[ToolResultMessage, ToolStatus] | None:
        if self.live or self.tools_mode != "recorded":
            return None
        found = self.tape.tool_result(f"{call.name}#{k}")
        if found is None:
            return None  # past what the recording holds: tool_done says so
        status, message = found
        if status in ("rejected", "unknown_tool"):
            # It did not run in the recorded run, and is not to run now: nothing to serve.
            text = f"not run: the recording holds no result for {call.name} (it was {status})"
            return ToolResultMessage(call.id, call.name, text, is_error=True), "error"
        return _result(call, message), status

    def tool_done(
        self, call: ToolCall, k: int, result: ToolResultMessage, status: ToolStatus
    ) -> ToolResultMessage:
        if self.live:
            return result
        key = f"{call.name}#{k}"
        found = self.tape.tool_result(key)
        at = self.calls
        if found is None:
            if self.tape.end is None and at >= self.tape.call_count:
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
        if (
            recorded_status == status
            and recorded_text == result.content
            and bool(message.get("is_error")) == result.is_error
        ):
            return result
        text = as_recorded(result.content)
        if recorded_status == status and bool(message.get("is_error")) == result.is_error:
            if recorded_text == text:
                return result  # the same, once redacted as the recording is
            if _same_json(recorded_text, text):
                # The same value, its keys in another order: the recorded bytes are kept, so
                # the next request is the recorded one.
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

    # -- the end -------------------------------------------------------------------------

    def finished(self, status: RunStatus) -> None:
        if self.live:
            return
        if self.pending is not None:
            held, self.pending = self.pending, None
            self._diverge(held)
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
        end = self.tape.end
        if end is not None and end.status != status:
            self.ended(status)

    def ended(self, status: str) -> None:
        """The run ended as ``status``: a difference when the recorded run ended otherwise."""
        end = self.tape.end
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
