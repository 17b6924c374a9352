"""The leaderboard's result row (docs/leaderboard.md) and the CSV files that hold rows.

One row is one evaluation of one run at one training step. Every file that holds rows (a run
directory's ``results.csv``, a board) is a plain CSV whose header is exactly :data:`COLUMNS`, so a
board can be read by any tool; parsing goes through :meth:`ResultRow.from_mapping`, so every
consumer refuses the same malformed values with the same message.

``method_config`` says which method a row is beyond (algorithm, critic, K, beta): the
method-defining config fields the run set away from its domain's defaults, e.g. ``T=10 lr=0.01``,
or ``defaults`` (docs/architecture.md#runs-are-self-contained). Files written before it existed have :data:`LEGACY_COLUMNS` and are
still read; their rows carry an empty ``method_config`` ("not recorded").

The last five columns tie a row to the data and code that made it (docs/leaderboard.md#what-made-a-row):
``commit`` (the package's git commit, empty where it ran from no checkout), ``dirty`` (``true`` /
``false``: local changes to tracked files), ``diff_sha256`` (SHA-256 of ``git diff HEAD`` when
dirty), ``data_sha256`` (the content digest of the dataset an offline run trained on, the one
dataset manifests record, docs/datasets.md#manifests; empty for online runs) and ``device`` (``cpu``
or the accelerator's model). Files written before them (:data:`PREVIOUS_COLUMNS`) are still read;
their rows carry the columns empty: unknown.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TextIO

from offline_gitd.errors import UsageError

COLUMNS: tuple[str, ...] = (
    "suite",
    "env",
    "algorithm",
    "critic",
    "K",
    "beta",
    "seed",
    "step",
    "return",
    "run_id",
    "config_hash",
    "package_version",
    "created_at",
    "method_config",
    "commit",
    "dirty",
    "diff_sha256",
    "data_sha256",
    "device",
)
# What made a row; empty (unknown) in rows of files written before these columns existed.
MADE_BY: tuple[str, ...] = ("commit", "dirty", "diff_sha256", "data_sha256", "device")
PREVIOUS_COLUMNS: tuple[str, ...] = COLUMNS[: -len(MADE_BY)]  # files before MADE_BY
LEGACY_COLUMNS: tuple[str, ...] = PREVIOUS_COLUMNS[:-1]  # files before method_config
OLDER_HEADERS = (PREVIOUS_COLUMNS, LEGACY_COLUMNS)
NOT_RECORDED = ""  # method_config (and each MADE_BY column) of rows from files written before it existed


class SchemaError(UsageError):
    """A row, or a file of rows, that does not follow the schema; the message names the field."""


def _text(name: str, value: str) -> str:
    if not value.strip():
        raise SchemaError(f"field '{name}': must not be empty")
    if value != value.strip():
        raise SchemaError(f"field '{name}': leading or trailing spaces in {value!r}")
    return value


def _integer(name: str, value: str, minimum: int) -> int:
    try:
        number = int(value)
    except ValueError:
        raise SchemaError(f"field '{name}': expected an integer, got {value!r}") from None
    if number < minimum:
        raise SchemaError(f"field '{name}': must be >= {minimum}, got {number}")
    return number


def _finite(name: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise SchemaError(f"field '{name}': expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise SchemaError(f"field '{name}': must be finite, got {value!r}")
    return number


def _hex(name: str, value: str, lengths: tuple[int, ...]) -> str:
    """Empty (unknown) or a lowercase hex digest of one of ``lengths`` characters."""
    if value and (len(value) not in lengths or value.strip("0123456789abcdef")):
        want = " or ".join(map(str, lengths))
        raise SchemaError(f"field '{name}': expected {want} lowercase hex digits or nothing, got {value!r}")
    return value


def _flag(name: str, value: str) -> str:
    if value not in ("", "true", "false"):
        raise SchemaError(f"field '{name}': expected true, false or nothing, got {value!r}")
    return value


def _timestamp(name: str, value: str) -> str:
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise SchemaError(f"field '{name}': expected an ISO 8601 time, got {value!r}") from None
    if stamp.tzinfo is None:
        raise SchemaError(f"field '{name}': needs a UTC offset (e.g. +00:00), got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ResultRow:
    """One validated result row. ``return`` is a Python keyword, so the attribute is ``return_``."""

    suite: str
    env: str
    algorithm: str
    critic: str
    K: int
    beta: float
    seed: int
    step: int
    return_: float
    run_id: str
    config_hash: str
    package_version: str
    created_at: str
    method_config: str = NOT_RECORDED
    commit: str = NOT_RECORDED
    dirty: str = NOT_RECORDED  # "true" / "false" / "" (unknown)
    diff_sha256: str = NOT_RECORDED
    data_sha256: str = NOT_RECORDED
    device: str = NOT_RECORDED

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, object]) -> ResultRow:
        """Parse a CSV record (strings) or any mapping; raise :class:`SchemaError` naming the field."""
        missing = [name for name in LEGACY_COLUMNS if name not in mapping]
        if missing:
            raise SchemaError(f"missing field(s): {', '.join(missing)}")
        unknown = sorted(str(name) for name in mapping if name not in COLUMNS)
        if unknown:
            raise SchemaError(f"unknown field(s): {', '.join(unknown)}")
        value = {name: "" if mapping.get(name) is None else str(mapping[name]) for name in COLUMNS}
        return cls._parse(value)

    @classmethod
    def _parse(cls, value: Mapping[str, str]) -> ResultRow:
        """The row of a complete record of strings (every name of :data:`COLUMNS`), validated;
        what :meth:`from_mapping` checks first, a file's reader checks once for its header."""
        return cls(
            suite=_text("suite", value["suite"]),
            env=_text("env", value["env"]),
            algorithm=_text("algorithm", value["algorithm"]),
            critic=_text("critic", value["critic"]),
            K=_integer("K", value["K"], minimum=1),
            beta=_finite("beta", value["beta"]),
            seed=_integer("seed", value["seed"], minimum=0),
            step=_integer("step", value["step"], minimum=0),
            return_=_finite("return", value["return"]),
            run_id=_text("run_id", value["run_id"]),
            config_hash=_text("config_hash", value["config_hash"]),
            package_version=_text("package_version", value["package_version"]),
            created_at=_timestamp("created_at", value["created_at"]),
            method_config=value["method_config"].strip(),
            commit=_hex("commit", value["commit"].strip(), (40, 64)),
            dirty=_flag("dirty", value["dirty"].strip()),
            diff_sha256=_hex("diff_sha256", value["diff_sha256"].strip(), (64,)),
            data_sha256=_hex("data_sha256", value["data_sha256"].strip(), (64,)),
            device=value["device"].strip(),
        )

    def to_record(self) -> list[str]:
        """The row as CSV cells in :data:`COLUMNS` order; ``repr`` keeps floats round-trip exact."""
        return [
            self.suite,
            self.env,
            self.algorithm,
            self.critic,
            str(self.K),
            repr(self.beta),
            str(self.seed),
            str(self.step),
            repr(self.return_),
            self.run_id,
            self.config_hash,
            self.package_version,
            self.created_at,
            self.method_config,
            self.commit,
            self.dirty,
            self.diff_sha256,
            self.data_sha256,
            self.device,
        ]

    @property
    def run_setting(self) -> tuple[object, ...]:
        """What one run_id must keep constant over its rows: the method and the env.

        The seed may vary: a run directory trains several seeds at once (``--seeds 0-4``, one
        vmapped program) and writes one run_id for all of them, so a single run's curve is
        (run_id, seed).
        """
        return (self.suite, self.env, self.algorithm, self.critic, self.K, self.beta, self.method_config)

    @property
    def identity(self) -> tuple[str, str]:
        """What a row was trained as: its config hash and the content digest of its data
        (empty: online, or not recorded). Two runs of one config on two recordings of a dataset
        differ here, though their ``config_hash`` is the same (docs/leaderboard.md#what-made-a-row)."""
        return (self.config_hash, self.data_sha256)


# Algorithms whose rows are online runs' (``offline_gitd online dqn|sac``); every other algorithm
# is an offline one (docs/leaderboard.md#one-board-one-kind-of-row).
ONLINE_ALGORITHMS = frozenset({"dqn", "sac"})


def row_kind(row: ResultRow) -> tuple[str, str, str]:
    """(protocol, suite, major version) of a row: what one board holds one of. The protocol is
    online or offline (by the algorithm: :data:`ONLINE_ALGORITHMS`); the major version is the
    version's first number, or ``0.minor`` before 1.0 (where a minor version may change the package,
    CHANGELOG.md); a version that is no dotted number is its own."""
    return row_kind_of(row.algorithm, row.suite, row.package_version)


def row_kind_of(algorithm: str, suite: str, package_version: str) -> tuple[str, str, str]:
    """:func:`row_kind` from the three cells it reads."""
    protocol = "online" if algorithm in ONLINE_ALGORITHMS else "offline"
    parts = [part if part.isascii() and part.isdigit() else None for part in package_version.split(".")]
    if parts[0] is not None and int(parts[0]) >= 1:
        major = str(int(parts[0]))
    elif parts[0] is not None and len(parts) > 1 and parts[1] is not None:
        major = f"{int(parts[0])}.{int(parts[1])}"
    else:
        major = package_version
    return protocol, suite, major


def describe_kind(kind: tuple[str, str, str]) -> str:
    """``an offline minari row of version 0.2`` (names shortened: they are data)."""
    protocol, suite, major = kind
    return f"an {protocol} {shorten(suite)} row of version {shorten(major)}.x"


def shorten(name: str, limit: int = 60) -> str:
    """A name as one line of at most about ``limit`` characters, for messages and figures: line ends
    shown as ``\\n``, and a long name cut in its middle with its length said. The full name stays
    in the data (docs/leaderboard.md#any-name-renders)."""
    text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in name)
    if len(text) <= limit:
        return text
    marker = f"...({len(name)} chars)..."
    keep = max(1, (limit - len(marker)) // 2)
    return f"{text[:keep]}{marker}{text[-keep:]}"


def is_legacy(path: Path) -> bool:
    """Whether the CSV at ``path`` has the header of files written before ``method_config`` or
    before the :data:`MADE_BY` columns (a submit rewrites it once with :data:`COLUMNS`)."""
    # utf-8-sig, as read_rows: a legacy board saved by a spreadsheet starts with a byte-order mark,
    # and read as plain UTF-8 its header would not match, so it would never be upgraded.
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return tuple(next(csv.reader(handle), ())) in OLDER_HEADERS


def read_rows(path: Path) -> list[tuple[int, ResultRow]]:
    """Read and validate every row of a CSV file, with its line number in the file.

    Errors carry ``path:line`` so a user can open the file at the bad row. An absent file is an
    error here: callers decide whether "no board yet" is allowed.
    """
    try:
        # utf-8-sig: a board saved by a spreadsheet starts with a byte-order mark; it is not data.
        handle = path.open(newline="", encoding="utf-8-sig")
    except FileNotFoundError:
        raise SchemaError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SchemaError(f"{path}: is a directory, expected a CSV file") from None
    with handle:
        try:
            return _parse_rows(path, handle)
        except UnicodeDecodeError as err:
            # err.start counts from the decoder's current chunk, not the file: not worth showing.
            raise SchemaError(f"{path}: not a UTF-8 CSV file ({err.reason})") from None
        except csv.Error as err:
            raise SchemaError(f"{path}: not a CSV file ({err})") from None


def _parse_rows(path: Path, handle: TextIO) -> list[tuple[int, ResultRow]]:
    """The rows of an open board file, each with its line number; the header must be COLUMNS."""
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise SchemaError(f"{path}:1: empty file, expected the header {','.join(COLUMNS)}")
    if tuple(header) != COLUMNS and tuple(header) not in OLDER_HEADERS:
        got = ",".join(header)
        got = got if len(got) <= 200 else got[:197] + "..."
        # repr: a quoted header cell may hold a line end, and the message must stay one line.
        raise SchemaError(f"{path}:1: header must be {','.join(COLUMNS)}, got {got!r}")
    columns = tuple(header)  # an older board (before method_config or MADE_BY) is read as it is
    rows: list[tuple[int, ResultRow]] = []
    start = reader.line_num + 1
    for record in reader:
        if len(record) != len(columns):
            raise SchemaError(f"{path}:{start}: expected {len(columns)} cells, got {len(record)}")
        try:
            cells = dict(zip(columns, record))
            for name in COLUMNS[len(LEGACY_COLUMNS) :]:
                cells.setdefault(name, NOT_RECORDED)
            rows.append((start, ResultRow._parse(cells)))
        except SchemaError as err:
            raise SchemaError(f"{path}:{start}: {err}") from None
        start = reader.line_num + 1
    return rows
