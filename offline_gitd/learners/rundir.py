"""The run directory: ``config.json``, ``metrics.csv``, ``results.csv``, ``checkpoints/``.

Side effects live here, at the edge. Checkpoints are orbax saves of the whole training-state
pytree (all seeds at once) keyed by epoch; a CSV row belongs to an epoch, and rows of epochs
after the last checkpoint are dropped on resume so that a crash between writing rows and saving
the checkpoint never duplicates or loses an epoch.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from offline_gitd.config_cli import resume_changes
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.schema import COLUMNS

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
RESULTS_FILE = "results.csv"
CHECKPOINTS = "checkpoints"
# The leaderboard's result row (DESIGN §6), in order.
RESULT_COLUMNS = COLUMNS


def write_json_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def absolute(path: str) -> str:
    """``path`` absolute and normalised (``~`` and ``..`` resolved, symlinks kept): what
    ``config.json`` stores, so that nothing in it depends on the cwd a run was started from."""
    return os.path.abspath(os.path.expanduser(path))


def holds_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a started run (its config, or checkpoints of one)."""
    return (run_dir / CONFIG_FILE).exists() or (run_dir / CHECKPOINTS).exists()


def check_run_dir(run_dir: Path, resume: bool, overwrite: bool) -> None:
    """Refuse, before any work, a ``--out`` that cannot be used as asked: resuming a directory
    with no run in it, or starting over a run without ``--overwrite``."""
    if resume and overwrite:
        raise UsageError("--resume and --overwrite contradict each other: pass one")
    if resume:
        if not (run_dir / CONFIG_FILE).exists():
            raise UsageError(f"nothing to resume in {run_dir}: no {CONFIG_FILE}")
        return
    if holds_run(run_dir) and not overwrite:
        raise UsageError(
            f"{run_dir} already holds a run; pass --resume to continue it, --overwrite to replace it, "
            "or choose another --out"
        )
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--out {run_dir} exists and is not a directory")


def start_run_dir(run_dir: Path, config: Mapping[str, Any], overwrite: bool) -> None:
    """Create the run directory and its ``config.json``, once the run has started (its config
    resolved, its data loaded, its networks built), so a failed start leaves nothing behind.
    ``overwrite`` first removes the run that was there (only a directory holding a run)."""
    if overwrite and holds_run(run_dir):
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / CONFIG_FILE, config)


def record_resume(run_dir: Path, config: Mapping[str, Any], provenance: Mapping[str, Any]) -> dict[str, Any]:
    """Rewrite ``config.json`` of a resumed run: its (possibly extended) config, and what resumed
    it appended to ``resumes``; the original run id, hash and provenance are kept."""
    saved = read_config(run_dir)
    saved["config"] = dict(config)
    saved["resumes"] = [*saved.get("resumes", []), dict(provenance)]
    write_json_atomic(run_dir / CONFIG_FILE, saved)
    return saved


def open_run_dir(
    run_dir: Path, record: Mapping[str, Any], made_by: Mapping[str, Any], resume: bool, overwrite: bool
) -> dict[str, Any]:
    """Write the run's ``config.json`` now that it has started: ``record`` for a new run, or the
    saved one with ``record``'s config and ``made_by`` appended to its resumes; returns what the
    run directory now says (run id, hash, suite, env: what result rows carry)."""
    if resume:
        return record_resume(run_dir, record["config"], made_by)
    start_run_dir(run_dir, record, overwrite)
    return dict(record)


def resumed_config(
    cls: type, run_dir: Path, given: Mapping[str, Any] | None, extendable: str, free: tuple[str, ...]
) -> Any:
    """The saved config (a ``cls``) of the run in ``run_dir``, wherever that directory now is,
    with the flags ``given`` on the command line: ``extendable`` (the run's length) may grow,
    ``free`` fields may change, any other difference is refused (DESIGN §9)."""
    saved = read_config(run_dir)["config"]
    changes = resume_changes(saved, dict(given or {}), extendable, free)
    changes["out"] = str(run_dir)
    return dataclasses.replace(cls(**saved), **changes)


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
    """orbax checkpoints of the training state, one per completed epoch (all kept: they are small
    next to the data, and a diverged run must still find its last good one)."""

    def __init__(self, run_dir: Path) -> None:
        self.directory = (run_dir / CHECKPOINTS).absolute()
        self.manager = ocp.CheckpointManager(self.directory)

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
    run_id, config_hash, package_version, method_config (absent from runs started before it
    existed: "not recorded"). Each seed is its own leaderboard run."""
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
        "method_config": provenance.get("method_config", ""),
    }
