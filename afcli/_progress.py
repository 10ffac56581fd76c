"""What ``af run`` prints on stderr while the agent runs, read from the records as they are
written (the ``observe=`` callback of ``Agent.run``), and the model's words as they stream
in (its ``stream=`` callback)."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.text import Text

from afcli._render import fit
from afcore.providers import TextDelta, ThinkingDelta, ToolCallStart
from afcore.readmodel import (
    SUMMARIZER,
    args_text,
    checked,
    fold_number,
    fold_text,
    ms_text,
    plural,
    reasons_text,
    result_notes,
    safe,
    shown_status,
    status_style,
    usage_text,
)

__all__ = ["Progress"]

_BLOBS_KEPT = 512
"""Blobs arrive before the records that refer to them; the recent ones are enough to show
a run's progress, and keeping only these bounds memory on a long run."""
_TEXT_KEPT = 4096
"""Progress shows one line of a value: no need to hold on to more of a long one."""


def _count(listed: Any) -> int | None:
    """How many entries a slot list holds, in either of its stored forms."""
    if isinstance(listed, list):
        return len(listed)
    if isinstance(listed, dict) and isinstance(listed.get("keep"), int):
        then = listed.get("then")
        return listed["keep"] + len(then) if isinstance(then, list) else None
    return None


def _light(value: Any) -> Any:
    """A blob's value with long texts cut to what a progress line can show; ``_chars`` keeps
    the full length, so the line can still say how much was cut."""
    if not isinstance(value, dict):
        return value
    content = value.get("content")
    if isinstance(content, str) and len(content) > _TEXT_KEPT:
        return {**value, "content": content[:_TEXT_KEPT], "_chars": len(content)}
    if isinstance(content, list):
        blocks = []
        for b in content:
            text = b.get("text") if isinstance(b, dict) else None
            if isinstance(text, str) and len(text) > _TEXT_KEPT:
                b = {**b, "text": text[:_TEXT_KEPT], "_chars": len(text)}
            blocks.append(b)
        return {**value, "content": blocks}
    return value


def _attempt_text(call: dict[str, Any]) -> str:
    """`` · attempt 2 · backup (providers[0])`` for a call that is not its stage's first
    attempt on the agent's provider; empty otherwise."""
    a = call.get("attempt")
    if not isinstance(a, dict) or (a.get("n") == 1 and a.get("via") == "agent"):
        return ""
    where = f" · {safe(str(a.get('provider')))}"
    if a.get("via") != "agent":
        where += f" ({safe(str(a.get('via')))})"
    return f" · attempt {safe(str(a.get('n')))}{where}"


class Progress:
    """Call with each record dict; prints a compact line or two for the ones that matter."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._blobs: OrderedDict[str, Any] = OrderedDict()
        self._broken = False
        self._invalid: dict[str, str] = {}
        """call id -> why its arguments were refused, until its result is shown"""
        self._fired: set[str] = set()
        """the injections that fired at the last iteration (those whose decision is recorded)"""
        self._failed: dict[str, str] = {}
        """injection id -> the error its last evaluation raised"""
        self._decisions: dict[str, dict[str, Any]] = {}
        """injection id -> its latest decision (the records list only what changed)"""
        self._context: list[Text] = []
        """what the last inject stage changed, shown under the call it composed"""
        self._summarizing: dict[str, int] = {}
        """a summarize stage's rsid -> the fold it summarizes for"""
        self._pending = ""
        """streamed words not yet printed: a line is printed when it is whole"""
        self._pending_style = ""
        self._streamed = False
        """whether the model's text for the current call was streamed (then not repeated)"""
        self.footer: Status | None = None
        """A status line kept under the output (on a terminal): iteration, call, tokens."""
        self._tokens = [0, 0]
        self._where = ""
        self.answer_streamed = False
        """Whether the last reply, the answer when the run ends on one, was streamed here."""
        self._running: dict[str, tuple[str, float]] = {}
        """tool call id -> the tool's name and when it started, until its result"""
        self._calling: tuple[int, float] | None = None
        """the model call in flight and when it was sent, until its reply"""

    def waiting_for(self) -> str:
        """What a stop now waits for, in words: the tools running (a sync tool's thread is
        left behind), the model call in flight, or nothing but the recording."""
        now = time.monotonic()
        if self._running:
            tools = ", ".join(
                f"{safe(name)} (running {now - t0:.1f} s)" for name, t0 in self._running.values()
            )
            return f"cancelling {tools} and closing the recording"
        if self._calling is not None:
            n, t0 = self._calling
            return (
                f"cancelling call {n} to the model (sent {now - t0:.1f} s ago) and closing the "
                "recording"
            )
        return "closing the recording"

    def stream(self, event: object) -> None:
        """The model's reply as it arrives: text, thinking (dimmed), tool calls starting.
        Printed a whole line at a time, so a footer below stays intact."""
        if self._broken:
            return
        try:
            if isinstance(event, TextDelta | ThinkingDelta):
                style = "dim italic" if isinstance(event, ThinkingDelta) else ""
                if style != self._pending_style:
                    self._flush_stream()
                    self._pending_style = style
                self._streamed = self._streamed or isinstance(event, TextDelta)
                self._pending += event.text
                *lines, self._pending = self._pending.split("\n")
                for line in lines:
                    self._stream_line(line)
            elif isinstance(event, ToolCallStart):
                self._flush_stream()
                self._say(("  … ", "dim"), (safe(event.name), "cyan"), (" starting", "dim"))
        except Exception as e:
            self._broken = True
            self.console.print(
                Text(f"(progress display stopped: {type(e).__name__}: {safe(str(e))})", "dim")
            )

    def _stream_line(self, line: str) -> None:
        mark = "  ┆ " if self._pending_style else "  │ "
        self.console.print(Text.assemble((mark, "dim"), (safe(line), self._pending_style)))

    def _flush_stream(self) -> None:
        if self._pending:
            self._stream_line(self._pending)
            self._pending = ""

    @contextmanager
    def footing(self, text: Text) -> Iterator[None]:
        """For the block, a spinner's status line under the output (:attr:`footer`). Its
        refresh thread is born deaf to Ctrl-C: a sync tool may block the main thread outside
        any selector, and only a signal the kernel hands to that thread interrupts it."""
        from afcore.loop import new_threads_leave_sigint

        with ExitStack() as stack:
            with new_threads_leave_sigint():
                self.footer = stack.enter_context(self.console.status(text, spinner="dots"))
            try:
                yield
            finally:
                self.footer = None

    def _update_footer(self) -> None:
        if self.footer is not None:
            tin, tout = self._tokens
            self.footer.update(
                Text(f"{self._where} · {tin:,} in / {tout:,} out tokens so far", "dim")
            )

    def __call__(self, record: dict[str, Any]) -> None:
        # An exception here would stop the run it only watches: report it once, carry on.
        if self._broken:
            return
        try:
            self._show(record)
        except Exception as e:
            self._broken = True
            self.console.print(
                Text(f"(progress display stopped: {type(e).__name__}: {safe(str(e))})", "dim")
            )

    # -- helpers -------------------------------------------------------------------------

    @property
    def _width(self) -> int:
        return max(self.console.width, 60)

    def value_of(self, write: Any) -> Any:
        """The value a record's write holds: inline, or in a blob seen before it (None: not
        kept, or a blob too big to keep)."""
        return self._value(write)

    def _value(self, write: Any) -> Any:
        if not isinstance(write, dict):
            return None
        ref = write.get("ref")
        if ref is None:
            return write.get("value")
        return self._blobs.get(ref)

    def _say(
        self, *parts: str | tuple[str, str], tail: str | None = None, total: int | None = None
    ) -> None:
        """Print ``parts`` on one line; ``tail`` (untrusted text, ``total`` characters in full)
        is cut to fit the rest."""
        text = Text.assemble(*parts)
        self.console.print(text if tail is None else fit(text, tail, self._width, total=total))

    # -- records -------------------------------------------------------------------------

    def _show(self, r: dict[str, Any]) -> None:
        t = r.get("t")
        if t == "commit" and "stage" not in r:  # 1.1: the stage is the rsid's
            r = {**r, "stage": str(r.get("rsid", "")).partition("#")[0]}
        if t == "blob":
            self._blobs[r["id"]] = _light(r.get("value"))
            if len(self._blobs) > _BLOBS_KEPT:
                self._blobs.popitem(last=False)
        elif t == "header":
            agent = r.get("agent") or {}
            self._say(
                (safe(str(agent.get("name", "agent"))), "bold"),
                (f" · {safe(str(r.get('model', '')))} · run {safe(str(r.get('run_id')))}", "dim"),
            )
        elif t == "call" and str(r.get("rsid", "")).startswith(SUMMARIZER):
            sent = sum(b - a + 1 for a, b in r.get("window", []))
            fold = self._summarizing.get(str(r.get("rsid")))
            self._say(
                ("  summarizer", "bold magenta"),
                (f" for fold {fold}" if fold is not None else "", "magenta"),
                (f" · call {r.get('call')} · {plural(sent, 'message')}", "dim"),
                (f" · {safe(str(r.get('model', '')))}", "dim"),
            )
        elif t == "call":
            self._calling = (int(r.get("call") or 0), time.monotonic())
            self._where = f"iteration {r.get('iter')} · call {r.get('call')}"
            self._update_footer()
            sent = sum(b - a + 1 for a, b in r.get("window", []))
            tools = _count(self._value({"ref": r.get("tools")}))
            self._say(
                (f"iteration {r.get('iter')}", "bold cyan"),
                (f" · call {r.get('call')} · {plural(sent, 'message')}", "dim"),
                (f" · {plural(tools, 'tool')}" if tools is not None else "", "dim"),
                (_attempt_text(r), "yellow"),
            )
            for change in self._context:
                self.console.print(change)
            self._context = []
        elif t == "commit" and r.get("stage") == "inject":
            self._inject(r)
        elif t == "commit" and r.get("stage") in ("window", "summarize"):
            self._window(r)
        elif t == "reply":
            self._calling = None
            self._reply(r)
            if any(
                isinstance(w, dict) and w.get("value") == "tools" and w.get("key") == "route"
                for w in r.get("writes") or ()
            ):
                # The loop goes on to the tools the reply asked for.
                now = time.monotonic()
                for call in r.get("tool_calls") or ():
                    if isinstance(call, dict):
                        self._running[str(call.get("id"))] = (str(call.get("name")), now)
        elif t == "tool_start":  # 1.0
            self._running[str(r.get("call_id"))] = (str(r.get("name")), time.monotonic())
        elif t == "args_invalid":
            problems = r.get("problems") or []
            text = "; ".join(f"{p.get('path', '$')}: {p.get('message', '')}" for p in problems)
            if r.get("enforced"):
                # Shown with the rejected result, in place of the correction's boilerplate.
                self._invalid[str(r.get("call_id"))] = text
            else:
                self._say(
                    ("  ! ", "yellow"),
                    (safe(str(r.get("name"))), "cyan"),
                    (" ran with invalid arguments: ", "yellow"),
                    tail=text,
                )
        elif t == "commit" and r.get("tool"):
            self._running.pop(str((r.get("tool") or {}).get("call_id")), None)
            self._tool_result(r)
            self._governed(r)
        elif t == "commit" and str(r.get("stage", "")).startswith(("govern:", "output")):
            self._governed(r)
        elif t == "resume":
            answered = "approved" if r.get("verb") == "approve" else "declined"
            self._say(
                (f"  ▶ {answered}", "bold green" if answered == "approved" else "bold red"),
                f" by {safe(str(r.get('by', '?')))}",
                tail=f": {r['why']}" if r.get("why") else "",
            )
        elif t == "tool_progress":
            self._say(("  … ", "dim"), tail=str(r.get("message", "")))
        elif t == "error":
            self._calling = None
            # A reply cut off mid-stream: what came of it is shown before why it stopped.
            self._flush_stream()
            self._streamed = False
            err = r.get("error") or {}
            decision = r.get("decision")
            verb = decision.get("verb") if isinstance(decision, dict) else None
            # What a reliability rule made of it: the next attempt, or the end of the call.
            then = f" → {safe(str(verb))}" if verb not in (None, "ok", "fail_fast") else ""
            self._say(
                ("  ✗ ", "bold red"),
                (safe(str(err.get("kind", "error"))), "red"),
                (then, "yellow"),
                ": ",
                tail=str(err.get("message", "")),
            )
        elif t == "run_end":
            self._end(r)

    def _governed(self, r: dict[str, Any]) -> None:
        """What the rules decided, one line each: only what they did (a link that allowed
        as it was is not news)."""
        from afcore.governance import decision_words

        for w in r.get("writes") or []:
            key = str(w.get("key", "")) if isinstance(w, dict) else ""
            if not key.startswith(("govern:", "output:")):
                continue
            for words in decision_words(key, self._value(w)):
                if " allowed " in words:
                    continue
                bad = " denied " in words or " failed" in words or "fails" in words
                self._say(("  ⚖ ", "red" if bad else "yellow"), tail=words)

    def _inject(self, r: dict[str, Any]) -> None:
        """What changed in the context: injections that fired now and not at the iteration
        before (+), that stopped firing (-), and rules that newly failed."""
        listed: Any = None
        for w in r.get("writes") or []:
            if isinstance(w, dict) and w.get("key") == "injections":
                listed = (self._value(w) or {}).get("decisions")
        if not isinstance(listed, list):
            return
        # The record lists the decisions that changed; the rest carry over.
        for d in listed:
            if isinstance(d, dict):
                self._decisions[str(d.get("id"))] = d
        decisions = list(self._decisions.values())
        fired: list[str] = []
        lines: list[Text] = []
        failed: dict[str, str] = {}
        for d in decisions:
            if not isinstance(d, dict):
                continue
            id = str(d.get("id"))
            if d.get("fired") is True:
                fired.append(id)
            elif d.get("error") is not None:
                failed[id] = error = str(d.get("error"))
                if self._failed.get(id) != error:
                    head = Text.assemble(("  ! ", "red"), (safe(id), "red"), (" skipped: ", "red"))
                    lines.append(fit(head, f"{d.get('reason')}: {error}", self._width))
        changes = [f"+{i}" for i in fired if i not in self._fired]
        changes += [f"-{i}" for i in sorted(self._fired) if i not in fired]
        if changes:
            head = Text("  injections ", "dim")
            lines.insert(0, fit(head, " ".join(changes), self._width))
        self._fired, self._failed, self._context = set(fired), failed, lines

    def _window(self, r: dict[str, Any]) -> None:
        """A fold, in one line as it happens; a summarize stage, for the call that follows."""
        for w in r.get("writes") or []:
            if not isinstance(w, dict):
                continue
            key = str(w.get("key", ""))
            source = w.get("source")
            if r.get("stage") == "summarize" and isinstance(source, dict):
                fold = fold_number(str(source.get("id", "")))
                if fold is not None:
                    self._summarizing[str(r.get("rsid"))] = fold
            fold = fold_number(key)
            if r.get("stage") == "window" and fold is not None:
                f = checked(self._value(w), fold)
                text = fold_text(f, compact=True)
                if not f.count and f.refusals:
                    # Nothing left: what kept it all is the news.
                    text += f"; {reasons_text(f)}"
                # Our own words, made safe by fold_text: cut to the line like a model's.
                self.console.print(fit(Text("  "), text, self._width), style="magenta")
                return

    def _reply(self, r: dict[str, Any]) -> None:
        self._flush_stream()
        streamed, self._streamed = self._streamed, False
        self.answer_streamed = streamed and not r.get("tool_calls")
        usage = r.get("usage") or {}
        self._tokens[0] += usage.get("input_tokens", 0) if isinstance(usage, dict) else 0
        self._tokens[1] += usage.get("output_tokens", 0) if isinstance(usage, dict) else 0
        self._update_footer()
        decision = r.get("decision")
        verb = decision.get("verb") if isinstance(decision, dict) else None
        self._say(
            ("  model ", "dim"),
            usage_text(r.get("usage")),
            (f" · {ms_text(r.get('ms'))} · {safe(str(r.get('stop_reason')))}", "dim"),
            # A reliability rule refused the answer: the next attempt follows.
            (f" · refused → {safe(str(verb))}" if verb not in (None, "ok") else "", "yellow"),
        )
        writes = r.get("writes") or [{}]
        message = self._value(writes[0])
        if not isinstance(message, dict):
            return
        texts = [b for b in message.get("content", []) if b.get("type") == "text"]
        text = "".join(b.get("text", "") for b in texts)
        if text and r.get("tool_calls") and not streamed:
            # The final answer goes to stdout; here only what the model says on its way.
            total = sum(b.get("_chars", len(b.get("text", ""))) for b in texts)
            self._say(("  says ", "dim"), tail=text, total=total)
        for block in message.get("content", []):
            if block.get("type") == "tool_call":
                name = safe(str(block.get("name")))
                self._say(
                    ("  → ", "cyan"),
                    (name, "bold cyan"),
                    ("(", "dim"),
                    args_text(block.get("args"), self._width - len(name) - 8),
                    (")", "dim"),
                )

    def _tool_result(self, r: dict[str, Any]) -> None:
        tool = r["tool"]
        status = str(tool.get("status"))
        writes = r.get("writes") or [{}]
        message = self._value(writes[0])
        content = message.get("content", "") if isinstance(message, dict) else None
        why = self._invalid.pop(str(tool.get("call_id")), None)
        total = None
        if why is not None:
            tail = why
        elif content is not None:
            tail, total = str(content), message.get("_chars")
        else:
            tail = "(the same value as earlier in the run)"
        declared = str(tool.get("result_status") or "") if status == "ok" else ""
        style = status_style(declared or status)
        self._say(
            ("  ← ", style),
            (safe(str(tool.get("name"))), "cyan"),
            (f" {shown_status(tool)}", style),
            (f" · {ms_text(tool.get('ms'))} · ", "dim"),
            tail=tail,
            total=total,
        )
        limits = next(
            (self._value(w) for w in writes if str(w.get("key", "")).startswith("limits:")), None
        )
        for note in result_notes(tool, limits):
            self._say(("    ", "dim"), tail=note)

    def _end(self, r: dict[str, Any]) -> None:
        status = str(r.get("status"))
        iterations, calls = r.get("iterations", 0), r.get("calls", 0)
        self._say(
            (status.replace("_", " "), f"bold {status_style(status)}"),
            (
                f" after {plural(iterations, 'iteration')} · {plural(calls, 'call')} · ",
                "dim",
            ),
            usage_text(r.get("usage")),
            (f" · {ms_text(r.get('ms'))}", "dim"),
        )
