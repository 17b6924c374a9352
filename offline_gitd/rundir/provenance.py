"""What produced a run (docs/architecture.md#runs-are-self-contained): commit, command line, versions, platform, device, data root.

Recorded in ``config.json`` when a run starts and again at each resume, so that a number on a
board can be traced to the code, the machine and the data that made it. Gathering it has side
effects (a ``git`` subprocess, JAX's device query), so it lives here, at the edge, and never fails
a run: what cannot be found is recorded as ``None``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from offline_gitd.version import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]
VERSIONED = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "gymnasium", "minari")


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(directory), *args], capture_output=True, timeout=30)


@functools.lru_cache(maxsize=None)
def git_commit(directory: Path = PACKAGE_DIR) -> dict[str, Any]:
    """The commit of the checkout the package was imported from, whether its tracked files had
    local changes, and the SHA-256 of ``git diff HEAD`` (binary, so a changed data file counts) when
    they had: enough to tell two dirty trees of one commit apart (docs/leaderboard.md#what-made-a-row).

    Never fails a run: from an installed wheel (no checkout) or without ``git``, ``commit`` is
    ``None`` and ``reason`` says why, beside the package's version. Taken once per process, at the
    first run it starts: that process runs the code it imported then, whatever the checkout does later.
    """
    unknown = {"commit": None, "dirty": None, "diff_sha256": None, "version": __version__}
    try:
        head = _git(directory, "rev-parse", "HEAD")
        if head.returncode != 0:
            why = head.stderr.decode(errors="replace").strip().splitlines()
            return {**unknown, "reason": f"not a git checkout ({why[0] if why else 'git rev-parse HEAD failed'})"}
        status = _git(directory, "status", "--porcelain", "--untracked-files=no")
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
        diff_sha256 = None
        if dirty:
            diff = _git(directory, "diff", "HEAD", "--binary")
            diff_sha256 = hashlib.sha256(diff.stdout).hexdigest() if diff.returncode == 0 else None
    except (OSError, subprocess.SubprocessError) as err:
        return {**unknown, "reason": f"git could not be run ({type(err).__name__}: {err})"}
    return {
        "commit": head.stdout.decode().strip(),
        "dirty": dirty,
        "diff_sha256": diff_sha256,
        "version": __version__,
        "reason": None,
    }


def describe_commit(git: Mapping[str, Any] | None) -> str:
    """``95530e6``, ``95530e6+dirty`` or ``no commit (why)``: one line for a description."""
    if not git or not git.get("commit"):
        return f"no commit ({(git or {}).get('reason') or 'not recorded'})"
    return f"{git['commit'][:7]}{'+dirty' if git.get('dirty') else ''}"


def versions() -> dict[str, str | None]:
    """Python, this package and the libraries whose versions change numbers."""
    found: dict[str, str | None] = {"python": platform.python_version(), "offline_gitd": __version__}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def device() -> dict[str, Any]:
    """The JAX backend, the kind of its first device (e.g. ``cpu``, ``NVIDIA H100``), the number of
    CPU devices and the XLA options the process ran with: on a GPU they say whether the run repeats
    bit for bit (docs/bounds.md#determinism)."""
    import jax

    devices = jax.devices()
    return {
        "backend": jax.default_backend(),
        "kind": devices[0].device_kind,
        "count": len(devices),
        # the seeds' groups in the offline loop, one per CPU device (docs/offline.md#seeds)
        "cpu_devices": len(jax.devices("cpu")),
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
    }


# the widest vector extension first: XLA compiles for the CPU it runs on, using what it has
_VECTOR_ISAS = ("avx512f", "avx2", "avx", "sse4_2", "neon", "asimd")


def describe_cpu(cpuinfo: str) -> str:
    """The kind of CPU in a ``/proc/cpuinfo`` text: model name, family/model/stepping and the widest
    vector extension, e.g. ``AMD EPYC (family 25, model 17, stepping 1, avx512f)``; empty when the
    text names none. Why: XLA generates code for the CPU it runs on, so a seeded recording repeats
    bit for bit only on the same kind (docs/datasets.md#manifests), and this is what says which."""
    first: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if first:
                break  # the first processor's block describes them all on one machine
            continue
        key, _, value = line.partition(":")
        first.setdefault(key.strip().lower(), value.strip())
    name = first.get("model name") or first.get("hardware") or first.get("cpu model") or ""
    ids = [
        f"{label} {first[key]}"
        for key, label in (("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
        if first.get(key)
    ]
    flags = set((first.get("flags") or first.get("features") or "").split())
    widest = next((isa for isa in _VECTOR_ISAS if isa in flags), None)
    details = [*ids, *([widest] if widest else [])]
    if not details:
        return name
    return f"{name or 'unnamed CPU'} ({', '.join(details)})"


@functools.lru_cache(maxsize=None)
def cpu_kind() -> str | None:
    """:func:`describe_cpu` of this machine, else :func:`platform.processor` (``None`` if neither
    says anything). Read once per process: a sweep's runs in one process share the machine."""
    try:
        described = describe_cpu(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        described = ""
    return described or platform.processor() or None


def collect(argv: Sequence[str] | None, data_dir: str | None) -> dict[str, Any]:
    """Everything above, with the command line (``argv`` as typed after ``offline_gitd``, or this
    process's arguments) and the resolved data roots (``--data-dir`` / ``$OFFLINE_GITD_DATA`` /
    the cache dir, and where Minari datasets are read), stamped with the time."""
    from offline_gitd.data.paths import data_root, minari_datasets_dir

    command = list(argv) if argv is not None else list(sys.argv[1:])
    return {
        "at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command_line": ["offline_gitd", *command],
        "git": git_commit(),
        "versions": versions(),
        "platform": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "node": platform.node(),
            "cpu": cpu_kind(),
        },
        "device": device(),
        "data_root": str(data_root(data_dir).absolute()),
        "minari_root": str(minari_datasets_dir(data_dir).absolute()),
    }


def row_facts(made_by: Mapping[str, Any], data_sha256: str | None = None) -> dict[str, str]:
    """The board row's cells of what made it (docs/leaderboard.md#what-made-a-row), from a
    provenance of :func:`collect`: the commit (empty without a checkout), ``true``/``false`` for
    local changes (empty when unknown), the diff's digest, the data's digest and the device kind."""
    git = made_by.get("git") or {}
    dirty = git.get("dirty")
    found = made_by.get("device") or {}
    kind = found.get("kind")
    device_name = "cpu" if found.get("backend") == "cpu" else (str(kind) if kind else "")
    return {
        "commit": git.get("commit") or "",
        "dirty": "" if dirty is None or not git.get("commit") else ("true" if dirty else "false"),
        "diff_sha256": git.get("diff_sha256") or "",
        "data_sha256": data_sha256 or "",
        "device": device_name,
    }
