"""One data root (docs/datasets.md): ``--data-dir`` or ``$OFFLINE_GITD_DATA`` moves Minari data too, and
every command the CLI prints as a hint works when pasted as it is."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.data.paths import minari_datasets_dir

pytestmark = pytest.mark.usefixtures("jax_compilation_cache")


def test_minari_root_follows_the_data_root() -> None:
    env = {"OFFLINE_GITD_DATA": "/data", "MINARI_DATASETS_PATH": "/m"}
    assert minari_datasets_dir("/d", env) == Path("/d/minari")
    assert minari_datasets_dir(None, env) == Path("/data/minari")
    assert minari_datasets_dir(None, {"MINARI_DATASETS_PATH": "/m"}) == Path("/m")


def _hint(text: str, prefix: str) -> list[str]:
    """The command after ``prefix`` in ``text``, split as a shell would, without ``offline_gitd``."""
    line = next(line for line in text.splitlines() if prefix in line)
    command = shlex.split(line.split(prefix, 1)[1].split("  (")[0])
    assert command[0] == "offline_gitd"
    return command[1:]


def test_hints_after_collect_and_for_a_missing_dataset_work(tmp_path, monkeypatch, capsys) -> None:
    data = tmp_path / "my data"  # a space: hints must quote paths
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari-default"))
    monkeypatch.delenv("OFFLINE_GITD_DATA", raising=False)
    train_flags = ["--epochs", "1", "--steps-per-epoch", "5", "--eval-episodes", "0", "--mlp-hidden", "8"]
    missing = ["train", "--dataset", "minari:tests/hint/random-v0", "--data-dir", str(data), "--out", "x"]
    assert main(missing) == 2
    fetch = _hint(capsys.readouterr().err, "get it with: ")
    assert fetch == ["fetch", "minari", "tests/hint/random-v0", "--data-dir", str(data)]

    collect = ["collect", "CartPole-v1", "--policy", "random", "--steps", "60", "--out", "tests/hint/random-v0"]
    assert main([*collect, "--data-dir", str(data), "--no-progress"]) == 0
    assert (data / "minari" / "tests" / "hint" / "random-v0").is_dir()
    hint = _hint(capsys.readouterr().out, "train on it with: ")
    run_dir = tmp_path / "run"
    argv = [str(run_dir) if word == "RUN_DIR" else word for word in hint]
    assert main([*argv, *train_flags, "--no-progress"]) == 0
    assert (run_dir / "config.json").exists()


def test_collect_refuses_a_malformed_id_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    assert main(["collect", "CartPole-v1", "--steps", "10", "--out", "badid", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad Minari dataset id 'badid': expected [namespace/]name-vN" in err
