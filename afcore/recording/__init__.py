"""The recording: each run written as one JSONL file, and read back.

``open_recording(path)`` gives a :class:`Recording`: its header, its records, its calls, each call's
request rebuilt exactly, and the check of its hash. ``verify(recording)`` checks it all.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from afcore.recording._config import RecordingConfig
    from afcore.recording._hashing import canonical, content_hash
    from afcore.recording._models import (
        FORMAT,
        FORMAT_VERSION,
        RECORD_ADAPTER,
        AgentInfo,
        ArgsInvalid,
        AttemptDecision,
        AttemptInfo,
        Blob,
        BreakerInfo,
        Call,
        CallTool,
        Commit,
        ContextEvicted,
        ErrorEvent,
        ErrorInfo,
        Fold,
        FoldRefusal,
        FoldSummary,
        Header,
        InjectionDecision,
        InjectionDecisions,
        InjectionInfo,
        Record,
        RedactionInfo,
        ReliabilityInfo,
        ReliabilityRuleInfo,
        Reply,
        ReplyToolCall,
        RunConfig,
        RunEnd,
        Segment,
        SkippedProvider,
        SlotDelta,
        SourceInfo,
        TargetInfo,
        ToolInfo,
        ToolOutcome,
        ToolProgress,
        ToolStart,
        ToolStatus,
        UnknownRecord,
        UsageInfo,
        WindowInfo,
        Write,
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

# Imported when first used: reading a recording loads neither the writer nor redaction.
_WHERE: dict[str, tuple[str, ...]] = {
    "afcore.recording._config": ("RecordingConfig",),
    "afcore.recording._hashing": (
        "canonical",
        "content_hash",
    ),
    "afcore.recording._models": (
        "FORMAT",
        "FORMAT_VERSION",
        "RECORD_ADAPTER",
        "AgentInfo",
        "ArgsInvalid",
        "AttemptDecision",
        "AttemptInfo",
        "Blob",
        "BreakerInfo",
        "Call",
        "CallTool",
        "Commit",
        "ContextEvicted",
        "ErrorEvent",
        "ErrorInfo",
        "Fold",
        "FoldRefusal",
        "FoldSummary",
        "Header",
        "InjectionDecision",
        "InjectionDecisions",
        "InjectionInfo",
        "Record",
        "RedactionInfo",
        "ReliabilityInfo",
        "ReliabilityRuleInfo",
        "Reply",
        "ReplyToolCall",
        "RunConfig",
        "RunEnd",
        "Segment",
        "SkippedProvider",
        "SlotDelta",
        "SourceInfo",
        "TargetInfo",
        "ToolInfo",
        "ToolOutcome",
        "ToolProgress",
        "ToolStart",
        "ToolStatus",
        "UnknownRecord",
        "UsageInfo",
        "WindowInfo",
        "Write",
    ),
    "afcore.recording._paths": (
        "default_dir",
        "new_run_id",
        "resolve_run",
    ),
    "afcore.recording._reader": (
        "MAX_LINE",
        "CallCheck",
        "Problem",
        "Recording",
        "TornTail",
        "open_recording",
    ),
    "afcore.recording._redaction": ("Redaction",),
    "afcore.recording._verify": (
        "VerifyReport",
        "verify",
    ),
    "afcore.recording._writer": ("Recorder",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_LINE",
    "RECORD_ADAPTER",
    "AgentInfo",
    "ArgsInvalid",
    "AttemptDecision",
    "AttemptInfo",
    "Blob",
    "BreakerInfo",
    "Call",
    "CallCheck",
    "CallTool",
    "Commit",
    "ContextEvicted",
    "ErrorEvent",
    "ErrorInfo",
    "Fold",
    "FoldRefusal",
    "FoldSummary",
    "Header",
    "InjectionDecision",
    "InjectionDecisions",
    "InjectionInfo",
    "Problem",
    "Record",
    "Recorder",
    "Recording",
    "RecordingConfig",
    "Redaction",
    "RedactionInfo",
    "ReliabilityInfo",
    "ReliabilityRuleInfo",
    "Reply",
    "ReplyToolCall",
    "RunConfig",
    "RunEnd",
    "Segment",
    "SkippedProvider",
    "SlotDelta",
    "SourceInfo",
    "TargetInfo",
    "ToolInfo",
    "ToolOutcome",
    "ToolProgress",
    "ToolStart",
    "ToolStatus",
    "TornTail",
    "UnknownRecord",
    "UsageInfo",
    "VerifyReport",
    "WindowInfo",
    "Write",
    "canonical",
    "content_hash",
    "default_dir",
    "new_run_id",
    "open_recording",
    "resolve_run",
    "verify",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'afcore.recording' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
