"""Lines with a few bytes changed: what a regex that takes a line by its bytes must refuse
unless the line still parses to the same record."""

from __future__ import annotations

from hypothesis import strategies as st

BYTES = [*b'0123456789-"\\:,{}[] .eE+a\x00\x7f\xc3\xff']
"""JSON's own punctuation and digits, and bytes that are not ASCII or not UTF-8."""


def edited(data: st.DataObject, line: bytes) -> bytes:
    """``line`` with one to three bytes replaced or inserted."""
    out = bytearray(line)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(out)))
        byte = data.draw(st.sampled_from(BYTES))
        if data.draw(st.booleans()) and at < len(out):
            out[at] = byte
        else:
            out.insert(at, byte)
    return bytes(out)
