"""What produced a run (docs/architecture.md#runs-are-self-contained): commit, command line, versions, platform, device, data root.

Recorded in ``config.json`` when a run starts and again at each resume, so that a number on a
board can be traced to the code, the machine and the data that made it. Gathering it has side
effects (a ``git`` subprocess, JAX's device query), so it lives here, at the edge, and never fails
a run: what cannot be found is recorded as ``None``.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from offline_gitd.version import __version__

PACKAGE_DIR = Path(__file__).resolve().parents[1]
VERSIONED = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "gymnasium", "minari")


def git_commit(directory: Path = PACKAGE_DIR) -> dict[str, Any] | None:
    """The commit of the checkout the package was imported from, and whether it had local
    changes; ``None`` for an installed wheel (no checkout) or without ``git``."""
    try:
        head = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        status = subprocess.run(
            ["git", "-C", str(directory), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


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
        "platform": {"system": platform.platform(), "machine": platform.machine(), "node": platform.node()},
        "device": device(),
        "data_root": str(data_root(data_dir).absolute()),
        "minari_root": str(minari_datasets_dir(data_dir).absolute()),
    }
