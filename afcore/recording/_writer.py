"""Writing a run as one JSONL file: one writer, append-only, every line whole.

Each record is serialized once and written with a single ``os.write`` on a file opened for
appending, so a run killed at any point leaves only complete lines (and at worst a torn last
one, which readers report). The file is synced at every iteration boundary by a background
thread, so the loop never waits on the disk, and synchronously when the run ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from afcore.errors import UsageError
from afcore.messages import Message, SystemSegment, ToolSpec, Usage
from afcore.recording._hashing import content_hash, request_digest, request_hash
from afcore.recording._redaction import Redactor

__all__ = ["NullRecorder", "Recorder", "RecordObserver"]

RecordObserver = Callable[[dict[str, Any]], None]

INLINE_LIMIT = 256
"""Values whose JSON is longer than this many bytes are stored once as blobs and referred to."""


class Recorder:
    """Appends the records of one run to ``path``. Used by the loop; not thread-safe (the
    loop writes from its own thread; tools running in threads report through it)."""

    enabled = True

    def __init__(
        self,
        path: Path,
        *,
        run_id: str,
        redactor: Redactor,
        clock: Callable[[], float] = time.perf_counter,
        observers: Sequence[RecordObserver] = (),
    ) -> None:
        self.path = path
        self.run_id = run_id
        self.redactor = redactor
        self.clock = clock
        self.observers = tuple(observers)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except FileExistsError:
            raise UsageError(
                f"a recording already exists at {path}; choose another run id"
            ) from None
        except OSError as e:
            raise UsageError(f"cannot write a recording at {path}: {e.strerror}") from None
        self.seq = 0
        self._stage_counter = -1
        self.versions: dict[str, int] = {}
        """For each key, the seq of the commit that last wrote it."""
        self._blobs: set[str] = set()
        self._message_hashes: list[str] = []
        self._segments: dict[str, tuple[str, str | None]] = {}
        """System text -> (its hash, its redacted text when short enough to stay inline)."""
        self._spec_refs: dict[int, tuple[ToolSpec, str]] = {}
        self._syncer = _Syncer(self._fd)

    # -- low level -----------------------------------------------------------------------

    def _emit(self, record: dict[str, Any]) -> None:
        os.write(self._fd, orjson.dumps(record) + b"\n")
        for observe in self.observers:
            observe(record)

    def _blob(self, value: Any) -> str:
        """Store ``value`` (already redacted) once; return its hash."""
        ref = content_hash(value)
        if ref not in self._blobs:
            self._blobs.add(ref)
            self._emit({"t": "blob", "id": ref, "value": value})
        return ref

    def _write(self, key: str, value: Any) -> dict[str, Any]:
        value = self.redactor.redact(value)
        if len(orjson.dumps(value)) <= INLINE_LIMIT:
            return {"key": key, "value": value}
        return {"key": key, "ref": self._blob(value)}

    def next_rsid(self, stage: str) -> str:
        self._stage_counter += 1
        return f"{stage}#{self._stage_counter}"

    def _versions(self, keys: Iterable[str]) -> list[list[Any]]:
        versions = self.versions
        return [[k, versions[k]] for k in keys if k in versions]

    def _commit_writes(self, writes: list[dict[str, Any]]) -> None:
        for w in writes:
            self.versions[w["key"]] = self.seq
            if w["key"].startswith("message:"):
                self.versions["messages"] = self.seq

    # -- records -------------------------------------------------------------------------

    def header(self, header: dict[str, Any]) -> None:
        self._emit(header)

    def tool_ref(self, spec: ToolSpec) -> str:
        cached = self._spec_refs.get(id(spec))
        if cached is not None:
            return cached[1]
        ref = self._blob(self.redactor.redact(spec.to_json()))
        self._spec_refs[id(spec)] = (spec, ref)
        return ref

    def message(self, message: Message) -> tuple[int, dict[str, Any]]:
        """Store a message of the run's history; return its number and the write naming it."""
        ref = self._blob(self.redactor.redact(message.to_json()))
        self._message_hashes.append(ref)
        n = len(self._message_hashes)
        return n, {"key": f"message:{n}", "ref": ref}

    def write(self, key: str, value: Any) -> dict[str, Any]:
        """A write of ``value`` under ``key``, inline or by reference, for a commit."""
        return self._write(key, value)

    def commit(
        self,
        rsid: str,
        stage: str,
        iteration: int,
        *,
        reads: Iterable[str] = (),
        writes: list[dict[str, Any]] = (),  # type: ignore[assignment]
        tool: dict[str, Any] | None = None,
    ) -> int:
        self.seq += 1
        record: dict[str, Any] = {
            "t": "commit",
            "seq": self.seq,
            "rsid": rsid,
            "stage": stage,
            "iter": iteration,
            "reads": self._versions(reads),
            "writes": writes,
        }
        if tool is not None:
            record["tool"] = tool
        self._emit(record)
        self._commit_writes(writes)
        return self.seq

    def call(
        self,
        rsid: str,
        iteration: int,
        call: int,
        *,
        model: str,
        system: Sequence[SystemSegment],
        window: Sequence[tuple[int, int]],
        tools: Sequence[ToolSpec],
        params: dict[str, Any],
        cache: Sequence[dict[str, Any]],
    ) -> str:
        """Record a model call as it is sent; return the request's hash."""
        segments: list[dict[str, Any]] = []
        segment_hashes: list[str] = []
        for seg in system:
            stored = self._segments.get(seg.text)
            if stored is None:
                body = self.redactor.redact(seg.to_json())
                if len(body["text"]) > INLINE_LIMIT:
                    stored = (self._blob(body), None)
                else:
                    stored = (content_hash(body), body["text"])
                self._segments[seg.text] = stored
            ref, inline = stored
            source = seg.source.to_json()
            segments.append(
                {"ref": ref, "source": source}
                if inline is None
                else {"text": inline, "source": source}
            )
            segment_hashes.append(ref)
        hashes = self._message_hashes
        message_hashes = [h for a, b in window for h in hashes[a - 1 : b]]
        tool_entries = []
        tool_hashes = []
        for spec in tools:
            ref = self.tool_ref(spec)
            tool_hashes.append(ref)
            tool_entries.append({"name": spec.name, "ref": ref, "source": spec.source.to_json()})
        params = self.redactor.redact(params)
        digest = request_digest(
            model=model,
            system=segment_hashes,
            messages=message_hashes,
            tools=tool_hashes,
            params=params,
            cache=cache,
        )
        digest_hash = request_hash(digest)
        self.seq += 1
        key = f"call:{call}"
        self._emit(
            {
                "t": "call",
                "seq": self.seq,
                "rsid": rsid,
                "iter": iteration,
                "call": call,
                "reads": self._versions(("system", "tools", "messages")),
                "model": model,
                "system": segments,
                "window": [list(r) for r in window],
                "tools": tool_entries,
                "params": params,
                "cache": list(cache),
                "hash": digest_hash,
            }
        )
        self.versions[key] = self.seq
        return digest_hash

    def reply(
        self,
        rsid: str,
        iteration: int,
        call: int,
        *,
        message_write: dict[str, Any],
        stop_reason: str,
        tool_calls: list[dict[str, Any]],
        usage: Usage | None,
        model: str | None,
        ms: float,
    ) -> int:
        self.seq += 1
        record: dict[str, Any] = {
            "t": "reply",
            "seq": self.seq,
            "rsid": rsid,
            "iter": iteration,
            "call": call,
            "writes": [message_write],
            "stop_reason": stop_reason,
            "tool_calls": tool_calls,
            "usage": usage.to_json() if usage is not None else None,
            "model": model,
            "ms": round(ms, 3),
        }
        self._emit(record)
        self._commit_writes([message_write])
        self.versions[f"reply:{call}"] = self.seq
        return self.seq

    def event(self, record: dict[str, Any]) -> None:
        self._emit(self.redactor.redact(record))

    def sync(self) -> None:
        """An iteration boundary: make what is written durable, without waiting for it."""
        self._syncer.request()

    def close(self) -> None:
        self._syncer.stop()
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)


class NullRecorder(Recorder):
    """What the loop writes to when recording is off: nothing, at no cost."""

    enabled = False

    def __init__(self) -> None:  # noqa: D107 - nothing to open
        self.path = None  # type: ignore[assignment]
        self._stage_counter = -1
        self.versions = {}
        self.seq = 0
        self.redactor = None  # type: ignore[assignment]

    def _emit(self, record: dict[str, Any]) -> None:
        pass

    def header(self, header: dict[str, Any]) -> None:
        pass

    def message(self, message: Message) -> tuple[int, dict[str, Any]]:
        return 0, {}

    def write(self, key: str, value: Any) -> dict[str, Any]:
        return {}

    def commit(self, rsid: str, stage: str, iteration: int, **_: Any) -> int:
        return 0

    def call(self, rsid: str, iteration: int, call: int, **_: Any) -> str:
        return ""

    def reply(self, rsid: str, iteration: int, call: int, **_: Any) -> int:
        return 0

    def event(self, record: dict[str, Any]) -> None:
        pass

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Syncer:
    """fdatasync on request, off the loop's thread; requests that pile up are merged."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._wanted = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="af-recording-sync", daemon=True)
            self._thread.start()
        self._wanted.set()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            try:
                os.fdatasync(self._fd)
            except OSError:
                return  # closed underneath us: the final fsync in close() covers it

    def stop(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wanted.set()
            self._thread.join()
