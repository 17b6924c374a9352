"""Run a sweep on Ray: skip what is complete, schedule the rest, submit each finished run once.

Scheduling, resource accounting and retries are Ray's (DESIGN §8): every run is one Ray task
declaring its CPUs and GPU fraction, retried by Ray when its worker or node is lost (the retry
resumes the run from its own checkpoints, see ``task.py``), and a run that fails for its own
reasons is reported, not retried, and never stops the others. Ray Core tasks rather than Ray
Tune: a run here is a whole command with its own epochs, checkpoints and resume, not a trainable
reporting to a tuner, and Tune's trial directories, searchers and schedulers would all sit unused
beside the run directories the package already defines.

Without ``--address`` the sweep starts an embedded local Ray instance (``ray.init()``); with one
it joins that cluster. Run directories, logs, states and the board live under ``--out``, which
on a cluster must be a path every node reaches (a shared filesystem).

The board is written only here, by the driver, after a run is done; the run's state then records
``submitted``. A crash between the two is harmless: submission skips rows already on the board
(same run, seed and step), so every run's rows are on the board exactly once.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.damaged import not_on_board
from offline_gitd.sweeps.spec import RunPlan, SweepSpec, expand
from offline_gitd.sweeps.state import SweepPaths, read_state, update_state, write_state
from offline_gitd.sweeps.status import StatusTable
from offline_gitd.sweeps.task import collect_dataset, execute

SWEEP_FILE = "sweep.json"
POLL_SECONDS = 1.0


@dataclass(frozen=True)
class SweepOptions:
    out: Path
    address: str | None = None
    max_parallel: int | None = None


def board_path(plan: RunPlan, out: Path) -> Path:
    board = Path(plan.board)
    return board if board.is_absolute() else out / board


def boards_text(plans: list[RunPlan], out: Path) -> str:
    boards = sorted({str(board_path(plan, out)) for plan in plans})
    return f"board {boards[0]}" if len(boards) == 1 else f"{len(boards)} boards in {Path(boards[0]).parent}"


def is_complete(paths: SweepPaths, plan: RunPlan) -> bool:
    """Done under exactly this command line (a changed spec makes a run due again)."""
    state = read_state(paths.state(plan.name))
    return state.get("status") == "done" and state.get("argv") == list(plan.argv)


def plan_table(spec: SweepSpec, plans: list[RunPlan], paths: SweepPaths) -> str:
    """``--dry-run``'s table: each run, what the sweep would do with it, and its command."""
    rows = []
    for plan in plans:
        if is_complete(paths, plan):
            action = "done (skip)"
        elif (paths.run_dir(plan.name) / "config.json").exists():
            action = "resume"
        else:
            action = "new"
        rows.append((plan.name, action, "offline_gitd " + " ".join(plan.command_line(paths.run_dir(plan.name), False))))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'run':<{width}}  {'action':<11}  command", f"{'-' * width}  {'-' * 11}  -------"]
    lines += [f"{name:<{width}}  {action:<11}  {command}" for name, action, command in rows]
    lines += ["", f"results go to {boards_text(plans, paths.root)}"]
    if spec.collect:
        lines += [
            f"collect first (if absent): offline_gitd {' '.join(step.argv(spec.data_dir))}" for step in spec.collect
        ]
    return "\n".join(lines)


def submit_run(spec: SweepSpec, paths: SweepPaths, plan: RunPlan) -> int:
    """Put a finished run's rows on its board (only those not already there); record it."""
    from offline_gitd.leaderboard.submit import submit

    run_dir = paths.run_dir(plan.name)
    report = submit([run_dir], board_path(plan, paths.root), spec.allow_new_env, skip_existing=True)
    update_state(paths.state(plan.name), submitted=True, rows=report.added[run_dir])
    return report.added[run_dir]


def _check_reachable(address: str) -> None:
    """Refuse an address nothing answers at, in seconds: ray.init would retry for minutes."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address must look like HOST:PORT (the head's GCS address), got {address!r}")
    try:
        socket.create_connection((host.removeprefix("ray://"), int(port)), timeout=5).close()
    except OSError as err:
        raise UsageError(
            f"no Ray cluster answers at {address} ({err.strerror or err}); start one with ray start --head"
        ) from None


def _use_token_if_available() -> None:
    """Join a cluster with Ray's token authentication when this machine has the token.

    ``ray start --head`` turns token authentication on and writes the token to
    ``~/.ray/auth_token``, but a process joining it stays in the disabled mode unless
    ``RAY_AUTH_MODE=token`` is set, and then retries for 20 s with a warning a second. A token
    sent to a cluster without authentication is ignored, so sending it when it exists is safe.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    token_file = Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))
    if os.environ.get("RAY_AUTH_TOKEN") or token_file.is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _init_ray(address: str | None) -> Any:
    if address:
        _use_token_if_available()  # before Ray is imported: it reads its auth mode at import
    import ray

    # The runs' own output goes to logs/NAME.log; forwarding every worker's output would bury the
    # status lines. Ray's notice that its default token authentication is on is not news to a
    # sweep user (the README's cluster recipe says what it means), so it is not printed each time.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING, include_dashboard=False)
    except ConnectionError as err:
        hint = ""
        if os.environ.get("RAY_AUTH_MODE") != "token":
            hint = (
                "; a cluster started with `ray start` uses token authentication (Ray's default): copy the "
                "head's ~/.ray/auth_token here and set RAY_AUTH_MODE=token"
            )
        raise UsageError(f"could not join the Ray cluster at {address}: {_first_line(str(err))}{hint}") from None
    return ray


def _check_resources(ray: Any, spec: SweepSpec) -> None:
    """A run asking for more than the cluster has would wait forever: refuse it up front."""
    total = ray.cluster_resources()
    wanted = spec.resources
    if wanted.gpus > total.get("GPU", 0):
        raise UsageError(
            f"each run asks for {wanted.gpus:g} GPU but the Ray cluster has {total.get('GPU', 0):g}; "
            "set [resources] gpus = 0 to run on CPU"
        )
    if wanted.cpus > total.get("CPU", 0):
        raise UsageError(f"each run asks for {wanted.cpus:g} CPUs but the Ray cluster has {total.get('CPU', 0):g}")


def run_sweep(spec: SweepSpec, options: SweepOptions, stream: TextIO | None = None) -> int:
    """Run every incomplete run of ``spec``; returns 0 when all are done, 1 if any failed."""
    stream = stream or sys.stdout
    plans = expand(spec)
    if options.address:
        _check_reachable(options.address)  # before the sweep folder exists: a refusal leaves nothing
    out = options.out.absolute()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {options.out}: exists and is not a directory")
    parents = {board_path(plan, out).parent for plan in plans}
    missing = sorted(str(parent) for parent in parents if parent != out and not parent.is_dir())
    if missing:
        raise UsageError(f"{missing[0]}: the board's directory does not exist; create it or change the spec's board")
    out.mkdir(parents=True, exist_ok=True)
    paths = SweepPaths(out)
    boards = boards_text(plans, out)
    sweep_id = uuid.uuid4().hex[:12]
    write_state(
        out / SWEEP_FILE,
        {"spec": str(spec.path), "spec_text": spec.path.read_text(), "runs": {p.name: list(p.argv) for p in plans}},
    )
    table = StatusTable([plan.name for plan in plans], stream)
    todo = []
    damaged: list[tuple[str, str]] = []  # done, but the board refuses them: reported, the rest go on
    for plan in plans:
        if is_complete(paths, plan):
            if not read_state(paths.state(plan.name)).get("submitted"):
                try:
                    submit_run(spec, paths, plan)
                except UsageError as err:
                    damaged.append((plan.name, not_on_board(plan, paths, err)))
                    table.state[plan.name] = "failed"
                    continue
            table.state[plan.name] = "done"
        else:
            todo.append(plan)
    print(
        f"sweep {spec.path}: {len(plans)} runs, {len(plans) - len(todo)} already done, {len(todo)} to run; "
        f"runs in {paths.root / 'runs'}, {boards}",
        file=stream,
        flush=True,
    )
    if not todo:
        if damaged:  # nothing left to run: only runs the board refused
            return _report(table, plans, damaged, paths, boards, stream)
        print(f"nothing to do: every run is done and on its board ({boards})", file=stream)
        return 0
    ray = _init_ray(options.address)
    try:
        _check_resources(ray, spec)
        where = options.address or "an embedded local Ray instance"
        print(f"scheduling on {where}: {ray.cluster_resources().get('CPU', 0):g} CPUs in all", file=stream, flush=True)
        if not _collect(ray, spec, paths, sweep_id, table):
            return 1
        failures = damaged + _run_grid(ray, spec, todo, paths, sweep_id, options.max_parallel, table)
    except KeyboardInterrupt:
        table.close()
        print(f"interrupted; run the same command again to continue the sweep in {out}", file=sys.stderr)
        return 130
    finally:
        ray.shutdown()
    return _report(table, plans, failures, paths, boards, stream)


def _report(
    table: StatusTable,
    plans: list[RunPlan],
    failures: list[tuple[str, str]],
    paths: SweepPaths,
    boards: str,
    stream: TextIO,
) -> int:
    """The sweep's last lines: the counts, then each failed run with its error and log."""
    table.close()
    done = sum(state == "done" for state in table.state.values())
    print(f"sweep finished: {done}/{len(plans)} done, {len(failures)} failed; {boards}", file=stream)
    for name, error in failures:
        print(f"  failed: {paths.run_dir(name)}: {error} (log: {paths.log(name)})", file=stream)
    return 1 if failures else 0


def _collect(ray: Any, spec: SweepSpec, paths: SweepPaths, sweep_id: str, table: StatusTable) -> bool:
    """Record the datasets the grid trains on (in parallel, each skipped where already local)."""
    if not spec.collect:
        return True
    task = ray.remote(num_cpus=1, max_retries=spec.resources.retries, max_calls=1)(collect_dataset)
    refs = {}
    for step in spec.collect:
        name = "collect-" + step.out.replace("/", "-")
        refs[task.remote(name, step.argv(spec.data_dir), str(paths.root), sweep_id, step.out, spec.data_dir)] = name
        table.line(f"collecting {step.out} ({step.steps} steps of {step.env}) if absent")
    ok = True
    for ref, name in refs.items():
        outcome = _outcome(ray, ref, name)
        if outcome["status"] != "done":
            ok = False
            table.line(f"failed   {name}: {outcome['error']} (log: {paths.log(name)})")
        else:
            table.line(f"dataset ready: {name}{' (already local)' if outcome.get('cached') else ''}")
    return ok


def _outcome(ray: Any, ref: Any, name: str) -> dict[str, Any]:
    """A task's returned outcome, or its Ray error (retries exhausted, cancelled) as a failure."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        return {"name": name, "status": "failed", "error": f"{type(err).__name__}: {lines[-1] if lines else ''}"}


def _run_grid(
    ray: Any,
    spec: SweepSpec,
    todo: list[RunPlan],
    paths: SweepPaths,
    sweep_id: str,
    max_parallel: int | None,
    table: StatusTable,
) -> list[tuple[str, str]]:
    resources = spec.resources
    task = ray.remote(
        num_cpus=resources.cpus,
        num_gpus=resources.gpus,
        max_retries=resources.retries,
        retry_exceptions=False,
        max_calls=1,  # a fresh process per run: JAX frees its device memory only at exit
    )(execute)
    pending = deque(todo)
    inflight: dict[Any, RunPlan] = {}
    failures: list[tuple[str, str]] = []
    try:
        while pending or inflight:
            while pending and (max_parallel is None or len(inflight) < max_parallel):
                plan = pending.popleft()
                ref = task.remote(plan.name, list(plan.argv), str(paths.root), sweep_id, resources.gpus, True)
                inflight[ref] = plan
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=POLL_SECONDS)
            for plan in inflight.values():
                state = read_state(paths.state(plan.name))
                if state.get("sweep_id") == sweep_id and state.get("status") == "running":
                    attempt = state.get("attempt", 1)
                    table.set(plan.name, "running", f"(attempt {attempt})" if attempt > 1 else "")
            for ref in ready:
                plan = inflight.pop(ref)
                outcome = _outcome(ray, ref, plan.name)
                if outcome["status"] == "busy":  # another process writes this run: left to it
                    outcome["error"] = f"left to its holder: {outcome['error']}"
                elif outcome["status"] == "done":
                    try:
                        rows = submit_run(spec, paths, plan)
                    except UsageError as err:  # a run with --eval-episodes 0 has no rows; a damaged one
                        outcome = {"status": "failed", "error": not_on_board(plan, paths, err)}
                    else:
                        table.set(plan.name, "done", f"{outcome.get('seconds', 0):.0f}s, {rows} rows on the board")
                if outcome["status"] != "done":
                    failures.append((plan.name, outcome["error"]))
                    table.set(plan.name, "failed", f"{outcome['error']} (log: {paths.log(plan.name)})")
    except BaseException:
        for ref in inflight:
            ray.cancel(ref, force=True)
        raise
    return failures
