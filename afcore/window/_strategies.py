"""Window strategies: when the live window is cut, and what takes the place of what left.

Three ship, sharing one turn segmentation and one refusal engine (``_turns``), so a refusal
means the same under all of them:

- ``sliding_window(keep_recent_turns=N)``: keep the last N turns, drop older ones, at every
  step. No model call, no token counts: it runs on any provider.
- ``token_budget(threshold_tokens=N)``: when the last call's input tokens, as the provider
  counted them, exceed N, drop every turn that may leave.
- ``summarize_oldest(threshold_tokens=N, summarizer=provider)``: over the same threshold,
  fold the oldest span that may leave into one summary message written by ``summarizer``.

Token thresholds compare counted tokens, never guessed ones: a provider that reported no
usage for the last call, or only an estimate (the mock's, unless it is told its numbers are
authoritative), makes the strategy raise :class:`CompactionUnmeasurableError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from afcore.errors import UsageError
from afcore.providers._base import Provider
from afcore.recording._models import WindowInfo, trusted

__all__ = ["WindowStrategy", "sliding_window", "summarize_oldest", "token_budget"]

StrategyName = Literal["sliding_window", "token_budget", "summarize_oldest"]
_info = trusted(WindowInfo)


@dataclass(frozen=True)
class WindowStrategy:
    """How an agent keeps its live window in budget. Made by the functions below."""

    name: StrategyName
    keep_recent_turns: int
    threshold_tokens: int | None = None
    """Act only when the last call's counted input tokens exceed this (None: always)."""
    summarizer: Provider | None = None
    """Who writes the summary (summarize_oldest only)."""
    model: str | None = None
    """The summarizer's model; None: the agent's."""

    @property
    def summarizes(self) -> bool:
        return self.summarizer is not None

    def describe(self) -> WindowInfo:
        """The strategy as the recording's header lists it."""
        return _info(
            strategy=self.name,
            keep_recent_turns=self.keep_recent_turns,
            threshold_tokens=self.threshold_tokens,
            summarizer=None if self.summarizer is None else self.summarizer.name,
            model=None if self.summarizer is None else self.model,
        )


def sliding_window(*, keep_recent_turns: int) -> WindowStrategy:
    """Keep the last ``keep_recent_turns`` turns (and what refuses to leave); drop the rest."""
    return WindowStrategy("sliding_window", _turns(keep_recent_turns))


def token_budget(*, threshold_tokens: int, keep_recent_turns: int = 2) -> WindowStrategy:
    """Over ``threshold_tokens`` counted input tokens, drop every turn that may leave."""
    return WindowStrategy("token_budget", _turns(keep_recent_turns), _threshold(threshold_tokens))


def summarize_oldest(
    *,
    threshold_tokens: int,
    summarizer: Provider,
    model: str | None = None,
    keep_recent_turns: int = 2,
) -> WindowStrategy:
    """Over ``threshold_tokens`` counted input tokens, fold the oldest span that may leave
    into one summary message written by ``summarizer`` (with ``model``, or the agent's)."""
    if not isinstance(summarizer, Provider):
        raise UsageError(
            f"summarizer= must be a provider such as mock(...), got {type(summarizer).__name__}"
        )
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise UsageError(f"model= must be a model name or None, got {model!r}")
    return WindowStrategy(
        "summarize_oldest",
        _turns(keep_recent_turns),
        _threshold(threshold_tokens),
        summarizer,
        model,
    )


def _turns(n: object) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise UsageError(f"keep_recent_turns must be a whole number >= 0, got {n!r}")
    return n


def _threshold(n: object) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise UsageError(f"threshold_tokens must be a whole number > 0, got {n!r}")
    return n
