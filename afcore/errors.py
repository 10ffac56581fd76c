"""Errors raised by af.

Every error af raises on purpose is an ``AfError``::

    AfError
    ├── UsageError                  a mistake in using the library (bad arguments, a bad builder)
    ├── ProviderError               a model provider failed to answer
    │   └── MockExhaustedError      a scripted mock ran out of replies
    ├── RunError                    a run stopped on an error; the recording says so
    ├── CompactionUnmeasurableError a token-triggered window strategy got no counted tokens
    └── RecordingError              a recording cannot be read
        ├── RecordingFormatError    not an af recording, or a record that breaks the format
        ├── UnsupportedVersionError written by a newer major version of the format
        └── RunNotFoundError        a run id or path that names no recording

Errors carry the context a person needs to act: the path and line of a recording, the
call number of a provider failure, the stage id where a run stopped.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AfError",
    "CompactionUnmeasurableError",
    "MockExhaustedError",
    "ProviderError",
    "RecordingError",
    "RecordingFormatError",
    "RunError",
    "RunNotFoundError",
    "UnsupportedVersionError",
    "UsageError",
]


class AfError(Exception):
    """The root of every error af raises on purpose."""


class UsageError(AfError):
    """The library was used in a way it does not support; the message says how to fix it."""


class ProviderError(AfError):
    """A model provider failed to answer a call."""

    def __init__(self, message: str, *, provider: str = "", call: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.call = call


class MockExhaustedError(ProviderError):
    """A mock with scripted replies was asked for one more reply than it has."""


class RunError(AfError):
    """A run stopped on an error. The recording holds the error and everything before it."""

    def __init__(self, message: str, *, rsid: str | None = None, recording: Path | None = None):
        super().__init__(message)
        self.rsid = rsid
        self.recording = recording


class CompactionUnmeasurableError(AfError):
    """A window strategy triggered by tokens found no count to compare: the provider
    reported no usage for the last call, or only an estimate. Counted, never guessed."""

    def __init__(self, message: str, *, strategy: str = "", call: int | None = None) -> None:
        super().__init__(message)
        self.strategy = strategy
        self.call = call


class RecordingError(AfError):
    """A recording cannot be read."""

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


class RecordingFormatError(RecordingError):
    """The file is not an af recording, or a record in it breaks the format."""


class UnsupportedVersionError(RecordingError):
    """The recording was written by a newer major version of the format than this af reads."""


class RunNotFoundError(RecordingError):
    """No recording matches the path or run id given."""
