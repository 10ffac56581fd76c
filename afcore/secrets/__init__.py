"""Secrets: keeping them out of what af writes, and finding them in what it shares.

- :class:`Redaction` is a policy; ``policy.compile()`` gives the :class:`Redactor` a run
  writes its recording through (every value screened before it is hashed and written).
- :func:`scan` and :func:`scan_recording` find secrets in a JSON value or a recording and
  say where they are and which rule matched, never the value.
- :func:`shorten` cuts text for a record or a message, screening it first within a run.

The rules both use are in ``_rules``; docs/recording-format.md (Redaction) states them.
"""

from afcore.secrets._redaction import (
    DEFAULT_FIELDS,
    DEFAULT_PATTERNS,
    Redaction,
    Redactor,
    as_recorded,
    redact_url,
    screening,
    shorten,
    url_passwords,
)
from afcore.secrets._scanner import Hit, place, scan, scan_recording

__all__ = [
    "DEFAULT_FIELDS",
    "DEFAULT_PATTERNS",
    "Hit",
    "Redaction",
    "Redactor",
    "as_recorded",
    "redact_url",
    "scan",
    "scan_recording",
    "screening",
    "shorten",
    "url_passwords",
    "place",
]
