"""``af schema``: the JSON Schema of a recording's records."""

from __future__ import annotations

from afcli._errors import command

__all__ = ["schema"]


@command
def schema() -> None:
    """Print the JSON Schema of a recording's lines (one record each), as JSON on stdout."""
    from afcli._render import print_json
    from afcore.recording import FORMAT, FORMAT_VERSION, every_record_schema

    body = every_record_schema()
    print_json(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"{FORMAT} {FORMAT_VERSION} record",
            "description": (
                "One line of an af recording (UTF-8 JSON Lines). The first line is a header "
                "(a flow's log: a flow record; a `run` record in it is followed by that "
                "agent's run, each of its lines after one space); every write ends with a "
                "seal (a hash chain "
                "over the file's bytes); a call line leaves out its frame (model, system, "
                "tools, params, cache) when it is the last call's that wrote one, and a "
                "commit's stage is its rsid up to '#'. A reader keeps records of types it "
                "does not know as they are."
            ),
            **body,
        }
    )
