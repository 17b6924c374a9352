"""A sweep's task asks XLA for what the command line asks for, with one CPU device per core the spec
gives each run (offline_gitd/sweeps/task.py, docs/offline.md#seeds)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from offline_gitd.sweeps import task
from offline_gitd.sweeps.core import collect_entries, run_entry
from offline_gitd.sweeps.spec import RunPlan, load_spec
from offline_gitd.sweeps.state import SweepPaths
from offline_gitd.xla_start import CHOICE, DETERMINISTIC_GPU_FLAGS, DEVICE_COUNT_FLAG

SPECS = Path(__file__).resolve().parents[2] / "sweeps"


def test_a_run_entry_carries_the_specs_cpus_and_execute_takes_them(tmp_path: Path) -> None:
    plan = RunPlan(name="r", fields={}, argv=("train",), length=None, board="board.csv")
    entry = run_entry(plan, SweepPaths(tmp_path), "sweep", gpus=0.0, cpus=3)
    assert entry["cpus"] == 3
    inspect.signature(task.execute).bind(**entry)  # every backend makes exactly this call


def test_a_collect_entry_carries_the_specs_cpus_too(tmp_path: Path) -> None:
    # the first task a reused worker runs sets its devices, whether it records a dataset or trains
    spec = load_spec(SPECS / "minatar_offline.toml")
    (entry, *_) = collect_entries(spec, SweepPaths(tmp_path), "sweep")
    assert entry["cpus"] == spec.resources.cpus
    inspect.signature(task.collect_dataset).bind(**entry)


@pytest.mark.parametrize(("cpus", "users", "asked"), [(4, None, "4"), (0.5, None, "1"), (4, "2", "2")])
def test_the_task_asks_for_the_specs_cpus_unless_the_user_chose(
    cpus: float, users: str | None, asked: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if users is None:
        monkeypatch.delenv(CHOICE, raising=False)
    else:
        monkeypatch.setenv(CHOICE, users)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    task._device_settings(0, cpus)
    assert os.environ[CHOICE] == asked


# A fresh process, as a SLURM job starts one: the flags are set before the task's run starts JAX.
CHILD = """
import json, os
from offline_gitd.sweeps import task
task._device_settings(0, 3)
import jax
print(json.dumps({"flags": os.environ.get("XLA_FLAGS"), "devices": len(jax.devices("cpu"))}))
"""


def test_a_fresh_task_process_gets_the_specs_cpu_devices() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", CHOICE)}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["flags"].split() == [*DETERMINISTIC_GPU_FLAGS, f"{DEVICE_COUNT_FLAG}=3"]
    assert record["devices"] == 3
