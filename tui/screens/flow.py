"""A flow's recording in the Lens: the tree of its steps, each with its status, the
decisions taken (which branch, what the predicate read), merges and loop turns; Enter on an
agent's step opens that agent's run in the Lens as any run, ``b`` comes back."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from afcore.readmodel import as_text, evidence_text, line, ms_text, plural, safe, status_style
from afcore.recording import FlowLogStep, FlowRecording, open_recording
from tui.screens.lens import LensScreen

__all__ = ["AgentRunScreen", "FlowScreen"]


class AgentRunScreen(LensScreen):
    """An agent's run opened from a flow: the Lens as for any run, with a way back."""

    BINDINGS = [Binding("b", "back", "Back to the flow", id="flow.back")]
    """Added to the Lens's own, which it inherits."""

    def action_back(self) -> None:
        self.app.pop_screen()

    def on_unmount(self) -> None:
        self.rec.close()


class FlowScreen(Screen[None]):
    BINDINGS = [
        Binding("enter", "open", "Open the agent's calls", priority=True, id="flow.open"),
        Binding("q", "app.quit", "Quit", id="flow.quit"),
    ]

    def __init__(self, flow: FlowRecording) -> None:
        super().__init__()
        self.flow = flow
        self.steps: list[FlowLogStep] = []
        """the step each option of the list is, by index (None rows are notes)"""
        self.agent_rows: dict[str, FlowLogStep] = {}

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield OptionList(id="steps")
        yield Footer()

    def on_mount(self) -> None:
        h = self.flow.header
        end = self.flow.end
        head = Text.assemble(
            ("flow ", "dim"), (safe(h.run_id), "bold"), "  ", (safe(h.flow.name), "bold")
        )
        if end is None:
            head.append("  unfinished", "red")
        else:
            head.append(f"  {end.status}", status_style(end.status))
            head.append(f" · {plural(end.calls, 'call')} · {ms_text(end.duration_ms)}", "dim")
            if end.produced_by:
                head.append(f" · answer from {safe(end.produced_by)}", "cyan")
        self.query_one("#header", Static).update(head)
        options = self.query_one("#steps", OptionList)
        if self.flow.top is not None:
            self._add(options, self.flow.top, 0)
        options.focus()
        first = next((i for i, o in enumerate(options._options) if o.id), None)
        if first is not None:
            options.highlighted = first

    def _add(self, options: OptionList, step: FlowLogStep, depth: int) -> None:
        pad = "  " * depth
        label = step.path.rsplit("/", 1)[-1] if step.path else self.flow.header.flow.name
        row = Text.assemble(pad, (safe(label), "bold"), (f" {step.kind} ", "dim"))
        row.append(step.status, status_style(step.status))
        if step.end is not None:
            row.append(f"  {ms_text(step.end.ms)}", "dim")
            if step.end.calls:
                row.append(f"  {plural(step.end.calls, 'call')}  ⏎ open", "cyan")
            if step.end.error is not None:
                row.append(
                    f"  {line(step.end.error.kind + ': ' + step.end.error.message, 80)}", "red"
                )
            elif step.kind != "agent" and not step.steps and step.end.output is not None:
                row.append(f"  → {line(as_text(step.end.output), 60)}", "dim")
        if step.kind == "agent" and self.flow.run_file(step) is not None:
            self.agent_rows[step.path] = step
            options.add_option(Option(row, id=step.path))
        else:
            options.add_option(Option(row, disabled=False))
        for d in step.decisions:
            which = f"turn {d.turn}: " if d.turn is not None else ""
            note = Text.assemble(pad, "  ", ("⤷ ", "magenta"), f"{which}chose {d.chosen}")
            fired = [v for v in d.verdicts if v.fired] or d.verdicts[-1:]
            for v in fired:
                if v.reads:
                    note.append(f"  read {line(evidence_text(dict(v.reads)), 80)}", "dim")
            options.add_option(Option(note))
        for child in step.steps:
            self._add(options, child, depth + 1)
        if step.merge is not None:
            m = step.merge
            said = " ".join(f"{k}={v}" for k, v in m.branches.items())
            options.add_option(Option(Text.assemble(pad, "  ", ("⤶ merge ", "magenta"), said)))

    def action_open(self) -> None:
        options = self.query_one("#steps", OptionList)
        if options.highlighted is None:
            return
        option = options.get_option_at_index(options.highlighted)
        step = self.agent_rows.get(option.id or "")
        if step is None:
            self.notify("only an agent's step has calls to open", severity="warning")
            return
        file = self.flow.run_file(step)
        assert file is not None
        try:
            rec = open_recording(file)
        except Exception as e:  # noqa: BLE001 - a missing or broken run is said, not raised
            self.notify(f"cannot open {file.name}: {e}", severity="error")
            return
        self.app.push_screen(AgentRunScreen(rec, follow=False))
