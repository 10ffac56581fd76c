"""Writing a bundle: one zip to attach to a bug report.

``export_bundle(recording, out)`` learns what the policy finds, rewrites the recording with
every such value replaced by its placeholder (ids, refs and call hashes made anew through
the recording's own rewrite, so it verifies), scans the result for secrets, and only then
writes the zip: ``manifest.json`` (which af, Python and platform, provider and models, the
agent and a hash of its source), ``recording.jsonl``, ``redaction.json`` (what was
redacted, by which rule, how many times and where: never the values), and with
``with_source`` the agent's source file. A secret the scanner finds refuses the export
(:class:`ExportRefused`, naming where and which rule) unless ``force``, which the manifest
and the report then state.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import sys
import tempfile
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from afcore.bundle._policy import ExportPolicy, FieldPath, luhn
from afcore.errors import AfError
from afcore.recording import BUNDLE_RECORDING, Leaf, content_leaves, rewrite
from afcore.recording._typed import dump

if TYPE_CHECKING:
    from afcore.secrets import Hit

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "ExportRefused",
    "Exported",
    "Prepared",
    "export_bundle",
    "prepare_export",
    "read_bundle",
]

BUNDLE_FORMAT = "af.bundle"
BUNDLE_VERSION = "1.0"
MANIFEST = "manifest.json"
REPORT = "redaction.json"
_PLACES_SHOWN = 200
"""Places listed per rule in the report; the count is always whole."""
_MIN_TEXT = 4
"""A learned value shorter than this is replaced where a rule found it, not in all text
(`42` under a redacted field must not erase every 42 in the run)."""


class ExportRefused(AfError):
    """The scanner found secrets in what would be written; nothing was written."""

    def __init__(self, hits: list[Any]) -> None:
        self.hits = hits
        first = hits[0]
        more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
        super().__init__(
            f"refused: a secret ({first.rule}) at {first.where()}{more}; "
            "redact it (--redact, --redact-field) or export anyway with --force"
        )


@dataclass
class Exported:
    """What an export wrote."""

    path: Path
    manifest: dict[str, Any]
    report: dict[str, Any]
    hits: list[Any] = field(default_factory=list)
    """The scanner's hits, exported anyway (``force``)."""


class _Learner:
    """Pass one: every value the policy finds, each given its placeholder."""

    def __init__(self, policy: ExportPolicy) -> None:
        self.fields = [FieldPath(f) for f in policy.fields]
        self.rules = policy.rules
        self.placeholder: dict[str, str] = {}
        self.rule_of: dict[str, str] = {}
        self._numbers: Counter[str] = Counter()

    def learn(self, value: str, rule: str) -> None:
        if value in self.placeholder or value.startswith("[redacted"):
            return
        self._numbers[rule] += 1
        self.placeholder[value] = f"[redacted:{rule}:{self._numbers[rule]}]"
        self.rule_of[value] = rule

    def field_of(self, keys: tuple[str, ...]) -> str | None:
        if "input_schema" in keys:
            return None  # a tool's JSON Schema names its arguments: `email` there is a name
        for f in self.fields:
            if f.matches(keys):
                return f.spec
        return None

    def visit(self, value: Any, leaf: Leaf) -> None:
        if leaf.is_key:
            keys = _keys(leaf.path[:-1])
        else:
            keys = _keys(leaf.path)
            spec = self.field_of(keys) if self.fields else None
            if spec is not None and value != "":
                self.learn(str(value), f"field:{spec}")
                return
        if not isinstance(value, str):
            if isinstance(value, int) and len(str(value)) >= 13:
                self._patterns(str(value))
            return
        self._patterns(value)
        if self.fields and not leaf.is_key:
            self._json_inside(value, keys)

    def _patterns(self, text: str) -> None:
        for name, rx in self.rules:
            for m in rx.finditer(text):
                if name == "card" and not luhn(m.group(0)):
                    continue
                self.learn(m.group(0), name)

    def _json_inside(self, text: str, keys: tuple[str, ...]) -> None:
        s = text.strip()
        if not (s[:1] in "{[" and s[-1:] in "}]"):
            return
        try:
            inner = orjson.loads(s)
        except orjson.JSONDecodeError:
            return
        for value, inner_keys in _json_leaves(inner, keys):
            spec = self.field_of(inner_keys)
            if spec is not None and value != "":
                self.learn(str(value), f"field:{spec}")


def _keys(path: tuple[str | int, ...]) -> tuple[str, ...]:
    return tuple(p for p in path if isinstance(p, str))


def _json_leaves(value: Any, keys: tuple[str, ...]) -> Iterator[tuple[Any, tuple[str, ...]]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_leaves(v, (*keys, str(k)))
    elif isinstance(value, list):
        for v in value:
            yield from _json_leaves(v, keys)
    elif value is not None and not isinstance(value, bool):
        yield value, keys


class _Replacer:
    """Pass two: each learned value replaced wherever it stands, each replacement counted
    with where it was."""

    def __init__(self, learner: _Learner) -> None:
        self.learner = learner
        self.placeholder = learner.placeholder
        words = sorted((v for v in self.placeholder if len(v) >= _MIN_TEXT), key=len, reverse=True)
        self.rx = re.compile("|".join(_bounded(w) for w in words)) if words else None
        self.places: dict[str, Counter[tuple[int, str, str]]] = defaultdict(Counter)
        """rule -> (line, record, path) -> replacements"""

    def __call__(self, value: Any, leaf: Leaf) -> Any:
        if isinstance(value, str):
            exact = self.placeholder.get(value)
            if exact is not None:
                self._count(value, leaf, 1)
                return exact
            # Each value learned, wherever it stands (the longest first); then where a rule
            # matches as the first pass found it (inside text a word boundary misreads).
            if self.rx is not None:
                value = self.rx.sub(lambda m: self._sub(m.group(0), leaf), value)
            for _, rx in self.learner.rules:
                value = rx.sub(lambda m: self._rule_sub(m.group(0), leaf), value)
            return value
        if self.learner.fields and not leaf.is_key:
            text = str(value)
            if text in self.placeholder and self.learner.field_of(_keys(leaf.path)) is not None:
                self._count(text, leaf, 1)
                return self.placeholder[text]
        if isinstance(value, int) and not leaf.is_key:
            text = str(value)
            rule = self.learner.rule_of.get(text)
            if rule is not None and not rule.startswith("field:"):
                self._count(text, leaf, 1)
                return self.placeholder[text]
        return value

    def _rule_sub(self, found: str, leaf: Leaf) -> str:
        if found not in self.placeholder:
            return found  # turned down in the first pass (a card number failing Luhn)
        return self._sub(found, leaf)

    def _sub(self, found: str, leaf: Leaf) -> str:
        self._count(found, leaf, 1)
        return self.placeholder[found]

    def _count(self, value: str, leaf: Leaf, n: int) -> None:
        rule = self.learner.rule_of[value]
        self.places[rule][(leaf.line, leaf.record, leaf.path_text())] += n


def _bounded(word: str) -> str:
    """``word`` as an expression that does not match inside a longer word (text that holds
    JSON counts ``\\n`` before a word as a break, not as a letter)."""
    rx = re.escape(word)
    if word[:1].isalnum() or word[:1] == "_":
        rx = r"(?:(?<!\w)|(?<=\\[nrt]))" + rx
    if word[-1:].isalnum() or word[-1:] == "_":
        rx += r"(?!\w)"
    return rx


def export_bundle(
    recording: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    policy: ExportPolicy | None = None,
    force: bool = False,
    with_source: bool = False,
    source_root: str | os.PathLike[str] | None = None,
) -> Exported:
    """Write the bundle of ``recording`` (a recording or a bundle) to ``out``. Raises
    :class:`ExportRefused` when the scanner finds a secret in what would be written (and
    ``force`` is not set); nothing is written then."""
    with prepare_export(
        recording, policy=policy, force=force, with_source=with_source, source_root=source_root
    ) as prepared:
        return prepared.write(out)


@dataclass
class Prepared:
    """A recording redacted, rewritten, scanned and verified, not yet written anywhere:
    ``recording`` is a private file that lives as long as the ``with`` block."""

    recording: Path
    manifest: dict[str, Any]
    report: dict[str, Any]
    hits: list[Any]
    source: bytes | None
    source_name: str | None

    def write(self, out: str | os.PathLike[str]) -> Exported:
        """The bundle, written to ``out`` whole (or not at all)."""
        out = Path(out)
        _write_zip(
            out,
            self.manifest,
            self.recording.read_bytes(),
            self.report,
            self.source,
            self.source_name,
        )
        return Exported(out, self.manifest, self.report, self.hits)


@contextmanager
def prepare_export(
    recording: str | os.PathLike[str],
    *,
    policy: ExportPolicy | None = None,
    force: bool = False,
    with_source: bool = False,
    source_root: str | os.PathLike[str] | None = None,
) -> Iterator[Prepared]:
    """What an export writes, ready (see :func:`export_bundle`): for writing a bundle, a
    page, or both from one redaction."""
    from afcore.recording import is_flow, open_recording, recording_path, verify
    from afcore.secrets import place, scan_recording

    policy = policy or ExportPolicy()
    src = recording_path(recording)
    if is_flow(src):
        with _prepare_flow(src, policy, force, with_source, source_root) as prepared:
            yield prepared
        return
    with open_recording(src) as rec:
        header = rec.header

    learner = _Learner(policy)
    _learn(learner, src)

    replacer = _Replacer(learner)
    with tempfile.TemporaryDirectory(prefix="af-export-") as tmp:
        redacted = Path(tmp) / BUNDLE_RECORDING
        done = rewrite(src, redacted, replacer)
        hits = scan_recording(redacted)
        if hits and not force:
            raise ExportRefused(hits)
        with open_recording(redacted, index=False) as rec:
            checked = verify(rec)
        data = redacted.read_bytes()

        # Where each replacement was, named as the scanner names where a secret is.
        located, counts = _located(replacer)
        by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for h, count in zip(place(src, located), counts, strict=True):
            by_rule[h.rule].append(_place(h, count))
        rules = _rules(by_rule, learner)
        report: dict[str, Any] = {
            "format": "af.redaction-report",
            "policy": policy.describe(),
            "run_policy": dump(header.redaction, mode="json"),
            "rules": rules,
            "dropped_lines": done.dropped,
            "forced": bool(hits),
            "secrets": [h.to_json() for h in hits],
        }
        source, source_file = _agent_source(header.agent.source, source_root)
        manifest: dict[str, Any] = {
            **_manifest_head(header),
            "provider": header.provider,
            "model": header.model,
            "models": _models(data, header.model),
            "agent": {
                "name": header.agent.name,
                "spec": header.agent.source,
                "source_file": source_file,
                "source_sha256": hashlib.sha256(source).hexdigest() if source else None,
                "source_included": bool(with_source and source),
            },
            "recording": {
                "member": BUNDLE_RECORDING,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
            "verify": _verdict(checked.ok, checked.calls, checked.verified, _problems(checked)),
            "redactions": sum(r["count"] for r in rules),
            "forced": bool(hits),
            "secrets_found": len(hits),
        }
        yield Prepared(
            redacted, manifest, report, hits, source if with_source else None, source_file
        )


@contextmanager
def _prepare_flow(
    src: Path,
    policy: ExportPolicy,
    force: bool,
    with_source: bool,
    source_root: str | os.PathLike[str] | None,
) -> Iterator[Prepared]:
    """A composed run made ready as an agent's run is: one policy learned over the log and
    every agent's run (one value, one placeholder, across the whole run), each run rewritten
    so it verifies and folded into the log written anew, scanned, then verified."""
    from afcore.recording import (
        flow_content_leaves,
        flow_runs,
        open_flow,
        open_recording,
        rewrite_flow,
        verify_flow,
    )
    from afcore.secrets import place, scan_recording

    flow = open_flow(src)
    runs = list(flow_runs(flow))
    learner = _Learner(policy)
    for value, leaf in flow_content_leaves(src):
        learner.visit(value, leaf)
    for _, _, file in runs:
        _learn(learner, file)

    # One replacer per file: each counts the places in its own lines.
    replacers: dict[str | None, _Replacer] = {}

    def transform_for(step: str | None) -> _Replacer:
        return replacers.setdefault(step, _Replacer(learner))

    with tempfile.TemporaryDirectory(prefix="af-export-") as tmp:
        redacted = Path(tmp) / BUNDLE_RECORDING
        done = rewrite_flow(src, redacted, transform_for)
        hits = scan_recording(redacted)
        if hits and not force:
            raise ExportRefused(hits)
        checked = verify_flow(open_flow(redacted))
        data = redacted.read_bytes()

        files = {step: file for step, _, file in runs}
        by_rule: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for step, replacer in replacers.items():
            located, counts = _located(replacer)
            if step is not None:
                located = place(files[step], located)
            for h, count in zip(located, counts, strict=True):
                by_rule[h.rule].append(_place(h, count, step))
        rules = _rules(by_rule, learner)
        header = flow.header
        agents: list[dict[str, Any]] = []
        models: set[str] = set()
        for step, name, file in runs:
            with open_recording(file, index=False) as rec:
                head = rec.header
            agents.append(
                {
                    "step": step,
                    "run": name,
                    "name": head.agent.name,
                    "provider": head.provider,
                    "model": head.model,
                }
            )
            models.add(head.model)
        models.update(_models(data, next(iter(models), "")))
        models.discard("")
        report: dict[str, Any] = {
            "format": "af.redaction-report",
            "policy": policy.describe(),
            "run_policy": dump(header.redaction, mode="json"),
            "rules": rules,
            "dropped_lines": done.log.dropped,
            "dropped_run_lines": {step: r.dropped for step, r in done.runs.items() if r.dropped},
            "forced": bool(hits),
            "secrets": [h.to_json() for h in hits],
        }
        source, source_file = _agent_source(header.source, source_root)
        manifest: dict[str, Any] = {
            **_manifest_head(header),
            "flow": {
                "name": header.flow.name,
                "kind": header.flow.kind,
                "status": flow.end.status if flow.end is not None else "unfinished",
                "agents": agents,
            },
            "provider": agents[0]["provider"] if agents else None,
            "model": agents[0]["model"] if agents else None,
            "models": sorted(models),
            "agent": {
                "name": header.flow.name,
                "spec": header.source,
                "source_file": source_file,
                "source_sha256": hashlib.sha256(source).hexdigest() if source else None,
                "source_included": bool(with_source and source),
            },
            "recording": {
                "member": BUNDLE_RECORDING,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            },
            "verify": _verdict(
                checked.ok, checked.calls, checked.verified, _flow_problems(checked)
            ),
            "redactions": sum(r["count"] for r in rules),
            "forced": bool(hits),
            "secrets_found": len(hits),
        }
        yield Prepared(
            redacted, manifest, report, hits, source if with_source else None, source_file
        )


def _learn(learner: _Learner, path: str | os.PathLike[str]) -> None:
    """Show ``learner`` every content value of the recording at ``path``, line by line
    (a line that is not JSON holds nothing to learn from)."""

    ids: dict[str, str] = {}
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict) and record.get("t") == "blob":
                if isinstance(record.get("id"), str):
                    ids[record["id"]] = record["id"]
            for value, leaf in content_leaves(record, n, ids):
                learner.visit(value, leaf)


def _manifest_head(header: Any) -> dict[str, Any]:
    """What every bundle's manifest starts with: the bundle's format, who made it, and the
    recorded run's own header facts (an agent's and a flow log's headers name them alike)."""
    from afcore import __version__

    return {
        "format": BUNDLE_FORMAT,
        "version": BUNDLE_VERSION,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "exported_by": {
            "af_version": __version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "run": {
            "run_id": header.run_id,
            "started_at": header.started_at,
            "format_version": header.version,
            "af_version": header.af_version,
            "python": header.python,
        },
    }


_PROBLEMS_SHOWN = 20


def _verdict(ok: bool, calls: int, verified: int, problems: list[str]) -> dict[str, Any]:
    """``af verify``'s verdict on what the bundle holds, with what it found first in words."""
    shown: dict[str, Any] = {"problems": problems[:_PROBLEMS_SHOWN]} if problems else {}
    if len(problems) > _PROBLEMS_SHOWN:
        shown["problems_left_out"] = len(problems) - _PROBLEMS_SHOWN
    return {"ok": ok, "calls": calls, "verified": verified, **shown}


def _problems(checked: Any) -> list[str]:
    said = [str(p) for p in checked.problems]
    if checked.torn_tail is not None:
        said.append(f"line {checked.torn_tail.line}: torn: the run was cut off mid-write")
    return said


def _flow_problems(checked: Any) -> list[str]:
    said = [f"line {n}: {m}" if n else m for n, m in checked.problems]
    for step, _, run in checked.runs:
        if run is not None and run.torn_tail is not None:
            said.append(f"{step}: line {run.torn_tail.line}: torn: the run was cut off mid-write")
    return said


def _models(data: bytes, default: str) -> list[str]:
    """Every model the run's calls went to."""
    seen = {default}
    for m in re.finditer(rb'"t":"call".*?"model":"((?:[^"\\]|\\.)*)"', data):
        seen.add(orjson.loads(b'"' + m.group(1) + b'"'))
    return sorted(seen)


def _agent_source(
    spec: str | None, root: str | os.PathLike[str] | None
) -> tuple[bytes | None, str | None]:
    """The agent's source file and its name as the spec gives it, found without importing
    anything (``file.py:attr`` under ``root``, ``package.module:attr`` on ``sys.path``)."""
    if not spec:
        return None, None
    where = spec.rpartition(":")[0] or spec
    base = Path(root) if root is not None else Path.cwd()
    candidates: list[tuple[Path, str]] = []
    if where.endswith(".py"):
        candidates.append((base / where, Path(where).name))
    elif all(p.isidentifier() for p in where.split(".")):
        rel = Path(*where.split("."))
        for entry in [str(base), *sys.path]:
            folder = Path(entry or ".")
            candidates += [
                (folder / rel.with_suffix(".py"), f"{rel.as_posix()}.py"),
                (folder / rel / "__init__.py", f"{rel.as_posix()}/__init__.py"),
            ]
    for path, name in candidates:
        try:
            if path.is_file():
                return path.read_bytes(), name
        except OSError:
            continue
    return None, None


def _write_zip(
    out: Path,
    manifest: dict[str, Any],
    recording: bytes,
    report: dict[str, Any],
    source: bytes | None,
    source_name: str | None,
) -> None:
    """The zip, written beside ``out`` and moved over it whole."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".af-export-", suffix=".afz", dir=out.parent)
    os.close(fd)
    try:
        # Fixed member times: the same run exported twice gives the same bytes but the
        # manifest's created_at.
        stamp = (2026, 1, 1, 0, 0, 0)
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name, body in (
                (MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2)),
                (BUNDLE_RECORDING, recording),
                (REPORT, orjson.dumps(report, option=orjson.OPT_INDENT_2)),
            ):
                z.writestr(zipfile.ZipInfo(name, stamp), body, zipfile.ZIP_DEFLATED)
            if source is not None and source_name:
                z.writestr(
                    zipfile.ZipInfo(f"source/{Path(source_name).name}", stamp),
                    source,
                    zipfile.ZIP_DEFLATED,
                )
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_bundle(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A bundle's manifest and redaction report."""
    from afcore.errors import RecordingFormatError

    try:
        with zipfile.ZipFile(path) as z:
            manifest = orjson.loads(z.read(MANIFEST))
            report = orjson.loads(z.read(REPORT))
    except (KeyError, zipfile.BadZipFile, orjson.JSONDecodeError, OSError) as e:
        raise RecordingFormatError(f"{path} is not a readable af bundle: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise RecordingFormatError(f"{path} is not an af bundle (no af.bundle manifest)")
    return manifest, report


def _located(replacer: _Replacer) -> tuple[list[Hit], list[int]]:
    """Each replacement's place, as the scanner names where a secret is, and its count."""
    from afcore.secrets import Hit

    located: list[Hit] = []
    counts: list[int] = []
    for rule, places in replacer.places.items():
        for (line, record, path), count in places.items():
            located.append(Hit(rule, path, line=line, record=record))
            counts.append(count)
    return located, counts


def _place(h: Hit, count: int, step: str | None = None) -> dict[str, Any]:
    """A replacement's place as the manifest lists it (what is unknown left out)."""
    entry = {
        "step": step,
        "line": h.line,
        "record": h.record,
        "call": h.call,
        "slot": h.slot,
        "message": h.message,
        "path": h.path,
        "count": count,
    }
    return {k: v for k, v in entry.items() if v is not None}


def _rules(by_rule: dict[str, list[dict[str, Any]]], learner: _Learner) -> list[dict[str, Any]]:
    """The manifest's redaction rules: each with its values, count and first places."""
    values = Counter(learner.rule_of.values())
    return [
        {
            "rule": rule,
            "values": values[rule],
            "count": sum(e["count"] for e in entries),
            "places": entries[:_PLACES_SHOWN],
            **(
                {"places_left_out": len(entries) - _PLACES_SHOWN}
                if len(entries) > _PLACES_SHOWN
                else {}
            ),
        }
        for rule, entries in sorted(by_rule.items())
    ]
