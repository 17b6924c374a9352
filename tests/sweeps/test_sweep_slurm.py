"""Sweeps on a real one-node SLURM cluster on this machine, never a mock.

``slurmctld``, ``slurmd`` and ``munged`` are started by ``tests/sweeps/slurm_cluster.py`` (Debian's
packages; ``make slurm``) and ``offline_gitd sweep --backend slurm`` is run against them as a user
would, in a subprocess. The grid is the Ray test's: four tiny CartPole DQN runs. Behaviours: the
driver may exit after submitting and a second pass follows the queued jobs and puts every row on
the board exactly once; a third pass does nothing; a job requeued mid-run (as preemption or a
node failure does) resumes its run from its checkpoint within the same pass; a job killed with
``scancel`` is reported and the next pass submits it again, and it resumes. The job scripts'
resource mapping is checked without a cluster.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.slurm import Layout, SlurmOptions, job_script, sbatch_directives
from offline_gitd.sweeps.spec import load_spec
from tests.sweeps.slurm_cluster import LocalSlurm, missing
from tests.sweeps.test_sweep_ray import assert_every_row_once, spec_text, states


@pytest.fixture(scope="session")
def slurm():
    reason = missing()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"no local SLURM (CI=true): {reason}")
        pytest.skip(f"no local SLURM: {reason}")
    with LocalSlurm() as cluster:
        yield cluster


def start_sweep(cluster: LocalSlurm, spec: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec), "--out", str(out), "--backend", "slurm", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**cluster.env, "JAX_PLATFORMS": "cpu"},
    )


def finish(process: subprocess.Popen, expect: int = 0, timeout: float = 420) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == expect, output
    return output


def jobs(out: Path) -> dict[str, dict]:
    return json.loads((out / "slurm" / "jobs.json").read_text())


def all_job_ids(cluster: LocalSlurm) -> set[str]:
    return set(cluster.run("squeue", "--noheader", "--array", "--states=all", "--format=%i").split())


@pytest.mark.slurm
def test_driver_exits_second_pass_collects_third_does_nothing(slurm, tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(spec_text(steps=2000))
    out = tmp_path / "sweep"
    submitted = finish(start_sweep(slurm, spec, out, "--no-wait"), timeout=60)
    assert "submitted job array" in submitted and "4 runs" in submitted
    recorded_jobs = jobs(out)
    assert len(recorded_jobs) == 4 and len({record["job"] for record in recorded_jobs.values()}) == 4

    output = finish(start_sweep(slurm, spec, out))
    # the second pass follows the first pass's jobs and submits none; the jobs that finished while it
    # started (8 s each, two at a time: under load a few may) count as done, the rest are followed
    followed = re.search(r"(\d+) already done, \d+ to run.*following (\d+) queued or running jobs", output, re.S)
    assert followed and sum(map(int, followed.groups())) == 4, output
    assert "submitted job array" not in output, output
    assert "sweep finished: 4/4 done, 0 failed" in output
    assert jobs(out) == recorded_jobs  # nothing submitted twice
    recorded = states(out)
    assert len(recorded) == 4 and all(state["status"] == "done" and state["submitted"] for state in recorded.values())
    assert {state["node"] for state in recorded.values()} == {"localnode"}
    assert_every_row_once(out, runs=4, steps=2000)
    for name, state in recorded.items():  # the job ran the same command a Ray task runs
        command = json.loads((out / "runs" / name / "config.json").read_text())["provenance"]["command_line"]
        assert command[1:] == [*state["argv"], "--out", str(out / "runs" / name), "--no-progress"]

    board_before = (out / "board.csv").read_bytes()
    snapshot = {
        path: path.stat().st_mtime_ns for path in out.rglob("*") if path.is_file() and path.name != "sweep.json"
    }
    known_jobs = all_job_ids(slurm)
    again = finish(start_sweep(slurm, spec, out), timeout=120)
    assert "nothing to do" in again and "submitted" not in again
    assert (out / "board.csv").read_bytes() == board_before
    assert {path: path.stat().st_mtime_ns for path in snapshot} == snapshot  # no run, log or state touched
    assert all_job_ids(slurm) == known_jobs  # no job submitted


def _running_with_checkpoint(out: Path, exclude: set[str]) -> str | None:
    for name, state in states(out).items() if (out / "state").exists() else ():
        checkpoints = out / "runs" / name / "checkpoints"
        if name not in exclude and state.get("status") == "running" and checkpoints.exists():
            if any(checkpoints.iterdir()):
                return name
    return None


def _catch(out: Path, process: subprocess.Popen, exclude: set[str]) -> str:
    # generous: on a loaded machine the runs reach their first checkpoint late
    deadline = time.monotonic() + 480
    while time.monotonic() < deadline and process.poll() is None:
        victim = _running_with_checkpoint(out, exclude)
        if victim is not None:
            return victim
        time.sleep(0.2)
    raise AssertionError("no running run with a checkpoint was seen")


def make_eligible_now(cluster: LocalSlurm, job: str) -> None:
    """SLURM holds a requeued job back for two minutes (its BeginTime, reason ``BeginTime``) before
    it may start again; an administrator lifts that hold with ``StartTime=now``. The test does the
    same so the job restarts at once: what the sweep does with the requeued job is unchanged, only
    the cluster's idle wait goes."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = cluster.run("squeue", "--noheader", f"--jobs={job}", "--format=%T %r").split()
        if state[:2] == ["PENDING", "BeginTime"]:
            cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now")
            return
        time.sleep(0.2)
    raise AssertionError(f"the requeued job {job} was never seen held back by its BeginTime")


@pytest.mark.slurm
def test_requeued_job_resumes_and_cancelled_job_resumes_on_the_next_pass(slurm, tmp_path):
    spec = tmp_path / "grid.toml"
    spec.write_text(spec_text(steps=2000))
    out = tmp_path / "sweep"
    process = start_sweep(slurm, spec, out)
    requeued = _catch(out, process, set())
    slurm.run("scontrol", "requeue", jobs(out)[requeued]["job"])  # what preemption or a lost node does
    make_eligible_now(slurm, jobs(out)[requeued]["job"])
    cancelled = _catch(out, process, {requeued})
    slurm.run("scancel", jobs(out)[cancelled]["job"])

    output = finish(process, expect=1)
    assert "sweep finished: 3/4 done, 1 failed" in output, output
    assert f"failed   {cancelled}" in output and "CANCELLED" in output
    recorded = states(out)
    assert recorded[requeued]["status"] == "done" and recorded[requeued]["attempt"] >= 2
    assert "--resume" in (out / "logs" / f"{requeued}.log").read_text()  # the requeued job continued its run

    again = finish(start_sweep(slurm, spec, out))
    assert "3 already done, 1 to run" in again and "submitted job array" in again and ": 1 run " in again
    assert "sweep finished: 4/4 done, 0 failed" in again, again
    assert "--resume" in (out / "logs" / f"{cancelled}.log").read_text()  # resubmitted, it resumed
    assert_every_row_once(out, runs=4, steps=2000)  # both interrupted runs whole, nothing twice


def test_job_scripts_map_the_specs_resources(tmp_path):
    """CPUs round up to whole ones, GPUs become a gres, a GPU fraction needs a gres that shares one,
    the array is the sweep's own; --dry-run writes and submits nothing."""
    spec_path = tmp_path / "gpu.toml"
    spec_path.write_text(spec_text(steps=400).replace("cpus = 1", "cpus = 1.5\ngpus = 2"))
    spec = load_spec(spec_path)
    options = SlurmOptions(out=tmp_path / "out", partition="gpu", time="02:00:00", options=("account=rl", "exclusive"))
    directives = sbatch_directives(spec, options, "grid")
    assert directives["cpus-per-task"] == "2" and directives["gres"] == "gpu:2"
    assert directives["partition"] == "gpu" and directives["time"] == "02:00:00"
    assert directives["account"] == "rl" and directives["exclusive"] is None and "requeue" in directives
    script = job_script(directives, Layout(options.out), [Path("/s/a.json"), Path("/s/b.json")], options)
    assert (
        "#SBATCH --array=0-1\n" in script and "#SBATCH --gres=gpu:2\n" in script and "#SBATCH --exclusive\n" in script
    )
    assert '-m offline_gitd.sweeps.task "${ENTRIES[$SLURM_ARRAY_TASK_ID]}"' in script
    assert sbatch_directives(spec, options, "collect")["cpus-per-task"] == "1"

    spec_path.write_text(spec_text(steps=400).replace("cpus = 1", "cpus = 1\ngpus = 0.5"))
    half = load_spec(spec_path)
    with pytest.raises(UsageError, match="whole GPUs"):
        sbatch_directives(half, SlurmOptions(out=tmp_path), "grid")
    shared = sbatch_directives(half, SlurmOptions(out=tmp_path, options=("gres=shard:1",)), "grid")
    assert shared["gres"] == "shard:1"
    with pytest.raises(UsageError, match="set by the sweep"):
        sbatch_directives(spec, SlurmOptions(out=tmp_path, options=("array=0-3",)), "grid")

    out = tmp_path / "dry"
    result = subprocess.run(
        [sys.executable, "-m", "offline_gitd.cli", "sweep", str(spec_path), "--out", str(out), "--backend", "slurm"]
        + ["--dry-run", "--slurm-option", "gres=shard:1", "--max-parallel", "2"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --array=0-3%2" in result.stdout and "nothing was submitted" in result.stdout
    assert not out.exists()
