"""The Lens: a terminal app that replays a recording (``af lens``). It reads recordings with
afcore and draws what afcli's views of them say; neither depends on it."""

__all__: list[str] = []
