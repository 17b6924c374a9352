"""The run directory of an online run, whichever loop trains in it (docs/online.md#the-run-directory).

Both loops, the Python one (:mod:`offline_gitd.online.loop`) and the compiled one
(:mod:`offline_gitd.online.compiled_run`), live the same life in the same directory, so it is
written here once: the run directory held for one writer and checked before anything else
(:func:`held_run_dir`: the lock, then new, ``--resume`` or ``--overwrite``), its record
(``config.json``: the config, its hash, provenance, where a run started from) and its logs
(:func:`online_lifecycle`, which opens it, restores the newest intact checkpoint on resume and
writes the rows), and a checkpoint as a pair (:func:`save_checkpoint`): the learner's state saved
by orbax, and the loop's own state beside it as a sealed host state (``host_state/<step>.npz``),
each loop writing its own (:mod:`offline_gitd.online.host_state` for the Python loop,
:mod:`offline_gitd.online.compiled_run` for the compiled one). A trained run is read back the
same way whichever loop made it: its checkpoint is the learner's state alone
(:func:`~offline_gitd.rundir.checkpoints.restore_seed_states`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from offline_gitd.online.config import OnlineConfig
from offline_gitd.online.env_info import EnvInfo
from offline_gitd.online.host_state import LEGACY_SUFFIX, SUFFIX, host_state_path
from offline_gitd.online.init_from import Origin
from offline_gitd.online.windows import EPISODE_COLUMNS, EPISODES_FILE
from offline_gitd.rundir.files import absolute, check_run_dir
from offline_gitd.rundir.flags import RunFlags
from offline_gitd.rundir.lifecycle import RunLifecycle, run_record
from offline_gitd.rundir.lock import hold_run_dir
from offline_gitd.rundir.seals import deferred_interrupt


@contextlib.contextmanager
def held_run_dir(cfg: OnlineConfig, flags: RunFlags) -> Iterator[OnlineConfig]:
    """``cfg`` with ``out`` made absolute, its run directory held by this process alone
    (docs/locks.md) from its first check to its last row, and checked against ``--resume`` and
    ``--overwrite`` before anything is written. A config without ``out`` holds nothing."""
    if not cfg.out:
        yield cfg
        return
    cfg = dataclasses.replace(cfg, out=absolute(cfg.out))
    with hold_run_dir(Path(cfg.out)):
        check_run_dir(Path(cfg.out), flags.resume, flags.overwrite)
        yield cfg


def online_lifecycle(
    cfg: OnlineConfig, info: EnvInfo, flags: RunFlags = RunFlags(), *, origin: Origin | None = None
) -> RunLifecycle:
    """The run directory ``cfg.out`` of an online run, with its record and its episode log: what
    both loops train in, and what the speed benchmarks open a loop on. ``origin`` is the offline
    run a new run starts from, recorded in ``config.json``."""
    record, made_by = run_record(
        cfg,
        suite=info.suite,
        env=info.name,
        method_config=cfg.method_config(info.domain),
        command_line=flags.command_line,
        data_dir=None,
        **({"init_from": origin.record} if origin is not None else {}),
    )
    return RunLifecycle(
        Path(cfg.out),
        record,
        made_by,
        resume=flags.resume,
        overwrite=flags.overwrite,
        outputs=flags.outputs,
        unit="env step",
        extra_logs={"episodes": (EPISODES_FILE, EPISODE_COLUMNS)},
    )


def save_checkpoint(run: RunLifecycle, step: int, learner: Any, write_host: Callable[[Path], None]) -> None:
    """Checkpoint ``step`` of an online run, whichever loop runs it: the loop's host state
    (``write_host(path)``, sealed: verified on write), then orbax's save of the ``learner``'s state
    (every seed's, sealed by its digest), then the host states older than the previous checkpoint's.
    A crash or Ctrl-C anywhere leaves the newest pair or the one before it intact, and resume falls
    back to that one if needed."""
    path = host_state_path(run.run_dir, step)
    path.parent.mkdir(exist_ok=True)
    with deferred_interrupt():
        write_host(path)
        run.save(step, learner)
        saved = [p for suffix in (SUFFIX, LEGACY_SUFFIX) for p in path.parent.glob(f"*{suffix}")]
        kept = sorted({int(p.stem) for p in saved if p.stem.isdigit()}, reverse=True)[:2]
        for old in saved:
            if not old.stem.isdigit() or int(old.stem) not in kept:
                old.unlink()
