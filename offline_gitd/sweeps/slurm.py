"""The SLURM backend of ``offline_gitd sweep`` (``--backend slurm``; docs/sweeps-slurm.md).

Each run is one element of a job array submitted with ``sbatch`` (no other dependency): all runs
of a sweep ask for the same resources, which is what an array is for. The job runs the same call
a Ray task makes, ``python -m offline_gitd.sweeps.task ENTRY.json`` (``task.main``), so a job that
SLURM requeues (node failure, preemption; jobs are ``--requeue``-able) or that a later pass submits
again resumes its run directory from its checkpoints. Skipping complete runs, submitting each
finished run to its board once and the status lines are the sweep's own (``core.py``).

The driver need not outlive the jobs. It records which job runs which entry in
``OUT/slurm/jobs.json``, and a pass over the same spec first asks ``squeue`` which of those are
still queued or running: those are followed, not submitted again; runs that are neither done nor
queued are submitted; finished runs go on the board. A job that ended without finishing its run
(``scancel``, a time limit) is reported, and the next pass submits it again, resuming the run.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.core import (
    Sweep,
    action,
    collect_entries,
    needed_collect,
    open_sweep,
    plan_table,
    record_collect,
    record_outcome,
    run_entry,
    settle_complete,
    show_running,
    summary,
)
from offline_gitd.sweeps.on_board import BoardCheck
from offline_gitd.sweeps.spec import RunPlan, SweepSpec, expand
from offline_gitd.sweeps.state import SweepPaths, read_state, write_state
from offline_gitd.sweeps.status import StatusTable

POLL_SECONDS = 2.0
SLURM_DIR = "slurm"
# Job states in which a job may still run its entry (squeue --states=all also lists ended jobs
# for MinJobAge seconds: COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, ...).
ACTIVE = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "PREEMPTED",
}
OPTION_KEY = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
MANAGED = {"array": "each sweep entry is one element of the array the sweep submits"}


@dataclass(frozen=True)
class SlurmOptions:
    out: Path
    partition: str | None = None
    time: str | None = None
    options: tuple[str, ...] = ()  # --slurm-option KEY=VALUE (or KEY for a flag), as given
    max_parallel: int | None = None
    wait: bool = True
    python: str = field(default_factory=lambda: sys.executable)


@dataclass(frozen=True)
class Layout:
    """Where the backend writes under the sweep folder: ``slurm/jobs.json`` (entry -> job),
    ``slurm/entries/NAME.json`` (each job's call), ``slurm/scripts/``, ``slurm/output/``."""

    root: Path

    @property
    def jobs(self) -> Path:
        return self.root / SLURM_DIR / "jobs.json"

    def entry(self, name: str) -> Path:
        return self.root / SLURM_DIR / "entries" / f"{name}.json"

    def script(self, sweep_id: str, kind: str) -> Path:
        return self.root / SLURM_DIR / "scripts" / f"{sweep_id}-{kind}.sh"

    @property
    def output(self) -> Path:
        return self.root / SLURM_DIR / "output"


def sbatch_directives(spec: SweepSpec, options: SlurmOptions, kind: str) -> dict[str, str | None]:
    """``#SBATCH`` options for the grid (the spec's resources) or the collect array (one CPU).

    CPUs per run become ``--cpus-per-task`` (rounded up: SLURM allots whole CPUs) and GPUs
    ``--gres=gpu:N``. SLURM allots whole GPUs, so a fraction (which Ray shares) is refused unless
    a ``--slurm-option gres=...`` (e.g. a ``shard`` gres) says how the cluster shares them.
    """
    user: dict[str, str | None] = {}
    for option in options.options:
        key, sep, value = option.partition("=")
        key = key.removeprefix("--")
        if not OPTION_KEY.fullmatch(key):
            raise UsageError(f"--slurm-option {option!r}: expected KEY=VALUE (an sbatch option without its --)")
        if key in MANAGED:
            raise UsageError(f"--slurm-option {key}: set by the sweep ({MANAGED[key]})")
        user[key] = value if sep else None
    resources = spec.resources
    directives: dict[str, str | None] = {"job-name": f"gitd-{spec.path.stem}"}
    if kind == "grid":
        directives["cpus-per-task"] = str(max(1, math.ceil(resources.cpus)))
        if resources.gpus:
            if not float(resources.gpus).is_integer() and "gres" not in user:
                raise UsageError(
                    f"[resources] gpus = {resources.gpus:g}: SLURM allots whole GPUs; set gpus = 1, or pass "
                    "--slurm-option gres=... naming how your cluster shares a GPU (e.g. gres=shard:1)"
                )
            directives["gres"] = f"gpu:{math.ceil(resources.gpus)}"
    else:
        directives["cpus-per-task"] = "1"
    directives["requeue"] = None
    directives["open-mode"] = "append"  # a requeued job's output follows its first attempt's
    if options.partition:
        directives["partition"] = options.partition
    if options.time:
        directives["time"] = options.time
    directives.update(user)
    return directives


def job_script(directives: dict[str, str | None], layout: Layout, entries: list[Path], options: SlurmOptions) -> str:
    """A job array script: element i runs ``python -m offline_gitd.sweeps.task ENTRIES[i]``."""
    array = f"0-{len(entries) - 1}" + (f"%{options.max_parallel}" if options.max_parallel else "")
    lines = ["#!/bin/bash", f"#SBATCH --array={array}"]
    lines += [f"#SBATCH --{key}" + ("" if value is None else f"={value}") for key, value in directives.items()]
    lines += [
        f"#SBATCH --output={layout.output}/%A_%a.out",
        f"#SBATCH --chdir={Path.cwd()}",
        "# One sweep entry per array element; the entry resumes its run directory when it holds a started run.",
        "ENTRIES=(",
        *(f"  {shlex.quote(str(entry))}" for entry in entries),
        ")",
        f'exec {shlex.quote(options.python)} -m offline_gitd.sweeps.task "${{ENTRIES[$SLURM_ARRAY_TASK_ID]}}"',
        "",
    ]
    return "\n".join(lines)


def _slurm_command(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        raise UsageError(f"{argv[0]}: not found; --backend slurm runs on a SLURM login node (sbatch, squeue on PATH)")
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode:
        message = (result.stderr or result.stdout).strip().splitlines()
        raise UsageError(f"{shlex.join(argv)} failed: {message[-1] if message else f'exit {result.returncode}'}")
    return result.stdout


def job_states(job_ids: list[str]) -> dict[str, str]:
    """Each known job's state (``123_4`` -> ``RUNNING``), ended ones included while SLURM keeps
    them (``MinJobAge``); a job SLURM no longer knows is absent. Only this user's jobs are listed:
    the sweep's are among them, and a big cluster's whole queue is not."""
    if not job_ids:
        return {}
    text = _slurm_command(["squeue", "--me", "--noheader", "--array", "--states=all", "--format=%i|%T"])
    states = dict(line.strip().split("|", 1) for line in text.splitlines() if "|" in line)
    return {job: states[job] for job in job_ids if job in states}


def sbatch(script: Path, dependency: list[str]) -> str:
    """Submit ``script``; its array's job id. A dependency is on the collect array, and a failed
    collection cancels the grid rather than leaving it pending forever."""
    argv = ["sbatch", "--parsable"]
    if dependency:
        argv += ["--dependency=afterok:" + ":".join(dependency), "--kill-on-invalid-dep=yes"]
    return _slurm_command([*argv, str(script)]).strip().split(";")[0]


@dataclass
class Tracked:
    """An entry this pass waits for: its job, and the sweep id its state carries."""

    name: str
    job: str
    sweep_id: str
    plan: RunPlan | None  # None: a [[collect]] entry


def _active(jobs: dict[str, Any], states: dict[str, str], name: str) -> bool:
    record = jobs.get(name)
    return record is not None and states.get(record["job"]) in ACTIVE


def run_slurm(spec: SweepSpec, options: SlurmOptions, stream: TextIO | None = None) -> int:
    """Submit every run that is neither done nor queued, then (unless ``wait`` is off) follow the
    jobs until none is left, putting each finished run on its board; 0 when all are done."""
    stream = stream or sys.stdout
    sbatch_directives(spec, options, "grid")  # refuse bad options before the sweep folder exists
    sweep = open_sweep(spec, options.out)
    layout = Layout(sweep.paths.root)
    table = StatusTable([plan.name for plan in sweep.plans], stream)
    todo, damaged = settle_complete(sweep, table, stream)
    if not todo:
        return summary(sweep, table, damaged, stream) if damaged else 0
    jobs: dict[str, Any] = read_state(layout.jobs)
    states = job_states([record["job"] for record in jobs.values()])
    collect = collect_entries(spec, sweep.paths, "")
    tracked = [
        Tracked(name, jobs[name]["job"], jobs[name]["sweep_id"], plan)
        for plan in todo
        if _active(jobs, states, name := plan.name)
    ]
    tracked += [
        Tracked(name, jobs[name]["job"], jobs[name]["sweep_id"], None)
        for entry in collect
        if _active(jobs, states, name := entry["name"])
    ]
    submit = [plan for plan in todo if not _active(jobs, states, plan.name)]
    if tracked:
        table.line(f"following {len(tracked)} queued or running jobs of an earlier pass")
    if submit:
        tracked += _submit(sweep, options, layout, jobs, submit, [t for t in tracked if t.plan is None], table)
    if not options.wait:
        print(f"jobs submitted; run the same command again to collect what finished ({sweep.boards})", file=stream)
        return 0
    try:
        failures = damaged + _follow(sweep, layout, tracked, table)
    except KeyboardInterrupt:
        table.close()
        print(
            f"stopped following; the jobs keep running on SLURM: run the same command again to collect them "
            f"into {sweep.paths.root}",
            file=sys.stderr,
        )
        return 130
    return summary(sweep, table, failures, stream)


def _submit(
    sweep: Sweep,
    options: SlurmOptions,
    layout: Layout,
    jobs: dict[str, Any],
    submit: list[RunPlan],
    collecting: list[Tracked],
    table: StatusTable,
) -> list[Tracked]:
    """Write the entries and scripts of this pass and ``sbatch`` them: the datasets first (unless
    an earlier pass's collect jobs are still queued, which the grid then waits for), then the grid."""
    sweep_id = uuid.uuid4().hex[:12]
    gpus = math.ceil(sweep.spec.resources.gpus)
    submitted: list[Tracked] = []
    dependency = [t.job for t in collecting]
    # Only the datasets a run of this pass trains on; the others' runs are done (core.needed_collect).
    collect = collect_entries(sweep.spec, sweep.paths, sweep_id, needed_collect(sweep.spec, submit))
    if collect and not collecting:
        script = _write_array(sweep, options, layout, "collect", sweep_id, [("collect_dataset", e) for e in collect])
        array = sbatch(script, [])
        dependency = [array]
        submitted += [Tracked(entry["name"], f"{array}_{i}", sweep_id, None) for i, entry in enumerate(collect)]
        _record(layout, jobs, submitted)
        table.line(f"submitted job array {array}: {len(collect)} datasets to collect if absent ({script})")
    grid = [("execute", run_entry(plan, sweep.paths, sweep_id, gpus, sweep.spec.resources.cpus)) for plan in submit]
    script = _write_array(sweep, options, layout, "grid", sweep_id, grid)
    array = sbatch(script, dependency)
    submitted += [Tracked(plan.name, f"{array}_{i}", sweep_id, plan) for i, plan in enumerate(submit)]
    after = f", after job {':'.join(dependency)}" if dependency else ""
    runs = f"{len(submit)} run" + "s" * (len(submit) != 1)
    table.line(f"submitted job array {array}: {runs}{after} ({script})")
    _record(layout, jobs, submitted)
    return submitted


def _record(layout: Layout, jobs: dict[str, Any], submitted: list[Tracked]) -> None:
    """Note each submitted entry's job at once, so an interrupted pass never submits one twice."""
    jobs.update({t.name: {"job": t.job, "sweep_id": t.sweep_id} for t in submitted})
    write_state(layout.jobs, jobs)


def _write_array(
    sweep: Sweep, options: SlurmOptions, layout: Layout, kind: str, sweep_id: str, calls: list[tuple[str, dict]]
) -> Path:
    paths = []
    for call, args in calls:
        write_state(layout.entry(args["name"]), {"call": call, "args": args})
        paths.append(layout.entry(args["name"]))
    layout.output.mkdir(parents=True, exist_ok=True)
    script = layout.script(sweep_id, kind)
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(job_script(sbatch_directives(sweep.spec, options, kind), layout, paths, options))
    return script


def _follow(sweep: Sweep, layout: Layout, tracked: list[Tracked], table: StatusTable) -> list[tuple[str, str]]:
    """Poll the entries' states and ``squeue`` until every tracked job has ended."""
    failures: list[tuple[str, str]] = []
    waiting = list(tracked)
    while waiting:
        states = job_states([t.job for t in waiting])
        for entry in list(waiting):
            outcome = _ended(sweep.paths, layout, entry, states.get(entry.job))
            if outcome is None:
                if entry.plan is not None:
                    show_running(sweep, entry.plan, entry.sweep_id, table)
                continue
            waiting.remove(entry)
            if entry.plan is None:
                record_collect(sweep, {"name": entry.name}, outcome, table)
            else:
                record_outcome(sweep, entry.plan, outcome, table, failures)
        if waiting:
            time.sleep(POLL_SECONDS)
    return failures


def _ended(paths: SweepPaths, layout: Layout, entry: Tracked, job_state: str | None) -> dict[str, Any] | None:
    """The entry's outcome once its job is through with it, else ``None``. The state file is read
    after the job's state, so a run that finished just before its job ended is seen done."""
    active = job_state in ACTIVE
    state = read_state(paths.state(entry.name))
    if state.get("sweep_id") == entry.sweep_id and state.get("status") in ("done", "failed"):
        if state.get("status") == "done" or not active:
            timing = {key: state.get(key) for key in ("seconds", "attempt", "host", "resumed", "cached")}
            return {"status": state["status"], "error": state.get("error"), **timing}
    if active:
        return None
    output = layout.output / f"{entry.job}.out"
    return {
        "status": "failed",
        "error": f"job {entry.job} ended ({job_state or 'no longer known to SLURM'}) before its run finished; "
        f"run the same command again to resume it (job output: {output})",
    }


def dry_run(spec: SweepSpec, options: SlurmOptions, stream: TextIO | None = None) -> None:
    """``--dry-run --backend slurm``: the table of runs and the job scripts a pass would submit
    (entries named by the files a real pass writes); nothing is written or submitted."""
    stream = stream or sys.stdout
    plans = expand(spec)
    paths = SweepPaths(options.out.absolute())
    layout = Layout(paths.root)
    print(plan_table(spec, plans, paths), file=stream)
    jobs: dict[str, Any] = read_state(layout.jobs)
    try:
        states = job_states([record["job"] for record in jobs.values()])
    except UsageError as err:
        states = {}
        if jobs:
            print(f"\n(cannot ask SLURM which earlier jobs are still queued: {err})", file=stream)
    check = BoardCheck(spec)
    due = [p for p in plans if action(paths, p, check) in ("new", "resume")]  # not done here nor on the board
    submit = [p for p in due if not _active(jobs, states, p.name)]
    queued = [p.name for p in due if _active(jobs, states, p.name)]
    if queued:
        print(f"\nalready queued or running (followed, not submitted): {', '.join(queued)}", file=stream)
    if not submit:
        print("\nno job to submit", file=stream)
        return
    needed = needed_collect(spec, submit)
    if needed:
        entries = [layout.entry(e["name"]) for e in collect_entries(spec, paths, "", needed)]
        script = job_script(sbatch_directives(spec, options, "collect"), layout, entries, options)
        print(f"\n# sbatch {layout.script('ID', 'collect')}\n{script}", file=stream)
    entries = [layout.entry(plan.name) for plan in submit]
    script = job_script(sbatch_directives(spec, options, "grid"), layout, entries, options)
    after = " --dependency=afterok:COLLECT_JOB --kill-on-invalid-dep=yes" if needed else ""
    print(f"\n# sbatch{after} {layout.script('ID', 'grid')}\n{script}", file=stream)
