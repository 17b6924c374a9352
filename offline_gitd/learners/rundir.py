"""The run directory: ``config.json``, ``metrics.csv``, ``results.csv``, ``checkpoints/``.

Side effects live here, at the edge. Checkpoints are orbax saves of the whole training-state
pytree (all seeds at once) keyed by epoch; a CSV row belongs to an epoch, and rows of epochs
after the last checkpoint are dropped on resume so that a crash between writing rows and saving
the checkpoint never duplicates or loses an epoch.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from offline_gitd.errors import UsageError

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
RESULTS_FILE = "results.csv"
CHECKPOINTS = "checkpoints"
# The leaderboard's result row (DESIGN §6), in order.
RESULT_COLUMNS = (
    "suite", "env", "algorithm", "critic", "K", "beta", "seed", "step", "return",
    "run_id", "config_hash", "package_version", "created_at",
)  # fmt: skip


def write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def prepare_run_dir(run_dir: Path, config: Mapping[str, Any], resume: bool) -> None:
    """Create a fresh run directory, or check that ``resume`` finds the same run there."""
    config_path = run_dir / CONFIG_FILE
    if resume:
        if not config_path.exists():
            raise UsageError(f"nothing to resume in {run_dir}: no {CONFIG_FILE}")
        return
    if config_path.exists() or (run_dir / CHECKPOINTS).exists():
        raise UsageError(f"{run_dir} already holds a run; pass --resume to continue it or choose another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(config_path, config)


def read_config(run_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((run_dir / CONFIG_FILE).read_text())
    except FileNotFoundError:
        raise UsageError(f"{run_dir} holds no {CONFIG_FILE}") from None


class CsvLog:
    """Append-only CSV; rows carry a ``step`` column so that resume can trim unsaved epochs.

    An existing file keeps its own header (a resumed run appends to it); a new file takes
    ``columns``, or the keys of the first rows appended.
    """

    def __init__(self, path: Path, columns: Sequence[str] = ()) -> None:
        self.path = path
        self.columns = list(columns)
        if path.exists():
            with path.open(newline="") as f:
                self.columns = next(csv.reader(f), self.columns)

    def append(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        new = not self.path.exists()
        if new and not self.columns:
            self.columns = list(rows[0])
        with self.path.open("a", newline="") as f:
            writer = csv.DictWriter(f, self.columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerows(rows)
            f.flush()
            os.fsync(f.fileno())

    def drop_after(self, column: str, last_kept: int) -> None:
        """Remove rows whose ``column`` exceeds ``last_kept`` (epochs never checkpointed)."""
        if not self.path.exists():
            return
        with self.path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        kept = [row for row in rows if int(row[column]) <= last_kept]
        if len(kept) == len(rows):
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, self.columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(kept)
        os.replace(tmp, self.path)


class Checkpoints:
    """orbax checkpoints of the training state, one per completed epoch (all kept by default: they
    are small next to the data, and a diverged run must still find its last good one); ``keep``
    keeps only the newest ``keep``."""

    def __init__(self, run_dir: Path, keep: int | None = None) -> None:
        self.directory = (run_dir / CHECKPOINTS).absolute()
        self.manager = ocp.CheckpointManager(self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep))

    def save(self, epoch: int, state: Any) -> None:
        self.manager.save(epoch, args=ocp.args.StandardSave(state))
        self.manager.wait_until_finished()

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def restore(self, epoch: int, like: Any) -> Any:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self.manager.restore(epoch, args=ocp.args.StandardRestore(abstract))

    def path(self, epoch: int) -> Path:
        return self.directory / str(epoch)


def result_row(
    provenance: Mapping[str, Any], algorithm: str, critic: str, K: int, beta: float, seed: int, step: int, value: float
) -> dict[str, Any]:
    """One leaderboard row (DESIGN §6). ``provenance`` is the run's config.json: suite, env,
    run_id, config_hash, package_version. Each seed is its own leaderboard run."""
    return {
        "suite": provenance["suite"],
        "env": provenance["env"],
        "algorithm": algorithm,
        "critic": critic,
        "K": K,
        "beta": beta,
        "seed": seed,
        "step": step,
        "return": value,
        "run_id": f"{provenance['run_id']}-s{seed}",
        "config_hash": provenance["config_hash"],
        "package_version": provenance["package_version"],
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
