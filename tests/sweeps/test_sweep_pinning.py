"""Each local sweep run on cores of its own (offline_gitd/sweeps/pinning.py,
docs/sweeps.md#runs-pinned-to-cores): claims are exclusive across processes, a dead holder frees its
cores, XLA's threads inherit the claim, and a sweep task records and logs where it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from offline_gitd.sweeps import task
from offline_gitd.sweeps.pinning import claim_cores, pinned_cores
from offline_gitd.sweeps.state import SweepPaths, read_state

ALLOWED = sorted(os.sched_getaffinity(0))


def test_two_claims_never_share_a_core(tmp_path: Path) -> None:
    first = claim_cores(1, tmp_path)
    assert first is not None and first[0] == ALLOWED[:1]
    second = claim_cores(1, tmp_path)
    if len(ALLOWED) == 1:
        assert second is None  # the only core is held
    else:
        assert second is not None and second[0] == ALLOWED[1:2]
    for handle in first[1] + (second[1] if second else []):
        handle.close()


def test_too_few_free_cores_claims_none_and_holds_nothing(tmp_path: Path) -> None:
    assert claim_cores(len(ALLOWED) + 1, tmp_path) is None
    everything = claim_cores(len(ALLOWED), tmp_path)  # the failed claim let go of what it had taken
    assert everything is not None and everything[0] == ALLOWED
    for handle in everything[1]:
        handle.close()


def test_the_body_runs_on_its_cores_and_the_affinity_comes_back(tmp_path: Path) -> None:
    with pinned_cores(1, tmp_path) as cores:
        assert cores == ALLOWED[:1]
        assert sorted(os.sched_getaffinity(0)) == cores
    assert sorted(os.sched_getaffinity(0)) == ALLOWED
    assert claim_cores(len(ALLOWED), tmp_path) is not None  # released on exit


HOLDER = """
import sys, time
from pathlib import Path
from offline_gitd.sweeps.pinning import claim_cores
cores, held = claim_cores(1, Path(sys.argv[1]))
print(cores[0], flush=True)
time.sleep(600)
"""


def test_a_claim_held_by_another_process_is_skipped_and_freed_when_it_dies(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline())
        assert held == ALLOWED[0]
        mine = claim_cores(1, tmp_path)
        if len(ALLOWED) == 1:
            assert mine is None
        else:
            assert mine is not None and mine[0] == ALLOWED[1:2]
            for handle in mine[1]:
                handle.close()
    finally:
        holder.kill()  # no clean-up runs: the kernel drops the lock with the process
        holder.wait()
    again = claim_cores(1, tmp_path)
    assert again is not None and again[0] == ALLOWED[:1]


# XLA's CPU thread pool starts after the claim and must inherit it: every thread of the process,
# read from /proc after a computation, may run on the claimed core only.
THREADS = """
import json, sys
from pathlib import Path
from offline_gitd.sweeps.pinning import pinned_cores
with pinned_cores(1, Path(sys.argv[1])) as cores:
    import jax, jax.numpy as jnp
    jnp.ones((256, 256)) @ jnp.ones((256, 256))
    allowed = {}
    for status in Path("/proc/self/task").glob("*/status"):
        line = next(l for l in status.read_text().splitlines() if l.startswith("Cpus_allowed_list"))
        allowed[status.parent.name] = line.split(":")[1].strip()
print(json.dumps({"cores": cores, "threads": allowed}))
"""


def test_xla_threads_started_inside_the_claim_run_on_its_cores(tmp_path: Path) -> None:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run(
        [sys.executable, "-c", THREADS, str(tmp_path)], env=env, capture_output=True, text=True, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["cores"] == ALLOWED[:1]
    assert len(seen["threads"]) > 1  # XLA started its pool
    assert set(seen["threads"].values()) == {str(ALLOWED[0])}


def test_a_pinned_task_records_and_logs_its_cores(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("offline_gitd.sweeps.pinning.default_lock_dir", lambda: tmp_path / "locks")
    root = tmp_path / "sweep"
    outcome = task.execute("listing", ["datasets", "--help"], str(root), "s1", 0, resumable=False, pin=True)
    assert outcome["status"] == "done", outcome
    paths = SweepPaths(root)
    assert read_state(paths.state("listing"))["cores"] == ALLOWED[:1]
    assert f"pinned to core {ALLOWED[0]}\n" in paths.log("listing").read_text()
    assert sorted(os.sched_getaffinity(0)) == ALLOWED


def test_a_task_finding_every_core_taken_runs_unpinned_and_says_so(tmp_path: Path, monkeypatch) -> None:
    locks = tmp_path / "locks"
    monkeypatch.setattr("offline_gitd.sweeps.pinning.default_lock_dir", lambda: locks)
    taken = claim_cores(len(ALLOWED), locks)
    assert taken is not None
    root = tmp_path / "sweep"
    outcome = task.execute("listing", ["datasets", "--help"], str(root), "s1", 0, resumable=False, pin=True)
    assert outcome["status"] == "done", outcome
    paths = SweepPaths(root)
    assert read_state(paths.state("listing"))["cores"] == []
    assert "not pinned: every core this run may use is held by another run" in paths.log("listing").read_text()
    for handle in taken[1]:
        handle.close()


def test_an_unpinned_task_records_no_cores(tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    task.execute("listing", ["datasets", "--help"], str(root), "s1", 0, resumable=False)
    paths = SweepPaths(root)
    assert read_state(paths.state("listing"))["cores"] is None
    assert "pinned" not in paths.log("listing").read_text()


def test_the_cli_refuses_no_pin_with_slurm(tmp_path: Path, capsys) -> None:
    from offline_gitd.cli import main

    spec = Path(__file__).resolve().parents[2] / "sweeps" / "demo.toml"
    code = main(["sweep", str(spec), "--out", str(tmp_path / "s"), "--backend", "slurm", "--no-pin", "--dry-run"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "offline_gitd: error: --no-pin is an option of --backend ray and processes; SLURM places a job's cores itself "
        "(--cpus-per-task)"
    ]
    assert not (tmp_path / "s").exists()
