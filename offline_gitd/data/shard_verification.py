"""What a server's response promises about a shard, and every way a downloaded file breaks a promise.

Shards are GB-sized and the bucket publishes no checksums, so a download is checked against what
the server says (size from ``Content-Length`` / ``x-goog-stored-content-length`` / ``Content-Range``,
``x-goog-hash`` crc32c and md5 when sent) and against the run's lock file once it has an entry
(docs/datasets.md). Pure functions of headers and digests: no network, no files.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from offline_gitd.data.lock_book import FileDigests, LockEntry

# Byte counts a server sends: ASCII digits only (``\d`` and str.isdigit take "²" or "١", which
# int() refuses or reads as another number) and at most 20 of them (past 4300 int() refuses too).
_BYTES = r"([0-9]{1,20})"
_CONTENT_RANGE = re.compile(rf"bytes {_BYTES}-{_BYTES}/({_BYTES[1:-1]}|\*)")


@dataclass(frozen=True)
class ServerChecks:
    """What the server promised about the whole object (None: it did not say)."""

    size: int | None = None
    crc32c: int | None = None
    md5: bytes | None = None


def parse_content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``"bytes 100-199/200"`` -> ``(100, 199, 200)``; ``None`` when absent or malformed."""
    match = _CONTENT_RANGE.fullmatch((value or "").strip())
    if not match:
        return None
    total = None if match.group(3) == "*" else int(match.group(3))
    return int(match.group(1)), int(match.group(2)), total


def parse_goog_hash(values: Iterable[str]) -> tuple[int | None, bytes | None]:
    """crc32c (as int) and md5 (raw digest) from ``x-goog-hash`` header values.

    GCS sends either one header ``crc32c=<b64>,md5=<b64>`` or one header per hash; both work.
    Malformed entries are ignored (the size and lock checks still apply).
    """
    crc: int | None = None
    md5: bytes | None = None
    for value in values:
        for item in value.split(","):
            key, _, b64 = item.strip().partition("=")
            try:
                raw = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError):
                continue
            if key == "crc32c" and len(raw) == 4:
                crc = int.from_bytes(raw, "big")
            elif key == "md5" and len(raw) == 16:
                md5 = raw
    return crc, md5


def byte_count(value: str | None) -> int | None:
    """A header's byte count; ``None`` when absent or not one."""
    match = re.fullmatch(_BYTES, (value or "").strip())
    return int(match.group(1)) if match else None


def server_checks(status: int, headers: Any) -> ServerChecks:
    """What a 200/206 response says about the whole object (size and hashes).

    For 206 the body is a slice, so the size comes from ``Content-Range``'s total; GCS also sends
    ``x-goog-stored-content-length`` and whole-object hashes on ranged answers.
    """
    size = byte_count(headers.get("x-goog-stored-content-length"))
    if size is None and status == 206:
        content_range = parse_content_range(headers.get("Content-Range"))
        size = content_range[2] if content_range else None
    elif size is None:
        size = byte_count(headers.get("Content-Length"))
    crc, md5 = parse_goog_hash(headers.get_all("x-goog-hash") or [])
    return ServerChecks(size=size, crc32c=crc, md5=md5)


def same_object(a: ServerChecks, b: ServerChecks) -> bool:
    """False when two responses describe different objects (a field both give differs)."""
    pairs = ((a.size, b.size), (a.crc32c, b.crc32c), (a.md5, b.md5))
    return all(x is None or y is None or x == y for x, y in pairs)


def verification_problems(
    digests: FileDigests, checks: ServerChecks, lock: LockEntry | None, lock_name: str
) -> list[str]:
    """Every way a downloaded file disagrees with the server or the lock file (empty: good)."""
    problems = []
    if checks.size is not None and digests.size != checks.size:
        problems.append(f"size {digests.size} != {checks.size} announced by the server")
    if checks.crc32c is not None and digests.crc32c != checks.crc32c:
        problems.append(f"crc32c {digests.crc32c:08x} != {checks.crc32c:08x} from x-goog-hash")
    if checks.md5 is not None and digests.md5 != checks.md5:
        problems.append(f"md5 {digests.md5.hex()} != {checks.md5.hex()} from x-goog-hash")
    if lock is not None and (digests.size, digests.sha256) != (lock.size, lock.sha256):
        problems.append(
            f"size/sha256 {digests.size}/{digests.sha256[:12]}... != "
            f"{lock.size}/{lock.sha256[:12]}... recorded in {lock_name} "
            "(remote changed? delete the lock entry to accept it)"
        )
    return problems
