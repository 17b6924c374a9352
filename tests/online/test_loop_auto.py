"""``--loop auto``, the default: the compiled loop wherever it can run the run, the Python loop
otherwise (with a one-line note where an option rules the compiled loop out), and the run records
the loop that ran (docs/online.md#the-compiled-loop)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_gitd.choices import JAX_ENV_IDS
from offline_gitd.cli import main
from offline_gitd.online.config import OnlineConfig, choose_loop

TINY = ["--critic", "td", "--mlp-hidden", "8", "--batch-size", "8", "--initial-samples", "20", "--log-every", "50"]


def config(**fields) -> OnlineConfig:
    return OnlineConfig(**{"algo": "dqn", "env": "CartPole-v1", "critic": "td", "out": "x", **fields})


def test_auto_is_the_default_and_picks_the_compiled_loop_for_every_jax_env() -> None:
    assert OnlineConfig().loop == "auto"
    for env in JAX_ENV_IDS:
        assert choose_loop(config(env=env)) == ("compiled", None), env


@pytest.mark.parametrize(
    ("fields", "loop", "note"),
    [
        (dict(env="LunarLander-v3"), "python", None),  # no JAX twin: the only loop there is, silently
        (dict(algo="sac", env="Pendulum-v1"), "python", None),
        (dict(per=True), "python", "note: --loop auto runs the Python loop: the compiled loop does not support --per"),
        (dict(n_step=3), "python", "does not support --n-step"),
        (dict(init_from="runs/offline"), "python", "does not support --init-from"),
        (dict(preset="strong"), "python", "does not support --preset strong"),
        (dict(loop="python"), "python", None),  # an explicit loop is kept
        (dict(loop="compiled"), "compiled", None),
    ],
)
def test_auto_falls_back_to_the_python_loop_where_the_compiled_one_cannot_run(fields, loop, note) -> None:
    chosen, why = choose_loop(config(**fields))
    assert chosen == loop
    if note is None:
        assert why is None
    else:
        assert why is not None and note in why and "\n" not in why


def test_a_resolved_config_records_the_loop_that_runs_and_hashes_as_that_loop() -> None:
    """``auto`` never reaches config.json: resolving picks the loop, and an auto run hashes as an
    explicit run of the loop it picked (so a board matches them)."""
    auto = config().resolve("gym")
    assert auto.loop == "compiled"
    assert auto.config_hash() == config(loop="compiled").resolve("gym").config_hash()
    per = config(per=True).resolve("gym")
    assert per.loop == "python" and per.config_hash() == config(per=True, loop="python").resolve("gym").config_hash()
    sac = OnlineConfig(algo="sac", env="Pendulum-v1", critic="td", out="x").resolve("continuous")
    assert sac.loop == "python"


def test_the_default_runs_the_compiled_loop_and_an_unsupported_option_the_python_one_with_a_note(
    tmp_path: Path, capsys
) -> None:
    """CartPole-v1 without ``--loop``: config.json says compiled; with ``--per`` it says python,
    and stderr has the fallback's one-line note."""
    fast = tmp_path / "fast"
    assert main(["online", "dqn", "--env", "CartPole-v1", "--steps", "100", *TINY, "--out", str(fast)]) == 0
    assert json.loads((fast / "config.json").read_text())["config"]["loop"] == "compiled"
    assert "note: --loop auto" not in capsys.readouterr().err
    slow = tmp_path / "slow"
    assert main(["online", "dqn", "--env", "CartPole-v1", "--steps", "100", "--per", *TINY, "--out", str(slow)]) == 0
    assert json.loads((slow / "config.json").read_text())["config"]["loop"] == "python"
    notes = [line for line in capsys.readouterr().err.splitlines() if "note: --loop auto" in line]
    assert notes == [
        "note: --loop auto runs the Python loop: the compiled loop does not support --per (it runs 1-step returns, "
        "uniform replay, fresh networks)"
    ]


@pytest.mark.e2e
def test_online_dqn_on_minatar_asterix_runs_the_compiled_loop_by_default(tmp_path: Path) -> None:
    """The issue's check: ``online dqn --env MinAtar/Asterix-v1`` with no ``--loop``; the run
    resumes, evaluates and loads as a run of the Python loop does (Asterix's env state, which the
    checkpoint holds, included)."""
    from offline_gitd.trained import load_run

    out = tmp_path / "asterix"
    assert main(["online", "dqn", "--env", "MinAtar/Asterix-v1", "--steps", "200", *TINY, "--out", str(out)]) == 0
    record = json.loads((out / "config.json").read_text())
    assert record["config"]["loop"] == "compiled" and "loop=compiled" in record["method_config"].split()
    assert main(["online", "dqn", "--out", str(out), "--resume", "--steps", "250"]) == 0
    assert main(["evaluate", str(out), "--episodes", "2"]) == 0
    run = load_run(out)
    assert run.checkpoints() == [200, 250] and run.agent().checkpoint == 250
