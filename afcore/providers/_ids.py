"""Model ids as ``provider:model``: the provider built from the prefix."""

from __future__ import annotations

from collections.abc import Callable

from afcore.errors import UsageError
from afcore.providers._anthropic import anthropic
from afcore.providers._base import Provider
from afcore.providers._openai import gemini, lmstudio, ollama, openai, openrouter

__all__ = ["MODEL_ID_PREFIXES", "from_model_id"]

_FACTORIES: dict[str, Callable[[str], Provider]] = {
    "anthropic": lambda model: anthropic(model=model),
    "openai": lambda model: openai(model=model),
    "ollama": lambda model: ollama(model=model),
    "lmstudio": lambda model: lmstudio(model=model),
    "openrouter": lambda model: openrouter(model=model),
    "gemini": lambda model: gemini(model=model),
}

MODEL_ID_PREFIXES: tuple[str, ...] = tuple(sorted(_FACTORIES))
"""The provider prefixes a model id may start with."""


def from_model_id(model_id: str) -> tuple[Provider, str]:
    """The provider and the model a ``provider:model`` id names, e.g.
    ``anthropic:claude-sonnet-4-5``, ``openai:gpt-4o``, ``ollama:llama3.1:8b``,
    ``openrouter:anthropic/claude-sonnet-4.5``, ``gemini:gemini-2.5-flash`` (the model is
    everything after the first colon).

    Raises :class:`UsageError` for an id without a known prefix (the message lists the
    valid ones) and, before any call is made, for a provider whose key is not set (the
    message names the environment variable to set).
    """
    valid = ", ".join(MODEL_ID_PREFIXES)
    if not isinstance(model_id, str):
        raise UsageError(
            f"a model id is a string such as 'anthropic:claude-sonnet-4-5', got "
            f"{type(model_id).__name__}"
        )
    prefix, colon, model = model_id.partition(":")
    if not colon:
        raise UsageError(
            f"model id {model_id!r} names no provider; write it as provider:model with a "
            f"provider among {valid} (e.g. anthropic:claude-sonnet-4-5)"
        )
    factory = _FACTORIES.get(prefix.strip().lower())
    if factory is None:
        raise UsageError(
            f"unknown provider {prefix!r} in model id {model_id!r}; the valid prefixes are {valid}"
        )
    model = model.strip()
    if not model:
        raise UsageError(f"model id {model_id!r} names no model after {prefix}:")
    return factory(model), model
