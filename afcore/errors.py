"""Errors raised by af.

Every error af raises on purpose is an ``AfError``::

    AfError
    ├── UsageError                  a mistake in using the library (bad arguments, a bad builder)
    │   ├── RefusedError            a tool result's declaration that says nothing, or says it wrong
    │   └── MissingKeyError         a provider has no API key: neither passed nor in the environment
    ├── ProviderError               a model provider failed to answer
    │   ├── RateLimitedError        429: too many requests or tokens for now
    │   ├── ServerError             5xx: the vendor failed
    │   │   └── OverloadedError     529 / overloaded_error: the vendor is too busy
    │   ├── BadRequestError         another 4xx: the request, key or model was refused
    │   ├── ConnectionFailedError   no answer: the network failed or timed out
    │   ├── StreamCutError          a streamed answer ended or broke part way
    │   └── MockExhaustedError      a scripted mock ran out of replies
    ├── ReliabilityFailFastError    a reliability rule (or af, for it) stopped a call's attempts
    ├── RunError                    a run stopped on an error; the recording says so
    ├── RunInFlightError            an agent instance asked to run while a run of it is under way
    ├── McpError                    an MCP server could not be reached, stopped, or refused a call
    ├── CompactionUnmeasurableError a token-triggered window strategy got no counted tokens
    ├── MessageDeniedError          message middleware refused the user's message or the answer
    ├── OutputSchemaError           the answer does not hold to the agent's output schema
    ├── RunPausedError              a typed run paused for a person (it carries the pause)
    ├── NotPausedError              a run asked to resume is not paused
    ├── SessionError                a session's store failed, or holds what this af cannot read
    │   └── TurnLostError           a turn's lease ran out and another process took it over
    ├── ReplayError                 a replay could not go on as the recording it replays
    │   ├── ReplayDivergedError     the run departed from the recording
    │   └── ReplayEndedError        the recording ends here: its run stopped at this point
    └── RecordingError              a recording cannot be read
        ├── RecordingFormatError    not an af recording, or a record that breaks the format
        ├── UnsupportedVersionError written by a newer major version of the format
        └── RunNotFoundError        a run id or path that names no recording

Errors carry the context a person needs to act: the path and line of a recording, the
call number of a provider failure, the stage id where a run stopped. A provider failure
also says what the vendor said (status, error type, message) and its ``kind``, the word
retry rules decide on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "AfError",
    "BadRequestError",
    "CompactionUnmeasurableError",
    "ConnectionFailedError",
    "McpError",
    "MessageDeniedError",
    "MissingKeyError",
    "MockExhaustedError",
    "NotPausedError",
    "OutputSchemaError",
    "OverloadedError",
    "ProviderError",
    "RateLimitedError",
    "RecordingError",
    "RecordingFormatError",
    "RefusedError",
    "ReliabilityFailFastError",
    "ReplayDivergedError",
    "ReplayEndedError",
    "ReplayError",
    "RunError",
    "RunPausedError",
    "RunNotFoundError",
    "ServerError",
    "SessionError",
    "StreamCutError",
    "TurnLostError",
    "UnsupportedVersionError",
    "UsageError",
]


class AfError(Exception):
    """The root of every error af raises on purpose."""


class UsageError(AfError):
    """The library was used in a way it does not support; the message says how to fix it."""


class MissingKeyError(UsageError):
    """A provider was made without an API key, and its environment variable is not set."""

    def __init__(self, vendor: str, variable: str, factory: str) -> None:
        super().__init__(
            f"no {vendor} API key: set the {variable} environment variable "
            f"or pass {factory}(api_key=...)"
        )
        self.vendor = vendor
        self.variable = variable
        """The environment variable the key is read from."""


class RefusedError(UsageError):
    """A tool result helper (``absent``, ``coverage``, ``described_result``) refused a
    declaration. Raised inside a tool, its text is the error result the model reads, so it
    starts ``refused:`` and ends naming the field: ``refused: <why> (field: <where>)``."""

    def __init__(self, reason: str, *, field: str) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"refused: {reason} (field: {field})")


class ProviderError(AfError):
    """A model provider failed to answer a call.

    ``status`` is the HTTP status when the vendor answered with one (or, for an error sent
    inside a stream, the status the error named), ``error_type`` and ``vendor_message``
    what its error body said, ``retry_after`` the seconds it asked to wait. ``mid_stream``
    is true when the failure came after the first streamed event: part of the answer may
    already have been shown, so sending the call again is not the same call.

    ``request_id`` is the vendor's id for the request (to find it in the vendor's logs);
    ``details`` the other fields of the vendor's error object, as it sent them (a code,
    ``failed_generation``, ``metadata``, ...); ``refused_fields`` the request fields the
    server said it does not accept, when it said which.
    """

    kind: ClassVar[str] = "provider"
    """A stable word for the kind of failure: what retry rules and recordings name."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        call: int | None = None,
        status: int | None = None,
        error_type: str | None = None,
        vendor_message: str | None = None,
        retry_after: float | None = None,
        mid_stream: bool = False,
        request_id: str | None = None,
        details: Mapping[str, Any] | None = None,
        refused_fields: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.call = call
        self.status = status
        self.error_type = error_type
        self.vendor_message = vendor_message
        self.retry_after = retry_after
        self.mid_stream = mid_stream
        self.request_id = request_id
        self.details: dict[str, Any] = dict(details) if details else {}
        self.refused_fields = refused_fields

    def vendor_json(self) -> dict[str, Any]:
        """What the vendor said beyond the message, for the recording's error events: its
        error type, its request id and the other fields of its error object, when given."""
        out: dict[str, Any] = {}
        if self.error_type is not None:
            out["error_type"] = self.error_type
        if self.request_id is not None:
            out["request_id"] = self.request_id
        if self.details:
            out["details"] = self.details
        return out


class RateLimitedError(ProviderError):
    """The vendor refused the call for now (429): too many requests or tokens."""

    kind = "rate_limited"


class ServerError(ProviderError):
    """The vendor failed to handle the call (5xx)."""

    kind = "server_error"


class OverloadedError(ServerError):
    """The vendor is too busy to take the call (529, or an `overloaded_error`)."""

    kind = "overloaded"


class BadRequestError(ProviderError):
    """The vendor refused the request itself (a 4xx other than 429): a malformed request,
    a bad key, an unknown model. Sending it again unchanged fails the same way."""

    kind = "bad_request"


class ConnectionFailedError(ProviderError):
    """No answer came: the connection failed or timed out before the first byte of a reply."""

    kind = "connection"


class StreamCutError(ProviderError):
    """A streamed answer ended or broke after it had begun, so it is incomplete."""

    kind = "stream_cut"


class MockExhaustedError(ProviderError):
    """A mock with scripted replies was asked for one more reply than it has."""

    kind = "mock_exhausted"


class ReliabilityFailFastError(AfError):
    """A model call was given up: a reliability rule decided ``fail_fast``, or af decided it
    for one (a retry after the reply had begun streaming, no provider left, too many
    attempts, an open circuit breaker, a rule that raised).

    ``kind`` is a stable word for why: the rule's own ``kind`` (``rule`` when it has
    none), or one of af's
    (``mid-stream-not-retryable``, ``no-provider-left``, ``no-fallback-left``,
    ``attempts-exhausted``, ``circuit-open``, ``rule-failed``); ``reason`` says it in words.
    ``error`` is the last attempt's failure (None when it answered and a rule refused the
    answer, or when no attempt was made), also the exception's ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        reason: str,
        call: int | None = None,
        attempts: int = 0,
        error: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.reason = reason
        self.call = call
        """The number of the last call attempted (None when no attempt was made)."""
        self.attempts = attempts
        """How many attempts this call made."""
        self.error = error


class RunError(AfError):
    """A run stopped on an error. The recording holds the error and everything before it."""

    def __init__(self, message: str, *, rsid: str | None = None, recording: Path | None = None):
        super().__init__(message)
        self.rsid = rsid
        self.recording = recording


class RunInFlightError(AfError):
    """An agent was asked to run while a run of the same instance is under way: one run at
    a time per agent instance. Build one agent per caller that can reach it at once.
    Raised inside an agent called as a tool, it is the error result the model reads."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class McpError(AfError):
    """An MCP server could not be started or reached, stopped during a call, did not answer
    in time, or answered a call with an error. Raised inside an MCP tool, it is the error
    result the model reads; ``server`` names the server."""

    def __init__(self, message: str, *, server: str = "") -> None:
        super().__init__(message)
        self.server = server


class CompactionUnmeasurableError(AfError):
    """A window strategy triggered by tokens found no count to compare: the provider
    reported no usage for the last call, or only an estimate. Counted, never guessed."""

    def __init__(self, message: str, *, strategy: str = "", call: int | None = None) -> None:
        super().__init__(message)
        self.strategy = strategy
        self.call = call


class MessageDeniedError(AfError):
    """A message middleware link refused the user's message (``phase`` ``input``: the run
    never started) or the answer (``output``: the caller gets no answer, and the model is
    not asked again). Carries the reason, the phase and the link's name; never the text it
    refused."""

    def __init__(self, reason: str, *, phase: str, link: str) -> None:
        what = "the message" if phase == "input" else "the answer"
        super().__init__(f"{link} refused {what}: {reason}")
        self.reason = reason
        self.phase = phase
        self.link = link


class OutputSchemaError(AfError):
    """The answer does not hold to the agent's output schema (after its retries and, for a
    typed run, its fallback tiers). ``errors``: each problem ``{"path", "message"}``;
    ``raw``: the answer as the model gave it; ``checks``: how many answers were checked."""

    def __init__(self, message: str, *, errors: list[dict[str, str]], raw: str, checks: int):
        super().__init__(message)
        self.errors = errors
        self.raw = raw
        self.checks = checks


class RunPausedError(AfError):
    """A typed run (``run_typed``) paused for a person: ``paused`` says what is asked, and
    ``agent.resume_typed(paused, approve=...)`` continues it."""

    def __init__(self, paused: Any) -> None:
        super().__init__(f"the run paused: {paused.question}")
        self.paused = paused


class NotPausedError(UsageError):
    """A run asked to resume did not end paused (or is being resumed by another process)."""


class SessionError(AfError):
    """A session could not be kept: its store failed (a locked or unreachable database, a
    schema of a newer af), or refused a change. ``session`` names it when there is one."""

    def __init__(self, message: str, *, session: str | None = None, store: str = "") -> None:
        super().__init__(message)
        self.session = session
        self.store = store


class TurnLostError(SessionError):
    """This process's turn of a session was taken over: its lease ran out (the process
    looked dead to the others), and another process treated the turn as interrupted. What
    the turn had stored is kept; what it would have stored after is not."""


class ReplayError(AfError):
    """A replay (``af replay``, ``afcore.replay``) could not go on as the recording it
    replays. Raised where the replay stops, before any provider is asked."""


class ReplayDivergedError(ReplayError):
    """A replay's run departed from the recording it replays: a request that differs from
    the recorded one, a tool result, a call the recording does not hold, a different
    ending. ``divergence`` says where (an ``afcore.replay.Divergence``); the message says
    it in words."""

    def __init__(self, message: str, *, divergence: Any = None) -> None:
        super().__init__(message)
        self.divergence = divergence


class ReplayEndedError(ReplayError):
    """The recording a replay answers from ends here, without what the run needs next:
    the recorded run stopped at this point (interrupted, killed). Everything before it was
    replayed; ``call`` is the call it ends at."""

    def __init__(self, message: str, *, call: int | None = None) -> None:
        super().__init__(message)
        self.call = call


class RecordingError(AfError):
    """A recording cannot be read."""

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


class RecordingWriteError(RecordingError):
    """The recording could not be written on (a full disk, a quota, an I/O error). What it
    holds up to its last complete line is intact and reads as a run that was cut off."""


class RecordingFormatError(RecordingError):
    """The file is not an af recording, or a record in it breaks the format."""


class UnsupportedVersionError(RecordingError):
    """The recording was written by a newer major version of the format than this af reads."""


class RunNotFoundError(RecordingError):
    """No recording matches the path or run id given."""
