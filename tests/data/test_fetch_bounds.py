"""Every wait of a fetch is bounded by default (docs/bounds.md#downloads), on a real loopback server.

A server that sends a few bytes and then stalls, or hangs up, again on every ``Range`` request,
delivers bytes on every attempt: counted as progress, they reset the attempt count forever. Real
progress is judged by rate, so such a fetch runs out of attempts, ends in one line and keeps its
``.part`` for a later resume.
"""

# ruff: noqa: F811 -- the fixtures ``bucket`` and ``server`` come from test_fetch and are named as arguments

from __future__ import annotations

import time
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.http_download import RetryPolicy
from tests.data.test_fetch import LAYOUT, bucket, error_line, server, shard_rel  # noqa: F401
from tests.data.test_fetch_damage import SHARD, fetch_one, raw
from tests.rlu_server import RluServer


@pytest.mark.parametrize("pattern", ["stall_every", "drop_every"])
def test_a_few_bytes_per_connection_is_no_progress(server: RluServer, bucket: Path, tmp_path: Path, pattern) -> None:
    path = server.path_of(SHARD)
    getattr(server.misbehave, pattern)[path] = 100
    policy = RetryPolicy(attempts=3, base_delay=0.2, timeout=0.5, min_rate=1024, rate_window=60)
    started = time.monotonic()
    (outcome,) = fetch_one(server, tmp_path, policy).outcomes
    elapsed = time.monotonic() - started
    assert outcome.status == "failed" and "gave up after 3 attempts without real progress" in outcome.message
    assert "partial download is kept" in outcome.message
    assert elapsed < policy.stall_bound()
    seen = server.gets(path)
    assert [r.range for r in seen] == [None, "bytes=100-", "bytes=200-"]  # resumed each time, kept each time
    part = raw(tmp_path) / (Path(SHARD).name + ".part")
    assert part.read_bytes() == (bucket / SHARD).read_bytes()[:300]
    getattr(server.misbehave, pattern).clear()
    (outcome,) = fetch_one(server, tmp_path, RetryPolicy(base_delay=0.01, timeout=5)).outcomes
    assert outcome.status == "fetched" and server.gets(path)[-1].range == "bytes=300-"
    assert (raw(tmp_path) / Path(SHARD).name).read_bytes() == (bucket / SHARD).read_bytes()


def test_the_cli_ends_a_stalling_server_in_one_line_with_the_default_rate(
    server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.misbehave.stall_every[server.path_of(shard_rel("Pong", 1, 0))] = 50
    argv = [
        "fetch", "rlu-atari", "--game", "Pong", "--run", "1", "--checkpoints", "0", "--data-dir", str(tmp_path),
        "--base-url", server.base_url, "--retry-delay", "0.01", "--timeout", "0.3", "--retries", "3",
    ]  # fmt: skip
    assert main(argv) == 2
    assert "without real progress (--min-rate 1024 B/s)" in error_line(capsys)
    assert (raw(tmp_path) / (Path(SHARD).name + ".part")).stat().st_size == 150


def test_a_flaky_but_fast_link_still_finishes(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    """Every connection drops after 2000 bytes, but they come fast: each attempt is real progress,
    so two attempts without progress are never used up and the shard completes."""
    path = server.path_of(SHARD)
    server.misbehave.drop_every[path] = 2000
    policy = RetryPolicy(attempts=2, base_delay=0.01, timeout=5, min_rate=1024)
    (outcome,) = fetch_one(server, tmp_path, policy).outcomes
    size = (bucket / SHARD).stat().st_size
    assert outcome.status == "fetched" and len(server.gets(path)) == -(-size // 2000) > 2
    assert (raw(tmp_path) / Path(SHARD).name).read_bytes() == (bucket / SHARD).read_bytes()


def test_the_default_bound_is_minutes() -> None:
    policy = RetryPolicy()
    assert policy.attempt_bound() == 60 + 60 + 60
    assert policy.stall_bound() == 5 * 180 + (1 + 2 + 4 + 8)  # 915 s: about 15 minutes
    assert RetryPolicy(deadline=100).stall_bound() == 100 + 180
    assert RetryPolicy(attempts=3, base_delay=0.2, timeout=0.5, rate_window=60).stall_bound() == pytest.approx(
        3 * 61 + 0.2 + 0.4
    )
