"""``offline_gitd fetch``: real HTTP against a loopback server serving real RLU-format shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.data.http_download import RetryPolicy
from offline_gitd.data.minari_fetch import minari_endpoint
from offline_gitd.data.paths import rlu_raw_dir
from offline_gitd.data.shard_verification import ServerChecks, parse_content_range, parse_goog_hash, same_object
from tests.rlu_server import RluServer
from tests.rlu_shards import make_synthetic_episode, write_rlu_episodes_shard

LAYOUT = "atari_episodes_ordered"


def shard_rel(game: str, run: int, shard: int, n: int = 50) -> str:
    return f"{LAYOUT}/{game}/run_{run}-{shard:05d}-of-{n:05d}"


@pytest.fixture(scope="module")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mirror folder with Pong run 1 checkpoints 0-3 as real episodes shards."""
    root = tmp_path_factory.mktemp("bucket")
    rng = np.random.default_rng(0)
    for checkpoint in range(4):
        path = root / shard_rel("Pong", 1, checkpoint)
        path.parent.mkdir(parents=True, exist_ok=True)
        episodes = [
            make_synthetic_episode(rng, 40 + 10 * i, checkpoint, 3 * checkpoint + i, i % 2 == 0) for i in range(3)
        ]
        write_rlu_episodes_shard(path, episodes)
    return root


@pytest.fixture
def server(bucket: Path) -> RluServer:
    with RluServer(bucket, prefix="/mirror/rl_unplugged") as srv:
        yield srv


def fetch(server: RluServer, data_dir: Path, *extra: str) -> int:
    return main(
        [
            "fetch", "rlu-atari", "--game", "Pong", "--run", "1", "--checkpoints", "0-2",
            "--data-dir", str(data_dir), "--base-url", server.base_url,
            "--retry-delay", "0.01", "--timeout", "5", *extra,
        ]
    )  # fmt: skip


def local_dir(data_dir: Path) -> Path:
    return rlu_raw_dir(data_dir, LAYOUT, "Pong")


def error_line(captured: pytest.CaptureFixture[str]) -> str:
    """The CLI's error: exactly one line starting with ``offline_gitd: error:``."""
    lines = [line for line in captured.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_whole_download_writes_verified_files_and_lock(
    server: RluServer, bucket: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fetch(server, tmp_path, "--jobs", "3") == 0
    directory = local_dir(tmp_path)
    names = [f"run_1-{i:05d}-of-00050" for i in range(3)]
    for i, name in enumerate(names):
        assert (directory / name).read_bytes() == (bucket / shard_rel("Pong", 1, i)).read_bytes()
    assert not list(directory.glob("*.part"))
    lock = json.loads((directory / "run_1.lock.json").read_text())
    assert [e["name"] for e in lock["shards"]] == names
    assert all(len(e["sha256"]) == 64 and e["size"] > 0 for e in lock["shards"])
    out = capsys.readouterr().out
    assert "fetched 3 shard(s)" in out and "failed 0" in out and str(directory) in out


def test_base_url_is_honoured(server: RluServer, tmp_path: Path) -> None:
    assert fetch(server, tmp_path, "--checkpoints", "3") == 0
    assert [r.path for r in server.gets()] == ["/mirror/rl_unplugged/atari_episodes_ordered/Pong/run_1-00003-of-00050"]


def test_dropped_connection_is_resumed_with_range(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    path = server.path_of(shard_rel("Pong", 1, 1))
    server.misbehave.drop_once.add(path)
    assert fetch(server, tmp_path) == 0
    seen = server.gets(path)
    assert len(seen) == 2 and seen[0].range is None
    assert seen[1].range is not None and seen[1].range.startswith("bytes=")
    assert int(seen[1].range.removeprefix("bytes=").rstrip("-")) > 0
    expected = (bucket / shard_rel("Pong", 1, 1)).read_bytes()
    assert (local_dir(tmp_path) / "run_1-00001-of-00050").read_bytes() == expected


def test_server_ignoring_range_restarts_from_zero(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    path = server.path_of(shard_rel("Pong", 1, 0))
    server.misbehave.drop_once.add(path)
    server.misbehave.ignore_range = True
    assert fetch(server, tmp_path, "--checkpoints", "0") == 0
    expected = (bucket / shard_rel("Pong", 1, 0)).read_bytes()
    assert (local_dir(tmp_path) / "run_1-00000-of-00050").read_bytes() == expected


def test_transient_http_error_is_retried(server: RluServer, tmp_path: Path) -> None:
    path = server.path_of(shard_rel("Pong", 1, 2))
    server.misbehave.error_once[path] = 503
    assert fetch(server, tmp_path, "--checkpoints", "2") == 0
    assert len(server.gets(path)) == 2


def test_retries_give_up_with_one_line(server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server.misbehave.error_once[server.path_of(shard_rel("Pong", 1, 2))] = 503
    assert fetch(server, tmp_path, "--checkpoints", "2", "--retries", "1") == 2
    line = error_line(capsys)
    assert "gave up after 1 attempts without real progress" in line and "HTTP 503" in line


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    assert [policy.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_corrupt_body_is_refused_and_deleted(
    server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.misbehave.corrupt.add(server.path_of(shard_rel("Pong", 1, 1)))
    assert fetch(server, tmp_path) == 2
    directory = local_dir(tmp_path)
    assert not (directory / "run_1-00001-of-00050").exists()
    assert not (directory / "run_1-00001-of-00050.part").exists()
    assert (directory / "run_1-00000-of-00050").exists()  # the good shards still land
    line = error_line(capsys)
    assert "crc32c" in line and "md5" in line and "deleted the bad download" in line


def test_missing_shard_is_a_one_line_404(server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fetch(server, tmp_path, "--checkpoints", "7") == 2
    line = error_line(capsys)
    assert "HTTP 404" in line and "--base-url" in line and "run_1-00007-of-00050" in line
    assert len(server.gets()) == 1  # a 404 is not retried


def test_second_run_downloads_nothing(server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fetch(server, tmp_path) == 0
    before = len(server.gets())
    capsys.readouterr()
    assert fetch(server, tmp_path) == 0
    assert len(server.gets()) == before
    out = capsys.readouterr().out
    assert "fetched 0 shard(s)" in out and "skipped 3" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--game", "Pongg", "--run", "1"], "valid games: Alien, Amidar"),
        (["--game", "Pong", "--run", "6"], "valid runs: 1, 2, 3, 4, 5"),
        (["--game", "Pong", "--run", "1", "--checkpoints", "50"], "valid: 0-49"),
        (["--game", "Carnival", "--run", "1", "--checkpoints", "0,49"], "valid: 0-48"),
        (["--game", "Pong", "--run", "1", "--checkpoints", "3-1"], "end before start"),
        (["--game", "Pong", "--run", "1", "--layout", "frames"], "valid layouts: episodes"),
        (
            ["--game", "Pong", "--run", "1", "--layout", "transitions", "--checkpoints", "0"],
            "episodes layout only",
        ),
    ],
)
def test_bad_request_names_valid_values(
    argv: list[str],
    expected: str,
    server: RluServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["fetch", "rlu-atari", *argv, "--data-dir", str(tmp_path), "--base-url", server.base_url])
    assert code == 2
    assert expected in error_line(capsys)
    assert server.gets() == []


def test_lock_mismatch_of_a_new_download_is_refused(
    server: RluServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fetch(server, tmp_path) == 0
    directory = local_dir(tmp_path)
    lock_file = directory / "run_1.lock.json"
    lock = json.loads(lock_file.read_text())
    lock["shards"][1]["sha256"] = "0" * 64
    lock_file.write_text(json.dumps(lock))
    (directory / "run_1-00001-of-00050").unlink()
    capsys.readouterr()
    assert fetch(server, tmp_path) == 2
    assert "recorded in run_1.lock.json" in error_line(capsys)
    assert not (directory / "run_1-00001-of-00050").exists()
    assert not (directory / "run_1-00001-of-00050.part").exists()


def test_local_copy_not_matching_lock_is_downloaded_again(
    server: RluServer, bucket: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fetch(server, tmp_path) == 0
    shard = local_dir(tmp_path) / "run_1-00002-of-00050"
    shard.write_bytes(b"bit rot" + shard.read_bytes()[7:])
    capsys.readouterr()
    assert fetch(server, tmp_path) == 0
    assert shard.read_bytes() == (bucket / shard_rel("Pong", 1, 2)).read_bytes()
    out = capsys.readouterr().out
    assert "did not match run_1.lock.json" in out and "fetched 1 shard(s)" in out


def test_partial_file_from_an_earlier_run_is_resumed(server: RluServer, bucket: Path, tmp_path: Path) -> None:
    expected = (bucket / shard_rel("Pong", 1, 0)).read_bytes()
    directory = local_dir(tmp_path)
    directory.mkdir(parents=True)
    (directory / "run_1-00000-of-00050.part").write_bytes(expected[:1000])
    assert fetch(server, tmp_path, "--checkpoints", "0") == 0
    assert [r.range for r in server.gets()] == ["bytes=1000-"]
    assert (directory / "run_1-00000-of-00050").read_bytes() == expected


def test_without_hashes_size_and_lock_still_verify(server: RluServer, tmp_path: Path) -> None:
    server.misbehave.send_hashes = False
    assert fetch(server, tmp_path, "--checkpoints", "0") == 0
    assert (local_dir(tmp_path) / "run_1.lock.json").exists()


def test_header_parsers() -> None:
    assert parse_content_range("bytes 100-199/200") == (100, 199, 200)
    assert parse_content_range("bytes 0-9/*") == (0, 9, None)
    assert parse_content_range("garbage") is None
    crc, md5 = parse_goog_hash(["crc32c=4waSgw==", "md5=1B2M2Y8AsgTpgAmY7PhCfg=="])
    assert crc == 0xE3069283 and md5 is not None and md5.hex() == "d41d8cd98f00b204e9800998ecf8427e"
    assert parse_goog_hash(["crc32c=!!,md5=short"]) == (None, None)
    assert same_object(ServerChecks(10, 1, None), ServerChecks(10, None, b"x"))
    assert not same_object(ServerChecks(10, 1, None), ServerChecks(11, 1, None))


def test_minari_endpoint_follows_env() -> None:
    assert minari_endpoint({}) == ("huggingface.co", 443)
    assert minari_endpoint({"HF_ENDPOINT": "http://127.0.0.1:9"}) == ("127.0.0.1", 9)
    assert minari_endpoint({"MINARI_REMOTE": "gcp://bucket"}) == ("storage.googleapis.com", 443)
    assert minari_endpoint({"HTTPS_PROXY": "http://proxy:3128"}) == ("proxy", 3128)


def test_fetch_minari_without_network_fails_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: like no network
    start = time.monotonic()
    code = main(["fetch", "minari", "mujoco/halfcheetah/medium-v0", "--data-dir", str(tmp_path)])
    assert code == 2 and time.monotonic() - start < 10
    assert "cannot reach the Minari remote" in error_line(capsys)


def test_fetch_minari_bad_id_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fetch", "minari", "halfcheetah"]) == 2
    assert "expected namespace/name-vN" in error_line(capsys)


def test_fetch_minari_unknown_id_fails_fast(server: RluServer, tmp_path: Path) -> None:
    """A reachable remote that knows no such dataset: minari's error becomes one line, quickly.

    huggingface_hub reads HF_ENDPOINT at import, hence a fresh interpreter.
    """
    env = {**os.environ, "HF_ENDPOINT": server.base_url.rsplit("/mirror", 1)[0]}
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", "fetch", "minari", "nobody/nothing-v0",
         "--data-dir", str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2 and time.monotonic() - start < 10
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "minari could not download 'nobody/nothing-v0'" in errors[0]
