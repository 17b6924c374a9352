"""What one sweep entry does on whichever node runs it: one command line of the sweep (docs/sweeps.md).

The same call for every backend: a Ray task calls :func:`execute` (or :func:`collect_dataset`)
directly, a SLURM job runs ``python -m offline_gitd.sweeps.task ENTRY.json``, whose JSON holds
that call's arguments (``core.run_entry``, ``core.collect_entries``).

A run is a function of its config (docs/architecture.md#a-run-is-a-function-of-its-config), so the task is the command a user would type,
parsed by the package's own parser and run in-process: ``train ... --out RUN_DIR`` for a new run,
the same with ``--resume`` when the run directory already holds a started run (a retry after a
lost worker, or a sweep re-run after a crash), so a run continues from its own checkpoints.

The task holds the run directory's lock throughout (docs/locks.md; a run another process is
writing is left to it: outcome ``busy``), records its state (running, then done or failed) beside
the run and sends the run's output to ``logs/NAME.log``; a failure becomes a returned outcome with
the last line of its error, never an exception, so Ray retries only what it should: a task whose
worker or node died (and SLURM requeues only a job whose node failed or that was preempted).
Nothing here imports JAX at module level: the device settings must be in place before it loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from offline_gitd.rundir.lock import HEARTBEAT_SECONDS, STALE_BEATS, LockBusy, hold_run_dir
from offline_gitd.sweeps.pinning import claimed_cores
from offline_gitd.sweeps.state import SweepPaths, now, read_state, update_state

CONFIG_FILE = "config.json"


def _device_settings(gpus: float, cpus: float) -> None:
    """Keep a CPU-only task off the GPU, and a GPU-fraction task inside its share of memory
    (JAX otherwise preallocates 75% of the card in every process that shares it); then ask XLA for
    what the command line asks for (:func:`~offline_gitd.xla_start.prepare_xla`), with one CPU device
    per core the spec gives the run (``[resources] cpus``), not per core of the node, which the
    node's other runs share. Too late in a reused worker whose JAX already started: the first
    task's settings stand, and every task of a sweep asks for the same."""
    from offline_gitd.xla_start import CHOICE, prepare_xla

    if gpus <= 0:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    elif gpus < 1:
        os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 * gpus:.3f}")
    os.environ.setdefault(CHOICE, str(max(1, int(cpus))))
    prepare_xla()


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _node_id() -> str:
    """Ray's node id inside a Ray task; otherwise (a SLURM job, a direct call) the node's name.
    Asking Ray outside a Ray task would start a Ray instance."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return ray.get_runtime_context().get_node_id()
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def _pin_note(cores: list[int] | None) -> str | None:
    if cores is None:
        return None
    if not cores:
        return "not pinned: every core this run may use is held by another run (docs/sweeps.md#runs-pinned-to-cores)"
    return f"pinned to core{'s' * (len(cores) > 1)} {','.join(map(str, cores))}"


def run_command(argv: list[str], log: Path, note: str | None = None) -> str | None:
    """Run ``offline_gitd ARGV`` in this process with its output appended to ``log`` (after
    ``note``, a line about where it runs); returns ``None`` on success or the last line of the error."""
    from offline_gitd.commands import build_parser
    from offline_gitd.errors import UsageError

    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", buffering=1) as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        print(f"=== {now()} offline_gitd {shlex.join(argv)}")
        if note:
            print(note)
        try:
            args = build_parser().parse_args(argv)
            args.argv = list(argv)  # the run's provenance records the command, as cli.main does
            code = int(args.func(args) or 0)
        except UsageError as err:
            print(f"offline_gitd: error: {err}")
            return _last_line(str(err)) or type(err).__name__
        except SystemExit as exit_:  # argparse's own refusals; its message is already in the log
            out.flush()
            return _last_line(log.read_text()) if exit_.code else None
        except Exception as err:
            traceback.print_exc()
            return f"{type(err).__name__}: {_last_line(str(err))}"
        if code:
            out.flush()
            return _last_line(log.read_text()) or f"exit code {code}"
    return None


def execute(
    name: str,
    argv: list[str],
    root: str,
    sweep_id: str,
    gpus: float,
    resumable: bool,
    cpus: float = 1,
    pin: bool = False,
) -> dict[str, Any]:
    """Run one sweep entry (a grid run, or a dataset to collect) and record what happened.

    ``resumable`` entries are run directories: ``--out`` and ``--resume`` are added here, where
    the run directory is seen, so a retried task resumes what its lost attempt started. ``pin``:
    run on cores of its own (``pinning.py``), claimed before JAX starts its thread pool.
    """
    _device_settings(gpus, cpus)
    paths = SweepPaths(Path(root))
    previous = read_state(paths.state(name))
    retried = previous.get("status") == "running" and previous.get("sweep_id") == sweep_id
    attempt = previous.get("attempt", 0) + 1 if retried else 1
    if not resumable:
        return _run_entry(name, list(argv), argv, paths, sweep_id, attempt, resumed=False, pin=pin, cpus=cpus)
    run_dir = paths.run_dir(name)
    # The run's one writer from here (docs/locks.md). A retry after a lost node may find the lost
    # attempt's lock not yet stale, and waits that out; anyone else's run is left to its holder.
    wait = HEARTBEAT_SECONDS * (STALE_BEATS + 1) if retried else 0.0
    try:
        with hold_run_dir(run_dir, wait=wait):
            resume = (run_dir / CONFIG_FILE).exists()
            command = [*argv, "--out", str(run_dir), "--no-progress"] + (["--resume"] if resume else [])
            return _run_entry(name, command, argv, paths, sweep_id, attempt, resumed=resume, pin=pin, cpus=cpus)
    except LockBusy as busy:
        return {"name": name, "status": "busy", "error": str(busy), "seconds": 0.0, "attempt": 0}


def _run_entry(
    name: str,
    command: list[str],
    argv: list[str],
    paths: SweepPaths,
    sweep_id: str,
    attempt: int,
    resumed: bool,
    pin: bool = False,
    cpus: float = 1,
) -> dict[str, Any]:
    """Run ``command`` as entry ``name``, recording its state before and after, with the wall
    time it took, the host it ran on (the sweep publishes both, docs/sweeps.md#timings), and
    the cores it was pinned to when ``pin`` (``pinning.py``: claimed here, before the command
    starts JAX; ``[]`` when none were free, ``None`` when not asked)."""
    state_path = paths.state(name)
    host = socket.gethostname()
    with claimed_cores(pin, max(1, int(cpus))) as cores:
        update_state(
            state_path,
            name=name,
            status="running",
            sweep_id=sweep_id,
            attempt=attempt,
            node=_node_id(),
            host=host,
            resumed=resumed,
            cached=False,
            argv=list(argv),
            started_at=now(),
            error=None,
            cores=cores,
        )
        started = time.perf_counter()
        error = run_command(command, paths.log(name), note=_pin_note(cores))
    status = "failed" if error else "done"
    seconds = round(time.perf_counter() - started, 1)
    update_state(state_path, status=status, error=error, seconds=seconds, finished_at=now())
    outcome = {"name": name, "status": status, "error": error, "seconds": seconds, "attempt": attempt}
    return {**outcome, "host": host, "resumed": resumed}


def collect_dataset(
    name: str,
    argv: list[str],
    root: str,
    sweep_id: str,
    dataset_id: str,
    data_dir: str | None,
    cpus: float = 1,
    record_missing: bool = False,
) -> dict[str, Any]:
    """A ``[[collect]]`` entry: record the dataset unless the node already sees it in its data
    root (collected by an earlier sweep, or by hand), which counts as done.

    A dataset that a repository manifest lists is fetched from its mirrors first
    (docs/sweeps.md#datasets-from-mirrors): the published data, not a new recording that differs
    from it on another CPU. When no mirror gives it the entry fails, saying so, unless
    ``record_missing`` (``sweep --record-missing``) asks for a new recording."""
    _device_settings(0, cpus)
    import minari

    from offline_gitd.data.pack_fetch import find_entry, repository_manifests
    from offline_gitd.data.paths import use_minari_root

    use_minari_root(data_dir)
    if dataset_id in minari.list_local_datasets():
        state = SweepPaths(Path(root)).state(name)
        update_state(state, name=name, status="done", sweep_id=sweep_id, argv=list(argv), error=None, cached=True)
        return {"name": name, "status": "done", "error": None, "seconds": 0.0, "attempt": 1, "cached": True}
    if find_entry(dataset_id, repository_manifests()) is not None:
        fetch = ["fetch", "minari", dataset_id, *(["--data-dir", data_dir] if data_dir else [])]
        outcome = execute(name, fetch, root, sweep_id, 0, resumable=False, cpus=cpus)
        if outcome["status"] == "done":
            return {**outcome, "cached": True, "fetched": True}
        if not record_missing:
            error = f"{outcome['error']}; pass --record-missing to record it anew"
            update_state(SweepPaths(Path(root)).state(name), error=error)
            return {**outcome, "error": error}
    # An attempt that died before writing the dataset leaves a partial behaviour run; recording
    # starts again from step 0 (a dataset is the whole replay of one run), so it is cleared.
    shutil.rmtree(SweepPaths(Path(root)).run_dir(name), ignore_errors=True)
    return execute(name, argv, root, sweep_id, 0, resumable=False, cpus=cpus)


ENTRY_POINTS = {"execute": execute, "collect_dataset": collect_dataset}


def main(argv: list[str] | None = None) -> int:
    """``python -m offline_gitd.sweeps.task ENTRY.json``: run the entry the JSON describes
    (``{"call": "execute" | "collect_dataset", "args": {...}}``); exit 0 when it is done, 1 when
    it failed (its state and log say why)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m offline_gitd.sweeps.task ENTRY.json", file=sys.stderr)
        return 2
    entry = json.loads(Path(argv[0]).read_text())
    outcome = ENTRY_POINTS[entry["call"]](**entry["args"])
    print(json.dumps(outcome), flush=True)
    return 0 if outcome["status"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
