"""The recording: each run written as one JSONL file, and read back.

``open_recording(path)`` gives a :class:`Recording`: its header, its records, its calls, each call's
request rebuilt exactly, and the check of its hash. ``verify(recording)`` checks it all.
"""

from afcore.recording._config import RecordingConfig
from afcore.recording._hashing import canonical, content_hash
from afcore.recording._models import (
    FORMAT,
    FORMAT_VERSION,
    RECORD_ADAPTER,
    ArgsInvalid,
    AttemptDecision,
    AttemptInfo,
    Blob,
    Call,
    CallTool,
    Commit,
    ContextEvicted,
    ErrorEvent,
    Header,
    Record,
    Reply,
    RunEnd,
    Segment,
    ToolProgress,
    ToolStart,
    UnknownRecord,
    UsageInfo,
)
from afcore.recording._paths import default_dir, new_run_id, resolve_run
from afcore.recording._reader import (
    MAX_LINE,
    CallCheck,
    Problem,
    Recording,
    TornTail,
    open_recording,
)
from afcore.recording._redaction import Redaction
from afcore.recording._verify import VerifyReport, verify
from afcore.recording._writer import Recorder

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_LINE",
    "RECORD_ADAPTER",
    "ArgsInvalid",
    "AttemptDecision",
    "AttemptInfo",
    "Blob",
    "Call",
    "CallCheck",
    "CallTool",
    "Commit",
    "ContextEvicted",
    "ErrorEvent",
    "Header",
    "Problem",
    "Record",
    "Recorder",
    "Recording",
    "RecordingConfig",
    "Redaction",
    "Reply",
    "RunEnd",
    "Segment",
    "ToolProgress",
    "ToolStart",
    "TornTail",
    "UnknownRecord",
    "UsageInfo",
    "VerifyReport",
    "canonical",
    "content_hash",
    "default_dir",
    "new_run_id",
    "open_recording",
    "resolve_run",
    "verify",
]
