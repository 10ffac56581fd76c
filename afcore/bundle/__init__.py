"""Bundles: one file to attach to a bug report.

:func:`export_bundle` writes a zip holding the recording (redacted further by an
:class:`ExportPolicy`, and rewritten so it still verifies), a manifest (which af, Python,
platform, provider, models and agent) and a redaction report (what, by which rule, how many
times and where; never the values). Every reader opens a bundle as the recording it holds
(``afcore.recording.open_recording``). :func:`read_bundle` gives the manifest and report.
"""

from afcore.bundle._export import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    Exported,
    ExportRefused,
    Prepared,
    export_bundle,
    prepare_export,
    read_bundle,
)
from afcore.bundle._policy import BUILTIN_RULES, ExportPolicy, FieldPath
from afcore.recording import is_bundle

__all__ = [
    "BUILTIN_RULES",
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "ExportPolicy",
    "ExportRefused",
    "Exported",
    "FieldPath",
    "Prepared",
    "export_bundle",
    "prepare_export",
    "is_bundle",
    "read_bundle",
]
