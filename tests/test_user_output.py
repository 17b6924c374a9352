"""What a command tells its user: the files it lists exist, and no third-party warning leaks into
its output (``collect``'s Minari dataset fields it has no value for)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from offline_gitd.cli import main

pytestmark = pytest.mark.e2e

DATASET = "tests/CartPole-v1/output-v0"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[warnings.WarningMessage]]:
    """A 100-step random CartPole collect, with every warning it raised."""
    root = tmp_path_factory.mktemp("collect")
    argv = ["collect", "CartPole-v1", "--steps", "100", "--policy", "random", "--out", DATASET]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*argv, "--data-dir", str(root), "--no-progress"]) == 0
    return root, caught


def test_collect_raises_no_minari_warning_for_fields_it_has_no_value_for(collected) -> None:
    _, caught = collected
    said = [str(item.message) for item in caught]
    assert not [text for text in said if "code_permalink" in text or "author_email" in text], said


def test_the_minari_warnings_are_silenced_in_collect_alone(tmp_path: Path, monkeypatch) -> None:
    """The filter is scoped to the call: Minari's own warning still reaches a caller of its API."""
    import gymnasium as gym
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    env.reset(seed=0)
    for _ in range(20):
        if any(env.step(env.action_space.sample())[2:4]):
            env.reset()
    with pytest.warns(UserWarning, match="`author_email` is set to None"):
        env.create_dataset(dataset_id="tests/CartPole-v1/direct-v0", algorithm_name="random", author="tests")


def test_train_with_no_evaluation_lists_only_the_files_it_wrote(collected, tmp_path: Path, capsys) -> None:
    root, _ = collected
    out = tmp_path / "run"
    argv = ["train", "--dataset", f"minari:{DATASET}", "--data-dir", str(root), "--out", str(out)]
    argv += ["--epochs", "1", "--steps-per-epoch", "5", "--eval-episodes", "0", "--seeds", "0", "--no-progress"]
    capsys.readouterr()
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert not (out / "results.csv").exists()
    listed = [line.strip() for line in printed.splitlines() if line.startswith("  /")]
    assert listed and all(Path(path).exists() for path in listed)
    assert str(out / "metrics.csv") in listed
    assert "no results.csv: with --eval-episodes 0 nothing was evaluated" in printed


def test_a_run_on_the_packages_own_dataset_submits_once_then_is_a_no_op(collected, tmp_path: Path, capsys) -> None:
    """A run on a dataset ``collect`` wrote (in no registry): ``--allow-new-env`` adds it, and the
    same submit again, without the flag, says there is nothing to add, exits 0 and changes nothing."""
    root, _ = collected
    out, board = tmp_path / "run", tmp_path / "board.csv"
    argv = ["train", "--dataset", f"minari:{DATASET}", "--data-dir", str(root), "--out", str(out)]
    argv += ["--epochs", "1", "--steps-per-epoch", "5", "--eval-episodes", "1", "--seeds", "0", "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["leaderboard", "submit", str(out), "--board", str(board)]) == 2
    assert "pass --allow-new-env" in capsys.readouterr().err
    assert main(["leaderboard", "submit", str(out), "--board", str(board), "--allow-new-env"]) == 0
    before = board.read_bytes()
    capsys.readouterr()
    assert main(["leaderboard", "submit", str(out), "--board", str(board)]) == 0
    assert "nothing to add: all 1 row(s) are already on" in capsys.readouterr().out
    assert board.read_bytes() == before
