"""``fetch`` from an ordered list of sources: a dead or lacking one is skipped, a lying one is
refused in one line naming it, and the lock file says where each shard came from (real HTTP
against loopback servers: one good, one dead, one serving other bytes with matching headers)."""

# ruff: noqa: F811 -- the fixtures ``bucket`` and ``server`` come from test_fetch and are named as arguments

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.registry import load_rlu_registry, registry_from_dict
from tests.data.test_fetch import LAYOUT, bucket, error_line, local_dir, server, shard_rel  # noqa: F401
from tests.rlu_server import RluServer

NAME = "run_1-00000-of-00050"


@pytest.fixture(scope="module")
def lying_bucket(bucket: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bucket with one byte of every shard changed: a mirror that serves other bytes, with
    headers (size, crc32c, md5) that match what it serves."""
    root = tmp_path_factory.mktemp("liar")
    shutil.copytree(bucket, root, dirs_exist_ok=True)
    for path in root.rglob("run_*"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    return root


@pytest.fixture
def dead_url(tmp_path: Path) -> str:
    """The base URL of a server that was started and stopped: nothing listens there any more."""
    with RluServer(tmp_path, prefix="/dead") as gone:
        url = gone.base_url
    return url


def fetch(data_dir: Path, *sources: str, extra: tuple[str, ...] = ()) -> int:
    argv = ["fetch", "rlu-atari", "--game", "Pong", "--run", "1", "--checkpoints", "0", "--data-dir", str(data_dir)]
    for source in sources:
        argv += ["--base-url", source]
    return main([*argv, "--retry-delay", "0.01", "--timeout", "2", "--retries", "2", *extra])


def lock_sources(data_dir: Path) -> dict[str, str]:
    lock = json.loads((local_dir(data_dir) / "run_1.lock.json").read_text())
    return {entry["name"]: entry["source"] for entry in lock["shards"]}


def test_a_dead_source_falls_back_to_the_next_and_info_names_it(
    server: RluServer, bucket: Path, dead_url: str, tmp_path: Path, capsys
) -> None:
    assert fetch(tmp_path, dead_url, server.base_url) == 0
    assert (local_dir(tmp_path) / NAME).read_bytes() == (bucket / shard_rel("Pong", 1, 0)).read_bytes()
    assert lock_sources(tmp_path) == {NAME: f"{server.base_url}/{shard_rel('Pong', 1, 0)}"}
    out = capsys.readouterr().out
    assert f"note     {NAME}: {dead_url}/" in out  # the dead source is reported, not hidden
    assert main(["datasets", "info", "rlu-atari:Pong/1:0", "--data-dir", str(tmp_path)]) == 0
    assert f"in lock, from {server.base_url}/" in capsys.readouterr().out


def test_a_source_that_lacks_the_shard_falls_back(server: RluServer, tmp_path: Path) -> None:
    with RluServer(tmp_path / "empty", prefix="/empty") as empty:
        assert fetch(tmp_path / "data", empty.base_url, server.base_url) == 0
        assert len(empty.gets()) == 1  # a 404 is not retried
    assert lock_sources(tmp_path / "data")[NAME].startswith(server.base_url)


def test_a_lying_mirror_is_refused_against_the_lock_in_one_line(
    server: RluServer, lying_bucket: Path, dead_url: str, tmp_path: Path, capsys
) -> None:
    assert fetch(tmp_path, server.base_url) == 0
    (local_dir(tmp_path) / NAME).unlink()
    capsys.readouterr()
    with RluServer(lying_bucket, prefix="/liar") as liar:
        assert fetch(tmp_path, dead_url, liar.base_url) == 2
    line = error_line(capsys)
    assert f"refused the bytes of {liar.base_url}/" in line and "recorded in run_1.lock.json" in line
    assert not (local_dir(tmp_path) / NAME).exists() and not list(local_dir(tmp_path).glob("*.part"))


def test_a_mirror_describing_another_object_than_the_first_source_is_refused_before_its_bytes(
    server: RluServer, bucket: Path, lying_bucket: Path, tmp_path: Path, capsys
) -> None:
    """The first source answers (fixing the object's hashes), sends 1000 bytes per connection and
    stalls until it runs out of attempts; the lying mirror is refused before a byte of it is kept;
    a good mirror then resumes from the first source's bytes."""
    server.misbehave.stall_every[server.path_of(shard_rel("Pong", 1, 0))] = 1000
    with RluServer(lying_bucket, prefix="/liar") as liar:
        assert fetch(tmp_path, server.base_url, liar.base_url, extra=("--timeout", "0.3", "--min-rate", "100000")) == 2
        line = error_line(capsys)
        assert f"refused {liar.base_url}/" in line and "another object than the first source" in line
        part = local_dir(tmp_path) / f"{NAME}.part"
        assert part.read_bytes() == (bucket / shard_rel("Pong", 1, 0)).read_bytes()[:2000]
        with RluServer(bucket, prefix="/good") as good:
            assert (
                fetch(
                    tmp_path,
                    server.base_url,
                    liar.base_url,
                    good.base_url,
                    extra=("--timeout", "0.3", "--min-rate", "100000"),
                )
                == 0
            )
            assert [r.range for r in good.gets()] == ["bytes=4000-"]  # two more stalled attempts, 1000 each
    assert (local_dir(tmp_path) / NAME).read_bytes() == (bucket / shard_rel("Pong", 1, 0)).read_bytes()
    assert lock_sources(tmp_path)[NAME].startswith(good.base_url)


def test_the_registry_lists_mirrors_after_the_bucket() -> None:
    registry = load_rlu_registry()
    assert registry.sources() == (registry.base_url, *registry.mirrors)
    assert registry.sources(["http://a/", "http://b"]) == ("http://a", "http://b")
    raw = json.loads((Path(__file__).parents[2] / "datasets" / "rlu_atari.json").read_text())
    mirrored = registry_from_dict({**raw, "mirrors": ["https://mirror.example/rl_unplugged/"]})
    assert mirrored.sources() == (registry.base_url, "https://mirror.example/rl_unplugged")
    with pytest.raises(ValueError, match="mirrors must be a list of http"):
        registry_from_dict({**raw, "mirrors": ["ftp://x"]})
