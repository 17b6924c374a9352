"""Dataset manifests (docs/datasets.md#manifests): a content digest that tells equal recordings
from different ones, written and checked through the command line on real Minari datasets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.data.manifest import content_digest, differences


def _episode(obs: np.ndarray, **changes: np.ndarray) -> dict[str, np.ndarray]:
    episode = {
        "observations": obs,
        "actions": np.arange(len(obs) - 1),
        "rewards": np.ones(len(obs) - 1, np.float32),
        "terminations": np.zeros(len(obs) - 1, bool),
        "truncations": np.zeros(len(obs) - 1, bool),
    }
    return episode | changes


def test_the_digest_tells_content_and_layout_apart() -> None:
    obs = np.arange(12, dtype=np.float32).reshape(4, 3)
    same = content_digest([_episode(obs)])
    assert content_digest([_episode(obs.copy())]) == same
    assert content_digest([_episode(obs.reshape(4, 3, 1))]) != same  # same bytes, other shape
    assert content_digest([_episode(obs.astype(np.float64))]) != same
    assert content_digest([_episode(obs, rewards=np.array([1, 1, 2], np.float32))]) != same
    # episodes in another order, or split differently, are another dataset
    first, second = _episode(obs[:2]), _episode(obs[2:])
    assert content_digest([first, second]) != content_digest([second, first])


def test_differences_name_content_and_references_but_not_file_size() -> None:
    entry = {"episodes": 3, "steps": 30, "sha256": "a", "bytes": 10, "references": {"ref_min_score": 0.5}}
    assert differences(entry, dict(entry, bytes=11)) == []
    found = differences(entry, dict(entry, sha256="b", references={"ref_min_score": 0.6}))
    assert found == ["sha256 a here, b in the manifest", "ref_min_score 0.5 here, 0.6 in the manifest"]


def _record(data: Path, seed: int, overwrite: bool = False) -> None:
    argv = ["collect", "CartPole-v1", "--policy", "random", "--steps", "200", "--seed", str(seed)]
    argv += ["--out", "tests/cartpole/random-v0", "--data-dir", str(data), "--no-progress", "--no-tensorboard"]
    assert main(argv + (["--overwrite"] if overwrite else [])) == 0


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_recording_made_again_matches_its_manifest_and_another_does_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, manifest = tmp_path / "data", tmp_path / "manifest.json"
    _record(data, seed=0)
    assert (
        main(
            ["datasets", "manifest", "minari:tests/cartpole/random-v0", "--out", str(manifest), "--data-dir", str(data)]
        )
        == 0
    )
    (entry,) = json.loads(manifest.read_text())["datasets"]
    assert (entry["id"], entry["env"], entry["steps"]) == ("tests/cartpole/random-v0", "CartPole-v1", 200)
    code = entry["recorded_with"]  # the code and device that recorded it, committed with the manifest
    assert code["collected_on"] == "cpu" and (len(code["code_commit"]) == 40 or code["code_commit_reason"])
    assert "collected_cpu" in code  # the CPU kind: a recording repeats only on the same kind
    check = ["datasets", "manifest", "--check", "--out", str(manifest), "--data-dir", str(data)]
    # recorded again from nothing: the same transitions
    _record(data, seed=0, overwrite=True)
    capsys.readouterr()
    assert main(check) == 0
    assert "matches the manifest" in capsys.readouterr().out
    # another seed: other transitions, and the check says so
    _record(data, seed=1, overwrite=True)
    capsys.readouterr()
    assert main(check) == 1
    assert "sha256" in capsys.readouterr().out


def test_a_writer_waits_for_the_manifest_lock_and_keeps_the_other_writers_entry(tmp_path: Path) -> None:
    """Two packs of one manifest's datasets at once: the second reads the manifest only once the
    first has written it, so both entries are there (a read-modify-write without the lock could
    drop the first)."""
    import threading

    from offline_gitd.data.manifest import MANIFEST_VERSION, manifest_lock, read_manifest, write_manifest
    from offline_gitd.durable import file_lock

    manifest = tmp_path / "m.json"
    first = {"id": "a/first-v0", "sha256": "1" * 64}
    second = {"id": "a/second-v0", "sha256": "2" * 64}
    with file_lock(manifest_lock(manifest)):  # another writer is between its read and its write
        waiting = threading.Thread(target=write_manifest, args=(manifest, [second]))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive() and not manifest.exists()  # it waits for the lock
        manifest.write_text(json.dumps({"version": MANIFEST_VERSION, "datasets": [first]}))  # the holder's write
    waiting.join(10)
    assert not waiting.is_alive()
    assert [entry["id"] for entry in read_manifest(manifest)] == ["a/first-v0", "a/second-v0"]
