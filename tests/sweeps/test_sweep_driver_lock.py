"""One driver per sweep (docs/locks.md): the same sweep started twice at once, as two real
processes (the processes backend: the lock is taken before any backend starts, so Ray's own
start-up would add time and nothing to the check). Exactly one runs the grid and puts every row on the
board once; the other says in one line who drives the sweep and how to watch it, and exits
non-zero. The status view reads the sweep without taking any lock, while it runs and after."""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from offline_gitd.cli import main
from offline_gitd.sweeps.driver_lock import DRIVER_LOCK_FILE
from offline_gitd.sweeps.watch import status_text

pytestmark = pytest.mark.e2e  # real sweep drivers and their runs, in subprocesses

SPEC = """command = "online dqn"
board = "board.csv"

[resources]
cpus = 1

[fixed]
env = "CartPole-v1"
loop = "python"
steps = 200
mlp_hidden = "16,16"
batch_size = 16
initial_samples = 50
log_every = 50
checkpoint_every = 100

[grid]
critic = ["td", "gitd"]
"""


def start_sweep(spec: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), "--backend", "processes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def test_two_drivers_started_together_run_the_grid_once(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC)
    out = tmp_path / "sweep"
    drivers = [start_sweep(spec, out), start_sweep(spec, out)]
    deadline = time.monotonic() + 300
    while all(driver.poll() is None for driver in drivers):
        assert time.monotonic() < deadline, "neither driver ended"
        time.sleep(0.1)
    (loser,) = [driver for driver in drivers if driver.poll() is not None]
    (winner,) = [driver for driver in drivers if driver is not loser]
    _, err = loser.communicate(timeout=60)
    assert loser.returncode == 2, err
    assert err.count("\n") == 1, err
    assert f"sweep {out} is in use by pid {winner.pid} on {socket.gethostname()} since " in err
    assert f"watch it with: offline_gitd sweep {spec} --out {out} --status --watch" in err

    while winner.poll() is None and not (out / "sweep.json").exists():
        time.sleep(0.1)
    if winner.poll() is None:  # seen from elsewhere while it runs: read-only, no lock taken
        assert f"driven by pid {winner.pid} on {socket.gethostname()}" in status_text(out)
    output, err = winner.communicate(timeout=300)
    assert winner.returncode == 0, output + err
    assert "sweep finished: 2/2 done, 0 failed" in output

    with (out / "board.csv").open() as handle:
        board = list(csv.DictReader(handle))
    keys = Counter((row["run_id"], row["seed"], row["step"]) for row in board)
    assert len(board) == 2 * 200 // 50 and max(keys.values()) == 1  # 2 runs x 4 rows, each once
    assert not (out / DRIVER_LOCK_FILE).exists()

    capsys.readouterr()
    assert main(["sweep", str(spec), "--out", str(out), "--status"]) == 0
    status = capsys.readouterr().out
    assert "no driver running" in status and "done 2" in status and status.count("4 rows on the board") == 2


DRIVE = """
import sys
from pathlib import Path
from offline_gitd.sweeps.driver_lock import sole_driver
with sole_driver(Path(sys.argv[1]), Path(sys.argv[2])):
    print("driving", flush=True)
    sys.stdin.read()
"""


def test_status_watch_follows_a_live_driver_without_locking_and_ends_with_it(tmp_path: Path) -> None:
    """A driver (a real process holding the sweep's lock) and a watcher in another process: the
    watcher prints the state again at each change, and returns once the driver is gone."""
    from offline_gitd.sweeps.spec import expand, load_spec
    from offline_gitd.sweeps.state import SweepPaths, write_state

    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC)
    out = tmp_path / "sweep"
    plans = expand(load_spec(spec))
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVE, str(spec), str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert driver.stdout.readline() == "driving\n"
    write_state(out / "sweep.json", {"spec": str(spec), "runs": {plan.name: list(plan.argv) for plan in plans}})
    before = sorted(path.name for path in out.rglob("*"))
    watcher = subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), "--status", "--watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def read_until(text: str) -> str:
        lines = []
        while not lines or text not in lines[-1]:
            lines.append(watcher.stdout.readline())
            assert lines[-1], "the watcher ended early"
        return "".join(lines)

    first = read_until(" | failed ")  # the first state, ending with its counts
    assert f"driven by pid {driver.pid} on {socket.gethostname()}" in first and "queued 2 | running 0" in first
    paths = SweepPaths(out)
    write_state(paths.state(plans[0].name), {"status": "running", "argv": list(plans[0].argv), "node": "n1"})
    second = read_until(" | failed ")
    assert "running  attempt 1, node n1" in second and "queued 1 | running 1" in second
    driver.stdin.close()
    assert driver.wait(30) == 0
    _, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert sorted(path.name for path in out.rglob("*") if path.name != "state" and path.parent.name != "state") == [
        name for name in before if name != DRIVER_LOCK_FILE
    ]
