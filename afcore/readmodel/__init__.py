"""The read model: what a recording says, as both front ends (``af`` and the Lens) show it.

- a run call by call (:func:`overview`): each call's slot sizes, its decisions, its reply,
  the tool results and errors that followed it, the folds between calls, the outcome;
- one call as it was sent (:func:`call_detail`): its three slots rebuilt from the file, with
  the provenance of every piece, the seams where folds changed the window, what changed
  since the call before, its attempts, its response and its verification;
- a fold of the window (:class:`Fold`), checked field by field;
- plain text both front ends need: :func:`safe` display of hostile text, cuts that say what
  they cut, plurals, token usage, tool arguments and parameters.

Nothing here imports Rich or Textual: a front end renders what this gives.
"""

from __future__ import annotations

from afcore.readmodel._call import CallNotFoundError, CallUnreadableError, call_detail
from afcore.readmodel._folds import (
    SUMMARIZER,
    checked,
    fold_number,
    fold_text,
    messages_text,
    reasons_text,
    refusal_texts,
    seam_text,
    writers_text,
)
from afcore.readmodel._run import overview
from afcore.readmodel._text import (
    args_text,
    as_dict,
    as_text,
    evidence_text,
    json_text,
    line,
    more_text,
    ms_text,
    params_text,
    plural,
    safe,
    status_style,
    usage_text,
)
from afcore.readmodel._walk import window_numbers

__all__ = [
    "SUMMARIZER",
    "CallNotFoundError",
    "CallUnreadableError",
    "args_text",
    "as_dict",
    "as_text",
    "call_detail",
    "checked",
    "evidence_text",
    "fold_number",
    "fold_text",
    "json_text",
    "line",
    "messages_text",
    "more_text",
    "ms_text",
    "overview",
    "params_text",
    "plural",
    "reasons_text",
    "refusal_texts",
    "safe",
    "seam_text",
    "status_style",
    "usage_text",
    "window_numbers",
    "writers_text",
]
