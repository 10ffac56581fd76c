"""The format's name and version: what a reader checks before it reads a record."""

FORMAT = "af.recording"
FORMAT_VERSION = "1.1"
"""major.minor: a reader refuses a newer major version and reads any minor version of its own."""

CALL_FRAME = ("model", "system", "tools", "params", "cache")
"""A call's frame: the fields a 1.1 call line leaves out when they are the call before's."""
