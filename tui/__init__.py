"""The Lens: a terminal app that replays a recording (``af lens``). Depends on afcore, never
the other way round."""

__all__: list[str] = []
