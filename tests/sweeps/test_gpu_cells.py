"""``sweeps/gpu_cells.sh`` on this machine's CPU (docs/online.md#whole-cells-on-a-gpu): the script a GPU
machine without a package index runs, from a git bundle of HEAD, with ``JAX_PLATFORMS=cpu`` as its
only change. Its cells finish, their rows name the bundle's commit, and the runs it brings back
give, submitted at home, the same rows its own board holds."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.sweep_specs import TINY_CARTPOLE_DQN

pytestmark = pytest.mark.e2e  # trains end to end from a bundle: out of make test-fast

ROOT = Path(__file__).resolve().parents[2]
SPEC = f"""command = "online dqn"
board = "board.csv"

[resources]
cpus = 1

[fixed]{TINY_CARTPOLE_DQN}steps = 400

[grid]
cell = [{{ name = "td", critic = "td" }}, {{ name = "gitd", critic = "gitd", K = 3 }}]
"""


def rows(board: Path) -> list[dict[str, str]]:
    with board.open() as handle:
        found = [{k: v for k, v in row.items() if k != "created_at"} for row in csv.DictReader(handle)]
    return sorted(found, key=lambda row: (row["run_id"], row["seed"], row["step"]))


def test_the_gpu_script_runs_cells_from_a_bundle_and_its_runs_submit_at_home(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("no git command on this machine: the script trains from a bundle of HEAD")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout: the script trains from a bundle of HEAD")
    sent = tmp_path / "sent"  # what travels: the script, .device/code.bundle, and the spec
    (sent / "sweeps").mkdir(parents=True)
    shutil.copy(ROOT / "sweeps" / "gpu_cells.sh", sent / "sweeps")
    (sent / ".device").mkdir()
    subprocess.run(
        ["git", "-C", str(ROOT), "bundle", "create", str(sent / ".device" / "code.bundle"), "HEAD"], check=True
    )
    spec = tmp_path / "cells.toml"
    spec.write_text(SPEC)
    out = tmp_path / "out"
    python_dir = str(Path(sys.executable).parent)  # its python3 is this one, as the device's is its own
    env = {**os.environ, "PATH": f"{python_dir}:{os.environ['PATH']}", "JAX_PLATFORMS": "cpu"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        ["bash", "sweeps/gpu_cells.sh", str(spec), str(out), "300", "cell=td", "cell=gitd"],
        cwd=sent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("sweep finished: 1/1 done, 0 failed") == 2, done.stdout
    assert f"commit {head.stdout.strip()}" in (out / "device.txt").read_text()

    device_rows = rows(out / "board.csv")
    assert len(device_rows) == 2 * 2 * 2  # 2 cells x 2 seeds x 2 windows
    assert {row["commit"] for row in device_rows} == {head.stdout.strip()}
    assert {row["dirty"] for row in device_rows} == {"false"}

    home = tmp_path / "home"
    with tarfile.open(out / "runs.tgz") as archive:
        archive.extractall(home, filter="data")
    assert not list(home.rglob("checkpoints"))  # the runs come back small
    for run_dir in sorted(home.glob("*/runs/*")):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "offline_gitd.cli",
                "leaderboard",
                "submit",
                str(run_dir),
                "--board",
                str(home / "board.csv"),
            ],
            check=True,
            capture_output=True,
        )
    assert rows(home / "board.csv") == device_rows
