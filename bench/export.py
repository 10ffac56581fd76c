"""``af export``: what a bundle and a page cost, how they grow, and the scanner beside a peer.

For recordings of growing size (written by a real af agent, ``bench.big_recording``,
short-lines shape), prints the time to export a bundle (learn, rewrite, scan, verify, zip)
and to write the page, and the sizes of both against the recording's: the page must grow
linearly with the content (its bytes per recording byte stay flat as the run grows).

The peer is Yelp's detect-secrets (``pip install detect-secrets``), the scanner people run
before sharing files, over the same recording, timed interleaved with af's scanner (best
of ``--repeats``), with how many hits each reports on a clean recording (af's samples hold
no secret: every hit is a false positive) and on a corpus of real-shaped fake keys and
look-alikes (hashes, uuids, base64 images, vendors' ids) planted in a recording.

    python -m bench.export [--mb 2,8,32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import random
import string
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afcore.bundle import export_bundle
from afcore.recording import rewrite
from afcore.secrets import scan_recording
from bench._report import print_table

SAMPLE = Path(__file__).resolve().parent.parent / "recordings" / "sample-trip.jsonl"


def _pick(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


B64URL = string.ascii_letters + string.digits + "-_"
ALNUM = string.ascii_letters + string.digits
KEYS: dict[str, Callable[[random.Random], str]] = {
    "anthropic": lambda r: "sk-" + "ant-api03-" + _pick(r, B64URL, 93) + "AA",
    "openai": lambda r: "sk-" + "proj-" + _pick(r, B64URL, 156),
    "aws": lambda r: "AK" + "IA" + _pick(r, string.ascii_uppercase + "234567", 16),
    "github": lambda r: "gh" + "p_" + _pick(r, ALNUM, 36),
    "stripe": lambda r: "sk" + "_live_" + _pick(r, ALNUM, 24),
    "slack": lambda r: "xo" + "xb-" + _pick(r, string.digits, 12) + "-" + _pick(r, ALNUM, 24),
    "google": lambda r: "AI" + "za" + _pick(r, B64URL, 35),
    "private key": lambda r: (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + base64.b64encode(r.randbytes(600)).decode()
        + "\n-----END RSA PRIVATE KEY-----"
    ),
    "password=": lambda r: "password=" + _pick(r, ALNUM, 18) + "9!",
}
"""Real-shaped fake keys (the tests hold the full corpus)."""
LOOK_ALIKES: dict[str, Callable[[random.Random], str]] = {
    "sha256": lambda r: hashlib.sha256(r.randbytes(16)).hexdigest(),
    "git sha": lambda r: hashlib.sha1(r.randbytes(16)).hexdigest(),
    "uuid": lambda r: str(uuid.UUID(bytes=r.randbytes(16), version=4)),
    "png base64": lambda r: (
        "data:image/png;base64,"
        + base64.b64encode(b"\x89PNG\r\n\x1a\n" + r.randbytes(1500)).decode()
    ),
    "jpeg base64": lambda r: base64.b64encode(b"\xff\xd8\xff\xe0" + r.randbytes(1200)).decode(),
    "message id": lambda r: "msg_01" + _pick(r, ALNUM, 22),
    "tool use id": lambda r: "toolu_01" + _pick(r, ALNUM, 22),
    "request id": lambda r: "req_" + _pick(r, ALNUM, 24),
    "signature": lambda r: base64.b64encode(r.randbytes(300)).decode(),
    "url": lambda r: f"https://example.com/docs/page-{r.randint(1, 999)}?ref=sidebar",
}


def _detect_secrets() -> Any:
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def scan(path: Path) -> int:
        with default_settings():
            found = SecretsCollection()
            found.scan_file(str(path))
            return sum(len(v) for _, v in found.data.items())

    return scan


def _best(run: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def _planted(folder: Path, name: str, value: str) -> Path:
    out = folder / f"planted-{abs(hash(name))}.jsonl"
    rewrite(
        SAMPLE,
        out,
        lambda v, leaf: v.replace("Lisbon", f"Lisbon {value}") if isinstance(v, str) else v,
    )
    return out


def corpus(folder: Path, peer: Any) -> None:
    r = random.Random(7)
    rows = []
    for label, makers in (("real-shaped keys", KEYS), ("look-alikes", LOOK_ALIKES)):
        af_hits = peer_hits = 0
        for name, make in makers.items():
            path = _planted(folder, name, make(r))
            af_hits += bool(scan_recording(path))
            if peer is not None:
                peer_hits += peer(path) > peer(SAMPLE)
        rows.append(
            [
                label,
                str(len(makers)),
                str(af_hits),
                str(peer_hits) if peer is not None else "-",
            ]
        )
    clean_af = len(scan_recording(SAMPLE))
    clean_peer = peer(SAMPLE) if peer is not None else "-"
    rows.append(["hits on a clean sample", "1", str(clean_af), str(clean_peer)])
    print_table(
        "scanner: files flagged (keys: more is better; look-alikes and clean: fewer)",
        ["corpus", "files", "af", "detect-secrets"],
        rows,
    )
    print()


def sizes(folder: Path, mbs: list[float], repeats: int, peer: Any) -> None:
    from afcli.page import page_data, render_page
    from bench.big_recording import write

    rows = []
    for mb in mbs:
        rec = folder / f"big-{mb}.jsonl"
        if not rec.exists():
            made = write(folder, mb=mb, shape="short-lines", run_id=f"big-{mb}")
            made.rename(rec)
        size = rec.stat().st_size
        out = folder / f"big-{mb}.afz"
        t_export = t_scan_af = t_scan_peer = float("inf")
        for _ in range(repeats):  # interleaved: af's export, af's scan, the peer's scan
            t_export = min(t_export, _best(lambda r=rec, o=out: export_bundle(r, o), 1))
            t_scan_af = min(t_scan_af, _best(lambda r=rec: scan_recording(r), 1))
            if peer is not None:
                t_scan_peer = min(t_scan_peer, _best(lambda r=rec: peer(r), 1))
        start = time.perf_counter()
        page = render_page(page_data(rec))
        t_page = time.perf_counter() - start
        rows.append(
            [
                f"{size / 2**20:.1f} MB",
                f"{t_export:.2f} s",
                f"{size / 2**20 / t_export:.1f} MB/s",
                f"{out.stat().st_size / size:.3f}",
                f"{t_page:.2f} s",
                f"{len(page) / size:.3f}",
                f"{t_scan_af:.2f} s",
                f"{t_scan_peer:.2f} s" if peer is not None else "-",
                f"{t_scan_peer / t_scan_af:.1f}x" if peer is not None else "-",
            ]
        )
    print_table(
        "export: bundle and page against the recording (sizes as a fraction of it)",
        [
            "recording",
            "export",
            "rate",
            "bundle/rec",
            "page",
            "page/rec",
            "scan af",
            "scan peer",
            "peer/af",
        ],
        rows,
    )
    flat = [float(r[5]) for r in rows]
    print(f"page bytes per recording byte: {min(flat):.3f} to {max(flat):.3f} (linear: flat)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", default="2,8,32", help="recording sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="keep the recordings here")
    args = parser.parse_args()
    peer = _detect_secrets()
    if peer is None:
        print("detect-secrets is not installed (pip install detect-secrets): af alone\n")
    else:
        from importlib.metadata import version

        print(f"peer: detect-secrets {version('detect-secrets')}\n")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.dir or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        corpus(folder, peer)
        sizes(folder, [float(x) for x in args.mb.split(",") if x], args.repeats, peer)


if __name__ == "__main__":
    main()
