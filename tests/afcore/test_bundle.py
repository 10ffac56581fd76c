"""Bundles: a recording made safe to attach, that still verifies and opens everywhere.

Personal data planted in a run's messages and tool results is gone from every byte of the
bundle, each value replaced by one placeholder wherever it stood; a secret the run's policy
missed refuses the export, naming where and which rule but never the value.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from afcore import Agent, define_tool, mock
from afcore.bundle import ExportPolicy, ExportRefused, export_bundle, is_bundle, read_bundle
from afcore.errors import RecordingFormatError, UsageError
from afcore.recording import open_recording, rewrite, verify
from afcore.secrets import scan_recording
from tests.afcore.secrets_corpus import KEY_SHAPES, LOOK_ALIKES, rng
from tests.conftest import fixed_recording

SAMPLES = Path(__file__).resolve().parents[2] / "recordings"
EMAIL = "jane.doe+bugs@example.org"
EMAIL2 = "ops@acme-corp.io"
CARD = "4111 1111 1111 1111"
CARD_DIGITS = 4012888888881881


def _all_bytes(bundle: Path) -> bytes:
    """The bundle as stored and every member decompressed."""
    out = [bundle.read_bytes()]
    with zipfile.ZipFile(bundle) as z:
        out += [z.read(name) for name in z.namelist()]
    return b"\n".join(out)


def _recording_of(bundle: Path) -> str:
    with zipfile.ZipFile(bundle) as z:
        return z.read("recording.jsonl").decode()


@pytest.fixture
def pii_run(tmp_path: Path) -> Path:
    """A run whose user message, tool arguments, tool results and answer hold an e-mail
    address and card numbers (as text, as a number, and inside JSON in a tool result)."""

    def customer(args: dict[str, Any], ctx: Any) -> str:
        return json.dumps(
            {
                "customer": {"name": "Jane Doe", "email": EMAIL, "phone": "+44 20 7946 0958"},
                "card": CARD,
                "card_on_file": CARD_DIGITS,
                "note": f"escalate to {EMAIL2}",
            }
        )

    agent = (
        Agent.create(
            provider=mock(
                replies=[
                    {
                        "content": f"Looking up {EMAIL}.",
                        "tool_calls": [{"id": "c1", "name": "customer", "args": {"email": EMAIL}}],
                    },
                    f"{EMAIL} paid with {CARD}; ask {EMAIL2}. Phone +44 20 7946 0958.",
                ]
            ),
            model="mock-support",
            name="support",
            record=fixed_recording(tmp_path, "pii-run"),
        )
        .system("You help with billing questions.")
        .tool(
            define_tool(
                "customer",
                "Find a customer by e-mail.",
                {"type": "object", "properties": {"email": {"type": "string"}}},
                customer,
            )
        )
        .build()
    )
    agent.run(f"Why was I charged twice? I am {EMAIL}, card {CARD}.")
    assert agent.last_recording is not None
    return agent.last_recording


def test_planted_personal_data_is_gone_from_every_byte_and_the_bundle_verifies(
    pii_run: Path, tmp_path: Path
) -> None:
    raw = pii_run.read_bytes()
    assert EMAIL.encode() in raw and b"4111 1111 1111 1111" in raw  # planted, as recorded
    out = tmp_path / "report.afz"
    done = export_bundle(pii_run, out, policy=ExportPolicy(fields=("phone",)))
    data = _all_bytes(out)
    for planted in (EMAIL, EMAIL2, CARD, str(CARD_DIGITS), "+44 20 7946 0958", "7946 0958"):
        assert planted.encode() not in data, planted
    assert is_bundle(out)
    with open_recording(out) as rec:
        report = verify(rec)
        assert report.ok, report.problems
        assert rec.origin == out
        assert rec.header.run_id == "pii-run"
    assert done.manifest["verify"] == {"ok": True, "calls": 2, "verified": 2}

    # One value, one placeholder, wherever it stood; two values, two placeholders.
    text = _recording_of(out)
    emails = set(re.findall(r"\[redacted:email:\d+\]", text))
    assert emails == {"[redacted:email:1]", "[redacted:email:2]"}
    first = "[redacted:email:1]"
    assert text.count(first) >= 5  # user message, reply text, tool args, tool result, answer
    assert re.search(r"\[redacted:card:\d+\]", text)
    assert "[redacted:field:phone:1]" in text

    # The report: what, which rule, how many times, where (call, slot, path); no value.
    manifest, rep = read_bundle(out)
    assert manifest == done.manifest
    rules = {r["rule"]: r for r in rep["rules"]}
    assert set(rules) == {"email", "card", "field:phone"}
    assert rules["email"]["values"] == 2
    assert rules["email"]["count"] == sum(p["count"] for p in rules["email"]["places"])
    # Every replacement counted, a whole value's as one inside a text: as many as the file holds.
    for rule, pattern in (("email", "email"), ("card", "card"), ("field:phone", "field:phone")):
        placed = len(re.findall(rf"\[redacted:{pattern}:\d+\]", text))
        assert rules[rule]["count"] == placed, (rule, rules[rule]["count"], placed)
    assert rules["card"]["values"] == 2
    slots = {(p.get("call"), p.get("slot")) for p in rules["email"]["places"]}
    assert (1, "messages") in slots
    assert all(p["path"].startswith("$") for p in rules["email"]["places"])
    assert rep["forced"] is False and rep["secrets"] == []


def test_the_manifest_says_which_af_python_platform_provider_model_and_agent(
    pii_run: Path, tmp_path: Path
) -> None:
    done = export_bundle(pii_run, tmp_path / "b.afz")
    m = done.manifest
    assert m["format"] == "af.bundle"
    assert m["exported_by"]["python"].count(".") == 2
    assert m["exported_by"]["platform"]
    assert m["provider"]["name"] == "mock"
    assert m["models"] == ["mock-support"]
    assert m["agent"]["name"] == "support"
    with zipfile.ZipFile(tmp_path / "b.afz") as z:
        assert sorted(z.namelist()) == ["manifest.json", "recording.jsonl", "redaction.json"]
        body = z.read("recording.jsonl")
    assert m["recording"]["bytes"] == len(body)


def test_the_agents_source_is_hashed_and_included_on_request(tmp_path: Path) -> None:
    sample = SAMPLES / "sample-trip.jsonl"
    done = export_bundle(sample, tmp_path / "t.afz", with_source=True)
    agent = done.manifest["agent"]
    assert agent["spec"] == "afcore.demos.trip:build_agent"
    assert agent["source_file"] == "afcore/demos/trip.py"
    import hashlib

    import afcore.demos.trip as trip

    source = Path(trip.__file__).read_bytes()
    assert agent["source_sha256"] == hashlib.sha256(source).hexdigest()
    with zipfile.ZipFile(tmp_path / "t.afz") as z:
        assert z.read("source/trip.py") == source
    without = export_bundle(sample, tmp_path / "u.afz")
    assert without.manifest["agent"]["source_included"] is False
    assert without.manifest["agent"]["source_sha256"] == agent["source_sha256"]


FROZEN = Path(__file__).resolve().parents[1] / "fixtures"
"""Samples frozen in the formats before this one: a bundle keeps the file's own format."""


@pytest.mark.parametrize(
    "sample",
    [*sorted(SAMPLES.glob("sample-*.jsonl")), *sorted(FROZEN.glob("v*/samples/sample-*.jsonl"))],
    ids=lambda p: f"{p.parent.parent.name}/{p.stem}" if p.parent.name == "samples" else p.stem,
)
def test_every_sample_exports_verifies_and_reads_as_the_original(
    sample: Path, tmp_path: Path
) -> None:
    out = tmp_path / f"{sample.stem}.afz"
    export_bundle(sample, out)
    with open_recording(sample) as a, open_recording(out) as b:
        assert verify(b).ok
        assert a.call_numbers == b.call_numbers
        for n in a.call_numbers:
            assert a.request(n) == b.request(n)
    # Nothing to redact in a sample: the recording is carried byte for byte.
    assert _recording_of(out).encode() == sample.read_bytes()


@pytest.mark.parametrize(
    "sample",
    [
        SAMPLES / "sample-compaction.jsonl",
        *sorted(FROZEN.glob("v*/samples/sample-compaction.jsonl")),
    ],
    ids=lambda p: p.parent.parent.name if p.parent.name == "samples" else "current",
)
def test_a_redacted_recording_verifies_in_its_own_format(sample: Path, tmp_path: Path) -> None:
    """Redaction changes blobs, inline messages, ids, call hashes and (1.1) the seals: each
    made anew in the file's own scheme."""
    out = tmp_path / "c.afz"
    done = export_bundle(sample, out, policy=ExportPolicy(patterns=(("supplier", "Kestrel"),)))
    assert done.report["rules"][0]["count"] > 10
    assert b"Kestrel" not in _all_bytes(out)  # the report names the pattern, never spells it
    with open_recording(sample) as a, open_recording(out) as b:
        assert b.header.hash == a.header.hash and b.header.version == a.header.version
        report = verify(b)
        assert report.ok, report.problems[:3]
        assert len(b.call_numbers) == len(a.call_numbers)


def test_a_field_path_redacts_inside_json_text_and_a_policy_file_adds_patterns(
    pii_run: Path, tmp_path: Path
) -> None:
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(
        'fields = ["customer.name"]\nkeep = ["card"]\n[patterns]\nsurname = "Doe"\n'
    )
    policy = ExportPolicy.from_file(policy_file)
    done = export_bundle(pii_run, tmp_path / "p.afz", policy=policy)
    text = _recording_of(tmp_path / "p.afz")
    assert "Jane Doe" not in text
    assert "[redacted:field:customer.name:1]" in text
    assert CARD in text  # the card rule was left out
    assert {r["rule"] for r in done.report["rules"]} >= {"field:customer.name", "email"}
    assert done.report["policy"]["builtin"] == ["email"]


@pytest.mark.parametrize(
    "content",
    ['fields = "x"', "[patterns]\nbad = '('", "keep = ['nope']", "colour = 1", "fields = ["],
)
def test_a_bad_policy_file_is_one_sentence(tmp_path: Path, content: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(content)
    with pytest.raises(UsageError) as info:
        ExportPolicy.from_file(path)
    said = str(info.value)
    assert "\n" not in said
    # It says what is wrong: the file, or the entry in it.
    assert str(path) in said or "'bad'" in said or "'nope'" in said, said


def _with_planted(sample: Path, secret: str, dst: Path) -> Path:
    """``sample`` as a writer without redaction would have left it: ``secret`` beside
    every mention of Lisbon (messages, tool results, the answer), and still verifying."""
    rewrite(
        sample,
        dst,
        lambda v, leaf: v.replace("Lisbon", f"Lisbon {secret}") if isinstance(v, str) else v,
    )
    with open_recording(dst) as rec:
        assert verify(rec).ok
    return dst


@pytest.mark.parametrize("shape", sorted(KEY_SHAPES))
def test_every_real_shaped_key_refuses_the_export_without_showing_it(
    shape: str, tmp_path: Path
) -> None:
    secret = KEY_SHAPES[shape](rng(5))
    planted = _with_planted(SAMPLES / "sample-trip.jsonl", secret, tmp_path / "in.jsonl")
    out = tmp_path / "out.afz"
    with pytest.raises(ExportRefused) as info:
        export_bundle(planted, out)
    assert not out.exists()
    assert list(tmp_path.glob(".af-export-*")) == []
    message = str(info.value)
    assert secret[:12] not in message and secret[-12:] not in message
    assert "line " in message
    # Each hit says where: the first call that sent it and the slot, where it is in one.
    assert any(h.call is not None and h.slot == "messages" for h in info.value.hits)

    forced = export_bundle(planted, out, force=True)
    assert forced.manifest["forced"] is True
    assert forced.report["forced"] is True
    assert forced.report["secrets"] and all("rule" in h for h in forced.report["secrets"])
    report_bytes = json.dumps(forced.report).encode() + json.dumps(forced.manifest).encode()
    assert secret[:12].encode() not in report_bytes


def test_look_alikes_pass_the_scanner(tmp_path: Path) -> None:
    """Hashes, uuids, base64 images, vendors' ids planted beside Lisbon: no refusal."""
    r = rng(9)
    refused = []
    for name, make in sorted(LOOK_ALIKES.items()):
        planted = _with_planted(SAMPLES / "sample-trip.jsonl", make(r), tmp_path / f"{name}.jsonl")
        try:
            export_bundle(planted, tmp_path / f"{name}.afz")
        except ExportRefused:
            refused.append(name)
    assert refused == []


def test_a_redact_pattern_clears_a_refusal(tmp_path: Path) -> None:
    secret = KEY_SHAPES["stripe_live"](rng(3))
    planted = _with_planted(SAMPLES / "sample-trip.jsonl", secret, tmp_path / "in.jsonl")
    policy = ExportPolicy(patterns=(("stripe", r"sk_live_\w+"),))
    done = export_bundle(planted, tmp_path / "ok.afz", policy=policy)
    assert secret.encode() not in _all_bytes(tmp_path / "ok.afz")
    assert done.manifest["verify"]["ok"]
    assert scan_recording(open_recording(tmp_path / "ok.afz").path) == []


def test_a_zip_that_is_not_a_bundle_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.afz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("notes.txt", "hello")
    with pytest.raises(RecordingFormatError, match="not an af bundle"):
        open_recording(path)
    broken = tmp_path / "broken.afz"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    with pytest.raises(RecordingFormatError, match="not a readable bundle"):
        open_recording(broken)


def test_a_bundle_too_big_to_unpack_here_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import namedtuple

    out = tmp_path / "t.afz"
    export_bundle(SAMPLES / "sample-trip.jsonl", out)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(100, 90, 10))
    with pytest.raises(RecordingFormatError, match="more than the 10 free"):
        open_recording(out)
