"""The read model: what a recording says, as both front ends (``af`` and the Lens) show it.

- a run call by call (:func:`overview`): each call's slot sizes, its decisions, its reply,
  the tool results and errors that followed it, the folds between calls, the outcome;
- one call as it was sent (:func:`call_detail`): its three slots rebuilt from the file, with
  the provenance of every piece, the seams where folds changed the window, what changed
  since the call before, its attempts, its response and its verification;
- the run as a timeline of calls (:class:`Timeline`, :func:`build`): one pass that keeps a
  few numbers a call and where the stages are that each call's provenance depends on, so
  that any call is shown without reading the file from the top (:func:`call_view`: a call
  with the events that followed it, as the Lens shows it);
- the typed objects all of these are made of (``_model``): a call's summary, its
  response, attempts, errors, decisions, slot entries with their provenance, seams, folds;
- a fold of the window, checked field by field;
- a session as its turns' recordings in order (:func:`session_runs`), and where a message
  a turn continued from was written (:func:`history_origin`);
- a flow's run as one timeline of every agent's calls (:func:`flow_timeline`), and the
  graph of what produced its answer or a state value (:func:`flow_graph`);
- two runs side by side (:func:`diff_runs`, :func:`diff_call`): what differs, call by call,
  slot by slot, in the replies, the tool results and the ending;
- plain text both front ends need: :func:`safe` display of hostile text, cuts that say what
  they cut, plurals, token usage, tool arguments and parameters.

Nothing here imports Rich or Textual: a front end renders what this gives.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from afcore.readmodel._call import (
        CallDetail,
        CallNotFoundError,
        CallUnreadableError,
        Verification,
        call_detail,
    )
    from afcore.readmodel._callview import EVENT_LIMIT, CallView, call_view, walk_lines
    from afcore.readmodel._diff import (
        SLOTS,
        CallDiff,
        Change,
        RunDiff,
        RunSide,
        diff_call,
        diff_runs,
        excerpts,
        first_difference,
    )
    from afcore.readmodel._flow import (
        AgentRun,
        FlowCall,
        FlowText,
        FlowTimeline,
        flow_texts,
        flow_timeline,
        step_starts,
    )
    from afcore.readmodel._flow_diff import (
        FLOW_SLOTS,
        FlowDiff,
        FlowSide,
        StepDiff,
        decision_changes,
        diff_flows,
        end_changes,
        merge_changes,
        start_changes,
        step_changes,
        step_end_changes,
    )
    from afcore.readmodel._flowgraph import (
        EDGE_KINDS,
        FlowEdge,
        FlowGraph,
        FlowKeyError,
        GraphNode,
        flow_graph,
    )
    from afcore.readmodel._folds import (
        SUMMARIZER,
        checked,
        fold_number,
        fold_text,
        messages_text,
        numbers_text,
        reasons_text,
        refusal_texts,
        seam_text,
        window_text,
        writers_text,
    )
    from afcore.readmodel._model import (
        Attempt,
        CallError,
        CallSummary,
        Decision,
        Decisions,
        FoldPart,
        FoldView,
        Gone,
        InvalidArgs,
        MessageEntry,
        Provenance,
        Refusal,
        Removed,
        Response,
        RunHead,
        RunOutcome,
        Seam,
        SystemEntry,
        ToolCall,
        ToolEntry,
        ToolResult,
    )
    from afcore.readmodel._run import RunPart, overview, run_view
    from afcore.readmodel._session import (
        HistoryOrigin,
        SessionRuns,
        TurnRun,
        history_origin,
        history_source,
        session_runs,
        turn_header,
        user_message,
    )
    from afcore.readmodel._text import (
        args_text,
        as_dict,
        as_text,
        block_text,
        evidence_text,
        json_text,
        line,
        more_text,
        ms_text,
        params_text,
        plural,
        result_notes,
        safe,
        shown_status,
        status_style,
        stop_text,
        usage_json,
        usage_text,
    )
    from afcore.readmodel._timeline import FoldMark, Mark, Timeline, build
    from afcore.readmodel._walk import window_numbers

# Imported when first used: ``af --help`` and ``af ls`` name these without paying for the
# reader and the read model.
_WHERE: dict[str, tuple[str, ...]] = {
    "afcore.readmodel._call": (
        "CallDetail",
        "CallNotFoundError",
        "CallUnreadableError",
        "Verification",
        "call_detail",
    ),
    "afcore.readmodel._callview": (
        "EVENT_LIMIT",
        "CallView",
        "call_view",
        "walk_lines",
    ),
    "afcore.readmodel._diff": (
        "SLOTS",
        "CallDiff",
        "Change",
        "RunDiff",
        "RunSide",
        "diff_call",
        "diff_runs",
        "excerpts",
        "first_difference",
    ),
    "afcore.readmodel._flow": (
        "AgentRun",
        "FlowCall",
        "FlowText",
        "FlowTimeline",
        "flow_texts",
        "flow_timeline",
        "step_starts",
    ),
    "afcore.readmodel._flowgraph": (
        "EDGE_KINDS",
        "FlowEdge",
        "FlowGraph",
        "FlowKeyError",
        "GraphNode",
        "flow_graph",
    ),
    "afcore.readmodel._flow_diff": (
        "FLOW_SLOTS",
        "FlowDiff",
        "FlowSide",
        "StepDiff",
        "decision_changes",
        "diff_flows",
        "end_changes",
        "merge_changes",
        "start_changes",
        "step_changes",
        "step_end_changes",
    ),
    "afcore.readmodel._folds": (
        "SUMMARIZER",
        "checked",
        "fold_number",
        "fold_text",
        "messages_text",
        "numbers_text",
        "reasons_text",
        "window_text",
        "refusal_texts",
        "seam_text",
        "writers_text",
    ),
    "afcore.readmodel._model": (
        "Attempt",
        "CallError",
        "CallSummary",
        "Decision",
        "Decisions",
        "FoldPart",
        "FoldView",
        "Gone",
        "InvalidArgs",
        "MessageEntry",
        "Provenance",
        "Refusal",
        "Removed",
        "Response",
        "RunHead",
        "RunOutcome",
        "Seam",
        "SystemEntry",
        "ToolCall",
        "ToolEntry",
        "ToolResult",
    ),
    "afcore.readmodel._run": ("RunPart", "overview", "run_view"),
    "afcore.readmodel._session": (
        "HistoryOrigin",
        "SessionRuns",
        "TurnRun",
        "history_origin",
        "history_source",
        "session_runs",
        "turn_header",
        "user_message",
    ),
    "afcore.readmodel._text": (
        "args_text",
        "as_dict",
        "as_text",
        "evidence_text",
        "json_text",
        "line",
        "more_text",
        "ms_text",
        "params_text",
        "plural",
        "result_notes",
        "safe",
        "shown_status",
        "status_style",
        "usage_json",
        "usage_text",
        "block_text",
        "stop_text",
    ),
    "afcore.readmodel._timeline": (
        "FoldMark",
        "Mark",
        "Timeline",
        "build",
    ),
    "afcore.readmodel._walk": ("window_numbers",),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "SLOTS",
    "EDGE_KINDS",
    "FlowEdge",
    "FlowGraph",
    "FlowKeyError",
    "GraphNode",
    "flow_graph",
    "AgentRun",
    "FlowCall",
    "FlowText",
    "FlowTimeline",
    "flow_texts",
    "flow_timeline",
    "step_starts",
    "Attempt",
    "CallDiff",
    "Change",
    "RunDiff",
    "RunSide",
    "diff_call",
    "diff_runs",
    "excerpts",
    "first_difference",
    "FLOW_SLOTS",
    "FlowDiff",
    "FlowSide",
    "StepDiff",
    "decision_changes",
    "diff_flows",
    "end_changes",
    "merge_changes",
    "start_changes",
    "step_changes",
    "step_end_changes",
    "CallError",
    "CallSummary",
    "Decision",
    "Decisions",
    "FoldPart",
    "FoldView",
    "Gone",
    "InvalidArgs",
    "MessageEntry",
    "Provenance",
    "Refusal",
    "Removed",
    "Response",
    "RunHead",
    "RunOutcome",
    "Seam",
    "SystemEntry",
    "ToolCall",
    "ToolEntry",
    "ToolResult",
    "usage_json",
    "EVENT_LIMIT",
    "CallDetail",
    "Verification",
    "SUMMARIZER",
    "CallView",
    "RunPart",
    "HistoryOrigin",
    "SessionRuns",
    "TurnRun",
    "history_origin",
    "history_source",
    "session_runs",
    "turn_header",
    "user_message",
    "FoldMark",
    "Mark",
    "Timeline",
    "build",
    "call_view",
    "walk_lines",
    "CallNotFoundError",
    "CallUnreadableError",
    "args_text",
    "as_dict",
    "as_text",
    "block_text",
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
    "numbers_text",
    "overview",
    "params_text",
    "plural",
    "reasons_text",
    "result_notes",
    "run_view",
    "refusal_texts",
    "safe",
    "seam_text",
    "shown_status",
    "status_style",
    "stop_text",
    "usage_text",
    "window_numbers",
    "window_text",
    "writers_text",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'afcore.readmodel' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
