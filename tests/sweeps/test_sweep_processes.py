"""``sweep --backend processes``: a grid as child processes of the driver, on a machine where Ray
cannot be imported (offline_gitd/sweeps/processes.py, docs/sweeps.md#without-ray).

Every test runs the driver as a user would, in a subprocess whose import path holds a ``ray``
package that refuses to import: the backend must never need it, in the driver or in its children.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from offline_gitd.sweeps.processes import ProcessPool
from tests.support.sweep_specs import TINY_CARTPOLE_DQN


def spec_text(steps: int, critics: list[str]) -> str:
    return (
        'command = "online dqn"\nboard = "board.csv"\n\n[resources]\ncpus = 1\n\n'
        f"[fixed]{TINY_CARTPOLE_DQN}steps = {steps}\n\n"
        f"[grid]\ncritic = {json.dumps(critics)}\n"
    )


def no_ray_env(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import ray`` fails, as on a machine without it."""
    shadow = tmp_path / "no-ray" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ray is not installed here')\n")
    path = os.pathsep.join(filter(None, [str(shadow.parent), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "JAX_PLATFORMS": "cpu"}


# The driver as a terminal starts it: Ctrl-C delivered and raised as KeyboardInterrupt. A process
# inherits an ignored or blocked SIGINT from its parent, and Python keeps an inherited ignore: a
# suite started as a background job of a non-interactive shell (which ignores SIGINT for it) ran
# the driver's grid to the end through the test's Ctrl-C, exit 0. The driver's own handling is
# what is tested, not how the suite was started.
AS_FROM_A_TERMINAL = (
    "import runpy, signal; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('offline_gitd.cli', run_name='__main__', alter_sys=True)"
)


def start(spec: Path, out: Path, env: dict[str, str], *flags: str) -> subprocess.Popen:
    command = [sys.executable, "-c", AS_FROM_A_TERMINAL, "sweep", str(spec), "--out", str(out)]
    return subprocess.Popen(
        [*command, "--backend", "processes", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def finish(process: subprocess.Popen, timeout: float = 300) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


def board_keys(out: Path) -> Counter:
    with (out / "board.csv").open() as handle:
        return Counter((row["run_id"], row["seed"], row["step"]) for row in csv.DictReader(handle))


@pytest.mark.e2e  # trains end to end in child processes: out of make test-fast
def test_a_grid_without_ray_interrupted_stops_its_children_and_resumes_then_a_rerun_does_no_work(
    tmp_path: Path,
) -> None:
    env = no_ray_env(tmp_path)
    spec = tmp_path / "grid.toml"
    spec.write_text(spec_text(steps=6000, critics=["td", "gitd"]))  # stopped at its first checkpoint, step 400
    out = tmp_path / "sweep"
    driver = start(spec, out, env, "--max-parallel", "2")
    checkpoints = [out / "runs" / name / "checkpoints" for name in ("td", "gitd")]
    deadline = time.monotonic() + 240
    while not all(folder.is_dir() and any(folder.iterdir()) for folder in checkpoints):
        assert driver.poll() is None, driver.communicate()[0]
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.1)
    driver.send_signal(signal.SIGINT)  # Ctrl-C at the driver: its children are stopped with it
    output, _ = driver.communicate(timeout=120)
    assert driver.returncode == 130, output
    states = {path.stem: json.loads(path.read_text()) for path in (out / "state").glob("*.json")}
    assert all(state["status"] == "running" for state in states.values())  # stopped, not done
    assert not (out / "board.csv").exists()

    resumed = finish(start(spec, out, env, "--max-parallel", "2"))
    assert "running on this machine, 2 child processes at a time" in resumed
    assert "sweep finished: 2/2 done, 0 failed" in resumed
    states = {path.stem: json.loads(path.read_text()) for path in (out / "state").glob("*.json")}
    assert all(state["status"] == "done" and state["submitted"] for state in states.values())
    assert all(isinstance(state["cores"], list) for state in states.values())  # pinned by default
    with (out / "timings.csv").open() as handle:
        assert {row["name"]: row["resumed"] for row in csv.DictReader(handle)} == {"td": "true", "gitd": "true"}
    keys = board_keys(out)
    assert len(keys) == 2 * 2 * 30 and max(keys.values()) == 1  # 2 runs x 2 seeds x 30 windows, each once

    board_before = (out / "board.csv").read_bytes()
    again = finish(start(spec, out, env), timeout=120)
    assert "nothing to do" in again and "child process" not in again
    assert (out / "board.csv").read_bytes() == board_before


def test_a_child_that_ends_without_an_outcome_is_a_failure_naming_its_last_words(tmp_path: Path) -> None:
    pool = ProcessPool(tmp_path)
    child = pool.submit("no_such_call", {"name": "broken"})
    assert pool.wait([child], timeout=60) == [child]
    outcome = pool.outcome(child, "broken")
    assert outcome["status"] == "failed"
    assert outcome["error"].startswith("the run's process ended without an outcome: KeyError: 'no_such_call'")
