"""``offline_gitd sweep SPEC --out OUT --status``: a sweep's state, seen from anywhere (docs/locks.md).

Read-only and lock-free: it reads ``sweep.json``, each run's ``state/NAME.json`` and who holds the
driver's lock file, and writes nothing, so it can look at a sweep another process is driving, from
another terminal or another host of the shared filesystem, as often as wanted. ``--watch``
prints it again whenever it changes, until no driver is left.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

from offline_gitd.errors import UsageError
from offline_gitd.rundir.lock import HEARTBEAT_SECONDS, STALE_BEATS, Holder, read_holder
from offline_gitd.sweeps.driver_lock import DRIVER_LOCK_FILE
from offline_gitd.sweeps.state import SweepPaths, read_state
from offline_gitd.sweeps.status import STATES

SWEEP_FILE = "sweep.json"
WATCH_SECONDS = 2.0


def live_driver(out: Path) -> tuple[Holder | None, bool]:
    """Who the driver's lock file names, and whether it still seems to run (same host: its pid
    lives; another host: its heartbeat is fresh). The file is gone once its driver ends."""
    holder = read_holder(out / DRIVER_LOCK_FILE)
    return holder, holder is not None and holder.seems_alive(HEARTBEAT_SECONDS * STALE_BEATS)


def status_text(out: Path) -> str:
    """The sweep's driver and each run's state, one line each, and the counts."""
    sweep = read_state(out / SWEEP_FILE)
    if not sweep:
        raise UsageError(f"{out}: no sweep here (no {SWEEP_FILE}); start one with offline_gitd sweep SPEC --out {out}")
    holder, alive = live_driver(out)
    if alive:
        driver = f"driven by {holder.describe()} (heartbeat {holder.heartbeat_age():.0f} s ago)"
    elif holder is not None:
        driver = f"no driver running (the last one, {holder.describe()}, stopped without finishing)"
    else:
        driver = "no driver running"
    paths = SweepPaths(out)
    runs: dict[str, list[str]] = sweep.get("runs", {})
    on_board = set(sweep.get("on_board", []))  # done on the board alone (docs/sweeps.md)
    width = max((len(name) for name in runs), default=3)
    lines = [f"sweep {out} ({sweep.get('spec', '?')}): {driver}"]
    count: Counter[str] = Counter()
    for name, argv in runs.items():
        state = read_state(paths.state(name))
        status = state.get("status", "queued") if state.get("argv") == argv else "queued"
        if status == "queued" and name in on_board:
            count["done"] += 1
            lines.append(f"  {name:<{width}}  {'done':<8} all its rows on its board (no run directory here)")
            continue
        count[status] += 1
        detail = []
        if status == "running":
            detail += [f"attempt {state.get('attempt', 1)}", f"node {state.get('node', '?')}"]
            detail.append(f"since {state.get('started_at', '?')}")
        elif status == "done":
            detail.append(f"{state.get('seconds', 0):.0f}s")
            detail.append(
                f"{state.get('rows', 0)} rows on the board" if state.get("submitted") else "not submitted yet"
            )
        elif status == "failed":
            detail.append(f"{state.get('error')} (log: {paths.log(name)})")
        lines.append(f"  {name:<{width}}  {status:<8} {', '.join(detail)}".rstrip())
    lines.append("  " + " | ".join(f"{name} {count[name]}" for name in STATES))
    return "\n".join(lines)


def show_status(out: Path, watch: bool, stream: TextIO | None = None) -> int:
    """Print the status once, or with ``watch`` again at each change until no driver is left."""
    stream = stream or sys.stdout
    out = out.absolute()
    shown = ""
    while True:
        text = status_text(out)
        if text != shown:
            print(text, file=stream, flush=True)
            shown = text
        if not watch or not live_driver(out)[1]:
            return 0
        time.sleep(WATCH_SECONDS)
