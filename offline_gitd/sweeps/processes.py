"""The processes backend of ``offline_gitd sweep`` (``--backend processes``; docs/sweeps.md#without-ray).

Each sweep entry runs as a child process of the driver, ``python -m offline_gitd.sweeps.task
ENTRY.json``: the call a Ray task makes and a SLURM job runs (``task.main``), so a run resumes,
pins, records its state and lands on its board exactly as on the other backends. What it adds is
independence from Ray: a machine where Ray is not installed, or cannot be (a GPU machine reached
with no package index, where Ray's wheel is too large to carry), still runs a grid with one
command. What it leaves out is Ray's: no cluster, and no retry of a child that died (running the
sweep again resumes it from its checkpoints).

The pool is the small interface :func:`offline_gitd.sweeps.runner.run_sweep` drives: ``submit`` a
call, ``wait`` for one to end, read its ``outcome``, ``cancel`` what is left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_gitd.sweeps.state import write_state

POLL_SECONDS = 0.5
# OUT/processes/NAME.json (each child's call), NAME.out (its stderr) and NAME.outcome (its stdout, whose
# last line is the outcome). Both streams go to files, never pipes: a child writing more than a pipe
# holds (C code bypasses the run's log redirection) would otherwise block until the driver read it.
ENTRIES = "processes"


@dataclass(eq=False)  # a handle: equal only to itself, hashable
class Child:
    name: str
    process: subprocess.Popen
    output: Path
    printed: Path  # its stdout: the outcome on the last line


@dataclass
class ProcessPool:
    """Runs sweep entries as child processes of this one; see the module's docstring."""

    root: Path
    python: str = field(default_factory=lambda: sys.executable)

    def slots(self, cpus: float) -> int:
        """Runs at a time when ``--max-parallel`` is not given: the cores this process may use,
        ``[resources] cpus`` to a run (as Ray counts them)."""
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return max(1, int(cores // max(1.0, cpus)))

    def submit(self, call: str, args: dict[str, Any]) -> Child:
        folder = self.root / ENTRIES
        entry = folder / f"{args['name']}.json"
        write_state(entry, {"call": call, "args": args})
        output = folder / f"{args['name']}.out"
        printed_to = folder / f"{args['name']}.outcome"
        with output.open("ab") as errors, printed_to.open("wb") as printed:
            process = subprocess.Popen(
                [self.python, "-m", "offline_gitd.sweeps.task", str(entry)], stdout=printed, stderr=errors
            )
        return Child(args["name"], process, output, printed_to)

    def wait(self, children: list[Child], timeout: float) -> list[Child]:
        """The children that have ended, waiting up to ``timeout`` seconds for the first."""
        deadline = time.monotonic() + timeout
        while True:
            ended = [child for child in children if child.process.poll() is not None]
            if ended or time.monotonic() >= deadline:
                return ended
            time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))

    def outcome(self, child: Child, name: str) -> dict[str, Any]:
        """The outcome the child printed last (``task.main``), or its death as a failure."""
        lines = [line.strip() for line in child.printed.read_text(errors="replace").splitlines() if line.strip()]
        try:
            outcome = json.loads(lines[-1]) if lines else None
        except json.JSONDecodeError:
            outcome = None
        if isinstance(outcome, dict) and "status" in outcome:
            return outcome
        said = [line.strip() for line in child.output.read_text(errors="replace").splitlines() if line.strip()]
        why = said[-1] if said else f"exit code {child.process.returncode}"
        return {"name": name, "status": "failed", "error": f"the run's process ended without an outcome: {why}"}

    def cancel(self, children: list[Child]) -> None:
        """Stop the children still running (Ctrl-C, a driver error); each resumes on the next pass."""
        for child in children:
            if child.process.poll() is None:
                child.process.terminate()
        for child in children:
            try:
                child.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()

    def close(self) -> None:
        """Nothing to shut down: every child has been waited for or cancelled."""
