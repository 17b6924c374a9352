"""Run a command under a hard memory limit and report what it used (docs/datasets.md#bigger-than-memory).

The limit is a memory cgroup, the only limit that counts what a memory-mapped store really costs:
``RLIMIT_AS`` counts the address space of every mapping, so a store bigger than the limit could
not even be mapped, while a cgroup counts the pages actually resident (anonymous memory and page
cache), reclaims clean file pages when the limit is reached, and kills the process (the OOM
killer) only when what cannot be reclaimed exceeds it. Swap is disabled for the cgroup, so swap
cannot hide an overflow. The mechanisms, in the order tried:

* cgroup v2 (``memory.max``, ``memory.swap.max`` 0): a child of this process's own cgroup, when
  the memory controller is enabled there and the folder is writable (root, or a delegated tree);
* cgroup v1 (``memory.limit_in_bytes``, and ``memory.memsw.limit_in_bytes`` when swap accounting
  is on): a child of this process's own memory cgroup (root);
* ``systemd-run --user --scope -p MemoryMax=... -p MemorySwapMax=0``: an unprivileged user with a
  systemd user session (most desktops).

Also a command line: ``python tests/memory_limit.py 1.5G -- offline_gitd train ...`` runs the
command under the limit and prints its figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

# Runs the command as this shell's own pid after moving itself into the cgroup: the command starts
# inside the limit, and waiting on the shell's pid is waiting on the command (exec keeps the pid).
_ENTER_AND_EXEC = 'echo $$ > "$0" && exec "$@"'
# For systemd's scope the shell stays, so it can read the scope's own peak after the command ends.
_RUN_AND_REPORT = (
    'out="$0"; shift; "$@"; rc=$?; dir="/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)"; '
    'cat "$dir/memory.peak" > "$out.peak" 2>/dev/null; cat "$dir/memory.events" > "$out.events" 2>/dev/null; '
    'exit "$rc"'
)


class NoMemoryLimit(RuntimeError):
    """No mechanism to limit memory here: not root (or no writable cgroup) and no systemd user session."""


@dataclass(frozen=True)
class LimitedRun:
    """What a command did under a memory limit.

    ``peak_bytes``: the cgroup's highest charge (resident anonymous memory plus page cache), None
    where the kernel does not report it (cgroup v2 before Linux 5.19). ``limit_hits``: how often a
    charge reached the limit and the kernel had to reclaim (v1 ``memory.failcnt``, v2 the ``max``
    count of ``memory.events``). ``oom_kills``: processes the OOM killer ended in the cgroup.
    ``maxrss_bytes``: the command's own peak resident set (``ru_maxrss``, mapped file pages included).
    ``read_bytes``: what the command read from storage, page faults on mapped files included
    (``read_bytes`` of ``/proc/PID/io``, which the kernel adds to this process's when it reaps it).
    """

    mechanism: str
    limit_bytes: int
    returncode: int
    peak_bytes: int | None
    limit_hits: int | None
    oom_kills: int | None
    maxrss_bytes: int
    read_bytes: int
    wall_s: float

    @property
    def oom_killed(self) -> bool:
        """Ended by the OOM killer: SIGKILL, with the kernel's count to say so where it keeps one."""
        return self.returncode == -9 and (self.oom_kills is None or self.oom_kills > 0)

    def summary(self) -> str:
        def mib(value: int | None) -> str:
            return "unknown" if value is None else f"{value / 2**20:,.0f} MiB"

        return (
            f"{self.mechanism}: limit {mib(self.limit_bytes)}, rc {self.returncode}, peak {mib(self.peak_bytes)}, "
            f"limit reached {self.limit_hits} times, OOM kills {self.oom_kills}, "
            f"ru_maxrss {mib(self.maxrss_bytes)}, read {mib(self.read_bytes)}, {self.wall_s:.1f} s"
        )


def run_with_memory_limit(
    command: list[str], limit_bytes: int, *, mechanism: str | None = None, **popen: object
) -> LimitedRun:
    """Run ``command`` (keyword arguments go to :class:`subprocess.Popen`) under ``limit_bytes``.

    ``mechanism`` forces one of ``cgroup2``, ``cgroup1``, ``systemd`` (default: the first that
    works, :func:`available_mechanism`). The cgroup is removed afterwards. Raises
    :class:`NoMemoryLimit` when none works.
    """
    mechanism = mechanism or available_mechanism()
    if mechanism == "systemd":
        return _run_systemd(command, limit_bytes, popen)
    group = _make_cgroup(mechanism, limit_bytes)
    try:
        procs = group / "cgroup.procs"
        result = _run_and_wait(["/bin/sh", "-c", _ENTER_AND_EXEC, str(procs), *command], popen)
        if mechanism == "cgroup1":
            peak = int((group / "memory.max_usage_in_bytes").read_text())
            # with swap accounting the memory+swap counter may be the one that hits the limit
            hits = sum(int(p.read_text()) for p in group.glob("memory*.failcnt") if "kmem" not in p.name)
            kills = _keyed(group / "memory.oom_control").get("oom_kill")
        else:
            peak_file = group / "memory.peak"
            peak = int(peak_file.read_text()) if peak_file.exists() else None
            events = _keyed(group / "memory.events")
            hits, kills = events.get("max"), events.get("oom_kill")
    finally:
        _remove_cgroup(group)
    return LimitedRun(mechanism, limit_bytes, result.returncode, peak, hits, kills, *result[1:])


def available_mechanism() -> str:
    """The first mechanism that can limit a child here; raises :class:`NoMemoryLimit` naming why none can."""
    for mechanism in ("cgroup2", "cgroup1"):
        try:
            _remove_cgroup(_make_cgroup(mechanism, 2**30))
            return mechanism
        except (OSError, NoMemoryLimit):
            continue
    if shutil.which("systemd-run") and _systemd_user_session():
        return "systemd"
    raise NoMemoryLimit(
        "no way to limit a process's memory here: no writable memory cgroup (v2 memory.max or v1 "
        "memory.limit_in_bytes; needs root or a delegated cgroup) and no systemd user session for "
        "systemd-run --user --scope -p MemoryMax"
    )


def _own_cgroup(mechanism: str) -> Path:
    """The folder of this process's cgroup in the v2 hierarchy or in v1's memory hierarchy."""
    fstype, wanted = ("cgroup2", None) if mechanism == "cgroup2" else ("cgroup", "memory")
    mount = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, point, kind, options = line.split()[:4]
        if kind == fstype and (wanted is None or wanted in options.split(",")):
            mount = Path(point)
            break
    if mount is None:
        raise NoMemoryLimit(f"no {fstype} {wanted or ''} hierarchy mounted")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (mechanism == "cgroup2" and number == "0" and not controllers) or (
            mechanism == "cgroup1" and "memory" in controllers.split(",")
        ):
            return mount / path.lstrip("/")
    raise NoMemoryLimit(f"this process is in no {mechanism} memory cgroup")


def _make_cgroup(mechanism: str, limit_bytes: int) -> Path:
    """A fresh child cgroup of this process's own, limited to ``limit_bytes`` with no swap."""
    parent = _own_cgroup(mechanism)
    if mechanism == "cgroup2" and "memory" not in (parent / "cgroup.controllers").read_text().split():
        raise NoMemoryLimit(f"the memory controller is not available in {parent}")
    group = parent / f"memory-limit-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        if mechanism == "cgroup1":
            (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
            memsw = group / "memory.memsw.limit_in_bytes"
            if _swap_active() and memsw.exists():  # memory + swap together under the same limit
                memsw.write_text(str(limit_bytes))
        else:
            if not (group / "memory.max").exists():  # the parent does not hand the controller down
                raise NoMemoryLimit(f"memory is not in {parent / 'cgroup.subtree_control'}")
            (group / "memory.max").write_text(str(limit_bytes))
            swap = group / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
    except BaseException:
        _remove_cgroup(group)
        raise
    return group


def _remove_cgroup(group: Path) -> None:
    """Remove an emptied cgroup (its charges move to the parent); the kernel may take a moment to
    see its last process gone."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    group.rmdir()


def _swap_active() -> bool:
    """Any swap device or file in use (``/proc/swaps`` lists more than its header)."""
    return len(Path("/proc/swaps").read_text().splitlines()) > 1


def _keyed(path: Path, separator: str | None = None) -> dict[str, int]:
    """A file of ``key value`` lines (cgroup files, ``/proc/PID/io``) as a dict; empty when absent."""
    if not path.exists():
        return {}
    pairs = (line.split(separator) for line in path.read_text().splitlines() if line)
    return {key.strip(): int(value) for key, value in pairs}


class _Ended(NamedTuple):
    returncode: int  # as Popen gives it: -N for a signal
    maxrss: int
    read: int
    wall: float


def _read_bytes() -> int:
    """This process's storage reads so far, its reaped children's included."""
    return _keyed(Path("/proc/self/io"), ":")["read_bytes"]


def _run_and_wait(argv: list[str], popen: dict) -> _Ended:
    """Run ``argv`` and reap it here, so its resource usage comes back with it."""
    started, read_before = time.perf_counter(), _read_bytes()
    process = subprocess.Popen(argv, **popen)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return _Ended(process.returncode, usage.ru_maxrss * 1024, _read_bytes() - read_before, wall)


def _systemd_user_session() -> bool:
    probe = subprocess.run(["systemctl", "--user", "is-system-running"], capture_output=True, text=True)
    return probe.stdout.strip() in ("running", "degraded")


def _run_systemd(command: list[str], limit_bytes: int, popen: dict) -> LimitedRun:
    """A transient systemd scope with the limit; a shell in it records the scope's peak and events."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "scope"
        # OOMPolicy: the default stops the whole scope on an OOM kill, the reporting shell with it
        argv = [
            "systemd-run", "--user", "--scope", "--quiet", "--collect", f"-pMemoryMax={limit_bytes}",
            "-pMemorySwapMax=0", "-pOOMPolicy=continue", "/bin/sh", "-c", _RUN_AND_REPORT, str(out), *command,
        ]  # fmt: skip
        ended = _run_and_wait(argv, popen)
        peak_file, events_file = out.with_suffix(".peak"), out.with_suffix(".events")
        peak = int(peak_file.read_text()) if peak_file.exists() else None
        events = _keyed(events_file)
    # the shell saw its command killed by a signal: 128 + SIGKILL
    returncode = -9 if ended.returncode == 137 else ended.returncode
    return LimitedRun("systemd", limit_bytes, returncode, peak, events.get("max"), events.get("oom_kill"), *ended[1:])


def parse_size(text: str) -> int:
    """``1536M``, ``1.5G``, ``2000000000`` -> bytes (binary units)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    scale = units.get(text[-1:].upper())
    return int(float(text[:-1]) * scale) if scale else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("limit", type=parse_size, help="e.g. 1.5G, 800M")
    parser.add_argument("--mechanism", choices=("cgroup2", "cgroup1", "systemd"))
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    try:
        run = run_with_memory_limit(command, args.limit, mechanism=args.mechanism)
    except NoMemoryLimit as err:
        print(f"memory_limit: {err}", file=sys.stderr)
        return 2
    print(run.summary(), file=sys.stderr)
    return run.returncode if run.returncode >= 0 else 128 - run.returncode


if __name__ == "__main__":
    sys.exit(main())
