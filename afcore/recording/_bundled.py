"""Recordings inside bundles: a bundle (``af export``) is a zip that holds one recording.

Every reader opens a recording through :func:`open_recording`, which comes here first: a
path to a bundle gives the path of its recording, extracted once per process into a private
temporary folder (the reader maps the file and reads lines at offsets, which a compressed
member does not allow) and removed when the process ends (see :mod:`._scratch`). Nothing in
the bundle is run.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from afcore.errors import RecordingFormatError

__all__ = ["BUNDLE_RECORDING", "is_bundle", "recording_path"]

BUNDLE_RECORDING = "recording.jsonl"
"""The recording's name inside a bundle."""
_ZIP_MAGIC = b"PK\x03\x04"

_lock = threading.Lock()
_extracted: dict[tuple[str, int, int], Path] = {}
_folder: Path | None = None


def is_bundle(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a zip (a bundle, or at least not a JSONL recording)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def recording_path(path: str | os.PathLike[str]) -> Path:
    """The recording ``path`` names: itself, or for a bundle its recording, extracted."""
    path = Path(path)
    if not is_bundle(path):
        return path
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _lock:
        done = _extracted.get(key)
        if done is not None and done.is_file():
            return done
        target = _workdir() / f"{len(_extracted)}-{BUNDLE_RECORDING}"
        _extract(path, target)
        _extracted[key] = target
        return target


def _extract(bundle: Path, target: Path) -> None:
    import zipfile  # a bundle's alone: every read of a plain recording comes through here

    try:
        with zipfile.ZipFile(bundle) as z:
            try:
                info = z.getinfo(BUNDLE_RECORDING)
            except KeyError:
                raise RecordingFormatError(
                    f"{bundle} is a zip without {BUNDLE_RECORDING}: not an af bundle", path=bundle
                ) from None
            free = shutil.disk_usage(target.parent).free
            if info.file_size > free:
                raise RecordingFormatError(
                    f"{bundle}'s recording would take {info.file_size:,} bytes unpacked, more "
                    f"than the {free:,} free in {target.parent}",
                    path=bundle,
                )
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as e:
        target.unlink(missing_ok=True)
        raise RecordingFormatError(f"{bundle} is not a readable bundle: {e}", path=bundle) from None


def _workdir() -> Path:
    global _folder
    if _folder is None:
        from afcore.recording._scratch import scratch_folder

        _folder = scratch_folder("af-bundle-")
    return _folder
