"""Session ids: what may key a conversation in a store and reach a model's prompt."""

from __future__ import annotations

import re

from afcore.errors import UsageError

__all__ = ["SESSION_ID", "check_session_id"]

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
"""1 to 128 characters: ASCII letters and digits, ``.``, ``_``, ``:`` and ``-``, starting
with a letter or a digit. A value that does not fit is refused, never mapped onto the set:
normalise it yourself (a branch name's ``/``, a subject's ``@``) before it names a session."""


def check_session_id(value: object) -> str:
    """``value`` when it is a valid session id; a :class:`UsageError` saying why not."""
    if not isinstance(value, str):
        raise UsageError(f"a session id is a string, got {type(value).__name__}")
    if SESSION_ID.fullmatch(value) is None:
        shown = repr(value[:60]) + (
            f" (and {len(value) - 60} more characters)" if len(value) > 60 else ""
        )
        raise UsageError(
            "a session id is 1 to 128 characters: ASCII letters, digits, '.', '_', ':' or '-', "
            f"starting with a letter or a digit; got {shown}"
        )
    return value
