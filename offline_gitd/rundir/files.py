"""The run directory's files: ``config.json``, ``metrics.csv``, ``results.csv`` and their rules.

Side effects live here, at the edge: starting a run directory, recording a resume, the saved
config a resume may only extend, append-only CSV logs and the leaderboard's result row.
Checkpoints are :mod:`offline_gitd.rundir.checkpoints`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from offline_gitd.config.fields import config_fields
from offline_gitd.errors import ConfigError, UsageError
from offline_gitd.input_paths import read_json_file, refuse_escaping_links
from offline_gitd.leaderboard.repeats import repeated_lines
from offline_gitd.leaderboard.schema import COLUMNS, MADE_BY
from offline_gitd.rundir.lock import RUN_LOCK_FILE
from offline_gitd.rundir.seals import (
    DiskFull,
    write_bytes_atomic,
    write_json_atomic,
)

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.csv"
RESULTS_FILE = "results.csv"
CHECKPOINTS = "checkpoints"
# The leaderboard's result row (docs/leaderboard.md), in order.
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
    ``overwrite`` first removes the run that was there (only a directory holding a run), all but
    its lock file, which this run holds (docs/locks.md)."""
    if overwrite and holds_run(run_dir):
        for entry in run_dir.iterdir():
            if entry.name == RUN_LOCK_FILE:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
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


def resume_changes(
    saved: dict[str, Any], given: dict[str, Any], extendable: str, free: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The changes a resume may make to a saved config: ``extendable`` (the run's length) may grow,
    ``free`` fields (where things are, not what is learned) may be given anew; any other flag
    whose value differs from the saved run's is refused, naming the field (docs/architecture.md#runs-are-self-contained)."""
    changes: dict[str, Any] = {}
    for name, value in given.items():
        flag = "--" + name.replace("_", "-")
        if name in free:
            if value is not None:
                changes[name] = value
        elif name == extendable:
            if value is None or value == saved.get(name):
                continue
            if saved.get(name) is not None and value < saved[name]:
                raise ConfigError(
                    f"{flag} {value} is shorter than the run's {saved[name]}: resume can only extend a run"
                )
            changes[name] = value
        elif value is not None and value != saved.get(name):
            raise ConfigError(
                f"{flag} {value} differs from the run's {name} = {saved.get(name)}: resume may only extend "
                f"--{extendable.replace('_', '-')} (start a new run with another --out, or use --overwrite)"
            )
    return changes


def resumed_config(
    cls: type, run_dir: Path, given: Mapping[str, Any] | None, extendable: str, free: tuple[str, ...]
) -> Any:
    """The saved config (a ``cls``) of the run in ``run_dir``, wherever that directory now is,
    with the flags ``given`` on the command line: ``extendable`` (the run's length) may grow,
    ``free`` fields may change, any other difference is refused (docs/architecture.md#runs-are-self-contained)."""
    saved = read_config(run_dir)["config"]
    config = config_from_record(cls, run_dir, saved)
    # compared with the config read, so a field added since the run was made has its default
    changes = resume_changes(config.to_dict(), dict(given or {}), extendable, free)
    changes["out"] = str(run_dir)
    return dataclasses.replace(config, **changes)


def read_config(run_dir: Path) -> dict[str, Any]:
    """The run's ``config.json``, read as data from a directory that may come from someone else
    (docs/bounds.md#run-directories-are-data): refused in one line when the directory holds a link
    to outside itself, or the file is too large, not JSON, or not a run's record."""
    refuse_escaping_links(run_dir, "run directory")
    try:
        saved = read_json_file(run_dir / CONFIG_FILE, CONFIG_FILE)
    except FileNotFoundError:
        raise UsageError(f"{run_dir} holds no {CONFIG_FILE}") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("config"), dict):
        raise UsageError(f"{run_dir / CONFIG_FILE} is not a run's record (no config object)")
    return saved


def config_from_record(cls: type, run_dir: Path, saved: Mapping[str, Any]) -> Any:
    """``cls(**saved)`` for a config read from a run directory, its flags checked: a field the
    package does not know, or a value out of its range (``seeds`` 0-10**9), is one line."""
    names = set(config_fields(cls))
    # a field the record predates takes the value it had then, where today's default differs
    saved = {**getattr(cls, "RECORDED_BEFORE", {}), **saved}
    unknown = sorted(set(saved) - names)
    if unknown:
        raise UsageError(f"{run_dir / CONFIG_FILE} has a field this version does not know: {unknown[0]!r}")
    try:
        config = cls(**saved)
        config.check_flags()
    except (TypeError, ValueError) as err:
        raise UsageError(f"{run_dir / CONFIG_FILE} holds a malformed config ({err})") from None
    except ConfigError as err:
        raise UsageError(f"{run_dir / CONFIG_FILE}: {err}") from None
    return config


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

    def drop_repeats(self) -> list[int]:
        """Remove rows that repeat an earlier row of the same run, seed and step exactly (two
        processes wrote this run at once) and return their line numbers; rows that disagree are
        refused naming both lines (:func:`~offline_gitd.leaderboard.repeats.repeated_lines`).
        Every other line, a torn last one included, is kept byte for byte."""
        if not self.path.exists():
            return []
        with self.path.open(newline="") as f:
            lines = f.read().splitlines(keepends=True)
        reader = csv.reader(lines)
        header = next(reader, None)
        if header is None:
            return []
        rows, spans, start = [], {}, reader.line_num + 1
        for values in reader:
            if len(values) == len(header):  # a torn row is left to drop_after
                rows.append((start, values))
                spans[start] = range(start, reader.line_num + 1)
            start = reader.line_num + 1
        repeats = repeated_lines(self.path, header, rows)
        if not repeats:
            return []
        dropped = {line for first in repeats for line in spans[first]}
        kept = "".join(text for number, text in enumerate(lines, start=1) if number not in dropped)
        try:
            write_bytes_atomic(self.path, kept.encode())
        except OSError as err:
            raise DiskFull(f"cannot rewrite {self.path}: {err.strerror or err}; it is unchanged") from None
        return repeats

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


def result_row(
    provenance: Mapping[str, Any],
    algorithm: str,
    critic: str,
    K: int,
    beta: float,
    seed: int,
    step: int,
    value: float,
    made_by: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One leaderboard row (docs/leaderboard.md). ``provenance`` is the run's config.json: suite, env,
    run_id, config_hash, package_version, method_config (absent from runs started before it
    existed: "not recorded"). Each seed is its own leaderboard run. ``made_by``: the row's
    ``commit``, ``dirty``, ``diff_sha256``, ``data_sha256`` and ``device`` cells, those of the
    process that computed it (a resumed run's later rows may come from other code or another device;
    :func:`offline_gitd.rundir.provenance.row_facts`); absent ones are empty (unknown)."""
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
        **{name: (made_by or {}).get(name, "") for name in MADE_BY},
    }
