"""What ``fetch`` reads from a server's headers (``Content-Range``, ``Content-Length``,
``x-goog-stored-content-length``, ``x-goog-hash``) and from a lock file on disk, on generated
values: each is the number or digest the text names, or "not given" (headers) / one line of
:class:`UsageError` (the lock file), never a traceback."""

from __future__ import annotations

import atexit
import base64
import json
import shutil
import tempfile
from email.message import Message
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from offline_gitd.data.lock_book import LockEntry, read_lock
from offline_gitd.data.shard_verification import parse_content_range, parse_goog_hash, server_checks
from offline_gitd.errors import UsageError
from tests.properties.checks import assert_one_line, share

SCRATCH = Path(tempfile.mkdtemp(prefix="locks-"))  # one file rewritten per example; removed at exit
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)

NEAR = st.lists(
    st.sampled_from(["bytes", " ", "-", "/", "*", "0", "7", "100", "2²", "١", "１", "9" * 25, "\t", "crc32c=", "md5="]),
    max_size=8,
).map("".join)
HEADER_TEXT = NEAR | st.text(st.characters(codec="latin-1"), max_size=20)  # http.client decodes headers as latin-1


@share(0.5)
@given(first=st.integers(0, 10**19), length=st.integers(0, 10**6), total=st.none() | st.integers(0, 10**19))
def test_content_ranges_read_back(first: int, length: int, total: int | None) -> None:
    text = f"bytes {first}-{first + length}/{'*' if total is None else total}"
    assert parse_content_range(text) == (first, first + length, total)


@given(text=HEADER_TEXT)
@example(text="bytes ١-٢/٣")  # was read as (1, 2, 3): \d takes any script's digits
def test_any_content_range_is_numbers_or_none(text: str) -> None:
    parsed = parse_content_range(text)
    if parsed is not None:
        first, last, total = parsed
        again = f"bytes {first}-{last}/{'*' if total is None else total}"
        assert parse_content_range(again) == parsed and text.strip().isascii()


@share(0.5)
@given(crc=st.integers(0, 2**32 - 1), md5=st.binary(min_size=16, max_size=16), one_header=st.booleans())
def test_goog_hashes_read_back(crc: int, md5: bytes, one_header: bool) -> None:
    items = [f"crc32c={base64.b64encode(crc.to_bytes(4, 'big')).decode()}", f"md5={base64.b64encode(md5).decode()}"]
    assert parse_goog_hash([",".join(items)] if one_header else items) == (crc, md5)


@share(0.5)
@given(
    status=st.sampled_from([200, 206]),
    stored=st.none() | HEADER_TEXT,
    length=st.none() | HEADER_TEXT,
    content_range=st.none() | HEADER_TEXT,
    hashes=st.lists(HEADER_TEXT, max_size=2),
)
@example(status=200, stored="²", length=None, content_range=None, hashes=[])  # was a ValueError: isdigit
@example(status=200, stored=None, length="１２", content_range=None, hashes=[])  # fullwidth digits were read as 12
def test_any_headers_are_checks_or_not_given(status, stored, length, content_range, hashes) -> None:
    headers = Message()
    for name, value in (
        ("x-goog-stored-content-length", stored),
        ("Content-Length", length),
        ("Content-Range", content_range),
    ):
        if value is not None:
            headers[name] = value
    for value in hashes:
        headers["x-goog-hash"] = value
    checks = server_checks(status, headers)
    assert checks.size is None or (isinstance(checks.size, int) and checks.size >= 0)
    assert checks.crc32c is None or 0 <= checks.crc32c < 2**32
    assert checks.md5 is None or len(checks.md5) == 16


ENTRIES = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.text(max_size=8),
            "size": st.integers(0, 10**12),
            "sha256": st.text("0123456789abcdef", max_size=64),
        }
    ),
    max_size=3,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)


@share(0.3)
@given(entries=ENTRIES)
def test_lock_files_read_back(entries: list[dict]) -> None:
    path = SCRATCH / "lock.json"
    path.write_text(json.dumps({"format_version": 1, "shards": entries}))
    assert read_lock(path) == {e["name"]: LockEntry(**e) for e in entries}


@share(0.5)
@given(content=st.binary(max_size=80) | JSON_VALUES.map(lambda v: json.dumps({"shards": v}).encode()))
@example(content=json.dumps({"shards": [{"name": "a", "size": "9" * 5000, "sha256": "0"}]}).encode())
@example(content=json.dumps({"shards": [{"name": 5, "size": 1, "sha256": "0"}]}).encode())  # was keyed 5, named "5"
def test_any_lock_bytes_are_entries_or_one_line(content: bytes) -> None:
    path = SCRATCH / "lock.json"
    path.write_bytes(content)
    try:
        entries = read_lock(path)
    except UsageError as error:
        assert_one_line(error)
    else:
        assert all(isinstance(name, str) and entry.name == name for name, entry in entries.items())
