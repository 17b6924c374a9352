"""A sweep's own bookkeeping under ``--out``, one small JSON file per run (docs/sweeps.md).

Every node writes the state of the runs it executes and the driver reads them, so the folder
must be one every node can reach (the same shared path as the run directories). Each file is
replaced atomically, so a reader never sees half a state, and a crash at any point leaves either
the old state or the new one: re-running the sweep continues from whatever was recorded.

A run's state says what happened to its command line (``argv``): ``running`` (with the attempt
number and the node), ``done``, or ``failed`` (with the last line of the error); and whether its
rows are on the board (``submitted``). A changed spec changes ``argv``, so a run recorded ``done``
under another command line is not done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from offline_gitd.durable import replace_text

RUNS = "runs"
LOGS = "logs"
STATE = "state"


@dataclass(frozen=True)
class SweepPaths:
    """Where a sweep writes: ``runs/NAME/`` (run directories), ``logs/NAME.log``, ``state/NAME.json``."""

    root: Path

    def run_dir(self, name: str) -> Path:
        return self.root / RUNS / name

    def log(self, name: str) -> Path:
        return self.root / LOGS / f"{name}.log"

    def state(self, name: str) -> Path:
        return self.root / STATE / f"{name}.json"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_state(path: Path) -> dict[str, Any]:
    """The recorded state, or ``{}`` when there is none (never started, or unreadable)."""
    try:
        state = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return state if isinstance(state, dict) else {}


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Replace the state at ``path`` atomically (:func:`offline_gitd.durable.replacing`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(state, indent=1, sort_keys=True))


def update_state(path: Path, **changes: Any) -> dict[str, Any]:
    state = read_state(path)
    state.update(changes, updated_at=now())
    write_state(path, state)
    return state
