"""Checkpoints of a run: orbax saves of the whole training-state pytree, sealed by a digest.

A CSV row belongs to a step, and rows of steps after the last checkpoint are dropped on resume
(:class:`~offline_gitd.rundir.files.CsvLog`), so a crash between writing rows and saving a
checkpoint never duplicates or loses a step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import orbax.checkpoint as ocp

from offline_gitd.errors import UsageError
from offline_gitd.rundir.files import CHECKPOINTS
from offline_gitd.rundir.seals import (
    DamagedFile,
    DiskFull,
    deferred_interrupt,
    tree_problem,
    tree_sha256,
    write_json_atomic,
)

if TYPE_CHECKING:
    from offline_gitd.learners.family import Family

ORBAX_TMP_SUFFIX = ".orbax-checkpoint-tmp"
# The folder inside a step where orbax's CheckpointManager keeps its one (unnamed) item.
ORBAX_ITEM = "default"
# Fields of a checkpoint that held a compiled loop's whole carry (docs/online.md#the-compiled-loop).
WHOLE_CARRY = {"learner", "env_state", "replay"}


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

    def saved_fields(self, epoch: int) -> list[str] | None:
        """The top-level names of the tree checkpoint ``epoch`` holds, from orbax's metadata (no
        array is read); ``None`` where the metadata cannot say (a damaged or unfinished save,
        which :meth:`problem` names)."""
        try:
            with _orbax_errors_unlogged():
                tree = ocp.StandardCheckpointHandler().metadata(self.path(epoch) / ORBAX_ITEM).tree
        except Exception:  # noqa: BLE001 -- orbax fails in many ways on a damaged save; problem() says which
            return None
        return sorted(tree) if isinstance(tree, dict) else None

    def refuse_whole_carry(self, epoch: int) -> None:
        """Refuse in one line (:class:`~offline_gitd.errors.UsageError`) a checkpoint that holds a
        compiled loop's whole carry, as older versions saved a compiled run's, where a checkpoint
        now holds the learner's state alone (docs/online.md#the-compiled-loop); checked before orbax
        is asked to read it, whose own error is pages of tree paths."""
        fields = self.saved_fields(epoch)
        if fields is not None and WHOLE_CARRY <= set(fields):
            raise UsageError(
                f"checkpoint {epoch} in {self.directory} holds a compiled loop's whole state, as older "
                "versions saved it; this version reads a checkpoint of the learner's state alone and "
                "cannot read or resume it: train the run again"
            )

    def restore_as_written(self, epoch: int) -> Any:
        """Checkpoint ``epoch`` as its files hold it, with no template: for comparing two runs'
        states (tests, ``benchmarks/determinism.py``) without building the networks that made them."""
        return self.manager.restore(epoch, args=ocp.args.StandardRestore())

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


def restore_seed_states(run_dir: Path, step: int, family: Family, seeds: Sequence[int]) -> Any:
    """Every seed's learner state at checkpoint ``step`` of a run directory, with a leading seed
    axis: what every reader of a trained run restores (``load_run`` and ``offline_gitd evaluate``,
    ``--init-from``, ``collect``'s evaluation of its behaviour agent), from an offline run or an
    online run of either loop, whose checkpoints all hold that one pytree
    (docs/architecture.md#runs-are-self-contained). The template is ``family``'s fresh state of
    ``seeds`` (:func:`~offline_gitd.learners.family.seed_states`, uncompiled); a compiled run of an
    older version, whose checkpoint holds the loop's whole carry, is refused in one line
    (:meth:`Checkpoints.refuse_whole_carry`)."""
    from offline_gitd.learners.family import seed_states  # the networks' imports, for a reader only

    checkpoints = Checkpoints(run_dir)
    like = seed_states(family, seeds, compiled=False)
    checkpoints.refuse_whole_carry(step)
    return checkpoints.restore(step, like)


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
