"""Sweeps on a real two-node Ray cluster on this machine , never a mock.

A head and a worker node are started by Ray's own ``ray.cluster_utils.Cluster``, both pinned to
127.0.0.1, and ``offline_gitd sweep --address`` is run against them as a user would, in a
subprocess. Three behaviours: a 6-run grid completes with every row on the board exactly once
and runs on both nodes; re-running a finished sweep does no work; killing the worker node
mid-run loses no run (Ray retries it on another node, where it resumes from its checkpoints) and the
board still holds every row exactly once.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from ray.cluster_utils import Cluster

from tests.support.sweep_specs import TINY_CARTPOLE_DQN

pytestmark = pytest.mark.ray

# Ray canonicalises 127.0.0.1 to a documentation address (192.0.2.2) for multi-node clusters on
# one machine unless told not to, and a driver then never finds its node; every process started
# here (nodes, the sweep's driver, their workers) inherits this.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "JAX_PLATFORMS": "cpu"}
NODE = dict(num_cpus=1, node_ip_address="127.0.0.1")
# Tiny CartPole DQN runs: two seeds in one vmapped program, a checkpoint every 400 steps.


def spec_text(steps: int) -> str:
    return (
        'command = "online dqn"\nboard = "board.csv"\n\n[resources]\ncpus = 1\nretries = 3\n\n'
        f"[fixed]{TINY_CARTPOLE_DQN}steps = {steps}\n\n"
        '[grid]\ncritic = ["td", "gitd"]\nT = [20, 40]\n'
    )


@pytest.fixture(scope="module")
def cluster():
    saved = {key: os.environ.get(key) for key in LOOPBACK_ENV}
    os.environ.update(LOOPBACK_ENV)
    # Quick failure detection, so that a killed node's tasks are retried in seconds, not a minute.
    system_config = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args=dict(**NODE, include_dashboard=False, _system_config=system_config),
    )
    worker = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    try:
        yield cluster, worker
    finally:
        cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def start_sweep(spec: Path, out: Path, address: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), "--address", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **LOOPBACK_ENV},
    )


def finish(process: subprocess.Popen, timeout: float = 420) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


def states(out: Path) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in (out / "state").glob("*.json")}


def assert_every_row_once(out: Path, runs: int, steps: int) -> None:
    """The board holds each run's whole results (2 seeds x steps / log_every 200 rows), each row
    exactly once (run, seed, step)."""
    with (out / "board.csv").open() as handle:
        board = list(csv.DictReader(handle))
    keys = Counter((row["run_id"], row["seed"], row["step"]) for row in board)
    assert keys and max(keys.values()) == 1, [key for key, n in keys.items() if n > 1]
    per_run = 2 * steps // 200
    for run_dir in sorted((out / "runs").iterdir()):
        with (run_dir / "results.csv").open() as handle:
            assert len(list(csv.DictReader(handle))) == per_run, run_dir
    assert len(board) == runs * per_run


def test_sweep_runs_on_both_nodes_and_rerun_does_no_work(cluster, tmp_path):
    cluster, worker = cluster
    spec = tmp_path / "grid.toml"
    # short runs: nothing here is caught mid-run, and two one-CPU nodes take the first two runs one each
    spec.write_text(spec_text(steps=400))
    out = tmp_path / "sweep"
    output = finish(start_sweep(spec, out, cluster.address))
    assert "sweep finished: 4/4 done, 0 failed" in output
    recorded = states(out)
    assert len(recorded) == 4 and all(state["status"] == "done" and state["submitted"] for state in recorded.values())
    assert {state["node"] for state in recorded.values()} == {cluster.head_node.node_id, worker.node_id}
    assert_every_row_once(out, runs=4, steps=400)
    # every run was asked to pin (the default): on cores of its own, or [] where all were held
    assert all(isinstance(state["cores"], list) for state in recorded.values())
    for name, state in recorded.items():  # each run's provenance names the command the sweep ran
        command = json.loads((out / "runs" / name / "config.json").read_text())["provenance"]["command_line"]
        assert command[1:] == [*state["argv"], "--out", str(out / "runs" / name), "--no-progress"]

    board_before = (out / "board.csv").read_bytes()
    snapshot = {
        path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file() and path.name != "sweep.json"
    }
    again = finish(start_sweep(spec, out, cluster.address), timeout=120)
    assert "nothing to do" in again and "scheduling" not in again
    assert (out / "board.csv").read_bytes() == board_before
    assert {path: path.stat().st_mtime_ns for path in snapshot} == snapshot  # no run, log or state touched


def test_killing_the_worker_node_mid_run_loses_no_run(cluster, tmp_path):
    """A run is caught on the worker between two of its checkpoints and the node is SIGKILLed; a
    fresh worker joins after the kill, as a cluster's autoscaler or operator would add one."""
    cluster, worker = cluster
    spec = tmp_path / "grid.toml"
    spec.write_text(spec_text(steps=2000))
    out = tmp_path / "sweep"
    process = start_sweep(spec, out, cluster.address)
    victim = None
    deadline = time.monotonic() + 240
    while victim is None and time.monotonic() < deadline and process.poll() is None:
        for name, state in states(out).items() if (out / "state").exists() else ():
            checkpoints = out / "runs" / name / "checkpoints"
            started = checkpoints.exists() and any(checkpoints.iterdir())
            if state.get("status") == "running" and state.get("node") == worker.node_id and started:
                victim = name
        time.sleep(0.2)
    assert victim is not None, "no run was seen on the worker node with a checkpoint"
    cluster.remove_node(worker, allow_graceful=False)  # SIGKILL: the node and the run die mid-step
    cluster.add_node(**NODE)

    output = finish(process)
    assert "sweep finished: 4/4 done, 0 failed" in output, output
    recorded = states(out)
    assert recorded[victim]["attempt"] >= 2 and recorded[victim]["node"] != worker.node_id
    assert "--resume" in (out / "logs" / f"{victim}.log").read_text()  # the retry continued the run
    assert_every_row_once(out, runs=4, steps=2000)  # the killed run is whole again, nothing twice
