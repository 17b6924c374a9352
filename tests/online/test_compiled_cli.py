"""``offline_gitd online dqn --loop compiled``: the Python loop's run directory and rules, its
refusals before anything is written, ``evaluate`` on its checkpoints, and its exact resume."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from offline_gitd.choices import JAX_ENV_IDS
from offline_gitd.cli import main
from offline_gitd.online.compiled import JAX_ENVS, SeedCarry
from offline_gitd.online.compiled_run import read_loop_state, run_compiled
from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.host_state import host_state_path
from offline_gitd.online.schedules import epsilon_at
from offline_gitd.online.train import build_family, compiled_dqn, resolve_config, resume_config
from offline_gitd.rundir.checkpoints import Checkpoints, restore_seed_states
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import TrainingDiverged
from offline_gitd.rundir.seals import read_sealed_arrays, write_sealed_arrays
from tests.online.test_online import poisoned

STEPS, LOG_EVERY, CHECKPOINT_EVERY, INITIAL = 1_200, 200, 600, 100
NETWORK = ["--critic", "gitd", "--K", "3", "--T", "20", "--mlp-hidden", "16", "--batch-size", "16"]
SCHEDULE = [
    "--initial-samples",
    str(INITIAL),
    "--log-every",
    str(LOG_EVERY),
    "--checkpoint-every",
    str(CHECKPOINT_EVERY),
]
FLAGS = ["--env", "CartPole-v1", *NETWORK, *SCHEDULE, "--no-progress"]
# Columns that say when or where a row was written, not what the run computed.
WALL_CLOCK = {"window_seconds", "created_at", "run_id"}


@pytest.fixture(scope="module", autouse=True)
def compilation_cache(jax_compilation_cache):
    """The runs, their resumes and the evaluations compile the same programs: compile them once."""
    yield


def online(out: Path, *extra: str, steps: int = STEPS) -> None:
    assert main(["online", "dqn", *FLAGS, "--steps", str(steps), *extra, "--out", str(out)]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory, compilation_cache) -> dict[tuple[str, str], Path]:
    """``(loop, seeds) -> run directory`` of the same flags, run once for the module's tests."""
    root = tmp_path_factory.mktemp("runs")
    made = {}
    for loop in ("python", "compiled"):
        for seeds in ("0", "0-1"):
            made[loop, seeds] = root / f"{loop}-{seeds}"
            online(made[loop, seeds], "--loop", loop, "--seeds", seeds)
    return made


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def header(path: Path) -> list[str]:
    with path.open(newline="") as f:
        return next(csv.reader(f))


def without(rows: list[dict[str, str]], columns: set[str]) -> list[dict[str, str]]:
    return [{k: v for k, v in row.items() if k not in columns} for row in rows]


def listing(run: Path) -> dict[str, list[str]]:
    """The run directory's entries, and those of its checkpoint and host-state folders."""
    return {
        where: sorted(p.name for p in (run / where).iterdir() if p.name != "tb")
        for where in (".", "checkpoints", "host_state")
    } | {"tb": sorted(p.name for p in (run / "tb").iterdir())}


def expected_results(run: Path) -> list[tuple[int, int, float]]:
    """``(step, seed, return)`` of ``results.csv`` as the rule says from ``episodes.csv`` and the
    logging steps of ``metrics.csv``: the mean return of the episodes that ended in the window,
    the previous value where none did, no row before a seed's first episode."""
    episodes = read_rows(run / "episodes.csv")
    steps = sorted({int(r["step"]) for r in read_rows(run / "metrics.csv")})
    seeds = sorted({int(r["seed"]) for r in read_rows(run / "metrics.csv")})
    rows, last, previous = [], dict.fromkeys(seeds), 0
    for step in steps:
        for seed in seeds:
            ended = [
                float(e["return"]) for e in episodes if int(e["seed"]) == seed and previous < int(e["step"]) <= step
            ]
            if ended:
                last[seed] = float(np.mean(ended))
            if last[seed] is not None:
                rows.append((step, seed, last[seed]))
        previous = step
    return rows


def saved_carry(run: Path, step: int | None = None) -> SeedCarry:
    """Checkpoint ``step`` (the last by default) of a compiled run as the whole carry: its learner
    from the checkpoint, the rest from its host state."""
    loop, cfg = compiled_dqn(resume_config(run))
    checkpoints = Checkpoints(run)
    step = checkpoints.latest() if step is None else step
    fresh = loop.init(cfg.seed_list)
    rest = read_loop_state(host_state_path(run, step), fresh, cfg.seed_list)[0]
    return rest._replace(learner=checkpoints.restore(step, fresh.learner))


def carry_leaves(run: Path) -> list[np.ndarray]:
    """The last checkpoint of a compiled run: the whole carry, as numpy leaves."""
    return [np.asarray(x) for x in jax.tree.leaves(saved_carry(run))]


# -- the run directory ----------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("seeds", ["0", "0-1"])
def test_it_writes_the_python_loops_files_by_the_same_rules(runs: dict, seeds: str) -> None:
    """The same files, CSV columns, logging grid, update counts and exploration rates as the
    Python loop run with the same flags; both loops' ``results.csv`` follow the rule from their own
    ``episodes.csv``, whose episodes tile each seed's steps; the configs differ in ``loop`` alone."""
    python, compiled = runs["python", seeds], runs["compiled", seeds]
    assert listing(compiled) == listing(python)
    assert listing(compiled)["checkpoints"] == ["1200", "1200.sha256", "600", "600.sha256"]
    for name in ("metrics.csv", "results.csv", "episodes.csv"):
        assert header(compiled / name) == header(python / name), name
    grid = ("step", "seed", "updates", "epsilon")
    assert [tuple(r[c] for c in grid) for r in read_rows(compiled / "metrics.csv")] == [
        tuple(r[c] for c in grid) for r in read_rows(python / "metrics.csv")
    ]
    cfg = resolve_config(resume_config(python))[0]
    for row in read_rows(compiled / "metrics.csv"):  # the rate the window's last step acted with
        step = int(row["step"])
        assert float(row["epsilon"]) == epsilon_at(
            step - 1, cfg.epsilon_start, cfg.epsilon_end, cfg.epsilon_steps, cfg.initial_samples
        )
    for run in (python, compiled):
        results = read_rows(run / "results.csv")
        assert [(int(r["step"]), int(r["seed"]), float(r["return"])) for r in results] == expected_results(run)
        for seed in {r["seed"] for r in results}:
            mine = [r for r in read_rows(run / "episodes.csv") if r["seed"] == seed]
            assert [int(r["episode"]) for r in mine] == list(range(len(mine)))
            assert [int(r["step"]) for r in mine] == np.cumsum([int(r["length"]) for r in mine]).tolist()
    assert len({r["step"] for r in read_rows(compiled / "results.csv")}) == STEPS // LOG_EVERY
    records = {loop: json.loads((runs[loop, seeds] / "config.json").read_text()) for loop in ("python", "compiled")}
    configs = {loop: record["config"] for loop, record in records.items()}
    assert {k for k in configs["python"] if configs["python"][k] != configs["compiled"][k]} == {"out", "loop"}
    assert configs["compiled"]["loop"] == "compiled" and configs["python"]["loop"] == "python"
    assert records["compiled"]["config_hash"] != records["python"]["config_hash"]
    assert records["compiled"]["method_config"] == records["python"]["method_config"].replace(
        "initial_samples=100", "initial_samples=100 loop=compiled"
    )


def test_the_loop_leaves_python_runs_hashes_and_method_configs_as_they_were() -> None:
    """Hashes and method descriptions of Python-loop runs computed before ``loop`` existed."""
    default = OnlineConfig(algo="dqn", env="CartPole-v1", critic="td", out="x", loop="python").resolve("gym")
    tiny = OnlineConfig(
        algo="dqn", env="CartPole-v1", critic="gitd", K=3, T=20, mlp_hidden="16", out="x", loop="python"
    )
    tiny = tiny.resolve("gym")
    assert (default.config_hash(), default.method_config("gym")) == ("53f8979d134adce1", "defaults")
    assert (tiny.config_hash(), tiny.method_config("gym")) == ("9d13f0495055bad3", "T=20 mlp_hidden=16")
    compiled = OnlineConfig(algo="dqn", env="CartPole-v1", critic="td", out="x", loop="compiled").resolve("gym")
    assert compiled.config_hash() != default.config_hash() and compiled.method_config("gym") == "loop=compiled"


def test_the_command_line_knows_the_envs_the_compiled_loop_has(capsys) -> None:
    """The names the command line refuses other envs by are the JAX twins' ids; ``--help`` says
    what the flag does and for which envs, for online dqn only."""
    assert tuple(JAX_ENVS) == JAX_ENV_IDS
    with pytest.raises(SystemExit):
        main(["online", "dqn", "--help"])
    dqn = " ".join(capsys.readouterr().out.split())
    assert "--loop {auto,python,compiled}" in dqn and f"envs written in JAX ({', '.join(JAX_ENV_IDS)})" in dqn
    assert "--loop compiled --steps 50000" in dqn
    with pytest.raises(SystemExit):
        main(["online", "sac", "--help"])
    assert "--loop" not in capsys.readouterr().out


@pytest.mark.e2e
def test_evaluate_plays_a_compiled_runs_checkpoint(runs: dict, capsys) -> None:
    """``offline_gitd evaluate`` and ``load_run`` restore the learner the checkpoint holds, the
    learner of the carry the run had at that step."""
    from offline_gitd.trained import load_run

    run = runs["compiled", "0-1"]
    capsys.readouterr()
    assert main(["evaluate", str(run), "--episodes", "2", "--epoch", "600"]) == 0
    out = capsys.readouterr().out
    assert "seed 0 at env step 600: return" in out and "seed 1 at env step 600: return" in out
    saved = saved_carry(run, STEPS).learner
    for x, y in zip(jax.tree.leaves(load_run(run).agent().state), jax.tree.leaves(saved), strict=True):
        np.testing.assert_array_equal(x, y)


# -- exact resume ---------------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_resumed_run_ends_bit_for_bit_where_the_straight_run_ends(runs: dict, tmp_path: Path) -> None:
    """Stopped at a checkpoint (``--steps 600``) and resumed to the end: the whole carry, the
    host counters and every CSV as the straight run's. Stopped off the logging grid (500) and
    resumed: the carry and the episodes the same (the extra window makes the logs differ by design)."""
    straight = runs["compiled", "0-1"]
    for stop, on_grid in ((CHECKPOINT_EVERY, True), (500, False)):
        stopped = tmp_path / f"stopped-{stop}"
        online(stopped, "--loop", "compiled", "--seeds", "0-1", steps=stop)
        assert main(["online", "dqn", "--out", str(stopped), "--resume", "--steps", str(STEPS), "--no-progress"]) == 0
        for x, y in zip(carry_leaves(straight), carry_leaves(stopped), strict=True):
            np.testing.assert_array_equal(x, y)
        assert read_rows(stopped / "episodes.csv") == read_rows(straight / "episodes.csv")
        if on_grid:
            for name in ("metrics.csv", "results.csv"):
                assert without(read_rows(stopped / name), WALL_CLOCK) == without(
                    read_rows(straight / name), WALL_CLOCK
                ), name
            counters = [read_sealed_arrays(run / "host_state" / f"{STEPS}.npz")[1] for run in (straight, stopped)]
            assert counters[0] == counters[1]


@pytest.mark.e2e
def test_a_non_finite_loss_stops_the_run_at_its_window_and_keeps_the_checkpoint(tmp_path: Path) -> None:
    """The loss turns NaN at the 151st update (env step 251): the run stops naming it and the last
    good checkpoint, before that window's rows are written."""
    cfg = OnlineConfig(
        algo="dqn", env="CartPole-v1", critic="td", mlp_hidden="16", batch_size=16, initial_samples=100,
        steps=300, log_every=50, checkpoint_every=100, seeds="0-1", loop="compiled", out=str(tmp_path / "run"),
    )  # fmt: skip
    cfg, info = resolve_config(cfg)
    family = build_family(cfg, info)
    with pytest.raises(
        TrainingDiverged, match=r"at env step 251, update 151 \(seed 0\); last good checkpoint: .*checkpoints/200"
    ):
        run_compiled(cfg, info, poisoned(family, 150), RunFlags(progress=False))
    assert Checkpoints(tmp_path / "run").latest() == 200
    assert max(int(r["step"]) for r in read_rows(tmp_path / "run" / "metrics.csv")) == 250


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["dqn", "--env", "LunarLander-v3"],
            f"--loop compiled needs an env written in JAX ({', '.join(JAX_ENV_IDS)}); got",
        ),
        (["sac", "--env", "Pendulum-v1"], "--loop compiled runs online dqn only, not online sac"),
        (["dqn", "--env", "CartPole-v1", "--per"], "--loop compiled does not support --per"),
        (["dqn", "--env", "CartPole-v1", "--n-step", "3"], "--loop compiled does not support --n-step"),
        (["dqn", "--env", "CartPole-v1", "--init-from", "runs/offline"], "does not support --init-from"),
        (["dqn", "--env", "CartPole-v1", "--preset", "strong"], "does not support --preset strong"),
    ],
)
def test_what_it_does_not_do_is_refused_before_anything_is_written(
    tmp_path: Path, capsys, argv: list[str], message: str
) -> None:
    out = tmp_path / "run"
    assert main(["online", *argv, "--loop", "compiled", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not out.exists()


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.e2e
@pytest.mark.parametrize(("saved", "other"), [("python", "compiled"), ("compiled", "python")])
def test_a_resume_refuses_another_loop_and_writes_nothing(runs: dict, capsys, saved: str, other: str) -> None:
    run = runs[saved, "0"]
    before = snapshot(run)
    assert main(["online", "dqn", "--out", str(run), "--resume", "--steps", "1400", "--loop", other]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--loop {other} differs from the run's loop = {saved}" in err, err
    assert snapshot(run) == before


@pytest.mark.e2e
def test_a_run_made_before_the_loop_existed_resumes_as_a_python_run(runs: dict, tmp_path: Path, capsys) -> None:
    """A ``config.json`` without ``loop`` reads as ``python``: ``--loop compiled`` is refused naming
    that, ``--loop python`` resumes it, and its hash is the one it recorded."""
    run = tmp_path / "old"
    shutil.copytree(runs["python", "0"], run)
    record = json.loads((run / "config.json").read_text())
    del record["config"]["loop"]
    (run / "config.json").write_text(json.dumps(record))
    assert main(["online", "dqn", "--out", str(run), "--resume", "--steps", "1400", "--loop", "compiled"]) == 2
    assert "--loop compiled differs from the run's loop = python" in capsys.readouterr().err
    assert resume_config(run).config_hash() == record["config_hash"]
    assert main(["online", "dqn", "--out", str(run), "--resume", "--steps", "1400", "--loop", "python"]) == 0
    assert max(int(r["step"]) for r in read_rows(run / "results.csv")) == 1400


# -- the checkpoint's layout ----------------------------------------------------------------------


@pytest.mark.e2e
def test_a_checkpoint_is_laid_out_as_the_python_loops(runs: dict) -> None:
    """The checkpoint holds the learner's state alone, the tree a Python run's holds, and reads back
    by the one path every reader takes; the loop's own state is the host state beside it."""
    python, compiled = runs["python", "0-1"], runs["compiled", "0-1"]
    assert Checkpoints(compiled).saved_fields(STEPS) == Checkpoints(python).saved_fields(STEPS)
    cfg, info = resolve_config(resume_config(compiled))
    state = restore_seed_states(compiled, STEPS, build_family(cfg, info), cfg.seed_list)
    for x, y in zip(jax.tree.leaves(state), jax.tree.leaves(saved_carry(compiled).learner), strict=True):
        np.testing.assert_array_equal(x, y)
    arrays, meta = read_sealed_arrays(host_state_path(compiled, STEPS))
    assert meta["kind"] == "compiled loop state" and ".replay.obs" in meta["carry"]
    assert len(arrays) == len(meta["carry"]) and not any(".learner" in name for name in meta["carry"])


@pytest.mark.e2e
def test_a_run_whose_checkpoint_holds_the_whole_carry_is_refused_in_one_line(
    runs: dict, tmp_path: Path, capsys
) -> None:
    """A compiled run saved by an older version (the whole carry as the checkpoint, counters alone
    as the host state): ``evaluate`` and ``--resume`` refuse it in one line, and the resume writes
    nothing."""
    old = tmp_path / "old"
    shutil.copytree(runs["compiled", "0"], old)
    carry = saved_carry(old)
    shutil.rmtree(old / "checkpoints")
    Checkpoints(old).save(STEPS, carry)
    meta = read_sealed_arrays(host_state_path(old, STEPS))[1]
    old_meta = {"kind": "compiled loop counters", **{k: meta[k] for k in ("seeds", "episodes", "last_results")}}
    write_sealed_arrays(host_state_path(old, STEPS), {}, old_meta)
    before = snapshot(old)
    capsys.readouterr()
    for argv in (["evaluate", str(old), "--episodes", "1"], ["online", "dqn", "--out", str(old), "--resume"]):
        assert main([*argv, "--steps", "1400"] if argv[0] == "online" else argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds a compiled loop's whole state" in err, err
        assert "train the run again" in err
    assert snapshot(old) == before
