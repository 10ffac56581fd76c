"""The Lens: a terminal app that replays a recording (``af lens``). It reads recordings
through afcore's read model and draws what it says; the command line starts it through
:func:`make_lens_app`, the one factory the tests use too."""

from tui.app import LensApp, make_lens_app

__all__ = ["LensApp", "make_lens_app"]
