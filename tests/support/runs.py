"""Synthetic run directories for the leaderboard tests (and the sweep tests that build boards).

Real run directories come from the learners; these write only ``results.csv`` with rows in the
leaderboard schema, so the leaderboard can be tested without training anything. They are test
fixtures, never results: nothing here is written outside pytest's temporary directories.
``tests/leaderboard/test_leaderboard_synthetic.py`` checks that they read back as valid rows.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from offline_gitd.leaderboard.schema import COLUMNS

CREATED_AT = "2026-01-01T00:00:00+00:00"


def result_record(
    *,
    env: str,
    algorithm: str,
    critic: str,
    seed: int,
    step: int,
    value: float,
    suite: str = "atari",
    K: int = 1,
    beta: float = 0.0,
    run_id: str | None = None,
    config_hash: str = "cfg0",
    created_at: str = CREATED_AT,
    package_version: str = "0.1.0",
) -> dict[str, object]:
    """One row of the schema; the run_id defaults to one derived from the method, env and seed."""
    return {
        "suite": suite,
        "env": env,
        "algorithm": algorithm,
        "critic": critic,
        "K": K,
        "beta": beta,
        "seed": seed,
        "step": step,
        "return": value,
        "run_id": run_id or f"{algorithm}-{critic}-K{K}-b{beta}-{env}-s{seed}",
        "config_hash": config_hash,
        "package_version": package_version,
        "created_at": created_at,
    }


def write_run(
    run_dir: Path,
    *,
    env: str,
    algorithm: str,
    critic: str,
    seed: int,
    steps: Sequence[int],
    returns: Sequence[float],
    **fields: object,
) -> Path:
    """A run directory whose results.csv holds one row per (step, return)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for step, value in zip(steps, returns, strict=True):
            writer.writerow(
                result_record(
                    env=env,
                    algorithm=algorithm,
                    critic=critic,
                    seed=seed,
                    step=step,
                    value=value,
                    **fields,
                )
            )
    return run_dir
