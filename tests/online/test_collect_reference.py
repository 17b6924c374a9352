"""``collect`` evaluates the behaviour agent's final policy the way the offline runs are evaluated
(epsilon 0.001, 100 episodes by default) and records it beside the training return, with the
commit facts of the code that recorded the data (docs/datasets.md#collecting-datasets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.leaderboard.board_references import from_metadata
from offline_gitd.rundir.provenance import cpu_kind

pytestmark = pytest.mark.usefixtures("jax_compilation_cache")


def collect(tmp_path: Path, name: str, *extra: str) -> dict:
    """A 600-step CartPole recording by the behaviour DQN (its table's schedule); its metadata."""
    data = tmp_path / "data"
    dataset = f"tests/cartpole/{name}-v0"
    argv = ["collect", "CartPole-v1", "--steps", "600", "--out", dataset, "--data-dir", str(data), "--no-progress"]
    assert main([*argv, *extra]) == 0
    return json.loads((data / "minari" / dataset / "data" / "metadata.json").read_text())


def test_the_final_policy_is_evaluated_at_the_runs_epsilon_and_kept_as_a_reference(tmp_path: Path) -> None:
    metadata = collect(tmp_path, "dqn")
    assert metadata["behaviour_eval_episodes"] == 100 and metadata["behaviour_eval_epsilon"] == 0.001
    assert metadata["behaviour_eval_step"] == 600  # the last checkpoint: the final policy
    assert metadata["behaviour_eval_score"] >= 8.0 and metadata["behaviour_eval_score_std"] >= 0.0
    assert (
        "behaviour_eval_score: the behaviour agent's final policy's mean return over 100 episodes at epsilon 0.001"
        in (metadata["description"])
    )
    reference = from_metadata("minari", "CartPole", "tests/cartpole/dqn-v0", metadata, "metadata.json")
    assert reference.behaviour_eval_score == metadata["behaviour_eval_score"]
    assert reference.ref_max_score == metadata["ref_max_score"]  # the training return stays beside it
    # the code and device that recorded the data
    commit, dirty = metadata["code_commit"], metadata["code_dirty"]
    assert (len(commit) == 40 and dirty in ("true", "false")) or (commit == "" and metadata["code_commit_reason"])
    assert (len(metadata["code_diff_sha256"]) == 64) == (dirty == "true")
    assert metadata["collected_on"] == "cpu" and metadata["code_version"]
    assert metadata["collected_cpu"] == (cpu_kind() or "")


def test_at_epsilon_one_the_evaluation_is_the_random_reference(tmp_path: Path) -> None:
    """Every action replaced by a uniform one: the same seeded episodes as the random reference's,
    whatever the policy, so the two means agree exactly."""
    metadata = collect(tmp_path, "uniform", "--reference-epsilon", "1")
    assert metadata["behaviour_eval_epsilon"] == 1.0
    assert metadata["behaviour_eval_score"] == metadata["ref_min_score"]


def test_zero_episodes_skip_it_and_bad_values_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    metadata = collect(tmp_path, "skipped", "--reference-episodes", "0")
    assert not any(key.startswith("behaviour_eval") for key in metadata)
    argv = ["collect", "CartPole-v1", "--steps", "10", "--out", "tests/x/y-v0", "--data-dir", str(tmp_path / "d")]
    assert main([*argv, "--reference-epsilon", "1.5"]) == 2
    assert "--reference-epsilon must be in [0, 1], got 1.5" in capsys.readouterr().err
    assert main([*argv, "--reference-episodes", "-1"]) == 2
    assert "--reference-episodes" in capsys.readouterr().err
