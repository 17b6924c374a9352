"""One run directory's life, as the offline and the online loop both live it.

A run starts (or resumes) its directory once its networks exist, so a network that does not fit
the data fails before anything is written; restores the newest intact checkpoint; appends metric,
result (and, online, episode) rows, trimming rows past the checkpoint it resumed from and rows a
past race of two writers left twice; streams the same rows as scalars; stops with one line, naming
the last good checkpoint, when a loss stops being finite; saves sealed checkpoints; and closes its
scalar writers. Both loops call this one class, so a rule of the run directory
(docs/architecture.md#runs-are-self-contained) is written once. Its one writer holds the run
directory's lock (docs/locks.md) for the whole run; each write first checks it still does.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.errors import UsageError
from offline_gitd.rundir.checkpoints import Checkpoints
from offline_gitd.rundir.files import METRICS_FILE, RESULT_COLUMNS, RESULTS_FILE, CsvLog, open_run_dir, result_row
from offline_gitd.rundir.flags import Outputs
from offline_gitd.rundir.lock import check_run_dir_held
from offline_gitd.rundir.provenance import collect as collect_provenance
from offline_gitd.rundir.provenance import row_facts
from offline_gitd.rundir.scalars import ScalarLog
from offline_gitd.version import __version__


class TrainingDiverged(UsageError):
    """A non-finite loss: the run stops, keeping its last good checkpoint."""


def flatten_metrics(aux: Mapping[str, Any]) -> dict[str, float]:
    """Per-seed means -> flat CSV columns (per-head vectors become ``name_k``, 1-based)."""
    flat: dict[str, float] = {}
    for name, value in sorted(aux.items()):
        value = np.asarray(value)
        if value.ndim == 0:
            flat[name] = float(value)
        else:
            for k, v in enumerate(value, start=1):
                flat[f"{name}_{k}"] = float(v)
    return flat


def run_record(
    config: Any,
    *,
    suite: str,
    env: str,
    method_config: str,
    command_line: Sequence[str] | None,
    data_dir: str | None,
    **extra: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What ``config.json`` says of a new run (config, ids, where it ranks, what produced it),
    and the provenance alone (recorded again at each resume). An offline run passes its data's
    content digest as ``data_sha256`` (docs/leaderboard.md#what-made-a-row)."""
    made_by = collect_provenance(command_line, data_dir)
    record = {
        "config": config.to_dict(),
        "run_id": uuid.uuid4().hex[:12],
        "config_hash": config.config_hash(),
        **extra,
        "suite": suite,
        "env": env,
        "method_config": method_config,
        "package_version": __version__,
        "created_at": made_by["at"],
        "provenance": made_by,
    }
    return record, made_by


class RunLifecycle:
    """A run directory from start to close; ``unit`` names a checkpoint's step ("epoch", "env step").

    ``extra_logs`` maps a name to ``(file name, columns)`` for CSVs beyond metrics and results
    (the online loop's ``episodes.csv``); :meth:`write` takes their rows by that name.
    """

    def __init__(
        self,
        run_dir: Path,
        record: Mapping[str, Any],
        made_by: Mapping[str, Any],
        *,
        resume: bool,
        overwrite: bool,
        outputs: Outputs | None,
        unit: str,
        extra_logs: Mapping[str, tuple[str, Sequence[str]]] | None = None,
    ) -> None:
        self.run_dir, self.record, self.made_by = run_dir, record, made_by
        self.resume, self.overwrite, self.unit = resume, overwrite, unit
        self.outputs = outputs or Outputs()
        self.extra_logs = dict(extra_logs or {})
        self.provenance: dict[str, Any] = {}
        self.checkpoints: Checkpoints | None = None
        self.logs: dict[str, CsvLog] = {}
        self.scalars: ScalarLog | None = None

    def open(self) -> dict[str, Any]:
        """Write ``config.json`` (new run, or the resume appended) and return what it now says."""
        check_run_dir_held(self.run_dir)
        self.provenance = open_run_dir(self.run_dir, self.record, self.made_by, self.resume, self.overwrite)
        self.checkpoints = Checkpoints(self.run_dir, self.outputs.keep_checkpoints)
        return self.provenance

    def restore(self, like: Any, companion: Callable[[int], Any] = lambda step: None) -> tuple[int, Any, Any]:
        """``(step, state, companion(step))`` of the newest intact checkpoint when resuming,
        ``(0, like, None)`` for a new run."""
        if not self.resume:
            return 0, like, None
        return self.checkpoints.restore_newest_intact(like, companion)

    def start_logs(self, start: int, seeds: Sequence[int]) -> None:
        """Open the CSVs (dropping rows past ``start``, the step resumed from) and the scalars."""
        self.logs = {
            "metrics": CsvLog(self.run_dir / METRICS_FILE),
            "results": CsvLog(self.run_dir / RESULTS_FILE, RESULT_COLUMNS),
            **{name: CsvLog(self.run_dir / file, columns) for name, (file, columns) in self.extra_logs.items()},
        }
        repeated = []
        for log in self.logs.values():
            log.drop_after("step", start)  # first: rows past the checkpoint are recomputed, repeated or not
            lines = log.drop_repeats()
            if lines:
                repeated.append(f"{len(lines)} from {log.path.name}")
        if repeated:
            print(
                f"offline_gitd: note: removed rows written twice by two processes ({', '.join(repeated)}) "
                f"in {self.run_dir}; each kept once",
                file=sys.stderr,
                flush=True,
            )
        self.scalars = ScalarLog(
            self.run_dir,
            seeds,
            self.provenance["config"],
            self.outputs,
            name=self.provenance["run_id"],
            resume_step=start,
        )

    def result_row(self, algorithm: str, critic: str, K: int, beta: float, seed: int, step: int, value: float) -> dict:
        """One leaderboard row of this run (its ids from ``config.json``)."""
        facts = row_facts(self.made_by, self.record.get("data_sha256"))
        return result_row(self.provenance, algorithm, critic, K, beta, seed, step, value, facts)

    def write(self, metric_rows: list[dict[str, Any]], result_rows: list[dict[str, Any]], **extra: list) -> None:
        """Append one logging window's rows (extra CSVs first) and stream the metrics as scalars."""
        check_run_dir_held(self.run_dir)  # a writer whose lock was taken over stops here
        for name, rows in extra.items():
            self.logs[name].append(rows)
        self.logs["metrics"].append(metric_rows)
        self.logs["results"].append(result_rows)
        self.scalars.log(metric_rows)

    def check_finite(self, loss: np.ndarray, seeds: Sequence[int], where: Callable[[int], str]) -> None:
        """Stop the run if any loss of a chunk ``[updates, seeds]`` is not finite; ``where(i)``
        describes update ``i`` of the chunk (its gradient step or env step)."""
        if np.all(np.isfinite(loss)):
            return
        index, seed_index = np.argwhere(~np.isfinite(loss))[0]
        kept = self.checkpoints.newest_intact()
        last = f"{self.checkpoints.path(kept)} ({self.unit} {kept})" if kept else f"none (no {self.unit} saved)"
        raise TrainingDiverged(
            f"loss became {loss[index, seed_index]} at {where(int(index))} (seed {seeds[seed_index]}); "
            f"last good checkpoint: {last}"
        )

    def save(self, step: int, state: Any) -> None:
        check_run_dir_held(self.run_dir)
        self.checkpoints.save(step, state)

    def close(self) -> None:
        if self.scalars is not None:
            self.scalars.close()
