"""The ``af`` command: run agents, list, show and verify their recordings."""

__all__: list[str] = []
