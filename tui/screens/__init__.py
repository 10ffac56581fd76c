"""The Lens's screens: the main one (``lens``), and those a key opens over it: ``help``
(?), ``search`` (/), ``why`` (w) and ``viewer`` (Enter on a long value)."""
