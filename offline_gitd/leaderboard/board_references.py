"""Reference scores that come with the data, kept beside a board (docs/leaderboard.md#reference-scores-from-the-data).

A board row names its env, not the dataset it was trained on, and the dataset may not be on the
machine that reads the board. So ``submit`` copies each run's dataset references into a side file
of the board, ``<board>.references.csv`` (``board.csv`` -> ``board.references.csv``), one line per
(suite, env): the board and its side file are then self-contained.

The references are those a dataset's own metadata carries (Minari's ``metadata.json``):

- ``ref_min_score`` / ``ref_max_score``: Minari's reference scores, normalised with D4RL's formula
  100 (x - min) / (max - min). ``offline_gitd collect`` writes a uniformly random policy's mean
  return over 100 episodes as ``ref_min_score`` and the behaviour agent's mean over its last 10
  training episodes as ``ref_max_score`` (docs/datasets.md), so random = 0 and behaviour = 100;
- ``checkpoint_returns``: the behaviour agent's mean return per checkpoint of a DQN-replay dataset
  (docs/minatar.md); its last one is the DQN-replay score, RL Unplugged's reference for its replay
  data, with ``ref_min_score`` as random;
- ``behaviour_eval_score``: the behaviour agent's final policy evaluated the way the runs are
  (``collect`` since it records it: 100 episodes at epsilon 0.001), beside its training return,
  which explores (epsilon 0.1 on MinAtar). Side files written before it have no such column.

A board made before this file existed has none: every reader then falls back to the packaged
tables and then to the baseline method (docs/leaderboard.md#normalisation), and the side file can be
written by hand, a plain CSV with the numbers and their ``source``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path

from offline_gitd.errors import UsageError

SUFFIX = ".references.csv"
FIELDS: tuple[str, ...] = (
    "suite",
    "env",
    "dataset",
    "ref_min_score",
    "ref_max_score",
    "dqn_replay_score",
    "source",
    "behaviour_eval_score",
)
OLDER_FIELDS = FIELDS[:-1]  # side files written before behaviour_eval_score


@dataclasses.dataclass(frozen=True)
class DatasetReference:
    """One env's references as its dataset records them; ``None`` where the dataset has none."""

    suite: str
    env: str
    dataset: str
    ref_min_score: float | None
    ref_max_score: float | None
    dqn_replay_score: float | None
    source: str
    behaviour_eval_score: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.suite, self.env)

    def same_numbers(self, other: DatasetReference) -> bool:
        return (self.ref_min_score, self.ref_max_score, self.dqn_replay_score) == (
            other.ref_min_score,
            other.ref_max_score,
            other.dqn_replay_score,
        ) and (
            None in (self.behaviour_eval_score, other.behaviour_eval_score)
            or (self.behaviour_eval_score == other.behaviour_eval_score)
        )


def references_path(board: Path) -> Path:
    """``board.csv`` -> ``board.references.csv`` in the same directory."""
    stem = board.name[: -len(".csv")] if board.name.endswith(".csv") else board.name
    return board.with_name(stem + SUFFIX)


def _number(path: Path, line: int, name: str, text: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{path}:{line}: field '{name}': expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise UsageError(f"{path}:{line}: field '{name}': must be finite, got {text!r}")
    return value


def read_references(board: Path) -> dict[tuple[str, str], DatasetReference]:
    """The references kept beside ``board``, by (suite, env); empty when it has no side file."""
    path = references_path(board)
    if not path.exists():
        return {}
    out: dict[tuple[str, str], DatasetReference] = {}
    with path.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) not in (FIELDS, OLDER_FIELDS):
            raise UsageError(f"{path}:1: header must be {','.join(FIELDS)}")
        for line, record in enumerate(reader, start=2):
            reference = DatasetReference(
                suite=record["suite"],
                env=record["env"],
                dataset=record["dataset"],
                ref_min_score=_number(path, line, "ref_min_score", record["ref_min_score"]),
                ref_max_score=_number(path, line, "ref_max_score", record["ref_max_score"]),
                dqn_replay_score=_number(path, line, "dqn_replay_score", record["dqn_replay_score"]),
                source=record["source"],
                behaviour_eval_score=_number(
                    path, line, "behaviour_eval_score", record.get("behaviour_eval_score") or ""
                ),
            )
            if reference.key in out:
                raise UsageError(f"{path}:{line}: a second line for {reference.suite} {reference.env}")
            out[reference.key] = reference
    return out


def encode_references(references: Iterable[DatasetReference]) -> bytes:
    """The side file's bytes, lines sorted by (suite, env); floats with ``repr`` (round-trip exact)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FIELDS)
    for item in sorted(references, key=lambda r: r.key):
        numbers = (item.ref_min_score, item.ref_max_score, item.dqn_replay_score)
        evaluated = "" if item.behaviour_eval_score is None else repr(float(item.behaviour_eval_score))
        writer.writerow(
            [
                item.suite,
                item.env,
                item.dataset,
                *("" if v is None else repr(float(v)) for v in numbers),
                item.source,
                evaluated,
            ]
        )
    return buffer.getvalue().encode("utf-8")


def from_metadata(
    suite: str, env: str, dataset: str, metadata: Mapping[str, object], source: str
) -> DatasetReference | None:
    """The references a Minari ``metadata.json`` holds, or ``None`` when it holds none."""

    def number(value: object) -> float | None:
        if value is None or isinstance(value, bool):
            return None
        try:
            result = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
        return result if math.isfinite(result) else None

    returns = metadata.get("checkpoint_returns")
    replay = number(returns[-1]) if isinstance(returns, list) and returns else None
    low, high = number(metadata.get("ref_min_score")), number(metadata.get("ref_max_score"))
    evaluated = number(metadata.get("behaviour_eval_score"))
    if low is None and high is None and replay is None and evaluated is None:
        return None
    return DatasetReference(suite, env, dataset, low, high, replay, source, evaluated)


def run_dataset(run_dir: Path) -> tuple[str, str | None] | None:
    """(Minari dataset id, data root) a run directory trained on, from its ``config.json``; ``None``
    for runs not trained on a Minari dataset (online runs, RL Unplugged)."""
    try:
        record = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    config = record.get("config", record) if isinstance(record, dict) else {}
    dataset = config.get("dataset") if isinstance(config, dict) else None
    if not isinstance(dataset, str) or not dataset.startswith("minari:"):
        return None
    data_dir = config.get("data_dir")
    return dataset.removeprefix("minari:"), data_dir if isinstance(data_dir, str) else None


def run_reference(run_dir: Path, suite: str, env: str) -> DatasetReference | None:
    """The references of the dataset a run trained on, read from the dataset's ``metadata.json``
    where it is on this machine; ``None`` when the run names no Minari dataset or it is absent."""
    from offline_gitd.data_roots import minari_datasets_dir

    found = run_dataset(run_dir)
    if found is None:
        return None
    dataset, data_dir = found
    metadata_file = minari_datasets_dir(data_dir) / dataset / "data" / "metadata.json"
    try:
        metadata = json.loads(metadata_file.read_text())
    except (OSError, ValueError):
        return None
    return from_metadata(suite, env, dataset, metadata, f"metadata.json of Minari dataset {dataset}")


def merge(
    existing: Mapping[tuple[str, str], DatasetReference], new: Iterable[DatasetReference]
) -> tuple[dict[tuple[str, str], DatasetReference], list[str]]:
    """``existing`` with ``new`` added; where an env already has other numbers the first are kept
    and a note says so (a board row does not name its dataset, so two datasets of one env cannot
    both be applied)."""
    merged = dict(existing)
    notes = []
    for item in new:
        first = merged.setdefault(item.key, item)
        if first.behaviour_eval_score is None and item.behaviour_eval_score is not None and first.same_numbers(item):
            merged[item.key] = first = dataclasses.replace(first, behaviour_eval_score=item.behaviour_eval_score)
        if not first.same_numbers(item):
            notes.append(
                f"{item.suite} {item.env}: dataset {item.dataset} has references other than those kept "
                f"({first.dataset}); kept the first"
            )
    return merged, notes
