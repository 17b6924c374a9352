"""The run directory: ``config.json``, ``metrics.csv``, ``results.csv``, ``checkpoints/``.

Side effects live here, at the edge. Checkpoints are orbax saves of the whole training-state
pytree (all seeds at once) keyed by epoch; a CSV row belongs to an epoch, and rows of epochs
after the last checkpoint are dropped on resume so that a crash between writing rows and saving
the checkpoint never duplicates or loses an epoch.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from offline_gitd.config_cli import resume_changes
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.schema import COLUMNS
from offline_gitd.learners.integrity import (
    DamagedFile,
    DiskFull,
    deferred_interrupt,
    tree_problem,
    tree_sha256,
    write_bytes_atomic,
    write_json_atomic,
)

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
RESULTS_FILE = "results.csv"
CHECKPOINTS = "checkpoints"
ORBAX_TMP_SUFFIX = ".orbax-checkpoint-tmp"
# The leaderboard's result row (DESIGN §6), in order.
RESULT_COLUMNS = COLUMNS


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
        try:
            with self.path.open("a", newline="") as f:
                writer = csv.DictWriter(f, self.columns, extrasaction="ignore")
                if new:
                    writer.writeheader()
                writer.writerows(rows)
                f.flush()
                os.fsync(f.fileno())
        except OSError as err:  # a part-written row is dropped by the resume (drop_after)
            raise DiskFull(
                f"cannot write {self.path}: {err.strerror or err}; the checkpoints are intact: "
                "make room, then continue the run with --resume"
            ) from None

    def drop_after(self, column: str, last_kept: int) -> None:
        """Remove rows whose ``column`` exceeds ``last_kept`` (epochs never checkpointed), and a
        row torn by a crash mid-write (no line end, or too few fields): its epoch's checkpoint was
        never saved either, so it is recomputed; appending after it would glue two rows together."""
        if not self.path.exists():
            return
        with self.path.open(newline="") as f:
            text = f.read()
        torn = not text.endswith("\n")
        if torn:  # even with every field present, its last value may be cut short
            text = text[: text.rfind("\n") + 1]
        rows = list(csv.DictReader(text.splitlines(keepends=True)))
        kept = [row for row in rows if _complete(row, self.columns, column) and int(row[column]) <= last_kept]
        if len(kept) == len(rows) and not torn:
            return
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, self.columns, extrasaction="ignore", lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(kept)
        try:
            write_bytes_atomic(self.path, buffer.getvalue().encode())
        except OSError as err:
            raise DiskFull(f"cannot rewrite {self.path}: {err.strerror or err}; it is unchanged") from None


def _complete(row: Mapping[str | None, Any], columns: Sequence[str], column: str) -> bool:
    """A row with every column (a torn one has fewer; a glued one has extra) and an integer ``column``."""
    if None in row or any(row.get(name) is None for name in columns):
        return False
    try:
        int(row[column])
    except (KeyError, ValueError):
        return False
    return True


class Checkpoints:
    """orbax checkpoints of the training state, one per completed epoch (all kept by default: they
    are small next to the data, and a diverged run must still find its last good one); ``keep``
    keeps only the newest ``keep``.

    Each save is sealed by ``<step>.sha256`` beside it (a digest of every file, taken from the disk
    once orbax has finished): a step without its digest never finished saving, and one whose files
    no longer match it is damaged. Resume takes the newest step that is intact.
    """

    def __init__(self, run_dir: Path, keep: int | None = None) -> None:
        self.directory = (run_dir / CHECKPOINTS).absolute()
        self.manager = ocp.CheckpointManager(self.directory, options=ocp.CheckpointManagerOptions(max_to_keep=keep))

    def save(self, epoch: int, state: Any) -> None:
        """Save and seal; Ctrl-C waits for both, so no half-written step is ever left behind."""
        with deferred_interrupt(), _orbax_errors_unlogged():
            try:
                self.manager.save(epoch, args=ocp.args.StandardSave(state))
                self.manager.wait_until_finished()
                write_json_atomic(self.digest_path(epoch), {"files": tree_sha256(self.path(epoch))})
            except Exception as err:
                remove_unfinished_saves(self.directory)
                if not _is_disk_error(err):
                    raise
                raise DiskFull(
                    f"cannot save checkpoint {epoch} in {self.directory}: {_first_line(err)}; the earlier "
                    "checkpoints are intact: make room, then continue the run with --resume"
                ) from None
            self._drop_orphan_digests()

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def restore(self, epoch: int, like: Any) -> Any:
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self.manager.restore(epoch, args=ocp.args.StandardRestore(abstract))

    def path(self, epoch: int) -> Path:
        return self.directory / str(epoch)

    def digest_path(self, epoch: int) -> Path:
        return self.directory / f"{epoch}.sha256"

    def problem(self, epoch: int) -> str | None:
        """Why step ``epoch`` cannot be trusted, or ``None``. Run directories from before digests
        existed (no step has one) are trusted as they are."""
        try:
            expected = json.loads(self.digest_path(epoch).read_text())["files"]
        except FileNotFoundError:
            if any(self.directory.glob("*.sha256")):
                return "its save never finished (no checksum)"
            return None
        except (ValueError, KeyError, TypeError):
            return f"{self.digest_path(epoch).name} is damaged"
        return tree_problem(self.path(epoch), expected)

    def newest_intact(self) -> int | None:
        return next((step for step in sorted(self.manager.all_steps(), reverse=True) if not self.problem(step)), None)

    def restore_newest_intact(
        self, like: Any, companion: Callable[[int], Any] = lambda step: None
    ) -> tuple[int, Any, Any]:
        """``(step, state, companion(step))`` of the newest step whose files and companion (the
        online loop's host state) are intact; ``(0, like, None)`` when nothing was saved.

        Damaged newer steps are reported in one line on stderr and removed (resume recomputes
        them exactly); if no step is intact nothing is removed and the run refuses to resume.
        Only the run that resumes calls this, so it also clears saves a killed process left
        unfinished (a reader of a live run must not).
        """
        remove_unfinished_saves(self.directory)
        damaged: list[tuple[int, str]] = []
        for step in sorted(self.manager.all_steps(), reverse=True):
            problem = self.problem(step)
            if problem is None:
                try:
                    state = self.restore(step, like)
                except Exception as err:  # noqa: BLE001 -- any orbax failure means the same: unreadable
                    problem = f"orbax cannot read it: {type(err).__name__}"
            if problem is None:
                try:
                    extra = companion(step)
                except DamagedFile as err:
                    problem = str(err)
            if problem is not None:
                damaged.append((step, problem))
                continue
            if damaged:
                self._discard(step for step, _ in damaged)
                print(
                    f"offline_gitd: warning: {_describe(damaged)} in {self.directory}; "
                    f"resuming from checkpoint {step}, the newest intact one",
                    file=sys.stderr,
                )
            return step, state, extra
        if damaged:
            raise DamagedFile(
                f"no intact checkpoint in {self.directory}: {_describe(damaged)}; "
                "nothing was removed: start the run again under a new --out"
            )
        return 0, like, None

    def _drop_orphan_digests(self) -> None:
        """Digests of steps orbax no longer has (pruned by a keep-last-N policy, or deleted)."""
        kept = {str(step) for step in self.manager.all_steps()}
        for digest in self.directory.glob("*.sha256"):
            if digest.stem not in kept:
                digest.unlink(missing_ok=True)

    def _discard(self, steps: Iterable[int]) -> None:
        for step in steps:
            shutil.rmtree(self.path(step), ignore_errors=True)
            self.digest_path(step).unlink(missing_ok=True)
        self.manager.reload()


def _is_disk_error(err: BaseException) -> bool:
    """An OSError, or orbax's tensorstore error wrapping one (it reports ``os_error_code``)."""
    return isinstance(err, OSError) or "os_error_code" in str(err)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    # tensorstore's message ends with the OS's words: "...: No space left on device [os_error_code='28']"
    match = re.search(r": ([^:]+?) \[os_error_code='\d+'\]", text)
    return match.group(1) if match else (text.splitlines() or [type(err).__name__])[0]


@contextlib.contextmanager
def _orbax_errors_unlogged() -> Iterator[None]:
    """orbax logs every failure of its save threads with a traceback (about 250 lines for one full
    disk) before raising it; the raised error alone says what happened, so hold its log meanwhile."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _describe(damaged: Sequence[tuple[int, str]]) -> str:
    return "; ".join(f"checkpoint {step} is damaged ({problem})" for step, problem in damaged)


def remove_unfinished_saves(directory: Path) -> None:
    """orbax writes a step into ``<step>.orbax-checkpoint-tmp-*`` and renames it when complete;
    one left behind is a save that a killed process never finished."""
    if directory.is_dir():
        for tmp in directory.glob(f"*{ORBAX_TMP_SUFFIX}*"):
            shutil.rmtree(tmp, ignore_errors=True)


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
