"""Secrets of the shapes credentials really take, made up at run time from a seeded random
source, so that no real-looking credential sits in the repository as a literal.

Each maker returns a fresh fake value of one vendor's shape; ``KEY_SHAPES`` names them all.
``LOOK_ALIKES`` makes values that look random but are not secrets (hashes, ids, images):
the scanner must pass them.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid
from collections.abc import Callable

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
UPPER_DIGITS = string.ascii_uppercase + "234567"


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _join(*parts: str) -> str:
    """Prefixes are spelled in pieces so that the repository holds no key-shaped literal."""
    return "".join(parts)


def private_key_block(rng: random.Random, kind: str = "RSA") -> str:
    body = base64.b64encode(rng.randbytes(600)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    head = f"{kind} PRIVATE KEY".strip()
    return f"-----BEGIN {head}-----\n{lines}\n-----END {head}-----"


KEY_SHAPES: dict[str, Callable[[random.Random], str]] = {
    "anthropic": lambda r: _join("sk-", "ant-api03-", _pick(r, B64URL, 93), "AA"),
    "openai_project": lambda r: _join("sk-", "proj-", _pick(r, B64URL, 156)),
    "openai_legacy": lambda r: _join("sk-", _pick(r, ALNUM, 48)),
    "openrouter": lambda r: _join("sk-", "or-v1-", _pick(r, "0123456789abcdef", 64)),
    "google": lambda r: _join("AI", "za", _pick(r, B64URL, 35)),
    "aws_access_key": lambda r: _join("AK", "IA", _pick(r, UPPER_DIGITS, 16)),
    "github_classic": lambda r: _join("gh", "p_", _pick(r, ALNUM, 36)),
    "github_oauth": lambda r: _join("gh", "o_", _pick(r, ALNUM, 36)),
    "github_fine_grained": lambda r: _join(
        "github", "_pat_", _pick(r, ALNUM, 22), "_", _pick(r, ALNUM, 59)
    ),
    "gitlab": lambda r: _join("gl", "pat-", _pick(r, B64URL, 20)),
    "slack_bot": lambda r: _join(
        "xo",
        "xb-",
        _pick(r, string.digits, 12),
        "-",
        _pick(r, string.digits, 13),
        "-",
        _pick(r, ALNUM, 24),
    ),
    "stripe_live": lambda r: _join("sk", "_live_", _pick(r, ALNUM, 24)),
    "stripe_restricted": lambda r: _join("rk", "_live_", _pick(r, ALNUM, 24)),
    "huggingface": lambda r: _join("h", "f_", _pick(r, string.ascii_letters, 34)),
    "npm": lambda r: _join("np", "m_", _pick(r, ALNUM, 36)),
    "pypi": lambda r: _join("py", "pi-", "AgEIcHlwaS5vcmc", _pick(r, B64URL, 70)),
    "sendgrid": lambda r: _join("S", "G.", _pick(r, B64URL, 22), ".", _pick(r, B64URL, 43)),
    "groq": lambda r: _join("gs", "k_", _pick(r, ALNUM, 52)),
    "xai": lambda r: _join("xa", "i-", _pick(r, ALNUM, 80)),
    "jwt": lambda r: ".".join(
        [
            base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("="),
            base64.urlsafe_b64encode(
                f'{{"sub":"{r.randint(1, 10**9)}","name":"Ada","iat":1700000000}}'.encode()
            )
            .decode()
            .rstrip("="),
            _pick(r, B64URL, 43),
        ]
    ),
    "private_key_rsa": lambda r: private_key_block(r, "RSA"),
    "private_key_openssh": lambda r: private_key_block(r, "OPENSSH"),
    "private_key_pkcs8": lambda r: private_key_block(r, ""),
}
"""Vendor key shapes (fake values of the real length and alphabet)."""


def _af_blob_id(r: random.Random) -> str:
    return hashlib.sha256(r.randbytes(32)).hexdigest()


LOOK_ALIKES: dict[str, Callable[[random.Random], str]] = {
    "sha256": lambda r: hashlib.sha256(r.randbytes(16)).hexdigest(),
    "sha1_git_commit": lambda r: hashlib.sha1(r.randbytes(16)).hexdigest(),
    "git_short_hash": lambda r: hashlib.sha1(r.randbytes(16)).hexdigest()[:7],
    "md5": lambda r: hashlib.md5(r.randbytes(16)).hexdigest(),
    "uuid4": lambda r: str(uuid.UUID(bytes=r.randbytes(16), version=4)),
    "uuid_hex": lambda r: uuid.UUID(bytes=r.randbytes(16), version=4).hex,
    "base64_png": lambda r: (
        "data:image/png;base64,"
        + base64.b64encode(b"\x89PNG\r\n\x1a\n" + r.randbytes(3000)).decode()
    ),
    "base64_jpeg_bare": lambda r: base64.b64encode(
        b"\xff\xd8\xff\xe0" + r.randbytes(2000)
    ).decode(),
    "af_blob_id": _af_blob_id,
    "af_ref_128_b64url": lambda r: base64.urlsafe_b64encode(r.randbytes(16)).decode().rstrip("="),
    "anthropic_message_id": lambda r: "msg_01" + _pick(r, ALNUM, 22),
    "anthropic_tool_use_id": lambda r: "toolu_01" + _pick(r, ALNUM, 22),
    "openai_completion_id": lambda r: "chatcmpl-" + _pick(r, ALNUM, 29),
    "openai_call_id": lambda r: "call_" + _pick(r, ALNUM, 24),
    "request_id": lambda r: "req_" + _pick(r, ALNUM, 24),
    "thinking_signature": lambda r: base64.b64encode(r.randbytes(300)).decode(),
    "task_words": lambda r: "task-management-system-overview-" + str(r.randint(10, 99)),
    "file_path": lambda r: f"/home/ada/projects/agent-{r.randint(1, 99)}/src/tools/search.py",
    "url": lambda r: f"https://example.com/docs/page-{r.randint(1, 999)}?ref=sidebar#setup",
    "email": lambda r: f"ada.lovelace{r.randint(1, 99)}@example.com",
    "s3_object_key": lambda r: f"photos/2024/IMG_{r.randint(1000, 9999)}.jpg",
    "semver_build": lambda r: f"1.{r.randint(0, 9)}.{r.randint(0, 99)}+build.{r.randint(1, 999)}",
    "iso_timestamp": lambda r: f"2026-10-{r.randint(10, 28)}T12:{r.randint(10, 59)}:07.123Z",
}
"""Values that look random and are not secrets."""


def rng(seed: int = 17) -> random.Random:
    return random.Random(seed)
