"""The recording as the Lens holds it open: afcore's reader, with the few things a viewer that
stays open needs on top.

- ``upto``: index only the lines that start in the first bytes of the file, so that the first
  call is on screen long before a big file's index is built (the whole file is then opened in
  the background and takes over).
- Values are cached up to a number of bytes, not of entries, so that browsing a file of big
  tool results cannot fill memory.
- ``release_pages()`` hands the pages of the file the reader's map has touched back to the
  system: a viewer that walks a 300 MB file would otherwise hold it all as resident memory.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from afcore.recording import MAX_LINE, Record, Recording, UnknownRecord

__all__ = ["LensRecording", "open_lens"]

CACHE_BYTES = 32 * 1024 * 1024
"""How many bytes of lines the parsed values in the cache may come from."""


def open_lens(path: Path, *, upto: int | None = None) -> LensRecording:
    """Open ``path``; ``upto``: index only the lines that start in its first ``upto`` bytes.
    Raises what afcore's reader raises for a file that is not a recording."""
    return LensRecording(path, upto=upto)


class _Upto:
    """The lines of a file that end by ``limit``: what the reader's index walks. ``partial``:
    a prefix is wanted, so a line without its newline is left for a later, whole open."""

    def __init__(self, file: IO[bytes], limit: int, partial: bool) -> None:
        self._file = file
        self._limit = limit
        self._partial = partial

    def seek(self, offset: int) -> int:
        return self._file.seek(offset)

    def __iter__(self) -> Iterator[bytes]:
        used = 0
        for raw in self._file:
            used += len(raw)
            if used > self._limit:
                return  # written after the file was mapped (a run still going): not yet
            if self._partial and not raw.endswith(b"\n"):
                return
            yield raw
            if used == self._limit and self._partial:
                return


class LensRecording(Recording):
    def __init__(self, path: Path, *, upto: int | None = None, max_line: int = MAX_LINE) -> None:
        self.upto = upto
        self.size = 0
        """the file's size when it was opened"""
        super().__init__(path, max_line=max_line)
        self._values: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._cached = 0
        self._lock = threading.Lock()
        self._scope: Sequence[int] | None = None
        self._messages: int | None = None

    @contextmanager
    def scoped(self, lines: Sequence[int]) -> Iterator[None]:
        """Within: :meth:`records` yields the records on ``lines`` only. For functions that
        walk the records to a call but need only some of them (see tui.data)."""
        self._scope = lines
        try:
            yield
        finally:
            self._scope = None

    def records(self) -> Iterator[tuple[int, Record | UnknownRecord]]:
        if self._scope is None:
            yield from super().records()
            return
        for line in self._scope:
            yield line, self._typed(line - 1)

    def _build_index(self) -> None:
        # The reader indexes the lines it iterates and reads them from its map of the file:
        # give it only the lines the map holds (a file still being written grows in between),
        # and of those only the prefix asked for.
        self.size = len(self._map)
        partial = self.upto is not None and self.upto < self.size
        limit = self.upto if partial and self.upto is not None else self.size
        self._file = _Upto(self._file, limit, partial)  # type: ignore[assignment]
        super()._build_index()

    @property
    def message_count(self) -> int:
        # The reader counts them at each call; this index never changes, so count once.
        if self._messages is None:
            self._messages = super().message_count
        return self._messages

    @property
    def partial(self) -> bool:
        """True when the index covers only a prefix of the file."""
        return self.upto is not None and self.upto < self.size

    @property
    def indexed_bytes(self) -> int:
        """How many bytes of the file the index covers."""
        return self.size if not self.partial else self._size

    def blob(self, ref: str) -> Any:
        with self._lock:
            hit = self._values.get(ref)
            if hit is not None:
                self._values.move_to_end(ref)
                return hit[0]
        value = self._load_blob(ref)
        size = self._blob_size(ref)
        if size <= CACHE_BYTES // 8:
            with self._lock:
                if ref not in self._values:
                    self._values[ref] = (value, size)
                    self._cached += size
                while self._cached > CACHE_BYTES and self._values:
                    _, (_, dropped) = self._values.popitem(last=False)
                    self._cached -= dropped
        return value

    def _blob_size(self, ref: str) -> int:
        i = self._blob_line(ref)
        return 0 if i is None else self.line_size(i + 1)

    def line_size(self, line: int) -> int:
        """How many bytes line ``line`` (from 1) takes, its newline excluded."""
        starts = self._index.starts
        i = line - 1
        end = starts[i + 1] - 1 if i + 1 < len(starts) else self._size
        return int(end - starts[i])

    def line_bytes(self, line: int, limit: int | None = None) -> bytes:
        """Line ``line`` (from 1) as stored, or its first ``limit`` bytes."""
        i = line - 1
        start = self._index.starts[i]
        size = self.line_size(line)
        return self._map[start : start + (size if limit is None else min(size, limit))]

    def line_start(self, line: int) -> int:
        """The offset of line ``line``'s first byte."""
        return int(self._index.starts[line - 1])

    def line_at(self, offset: int) -> int:
        """The line (from 1) the byte at ``offset`` is on."""
        import bisect

        return bisect.bisect_right(self._index.starts, offset)

    def release_pages(self) -> None:
        """Drop the file's pages from this process's resident memory; they stay in the
        system's cache, and a later read maps them again."""
        if hasattr(mmap, "MADV_DONTNEED"):
            try:
                self._map.madvise(mmap.MADV_DONTNEED)
            except (OSError, ValueError):
                pass  # an empty or closed map: nothing to release

    def reopen(self) -> LensRecording:
        """The file as it is now, indexed whole: for a file that grew, or that was opened
        as a prefix."""
        return LensRecording(self.path, max_line=self.max_line)

    def grown(self) -> bool:
        """True when the file now holds more than this index was built from."""
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return False
        return size != self.size
