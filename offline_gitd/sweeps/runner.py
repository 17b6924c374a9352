"""The Ray backend of ``offline_gitd sweep``: each run is one Ray task (the semantics are ``core.py``'s);
and the loop both local backends share, which also drives ``--backend processes`` (``processes.py``).

Scheduling, resource accounting and retries are Ray's (docs/sweeps.md): every run is one Ray task
declaring its CPUs and GPU fraction, retried by Ray when its worker or node is lost (the retry
resumes the run from its own checkpoints, see ``task.py``), and a run that fails for its own
reasons is reported, not retried, and never stops the others. Ray Core tasks rather than Ray
Tune: a run here is a whole command with its own epochs, checkpoints and resume, not a trainable
reporting to a tuner, and Tune's trial directories, searchers and schedulers would all sit unused
beside the run directories the package already defines.

Without ``--address`` the sweep starts an embedded local Ray instance (``ray.init(address="local")``,
never a cluster that happens to run on the machine); with one
it joins that cluster. Run directories, logs, states and the board live under ``--out``, which
on a cluster must be a path every node reaches (a shared filesystem).

Skipping complete runs, resuming started ones, submitting each finished run to its board once and
the status lines are the sweep's own (``core.py``), shared with the SLURM backend.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.core import (
    Sweep,
    collect_entries,
    needed_collect,
    open_sweep,
    record_collect,
    record_outcome,
    run_entry,
    settle_complete,
    show_running,
    summary,
)
from offline_gitd.sweeps.processes import ProcessPool
from offline_gitd.sweeps.spec import CollectStep, RunPlan, SweepSpec
from offline_gitd.sweeps.status import StatusTable
from offline_gitd.sweeps.task import collect_dataset, execute

POLL_SECONDS = 1.0


@dataclass(frozen=True)
class SweepOptions:
    out: Path
    address: str | None = None
    max_parallel: int | None = None
    backend: str = "ray"  # or "processes": child processes of the driver, no Ray (processes.py)
    pin: bool = True  # each run on cores of its own (pinning.py); --no-pin turns it off


# The HTTP/2 client preface and an empty SETTINGS frame: a Ray head (a gRPC server) answers with its
# own SETTINGS frame (RFC 9113, section 3.4).
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
HTTP2_SETTINGS = 4
JOIN_PROBE_SECONDS = 5.0


def check_ray_head(address: str) -> None:
    """Refuse, in seconds, an address where no Ray head answers: ``ray.init`` would retry for
    minutes where nothing listens, and without end (over 5 minutes measured) where something
    accepts the connection but is not a gRPC server (docs/bounds.md#other-network-waits)."""
    if address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address must look like HOST:PORT (the head's GCS address), got {address!r}")
    try:
        with socket.create_connection((host.removeprefix("ray://"), int(port)), timeout=JOIN_PROBE_SECONDS) as conn:
            answer = _http2_answer(conn)
    except OSError as err:
        raise UsageError(
            f"no Ray cluster answers at {address} ({err.strerror or err}); start one with ray start --head"
        ) from None
    if len(answer) < 9 or answer[3] != HTTP2_SETTINGS:
        raise UsageError(
            f"something at {address} accepts connections but does not answer as a Ray head (no gRPC reply within "
            f"{JOIN_PROBE_SECONDS:g} s); give the head's GCS address, HOST:6379 by default"
        )


def _http2_answer(conn: socket.socket) -> bytes:
    """Up to the first 9 bytes (one frame header) a server sends after the HTTP/2 preface."""
    conn.settimeout(JOIN_PROBE_SECONDS)
    conn.sendall(HTTP2_PREFACE)
    answer = b""
    try:
        while len(answer) < 9:
            chunk = conn.recv(9 - len(answer))
            if not chunk:
                break
            answer += chunk
    except TimeoutError:
        pass
    return answer


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
    # sweep user (docs/sweeps.md#on-a-cluster says what it means), so it is not printed each time.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    try:
        # "local": a new embedded instance even where RAY_ADDRESS or a cluster started on this
        # machine (ray start) would otherwise be joined silently by a sweep given no --address.
        ray.init(
            address=address or "local", log_to_driver=False, logging_level=logging.WARNING, include_dashboard=False
        )
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


@dataclass
class RayPool:
    """Sweep entries as Ray tasks, behind the interface ``processes.ProcessPool`` has too."""

    ray: Any
    spec: SweepSpec

    def __post_init__(self) -> None:
        resources = self.spec.resources
        self.tasks = {
            "collect_dataset": self.ray.remote(num_cpus=1, max_retries=resources.retries, max_calls=1)(collect_dataset),
            "execute": self.ray.remote(
                num_cpus=resources.cpus,
                num_gpus=resources.gpus,
                max_retries=resources.retries,
                retry_exceptions=False,
                max_calls=1,  # a fresh process per run: JAX frees its device memory only at exit
            )(execute),
        }

    def submit(self, call: str, args: dict[str, Any]) -> Any:
        return self.tasks[call].remote(**args)

    def wait(self, refs: list[Any], timeout: float) -> list[Any]:
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout)
        return ready

    def outcome(self, ref: Any, name: str) -> dict[str, Any]:
        """A task's returned outcome, or its Ray error (retries exhausted, cancelled) as a failure."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as err:
            lines = [line.strip() for line in str(err).splitlines() if line.strip()]
            return {"name": name, "status": "failed", "error": f"{type(err).__name__}: {lines[-1] if lines else ''}"}

    def cancel(self, refs: list[Any]) -> None:
        for ref in refs:
            self.ray.cancel(ref, force=True)

    def close(self) -> None:
        self.ray.shutdown()


def _open_pool(spec: SweepSpec, sweep: Sweep, options: SweepOptions, stream: TextIO) -> tuple[Any, int | None]:
    """The backend's pool and how many runs it keeps in flight (``None``: as Ray's resources allow)."""
    if options.backend == "processes":
        pool = ProcessPool(sweep.paths.root)
        slots = options.max_parallel or pool.slots(spec.resources.cpus)
        print(f"running on this machine, {slots} child process{'es' * (slots > 1)} at a time", file=stream, flush=True)
        return pool, slots
    ray = _init_ray(options.address)
    try:
        _check_resources(ray, spec)
    except BaseException:
        ray.shutdown()
        raise
    where = options.address or "an embedded local Ray instance"
    print(f"scheduling on {where}: {ray.cluster_resources().get('CPU', 0):g} CPUs in all", file=stream, flush=True)
    return RayPool(ray, spec), options.max_parallel


def run_sweep(spec: SweepSpec, options: SweepOptions, stream: TextIO | None = None) -> int:
    """Run every incomplete run of ``spec``; returns 0 when all are done, 1 if any failed."""
    stream = stream or sys.stdout
    if options.address:
        check_ray_head(options.address)  # before the sweep folder exists: a refusal leaves nothing
    sweep = open_sweep(spec, options.out)
    sweep_id = uuid.uuid4().hex[:12]
    table = StatusTable([plan.name for plan in sweep.plans], stream)
    todo, damaged = settle_complete(sweep, table, stream)
    if not todo:
        if damaged:  # nothing left to run: only runs the board refused
            return summary(sweep, table, damaged, stream)
        return 0
    pool, max_parallel = _open_pool(spec, sweep, options, stream)
    try:
        if not _collect(pool, sweep, needed_collect(spec, todo), sweep_id, max_parallel, table):
            return 1
        failures = damaged + _run_grid(pool, sweep, todo, sweep_id, options.pin, max_parallel, table)
    except KeyboardInterrupt:
        table.close()
        print(f"interrupted; run the same command again to continue the sweep in {sweep.paths.root}", file=sys.stderr)
        return 130
    finally:
        pool.close()
    return summary(sweep, table, failures, stream)


def _in_turn(
    pool: Any, calls: list[tuple[str, dict[str, Any]]], max_parallel: int | None, on_start=None
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Run ``calls`` on ``pool``, at most ``max_parallel`` at a time, yielding each one's
    arguments and outcome as it ends (``on_start(args)`` is called for each running one at every
    poll); whatever is still running when the caller stops (Ctrl-C, an error) is cancelled."""
    pending = deque(calls)
    inflight: dict[Any, dict[str, Any]] = {}
    try:
        while pending or inflight:
            while pending and (max_parallel is None or len(inflight) < max_parallel):
                call, args = pending.popleft()
                inflight[pool.submit(call, args)] = args
            ready = pool.wait(list(inflight), POLL_SECONDS)
            if on_start is not None:
                for args in inflight.values():
                    on_start(args)
            for handle in ready:
                args = inflight.pop(handle)
                yield args, pool.outcome(handle, args["name"])
    finally:
        if inflight:
            pool.cancel(list(inflight))


def _collect(
    pool: Any, sweep: Sweep, steps: tuple[CollectStep, ...], sweep_id: str, max_parallel: int | None, table: StatusTable
) -> bool:
    """Record the datasets the runs still to run train on (in parallel, each skipped where already
    local); one that only finished runs train on is not recorded (``core.needed_collect``)."""
    if len(steps) < len(sweep.spec.collect):
        table.line(f"not collecting {len(sweep.spec.collect) - len(steps)} datasets: no run left to run trains on them")
    entries = collect_entries(sweep.spec, sweep.paths, sweep_id, steps)
    for entry, step in zip(entries, steps, strict=True):
        table.line(f"collecting {step.out} ({step.steps} steps of {step.env}) if absent")
    ok = True
    for entry, outcome in _in_turn(pool, [("collect_dataset", entry) for entry in entries], max_parallel):
        ok = ok and outcome["status"] == "done"
        record_collect(sweep, entry, outcome, table)
    return ok


def _run_grid(
    pool: Any,
    sweep: Sweep,
    todo: list[RunPlan],
    sweep_id: str,
    pin: bool,
    max_parallel: int | None,
    table: StatusTable,
) -> list[tuple[str, str]]:
    resources = sweep.spec.resources
    plans = {plan.name: plan for plan in todo}
    calls = [
        ("execute", {**run_entry(plan, sweep.paths, sweep_id, resources.gpus, resources.cpus), "pin": pin})
        for plan in todo
    ]
    failures: list[tuple[str, str]] = []

    def running(args: dict[str, Any]) -> None:
        show_running(sweep, plans[args["name"]], sweep_id, table)

    for args, outcome in _in_turn(pool, calls, max_parallel, on_start=running):
        record_outcome(sweep, plans[args["name"]], outcome, table, failures)
    return failures
