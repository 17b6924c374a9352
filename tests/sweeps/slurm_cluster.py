"""A real one-node SLURM cluster on 127.0.0.1 for the sweep tests (Debian's ``slurm-wlm`` and
``munge``; ``make slurm`` installs them).

``munged``, ``slurmctld`` and ``slurmd`` run in the foreground as children of the test process,
each with its state, spool, socket and log in one temporary folder and its own free ports, so the
machine's own SLURM or munge (if any) is never touched. The configuration is the smallest that
runs job arrays the way a real cluster does: ``select/cons_tres`` allots whole CPUs to each job,
``proctrack/linuxproc`` and ``task/none`` need no cgroups (containers often have none), root is
``SlurmUser``, and ``JobRequeue=1`` lets jobs be requeued. Clients find it through ``SLURM_CONF``
(``env``), which ``sbatch`` also passes on to every job.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

DAEMONS = ("munged", "slurmctld", "slurmd")
START_TIMEOUT_S = 60.0
# The daemons live in sbin, which a non-root PATH often lacks.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _which(name: str) -> str | None:
    return shutil.which(name, path=SEARCH_PATH)


def missing() -> str | None:
    """Why this machine cannot run the cluster, or ``None``: the packages, and root (``slurmd``
    starts each job's step as the job's user, which only root may do)."""
    absent = [name for name in (*DAEMONS, "mungekey", "sbatch", "squeue", "scancel", "scontrol") if not _which(name)]
    if absent:
        return f"{', '.join(absent)} not installed (make slurm)"
    if os.geteuid() != 0:
        return "the local SLURM cluster runs its daemons as root (SlurmUser=root); run the tests as root"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalSlurm:
    """One node (``localnode``, every CPU of this machine) in one partition (``debug``)."""

    def __init__(self, cpus: int | None = None) -> None:
        self.cpus = cpus or os.cpu_count() or 1
        # Short: the munge socket's path must fit a Unix socket address (108 bytes).
        self.root = Path(tempfile.mkdtemp(prefix="slurm-"))
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.processes: dict[str, subprocess.Popen] = {}

    def _config(self) -> str:
        host = socket.gethostname().split(".")[0]  # slurmctld compares it with its own short name
        root = self.root
        return "\n".join(
            [
                "ClusterName=offline-gitd-test",
                f"SlurmctldHost={host}(127.0.0.1)",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={root}/munge/munge.sock",
                f"StateSaveLocation={root}/state",
                f"SlurmdSpoolDir={root}/spool",
                f"SlurmctldPidFile={root}/slurmctld.pid",
                f"SlurmdPidFile={root}/slurmd.pid",
                f"SlurmctldLogFile={root}/log/slurmctld.log",
                f"SlurmdLogFile={root}/log/slurmd.log",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_CPU",
                "SchedulerType=sched/backfill",
                "MpiDefault=none",
                "ReturnToService=2",
                "JobRequeue=1",
                "MinJobAge=600",  # ended jobs stay visible to squeue --states=all for the tests
                "KillWait=5",
                "InactiveLimit=0",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                f"NodeName=localnode NodeHostname={host} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
                "PartitionName=debug Nodes=localnode Default=YES MaxTime=INFINITE State=UP",
                "",
            ]
        )

    def start(self) -> LocalSlurm:
        for folder in ("munge", "state", "spool", "log"):
            (self.root / folder).mkdir()
        (self.root / "munge").chmod(0o711)  # munged refuses a socket folder others can write
        key = self.root / "munge" / "munge.key"
        subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
        key.chmod(0o600)
        self.conf.write_text(self._config())
        munge = self.root / "munge"
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",  # as root, in a folder it does not own the way a system install does
                f"--socket={munge}/munge.sock",
                f"--key-file={key}",
                f"--log-file={munge}/munged.log",
                f"--pid-file={munge}/munged.pid",
                f"--seed-file={munge}/munged.seed",
                "--num-threads=1",
            ],
        )
        self._wait(lambda: (munge / "munge.sock").exists(), "munged did not create its socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-c"])  # -c: a fresh controller, no saved jobs
        self._spawn("slurmd", ["slurmd", "-D", "-N", "localnode"])
        self._wait(self._node_idle, "the node did not come up idle")
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        self.processes[name] = subprocess.Popen(
            [_which(argv[0]), *argv[1:]],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "log" / f"{name}.err").open("w"),
        )

    def _node_idle(self) -> bool:
        result = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=self.env, capture_output=True, text=True)
        return result.returncode == 0 and result.stdout.strip() == "idle"

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            dead = [name for name, process in self.processes.items() if process.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"local SLURM: {what} ({', '.join(dead) or 'timeout'}):\n{self.logs()}")
            time.sleep(0.2)

    def logs(self, lines: int = 20) -> str:
        """The daemons' last log lines: why a cluster did not start says itself there."""
        text = []
        for path in sorted(self.root.glob("log/*")) + sorted(self.root.glob("munge/*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            text.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(text)

    def run(self, *argv: str) -> str:
        """A SLURM client command against this cluster; its output."""
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=True).stdout

    def stop(self) -> None:
        """Cancel every job (their steps outlive slurmd otherwise), then stop the daemons."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and self.run("squeue", "--noheader").strip():
                time.sleep(0.5)
        for name in reversed(DAEMONS):
            process = self.processes.pop(name, None)
            if process is None:
                continue
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
