"""Checkpoints on episode boundaries and mid-episode: the run completes, resumes from each, and
ends bit for bit where a run that never stopped ends (docs/online.md#resume).

A checkpoint on a boundary is where the seed's episode has just ended and the next one holds no
action yet: on an env with fixed-length episodes (Pendulum's 200 steps, MuJoCo's 1,000) that is
every checkpoint of every run, and the continuous-action host state once failed to save there.
Each case stops a run at a boundary, resumes it, stops it again mid-episode, resumes it to the
end, and compares it with the uninterrupted run: the final training state, ``episodes.csv``, the
final host state (replay, RNGs, running episodes) and, where the stops fall on the logging grid,
``metrics.csv`` and ``results.csv`` too. The quick cases run by default (seconds each); the
full-length ones (the issue's commands, Pendulum's real 200-step episodes) are marked ``slow``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

from offline_gitd.cli import main
from offline_gitd.online.train import resume_config, train
from offline_gitd.rundir.seals import read_sealed_arrays
from tests.online.test_online import final_params, read_rows, tiny

# Columns that say when or where a row was written, not what the run computed.
WALL_CLOCK = {"window_seconds", "created_at", "run_id"}


@pytest.fixture(scope="module", autouse=True)
def compilation_cache(jax_compilation_cache):
    """The straight and the stopped runs compile the same programs: compile them once."""
    yield


def episode_ends(run_dir: Path) -> dict[int, set[int]]:
    """``{step: seeds whose episode ended at that step}`` from ``episodes.csv``."""
    ends: dict[int, set[int]] = {}
    for row in read_rows(run_dir / "episodes.csv"):
        ends.setdefault(int(row["step"]), set()).add(int(row["seed"]))
    return ends


def without(rows: list[dict[str, str]], columns: set[str]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in columns} for row in rows]


def run_in_stops(out: Path, stops: list[int], **config: Any) -> None:
    """Run to ``stops[0]``, then resume to each next stop (``--steps`` is all a resume changes)."""
    train(tiny(out, steps=stops[0], **config), progress=False)
    for steps in stops[1:]:
        train(resume_config(out, {"steps": steps}), resume=True, progress=False)


def assert_same_run(straight: Path, stopped: Path, steps: int, config: Any, on_log_grid: bool) -> None:
    """Bit for bit: training state, episodes, the final host state; the logs too when every stop
    is a step the straight run logged at (otherwise the stopped run's extra log rows make its
    windows, and each seed's repeated ``last_result``, differ by design)."""
    for x, y in zip(
        jax.tree.leaves(final_params(straight, config)), jax.tree.leaves(final_params(stopped, config)), strict=True
    ):
        np.testing.assert_array_equal(x, y)
    assert read_rows(straight / "episodes.csv") == read_rows(stopped / "episodes.csv")
    (arrays_a, meta_a), (arrays_b, meta_b) = (
        read_sealed_arrays(run / "host_state" / f"{steps}.npz") for run in (straight, stopped)
    )
    assert arrays_a.keys() == arrays_b.keys()
    for name, value in arrays_a.items():
        assert (value.dtype, value.shape) == (arrays_b[name].dtype, arrays_b[name].shape), name
        assert value.tobytes() == arrays_b[name].tobytes(), name
    if not on_log_grid:
        for meta in (meta_a, meta_b):
            for slot in meta["slots"]:
                slot.pop("last_result")
    assert meta_a == meta_b
    if on_log_grid:
        for name in ("metrics.csv", "results.csv"):
            assert without(read_rows(straight / name), WALL_CLOCK) == without(read_rows(stopped / name), WALL_CLOCK)


def boundary_and_middle(ends: dict[int, set[int]], after: int, before: int) -> tuple[int, int]:
    """A step where seed 0's episode ended (seed 1 may be anywhere), then a later one where no
    seed's did, both in ``(after, before)``."""
    boundary = min(step for step, seeds in ends.items() if 0 in seeds and after < step < before)
    middle = next(step for step in range(boundary + 3, before) if step not in ends)
    return boundary, middle


# -- quick cases -------------------------------------------------------------------------------

SAC = dict(algo="sac", env="Pendulum-v1", T=None, K=2, seeds="0-1", initial_samples=30)


@pytest.mark.e2e
def test_sac_resumes_from_a_boundary_and_mid_episode(tmp_path: Path) -> None:
    """Pendulum with 40-step episodes (``--horizon``: truncated, never terminated): both seeds are
    reset at step 80, the first stop; 100 is mid-episode. Both stops lie on the logging grid."""
    config = dict(SAC, horizon=40, log_every=20, checkpoint_every=40)
    steps = 120
    train(tiny(tmp_path / "straight", steps=steps, **config), progress=False)
    ends = episode_ends(tmp_path / "straight")
    assert ends[80] == {0, 1} and 100 not in ends
    run_in_stops(tmp_path / "stopped", [80, 100, steps], **config)
    assert sorted(p.name for p in (tmp_path / "stopped" / "host_state").iterdir()) == ["100.npz", "120.npz"]
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", steps, tiny(tmp_path, steps=steps, **config), True)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("env", "extra"),
    [
        ("CartPole-v1", dict(per=True, n_step=3)),  # episodes end by termination, at different steps per seed
        # ... and by truncation at the horizon; image observations (uint8 [10, 10, 4]). Under `slow`:
        # the default run keeps one DQN case (make test from a fresh clone stays inside its budget).
        pytest.param("CartPole-v1", dict(horizon=12), marks=pytest.mark.slow),
        pytest.param("MinAtar/Breakout-v1", dict(mlp_hidden="16", utd=0.5), marks=pytest.mark.slow),
    ],
)
def test_dqn_resumes_from_a_boundary_and_mid_episode(tmp_path: Path, env: str, extra: dict[str, Any]) -> None:
    """The first stop is a step where seed 0's episode ended (seed 1 is then mid-episode: seeds
    in different phases), the second one is mid-episode for both."""
    config = dict(algo="dqn", env=env, seeds="0-1", initial_samples=40, log_every=50, checkpoint_every=100, **extra)
    steps = 160
    train(tiny(tmp_path / "straight", steps=steps, **config), progress=False)
    ends = episode_ends(tmp_path / "straight")
    boundary, middle = boundary_and_middle(ends, 40, steps - 5)
    run_in_stops(tmp_path / "stopped", [boundary, middle, steps], **config)
    on_grid = boundary % 50 == 0 and middle % 50 == 0
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", steps, tiny(tmp_path, steps=steps, **config), on_grid)


@pytest.mark.e2e
def test_collect_on_a_boundary_completes_and_its_run_resumes(tmp_path: Path, monkeypatch, capsys) -> None:
    """``collect`` on Pendulum (50-step episodes here), whose last step ends an episode: the dataset
    is written, and the behaviour agent's run directory (``--run-dir``) resumes, through a
    mid-episode stop, to the run of a longer collect that never stopped."""
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    common = ["--horizon", "50", "--no-progress", "--data-dir", str(tmp_path / "data")]
    for steps, name in ((100, "stopped"), (160, "straight")):
        argv = ["collect", "Pendulum-v1", "--steps", str(steps), "--out", f"tests/Pendulum-v1/{name}-v0"]
        assert main([*argv, "--run-dir", str(tmp_path / name), *common]) == 0
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "data" / "minari"))
    dataset = minari.load_dataset("tests/Pendulum-v1/stopped-v0")
    assert dataset.total_steps == 100 and [len(e.rewards) for e in dataset.iterate_episodes()] == [50, 50]
    # SAC's 5,000 initial random samples cover all 100 steps: the metadata says it never trained.
    metadata = dataset.storage.metadata
    assert (metadata["behaviour_policy"], metadata["behaviour_random_steps"], metadata["behaviour_updates"]) == (
        "sac",
        100,
        0,
    )
    assert "behaviour agent that never trained (0 gradient updates)" in metadata["description"]
    for steps in ("130", "160"):
        resume = ["online", "sac", "--out", str(tmp_path / "stopped"), "--resume", "--steps", steps]
        assert main([*resume, "--no-progress"]) == 0
    capsys.readouterr()
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", 160, resume_config(tmp_path / "straight"), False)


# -- full length -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.e2e
def test_the_issues_sac_command_completes_and_resumes_at_full_size(tmp_path: Path, capsys) -> None:
    """``online sac --env Pendulum-v1 --steps 1000 --seeds 0 --initial-samples 200`` with the paper's
    networks and Pendulum's own 200-step episodes: every checkpoint (200, 400, ...) is a boundary.
    Stopped at 400 (a boundary) and 500 (mid-episode), resumed to 1000: the same run."""
    argv = ["online", "sac", "--env", "Pendulum-v1", "--seeds", "0", "--initial-samples", "200", "--no-progress"]
    grid = ["--log-every", "100", "--checkpoint-every", "200"]
    assert main([*argv, *grid, "--steps", "1000", "--out", str(tmp_path / "straight")]) == 0
    assert main([*argv, *grid, "--steps", "400", "--out", str(tmp_path / "stopped")]) == 0
    for steps in ("500", "1000"):
        resume = ["online", "sac", "--out", str(tmp_path / "stopped"), "--resume", "--steps", steps]
        assert main([*resume, "--no-progress"]) == 0
    capsys.readouterr()
    assert sorted(episode_ends(tmp_path / "straight")) == [200, 400, 600, 800, 1000]
    config = resume_config(tmp_path / "straight")
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", 1000, config, True)


@pytest.mark.slow
@pytest.mark.e2e
def test_the_issues_collect_command_completes(tmp_path: Path, monkeypatch, capsys) -> None:
    """``collect Pendulum-v1 --steps 2000``: its one checkpoint (step 2000) ends the tenth episode."""
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    argv = ["collect", "Pendulum-v1", "--steps", "2000", "--out", "tests/Pendulum-v1/sac-v0", "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    dataset = minari.load_dataset("tests/Pendulum-v1/sac-v0")
    assert dataset.total_steps == 2000 and dataset.total_episodes == 10


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize("env", ["CartPole-v1", "MinAtar/Breakout-v1"])
def test_dqn_at_its_default_size_resumes_from_a_boundary_and_mid_episode(tmp_path: Path, env: str) -> None:
    """The domain's own networks and schedule (CartPole: the Gym table; Breakout: the MinAtar one),
    2,000 steps past the initial random samples, stopped on a boundary of seed 0 and mid-episode."""
    config = dict(algo="dqn", env=env, seeds="0-1", initial_samples=1000, log_every=500, checkpoint_every=1000)
    full = dict(critic="gitd", K=3, mlp_hidden=None, batch_size=None, T=None)
    steps = 3000
    train(tiny(tmp_path / "straight", steps=steps, **config, **full), progress=False)
    boundary, middle = boundary_and_middle(episode_ends(tmp_path / "straight"), 1000, steps - 100)
    run_in_stops(tmp_path / "stopped", [boundary, middle, steps], **config, **full)
    cfg = tiny(tmp_path, steps=steps, **config, **full)
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", steps, cfg, False)


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("algo", "env", "extra"),
    [
        # Truncation by the env's own time limit (200 steps, no termination for an untrained agent):
        # both seeds reset together, so every checkpoint at a multiple of 200 is a boundary of both.
        ("dqn", "MountainCar-v0", dict()),
        # MuJoCo: early termination when Hopper falls (episodes of tens of steps, a different length
        # per seed), continuous actions.
        ("sac", "Hopper-v5", dict(K=2)),
    ],
)
def test_mountaincar_and_hopper_resume_from_a_boundary_and_mid_episode_and_evaluate(
    tmp_path: Path, capsys, algo: str, env: str, extra: dict[str, Any]
) -> None:
    """The rest of the envs of the matrix (docs/online.md#resume): stopped where seed 0's episode
    ended and then mid-episode, resumed to the end, the same run; ``evaluate`` then plays the
    resumed run's last checkpoint."""
    config = dict(algo=algo, env=env, seeds="0-1", initial_samples=40, log_every=50, checkpoint_every=100, **extra)
    steps = 500
    train(tiny(tmp_path / "straight", steps=steps, **config), progress=False)
    ends = episode_ends(tmp_path / "straight")
    if env == "MountainCar-v0":
        assert ends == {200: {0, 1}, 400: {0, 1}}
    boundary, middle = boundary_and_middle(ends, 40, steps - 5)
    run_in_stops(tmp_path / "stopped", [boundary, middle, steps], **config)
    on_grid = boundary % 50 == 0 and middle % 50 == 0
    assert_same_run(tmp_path / "straight", tmp_path / "stopped", steps, tiny(tmp_path, steps=steps, **config), on_grid)
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "stopped"), "--episodes", "2"]) == 0
    printed = capsys.readouterr().out
    assert "seed 0" in printed and "seed 1" in printed, printed


def test_episode_ends_reads_the_steps_and_seeds(tmp_path: Path) -> None:
    with (tmp_path / "episodes.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["step", "seed", "episode", "return", "length"])
        writer.writerows([[5, 0, 0, 1.0, 5], [5, 1, 0, 1.0, 5], [9, 1, 1, 1.0, 4]])
    assert episode_ends(tmp_path) == {5: {0, 1}, 9: {1}}
    assert boundary_and_middle({5: {0, 1}, 9: {1}, 12: {0}}, 0, 20) == (5, 8)
