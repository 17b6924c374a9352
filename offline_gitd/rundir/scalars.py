"""Live scalars of a run: TensorBoard event files under ``RUN_DIR/tb/`` and, optionally, wandb.

The CSVs stay the record (leaderboards read them); these are for watching a run. Event files are
written by tensorboardX (no TensorFlow), one sub-directory per seed (``tb/seed_3/``) so that
TensorBoard overlays the seeds of one metric in one chart, with the resolved config as hparams. The
same rows go to wandb when ``--wandb`` is given (``pip install 'offline-gitd[wandb]'``;
``WANDB_MODE=offline`` works without a network).

Output choices are how a run is watched, not what it computes: they are CLI flags, not config
fields, so they never change a run's config hash.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from offline_gitd.errors import UsageError
from offline_gitd.rundir.flags import TB_DIR, Outputs

# Row columns that index a row rather than measure something.
_INDEX_COLUMNS = ("step", "seed", "epoch", "eval_seed")


def hparams_of(config: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """Config values as TensorBoard hparams accepts them (None and lists become strings)."""
    return {k: v if isinstance(v, bool | int | float | str) else str(v) for k, v in sorted(config.items())}


def _scalars(row: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for name, value in row.items():
        if name in _INDEX_COLUMNS or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[name] = float(value)
    return out


class ScalarLog:
    """Per-seed scalar rows -> TensorBoard (and wandb). ``resume_step``: events after it, written by
    an interrupted run and dropped from its CSVs, are purged from TensorBoard too."""

    def __init__(
        self,
        run_dir: Path,
        seeds: Sequence[int],
        config: Mapping[str, Any],
        outputs: Outputs,
        *,
        name: str,
        resume_step: int = 0,
    ) -> None:
        self.writers: dict[int, Any] = {}
        self.wandb_run: Any = None
        if outputs.tensorboard:
            from tensorboardX import SummaryWriter
            from tensorboardX.summary import hparams

            experiment = hparams(hparams_of(config), {"eval_return": 0.0, "episode_return": 0.0})
            for seed in seeds:
                writer = SummaryWriter(
                    str(run_dir / TB_DIR / f"seed_{seed}"),
                    purge_step=resume_step + 1 if resume_step else None,
                    # event file names carry whole seconds: a quick resume must neither overwrite the
                    # file nor sort before it (TensorBoard reads the files in name order)
                    filename_suffix=f".{time.time_ns()}",
                )
                if not resume_step:
                    for summary in experiment:
                        writer.file_writer.add_summary(summary)
                self.writers[seed] = writer
        if outputs.wandb:
            try:
                import wandb
            except ImportError:
                raise UsageError("--wandb needs the wandb extra: pip install 'offline-gitd[wandb]'") from None
            self.wandb_run = wandb.init(
                project="offline_gitd", name=name, dir=str(run_dir), config=dict(config), resume="allow", id=name
            )

    def log(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """One row per seed, each with ``step`` and ``seed``; every finite number becomes a scalar."""
        merged: dict[str, float] = {}
        for row in rows:
            values = _scalars(row)
            writer = self.writers.get(row["seed"])
            if writer is not None:
                for tag, value in values.items():
                    writer.add_scalar(tag, value, row["step"])
                writer.flush()  # a killed job keeps everything it logged
            merged.update({f"seed_{row['seed']}/{tag}": value for tag, value in values.items()})
        if self.wandb_run is not None and rows:
            self.wandb_run.log(merged, step=int(rows[0]["step"]))

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
