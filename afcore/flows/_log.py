"""A flow's recording, written as the flow runs: its steps, decisions, merges and turns
through the recording package's writer, and each agent step's run as its own recording in
the folder beside it, folded into the log when the flow ends and then removed (see
:mod:`afcore.recording._flows`)."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afcore._version import __version__
from afcore.agent._agent import Agent
from afcore.flows._result import FlowDecision, FlowResult, StepResult
from afcore.recording._config import RecordingConfig
from afcore.recording._flows import (
    FlowEnd,
    FlowHeader,
    FlowNode,
    RunFrame,
    StepDecision,
    StepEnd,
    StepMerge,
    StepStart,
    VerdictInfo,
)
from afcore.recording._models import RedactionInfo
from afcore.recording._paths import SUFFIX, default_dir, new_run_id, started_at
from afcore.recording._writer import Recorder, error_info, forget_folder, usage_info

if TYPE_CHECKING:
    from afcore.flows._replayer import FlowReplayer

__all__ = ["FlowLog"]


def _slug(path: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in path) or "step"


class FlowLog:
    """The writer of one flow run's recording."""

    def __init__(
        self,
        composition: FlowNode,
        config: RecordingConfig,
        *,
        source: str | None = None,
        replayer: FlowReplayer | None = None,
    ) -> None:
        self.config = config
        self.replayer = replayer
        self.run_id = config.run_id or new_run_id(config.now())
        folder = config.dir or default_dir()
        self.path = folder / f"{self.run_id}{SUFFIX}"
        self.runs = folder / self.run_id
        """The folder of the agents' runs."""
        redactor = config.redaction.compile()
        self.rec = Recorder(self.path, run_id=self.run_id, redactor=redactor, clock=config.clock)
        self.rec.header(
            FlowHeader(
                run_id=self.run_id,
                started_at=started_at(config.now()),
                af_version=__version__,
                python=".".join(map(str, sys.version_info[:3])),
                flow=composition,
                source=source,
                replay_of=replayer.link if replayer is not None else None,
                redaction=RedactionInfo(
                    fields=list(redactor.policy.fields),
                    patterns=redactor.pattern_names,
                    env=redactor.env_names,
                ),
            )
        )
        self.origin = config.clock()
        """The reading of the clock every `at` of the composed run is counted from."""
        if replayer is not None:
            replayer.start(self.path)
        self._runs: dict[str, tuple[str, str]] = {}
        """step path -> its agent run's file (relative) and run id"""

    def _event(self, record: Any) -> None:
        raw = self.rec.event(record)
        if self.replayer is not None:
            self.replayer.written(raw)

    def agent_recording(self, agent: Agent, path: str, n: int) -> RecordingConfig:
        """Where the agent step at ``path`` records its run: the flow's folder of runs, on
        the flow's clocks, under the agent's own redaction policy (or, when it records
        nothing itself, the flow's)."""
        own = agent.recording
        run_id = f"{n:03d}-{_slug(path)}"
        self._runs[path] = (f"{self.run_id}/{run_id}{SUFFIX}", run_id)
        redaction = own.redaction if own is not None else self.config.redaction
        return replace(
            self.config, dir=self.runs, run_id=run_id, redaction=redaction, origin=self.origin
        )

    def step_start(self, path: str, name: str, kind: str, message: Any) -> None:
        at = round((self.config.clock() - self.origin) * 1000, 3)
        self._event(StepStart(path=path, kind=kind, input=message, at=at))

    def step_end(self, step: StepResult, writes: dict[str, Any]) -> None:
        from afcore.injections._view import MISSING

        run, run_id = (
            self._runs.get(step.path, (None, None)) if step.kind == "agent" else (None, None)
        )
        self._event(
            StepEnd(
                path=step.path,
                status=step.status,
                output=None if step.status == "paused" else step.output,
                ms=round(step.ms, 3),
                produced_by=step.produced_by,
                writes={k: (None if v is MISSING else v) for k, v in writes.items()},
                reads=list(step.reads),
                run=run,
                run_id=run_id,
                calls=step.run.calls if step.run is not None else 0,
                usage=usage_info(step.run.usage) if step.run is not None else None,
                error=error_info(step.error) if step.error is not None and not step.steps else None,
            )
        )

    def decision(self, path: str, decision: FlowDecision) -> None:
        self._event(
            StepDecision(
                path=path,
                chosen=decision.chosen,
                verdicts=[
                    VerdictInfo(
                        name=v.name,
                        fired=v.fired,
                        reason=v.reason,
                        reads=list(v.reads),
                        error=v.error,
                    )
                    for v in decision.verdicts
                ],
                turn=decision.turn,
            )
        )

    def merge(
        self,
        path: str,
        branches: dict[str, str],
        reads: tuple[tuple[str, Any], ...],
        writes: dict[str, Any],
        output: Any,
        error: BaseException | None,
    ) -> None:
        self._event(
            StepMerge(
                path=path,
                branches=branches,
                reads=list(reads),
                writes=writes,
                output=output,
                error=error_info(error) if error is not None else None,
            )
        )

    def end(self, result: FlowResult) -> None:
        paused = None
        if result.status == "paused":
            paused = next(
                (s.path for s in result.steps.walk() if s.status == "paused" and not s.steps), None
            )
        ending = FlowEnd(
            status=result.status,
            answer=result.answer,
            produced_by=result.produced_by,
            calls=result.calls,
            iterations=result.iterations,
            usage=usage_info(result.usage),
            duration_ms=round(result.seconds * 1000, 3),
            error=error_info(result.error) if result.error is not None else None,
            paused=paused,
        )
        # A paused step's run goes on in its own file (af resume): it stays beside the log.
        paused_runs = {
            self._runs[s.path][0]
            for s in result.steps.walk()
            if s.status == "paused" and s.path in self._runs
        }
        tidy = None
        try:
            folded = self._fold()
            self._event(ending)
            gone = {self.path.parent / rel: size for rel, size in folded if rel not in paused_runs}
            tidy = partial(_remove_folded, self.runs, gone)
        finally:
            self.rec.close(then=tidy)

    def _fold(self) -> list[tuple[str, int]]:
        """Append each agent step's run to the log, byte for byte (a ``run`` frame), before
        its ``flow_end``: the log alone is then the whole composed run, and its last record
        is still the flow's end. A flow that never gets here (killed, cancelled) is read
        from the runs' own files, as before. Returns each run folded and its length."""
        folder = self.path.parent
        folded = []
        for rel, _ in self._runs.values():
            try:
                body = (folder / rel).read_bytes()
            except OSError:  # the step never wrote its run (it failed before it began)
                continue
            lines = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
            frame = RunFrame(
                path=rel, bytes=len(body), sha256=hashlib.sha256(body).hexdigest(), lines=lines
            )
            self.rec.embed(frame, body)
            folded.append((rel, len(body)))
        return folded

    def abort(self, error: BaseException) -> None:
        """The flow was stopped from outside (cancelled, interrupted)."""
        self.rec.event(
            FlowEnd(status="interrupted", usage=usage_info_zero(), error=error_info(error))
        )
        self.rec.close()


def _remove_folded(folder: Path, files: dict[Path, int]) -> None:
    """On the recordings' sync thread, once the log holding these runs is durable: their
    own files go (a finished flow is one file), each only if it is still as long as the
    copy folded (nothing written since is lost), and the folder if nothing else is in it."""
    for file, size in files.items():
        try:
            if file.stat().st_size == size:
                file.unlink()
        except OSError:
            pass  # gone already, or not ours to remove: it stays
    try:
        folder.rmdir()
    except OSError:
        return  # a paused step's run, or a file someone else put there
    forget_folder(folder)


def usage_info_zero() -> Any:
    from afcore.messages import Usage

    return usage_info(Usage())
