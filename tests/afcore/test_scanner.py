"""The secret scanner: every real-shaped key found (fake values made in the test), no
look-alike flagged, and each hit placed (line, record, path, message, call, slot) without
its value."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from afcore.secrets import scan, scan_recording
from tests.afcore.secrets_corpus import KEY_SHAPES, LOOK_ALIKES, rng

ROOT = Path(__file__).resolve().parents[2]

KEY_PLACES: dict[str, Callable[[str], Any]] = {
    "alone": lambda k: k,
    "in prose": lambda k: f"Sure, here is the key you asked for: {k}. Keep it safe.",
    "in a config": lambda k: f"[default]\nregion = eu-west-1\nkey = {k}\n",
    "under a plain field": lambda k: {"notes": [{"value": k}]},
    "in a shell line": lambda k: f"curl -s https://api.example.com -d 'k={k}' | jq .",
}

LOOK_ALIKE_PLACES: dict[str, Callable[[str], Any]] = {
    "alone": lambda v: v,
    "in prose": lambda v: f"The build {v} passed; see the log for details.",
    "as an id": lambda v: {"id": v, "ref": v, "hash": v, "sha256": v, "request_id": v},
    "beside key": lambda v: {"key": v, "cache_key": v, "idempotency_key": v},
    "key in text": lambda v: f"cache key: {v}",
    "in a commit record": lambda v: {"t": "commit", "writes": [{"key": "message:3", "ref": v}]},
}


def _generic_secrets() -> dict[str, Any]:
    """Secrets no vendor prefix gives away: found by their key or the word before them."""
    return {
        "password field": {"user": "ada", "password": "Tr0ub4dor&3-horse"},
        "token field, any case": {"X-Auth-Token": "Zk38fQ0mLN29pQ7rT8vW"},
        "password assignment": "DB_PASSWORD=hunter2-Sup3rS3cret-Passw0rd!",
        "json in text": 'resp: {"access_token": "a8Fq-39Zk-LmN2-pQ7r", "expires_in": 3600}',
        "keyword beside": "the api key is Xk39fZq0LmN2pQ7rT8vW, use it",
        "bearer": "Authorization: Bearer 9f8e7d6c5b4a3928171615141312",
        "basic": "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "url password": "postgres://app:s3cr3t-Pa55@db.internal:5432/app",
        "aws secret beside its name": "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8",
    }


@pytest.mark.parametrize("place", sorted(KEY_PLACES))
@pytest.mark.parametrize("shape", sorted(KEY_SHAPES))
def test_every_key_shape_is_found(shape: str, place: str) -> None:
    key = KEY_SHAPES[shape](rng(11))
    hits = scan(KEY_PLACES[place](key))
    assert hits, f"{shape} {place}"
    for hit in hits:
        assert key not in str(hit) and key not in orjson.dumps(hit.to_json()).decode()


@pytest.mark.parametrize("name", sorted(_generic_secrets()))
def test_secrets_without_a_vendor_prefix_are_found(name: str) -> None:
    assert scan(_generic_secrets()[name]), name


def test_look_alikes_pass_and_the_false_positives_are_counted() -> None:
    flagged = []
    checked = 0
    for name, make in sorted(LOOK_ALIKES.items()):
        for seed in range(5):
            value = make(rng(seed))
            for place, put in LOOK_ALIKE_PLACES.items():
                checked += 1
                hits = scan(put(value))
                if hits:
                    flagged.append((name, place, [h.rule for h in hits]))
    assert checked == len(LOOK_ALIKES) * 5 * len(LOOK_ALIKE_PLACES)
    assert flagged == [], f"{len(flagged)} false positives of {checked}: {flagged[:5]}"


def test_af_recordings_scan_clean() -> None:
    """af's own ids, hashes, refs and runs: the samples and the frozen fixtures."""
    files = sorted((ROOT / "recordings").glob("sample-*.jsonl"))
    files += sorted((ROOT / "tests" / "fixtures").glob("v1.*/valid.jsonl"))
    files += sorted((ROOT / "tests" / "fixtures" / "v1.0" / "samples").glob("*.jsonl"))
    assert len(files) >= 2
    for path in files:
        assert scan_recording(path) == [], path.name


def test_a_hit_says_where_it_is_and_never_what(tmp_path: Path) -> None:
    key = KEY_SHAPES["github_classic"](rng(1))
    source = ROOT / "recordings" / "sample-trip.jsonl"
    path = tmp_path / "leaky.jsonl"
    shutil.copy(source, path)
    lines = path.read_bytes().splitlines()
    from afcore.recording import open_recording

    with open_recording(path) as rec:
        seed = rec.message_line(1)
    # Plant the key in the user message, written inline in the seed's commit, as a file
    # written without redaction would hold it (its id and seal no longer match: the scanner
    # reads anyway).
    assert seed is not None
    record = orjson.loads(lines[seed - 1])
    at = next(i for i, w in enumerate(record["writes"]) if w["key"] == "message:1")
    record["writes"][at]["value"]["content"] += f" my token {key}"
    lines[seed - 1] = orjson.dumps(record)
    planted_line = seed
    lines.append(b'{"t":"torn", "text": "AKIA' + b"A" * 16 + b" ")
    path.write_bytes(b"\n".join(lines) + b"\n")

    hits = scan_recording(path)
    assert [h.rule for h in hits] == ["github_token", "aws_access_key"]
    first, torn = hits
    assert (first.line, first.record, first.message, first.call, first.slot) == (
        planted_line,
        "commit",
        1,
        1,
        "messages",
    )
    assert first.path == f"$.writes[{at}].value.content"
    content = orjson.loads(lines[planted_line - 1])["writes"][at]["value"]["content"]
    assert content[first.start : first.end] == key
    assert torn.line == len(lines) and torn.record is None
    report = "\n".join(str(h) for h in hits) + orjson.dumps([h.to_json() for h in hits]).decode()
    assert key not in report and "AKIA" + "A" * 16 not in report
    assert f"line {planted_line}, commit, message 1, call 1 (messages)" in str(first)


def test_a_secret_key_and_a_secret_as_a_key() -> None:
    key = KEY_SHAPES["stripe_live"](rng(2))
    hits = scan({"args": {key: 1, "api_key": "[redacted:field:api_key]", "token": "abc"}})
    assert [(h.rule, h.path, h.in_key) for h in hits] == [("stripe_key", "$.args[#0]", True)]
    assert key not in str(hits[0])
