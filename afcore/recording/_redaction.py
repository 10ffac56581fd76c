"""Redaction lives in :mod:`afcore.secrets`; this name is kept for the recorder's imports."""

from afcore.secrets._redaction import DEFAULT_FIELDS, DEFAULT_PATTERNS, Redaction, Redactor

__all__ = ["DEFAULT_FIELDS", "DEFAULT_PATTERNS", "Redaction", "Redactor"]
