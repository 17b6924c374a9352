"""``leaderboard submit``: validate run results and append them to a board, atomically.

How the append is made safe (docs/leaderboard.md):

- **Exclusion**: an exclusive ``flock`` on a side file ``<board>.lock`` is held from reading
  the board to replacing it, so concurrent submitters see each other's rows and cannot both add a
  duplicate. The lock file is never deleted (deleting it would let two processes lock two files).
- **Atomicity**: the new board is a temporary file in the same directory holding the old board's
  bytes, copied verbatim, followed by the new rows; it is fsynced and renamed over the board, and
  the directory is fsynced (:mod:`offline_gitd.durable`, like the lock). A reader, or a crash at
  any point, sees the old board or the new one, never a torn last line, which an ``O_APPEND`` write
  interrupted by a full disk or a kill can leave. Earlier rows are never re-serialised, so they
  stay byte-identical. The copy costs O(board size) per submit, which is small next to producing
  the runs.
- **Upgrade**: a board written before the ``method_config`` column, or before the columns of what
  made a row (``commit`` ... ``device``), is rewritten once, with the new header and its rows
  given those columns empty ("not recorded"), when rows are added.
- **All or nothing**: every row of every run directory is validated, and checked for duplicates
  within the input and against the board, before anything is written.
- **Repeats**: a run whose ``results.csv`` holds rows written twice (two processes wrote the run at
  once) gives each row once; rows of one run, seed and step that disagree are refused.
- **Idempotence**: a row identical to one on the board (every cell) is already there and is left
  out, so submitting a run again adds nothing, changes nothing and succeeds; a run that has grown
  adds its new rows. A row that shares a run, seed and step with a board row but differs is
  still refused as a duplicate.
- **Interrupted submits**: temporary files are named ``.<board>.<host>.<pid>.<random>.tmp``.
  Under the lock, a later submit removes one whose writer (on this host) no longer runs, or, for
  any other, one untouched for :data:`STALE_AFTER_S` (no submit takes that long between writing
  its temporary file and renaming it), so a writer that is still alive is never robbed of its file.
- **References**: each run's dataset references (its Minari ``metadata.json``) are kept beside the
  board in ``<board>.references.csv``, written the same atomic way
  (:mod:`~offline_gitd.leaderboard.board_references`).
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import io
import json
import math
import os
import re
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from offline_gitd.durable import TEMP_SUFFIX, file_lock, replace_bytes, temp_prefix
from offline_gitd.errors import UsageError
from offline_gitd.input_paths import refuse_escaping_links
from offline_gitd.leaderboard.board_references import (
    DatasetReference,
    encode_references,
    merge,
    read_references,
    references_path,
    run_reference,
)
from offline_gitd.leaderboard.reference import check_env
from offline_gitd.leaderboard.repeats import describe_repeats, repeated_lines
from offline_gitd.leaderboard.schema import (
    COLUMNS,
    ResultRow,
    SchemaError,
    describe_kind,
    is_legacy,
    read_rows,
    row_kind,
)

RESULTS_FILE = "results.csv"
# A temporary file older than this is stale whoever wrote it: a submit writes and renames its file
# within seconds of taking the lock.
STALE_AFTER_S = 3600.0


@dataclasses.dataclass(frozen=True)
class Located:
    """A row and where it came from, so every refusal can name ``file:line``."""

    path: Path
    line: int
    row: ResultRow

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclasses.dataclass(frozen=True)
class SubmitReport:
    """What a submit added: rows per run directory, the board's row count afterwards, the rows
    left out because the board already held them identically, and notes worth a line each."""

    board: Path
    added: dict[Path, int]
    total_rows: int
    already: int = 0
    notes: tuple[str, ...] = ()


def duplicate_keys(row: ResultRow) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """The two identities a row must not share with another: (run, step) and (setting, step).

    A run is (run_id, seed) since a run directory holds all its seeds under one run_id; where
    run_ids are per seed this is the same as (run_id, step). A setting is the method, the env and
    the row's identity (config hash and data digest): one config trained on two recordings of a
    dataset is two settings (docs/leaderboard.md#what-made-a-row).
    """
    return (
        ("run_id", row.run_id, row.seed, row.step),
        ("setting", row.algorithm, row.critic, row.K, row.beta, row.env, row.seed, row.step, *row.identity),
    )


def run_updates(run_dir: Path, last_step: int) -> int | None:
    """The gradient updates an online run had made by env step ``last_step``, from its
    ``config.json`` (none during its initial random samples, then ``utd`` per step: the online
    loop's schedule, docs/online.md#runs-that-would-not-train); ``None`` for an offline run, whose
    every row follows an epoch of updates, or where the record does not say."""
    try:
        record = json.loads((run_dir / "config.json").read_text())
        config = record["config"]
        initial, utd = int(config["initial_samples"]), Fraction(str(config.get("utd") or 1))
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    return math.floor(max(0, last_step - initial) * utd)


def refuse_untrained(run_dir: Path, located: Sequence[Located]) -> None:
    """A run that made no update is no result of its method (its returns are its random initial
    policy's): refused, naming its last row."""
    last = max(located, key=lambda item: item.row.step)
    if run_updates(run_dir, last.row.step) == 0:
        raise UsageError(
            f"{last.where}: {run_dir} made no update by its last row (step {last.row.step} is within its "
            "initial random samples): its returns are a random policy's, not a result of its method"
        )


def read_run(run_dir: Path, allow_new_env: bool) -> list[Located]:
    """A run directory's validated rows; unknown suites and envs are refused with their line.

    Rows a past race of two writers left twice are taken once, with one line on stderr; rows of
    the same run, seed and step that disagree are refused naming both lines (docs/locks.md). The
    file itself is the run's: resuming the run removes the repeats from it.
    """
    path = run_dir / RESULTS_FILE
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: not a run directory")
    refuse_escaping_links(run_dir, "run directory")
    located = [Located(path, line, row) for line, row in read_rows(path)]
    if not located:
        raise SchemaError(f"{path}: no result rows")
    repeats = repeated_lines(path, COLUMNS, [(item.line, item.row.to_record()) for item in located])
    if repeats:
        print(
            f"offline_gitd: note: {describe_repeats(path, repeats)} (resuming the run removes them from the file)",
            file=sys.stderr,
            flush=True,
        )
        dropped = set(repeats)
        located = [item for item in located if item.line not in dropped]
    refuse_untrained(run_dir, located)
    return located


def check_envs(new_rows: Sequence[Located], board_rows: Sequence[Located], allow_new_env: bool) -> None:
    """Refuse an unknown suite, and an env outside its suite's registry unless ``allow_new_env``
    or the board already holds it: ``--allow-new-env`` adds an env to a board once, and the
    board's own envs are known to it from then on (so submitting the same run again is a no-op)."""
    on_board = {(item.row.suite, item.row.env) for item in board_rows}
    for item in new_rows:
        try:
            check_env(item.row.suite, item.row.env, allow_new_env or (item.row.suite, item.row.env) in on_board)
        except UsageError as err:
            raise SchemaError(f"{item.where}: {err}") from None


def check_one_kind(board_rows: Sequence[Located], new_rows: Sequence[Located]) -> None:
    """Refuse new rows of another kind than the board's (:func:`row_kind`: protocol, suite, major
    version): a board compares like with like (docs/leaderboard.md#one-board-one-kind-of-row).
    ``submit(..., allow_mixed=True)`` (``--allow-mixed``) pools them on purpose."""
    first = board_rows[0] if board_rows else (new_rows[0] if new_rows else None)
    if first is None:
        return
    kind = row_kind(first.row)
    for item in new_rows:
        other = row_kind(item.row)
        if other != kind:
            raise UsageError(
                f"{item.where}: {describe_kind(other)}, where {first.where} is {describe_kind(kind)}: a board compares "
                "one protocol, one suite and one major version (pass --allow-mixed to pool them anyway)"
            )


def check_new_rows(board_rows: Sequence[Located], new_rows: Sequence[Located]) -> None:
    """Refuse a new row that repeats a board or input row, or a run_id that changes setting.

    A run_id names one run directory (one method and env); reusing it for another would merge
    curves of different methods on the board.
    """
    seen: dict[tuple[object, ...], Located] = {}
    runs: dict[str, Located] = {}
    for item in board_rows:
        for key in duplicate_keys(item.row):
            seen.setdefault(key, item)
        runs.setdefault(item.row.run_id, item)
    for item in new_rows:
        for key in duplicate_keys(item.row):
            if key in seen:
                what = (
                    "run_id, seed and step"
                    if key[0] == "run_id"
                    else ("algorithm, critic, K, beta, env, seed, step, config_hash and data_sha256")
                )
                raise UsageError(f"{item.where}: duplicate of {seen[key].where} (same {what})")
            seen[key] = item
        first = runs.setdefault(item.row.run_id, item)
        if first.row.run_setting != item.row.run_setting:
            raise UsageError(
                f"{item.where}: run_id {item.row.run_id!r} already names another run at "
                f"{first.where} (its suite, env, algorithm, critic, K or beta differ)"
            )


@contextmanager
def board_lock(board: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``<board>.lock`` (created if needed, never deleted) for the block."""
    with file_lock(board.with_name(board.name + ".lock")):
        yield


def encode_rows(rows: Sequence[ResultRow], header: bool) -> bytes:
    """CSV bytes for ``rows`` (``\\n`` line ends), optionally preceded by the header.

    Each record is written with ``\\r\\n`` and its end turned back into ``\\n``: the csv module
    quotes a cell only for the line terminator's own characters, so with ``\\n`` alone a carriage
    return inside a name went out unquoted and split its row when the board was read again.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    lines = []
    for record in ([list(COLUMNS)] if header else []) + [row.to_record() for row in rows]:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(record)
        lines.append(buffer.getvalue().removesuffix("\r\n") + "\n")
    return "".join(lines).encode("utf-8")


def _host() -> str:
    """This host's name as it may appear in a file name (no dots or path characters)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def replace_atomically(path: Path, content: bytes) -> None:
    """Replace ``path`` with ``content`` (:func:`offline_gitd.durable.replacing`: temp file beside
    it, fsync, rename, fsync of the directory; the file's permissions are kept).

    The temp file's name carries this host and process id, so that a later submit can tell the
    file of a killed writer from one still being written (:func:`remove_stale_temp_files`)."""
    replace_bytes(path, content, prefix=f"{temp_prefix(path)}{_host()}.{os.getpid()}.")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


def is_stale(temp: Path, target: Path, now: float) -> bool:
    """Whether a temporary file of ``target`` (the board or its side file) belongs to no live writer: its writer's process
    on this host is gone, or it is older than :data:`STALE_AFTER_S` (a file of another host, or
    named before the names carried a writer)."""
    try:
        age = now - temp.stat().st_mtime
    except FileNotFoundError:
        return False
    if age > STALE_AFTER_S:
        return True
    middle = temp.name[len(temp_prefix(target)) : -len(TEMP_SUFFIX)]
    parts = middle.split(".")
    if len(parts) >= 3 and parts[0] == _host() and parts[1].isdigit():
        return not _pid_alive(int(parts[1]))
    return False


def remove_stale_temp_files(board: Path, now: float | None = None) -> list[Path]:
    """Remove the temp files of submits killed before their rename (:func:`is_stale`); the paths
    removed. Call under :func:`board_lock`."""
    moment = time.time() if now is None else now
    removed = []
    for target in (board, references_path(board)):
        for temp in board.parent.glob(f"{glob.escape(temp_prefix(target))}*{TEMP_SUFFIX}"):
            if is_stale(temp, target, moment):
                temp.unlink(missing_ok=True)
                removed.append(temp)
    return removed


def _references(per_run: dict[Path, list[Located]]) -> tuple[list[DatasetReference], list[str]]:
    """The dataset references of the runs, and a note per run on a Minari dataset that is absent
    here (its references cannot be recorded)."""
    from offline_gitd.leaderboard.board_references import run_dataset

    found, notes = [], []
    for run_dir, rows in per_run.items():
        if not rows:
            continue
        row = rows[0].row
        reference = run_reference(run_dir, row.suite, row.env)
        if reference is not None:
            found.append(reference)
        elif (dataset := run_dataset(run_dir)) is not None:
            notes.append(f"{run_dir}: dataset {dataset[0]} is not on this machine; its references were not recorded")
    return found, notes


def submit(
    run_dirs: Sequence[Path],
    board: Path,
    allow_new_env: bool,
    skip_existing: bool = False,
    allow_mixed: bool = False,
) -> SubmitReport:
    """Validate the runs' rows and append them to ``board`` (created with a header if absent).

    A row identical to a board row is already there and is left out (a submit of the same run
    again is a no-op). ``skip_existing`` goes further, for a sweep that may submit a run again
    after a crash or once the run has grown: rows already on the board under the same run, seed
    and step, or under the same setting (method, env and config hash), seed and step (the run
    trained again where its run directory was lost, docs/sweeps.md#moving-a-sweep-to-another-machine;
    the config hash with the data digest),
    are left out even where they differ; every other row is checked as usual. The rows that are left
    must be of the board's kind (:func:`check_one_kind`) unless ``allow_mixed``, and of envs their
    suite knows, or the board holds, unless ``allow_new_env``.
    """
    if not run_dirs:
        raise UsageError("no run directories given")
    if not board.parent.is_dir():
        raise UsageError(f"{board.parent}: the board's directory does not exist")
    per_run = {run_dir: read_run(run_dir, allow_new_env) for run_dir in run_dirs}
    if board.exists():
        read_rows(board)  # a board that is no CSV of results is refused before its lock file is made
    with board_lock(board):
        remove_stale_temp_files(board)
        exists = board.exists()
        board_rows = [Located(board, line, row) for line, row in read_rows(board)] if exists else []
        identical = {item.row for item in board_rows}
        offered = sum(len(rows) for rows in per_run.values())
        per_run = {d: [item for item in rows if item.row not in identical] for d, rows in per_run.items()}
        if skip_existing:
            present = {key for item in board_rows for key in duplicate_keys(item.row)}
            per_run = {
                d: [item for item in rows if present.isdisjoint(duplicate_keys(item.row))]
                for d, rows in per_run.items()
            }
        new_rows = [item for rows in per_run.values() for item in rows]
        added = {run_dir: len(rows) for run_dir, rows in per_run.items()}
        already = offered - len(new_rows)
        if not new_rows and exists:
            return SubmitReport(board, added, len(board_rows), already)
        check_envs(new_rows, board_rows, allow_new_env)
        if not allow_mixed:
            check_one_kind(board_rows, new_rows)
        check_new_rows(board_rows, new_rows)
        references, notes = _references(per_run)
        if exists and is_legacy(board):
            old = encode_rows([item.row for item in board_rows], header=True)
        else:
            old = board.read_bytes() if exists else b""
        if old and not old.endswith(b"\n"):
            old += b"\n"
        replace_atomically(board, old + encode_rows([item.row for item in new_rows], not old))
        _record_references(board, references, notes)
    return SubmitReport(board, added, len(board_rows) + len(new_rows), already, tuple(notes))


def _record_references(board: Path, references: list[DatasetReference], notes: list[str]) -> None:
    """Add the runs' references to the board's side file (under the board's lock); the file is
    rewritten only when something new is added."""
    if not references:
        return
    existing = read_references(board)
    merged, conflicts = merge(existing, references)
    notes.extend(conflicts)
    if merged != existing:
        replace_atomically(references_path(board), encode_references(merged.values()))
