"""The ``af`` command: run agents, list, show and verify their recordings."""

__all__ = ["main"]


def main() -> None:
    """The console script. It imports the command line inside its handler, so that a Ctrl-C
    while af is still starting ends as one does later: a word, exit code 130, no traceback."""
    import sys

    try:
        # The C module: ``signal`` runs Python code (its enums) that a Ctrl-C can stop.
        import _signal  # type: ignore[import-not-found]

        # orjson's module set-up does not check the imports it makes: a KeyboardInterrupt
        # raised inside one of them crashes the process (a segmentation fault). Imported
        # first, with a Ctrl-C held until it is done.
        # Neither is pydantic-core's: an interrupt inside its validator build comes out as
        # a SchemaError. The command line's imports run with a Ctrl-C held until they end.
        held: list[int] = []
        _signal.signal(_signal.SIGINT, lambda number, _: held.append(number))
        try:
            import orjson  # noqa: F401

            from afcli.app import main as run
        finally:
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        if held:
            raise KeyboardInterrupt

        run()
    except KeyboardInterrupt:
        if "_signal" in sys.modules:  # a second Ctrl-C while we say so
            sys.modules["_signal"].signal(2, sys.modules["_signal"].SIG_IGN)
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
