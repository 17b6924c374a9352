"""What a sweep means, whatever schedules its runs (Ray or SLURM): one place for the semantics.

A backend only places entries somewhere and waits for them; everything a user relies on lives
here: the spec expands into run configs (``open_sweep``), runs done under the same command line
are skipped (``is_complete``), every entry is the same call of ``task.execute`` (``run_entry``,
``collect_entries``) so an interrupted run resumes from its checkpoints wherever it runs again,
each finished run reaches its board exactly once (``submit_run``, ``settle_complete``,
``record_outcome``), and the output is one line per state change (``StatusTable``).

The board is written only by the driver, after a run is done; the run's state then records
``submitted``. A crash between the two is harmless: submission skips rows already on the board
(same run, seed and step), so every run's rows are on the board exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.damaged import not_on_board
from offline_gitd.sweeps.spec import RunPlan, SweepSpec, expand
from offline_gitd.sweeps.state import SweepPaths, read_state, update_state, write_state
from offline_gitd.sweeps.status import StatusTable

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class Sweep:
    """An opened sweep: its spec, its runs and where it writes."""

    spec: SweepSpec
    plans: list[RunPlan]
    paths: SweepPaths

    @property
    def boards(self) -> str:
        return boards_text(self.plans, self.paths.root)


def board_path(plan: RunPlan, out: Path) -> Path:
    board = Path(plan.board)
    return board if board.is_absolute() else out / board


def boards_text(plans: list[RunPlan], out: Path) -> str:
    boards = sorted({str(board_path(plan, out)) for plan in plans})
    return f"board {boards[0]}" if len(boards) == 1 else f"{len(boards)} boards in {Path(boards[0]).parent}"


def is_complete(paths: SweepPaths, plan: RunPlan) -> bool:
    """Done under exactly this command line (a changed spec makes a run due again)."""
    state = read_state(paths.state(plan.name))
    return state.get("status") == "done" and state.get("argv") == list(plan.argv)


def action(paths: SweepPaths, plan: RunPlan) -> str:
    """What a sweep does with a run now: skip it, resume its run directory, or start it."""
    if is_complete(paths, plan):
        return "done (skip)"
    return "resume" if (paths.run_dir(plan.name) / "config.json").exists() else "new"


def plan_table(spec: SweepSpec, plans: list[RunPlan], paths: SweepPaths) -> str:
    """``--dry-run``'s table: each run, what the sweep would do with it, and its command."""
    rows = []
    for plan in plans:
        command = "offline_gitd " + " ".join(plan.command_line(paths.run_dir(plan.name), False))
        rows.append((plan.name, action(paths, plan), command))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'run':<{width}}  {'action':<11}  command", f"{'-' * width}  {'-' * 11}  -------"]
    lines += [f"{name:<{width}}  {act:<11}  {command}" for name, act, command in rows]
    lines += ["", f"results go to {boards_text(plans, paths.root)}"]
    if spec.collect:
        lines += [
            f"collect first (if absent): offline_gitd {' '.join(step.argv(spec.data_dir))}" for step in spec.collect
        ]
    return "\n".join(lines)


def open_sweep(spec: SweepSpec, out: Path) -> Sweep:
    """Expand the spec, check where it writes, and record what this sweep is (``sweep.json``)."""
    plans = expand(spec)
    out = out.absolute()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    parents = {board_path(plan, out).parent for plan in plans}
    missing = sorted(str(parent) for parent in parents if parent != out and not parent.is_dir())
    if missing:
        raise UsageError(f"{missing[0]}: the board's directory does not exist; create it or change the spec's board")
    out.mkdir(parents=True, exist_ok=True)
    write_state(
        out / SWEEP_FILE,
        {"spec": str(spec.path), "spec_text": spec.path.read_text(), "runs": {p.name: list(p.argv) for p in plans}},
    )
    return Sweep(spec, plans, SweepPaths(out))


def submit_run(spec: SweepSpec, paths: SweepPaths, plan: RunPlan) -> int:
    """Put a finished run's rows on its board (only those not already there); record it."""
    from offline_gitd.leaderboard.submit import submit

    run_dir = paths.run_dir(plan.name)
    report = submit([run_dir], board_path(plan, paths.root), spec.allow_new_env, skip_existing=True)
    update_state(paths.state(plan.name), submitted=True, rows=report.added[run_dir])
    return report.added[run_dir]


def settle_complete(sweep: Sweep, table: StatusTable, stream: TextIO) -> tuple[list[RunPlan], list[tuple[str, str]]]:
    """Mark the complete runs done (submitting any the board still lacks) and say what is left to
    run; a done run the board refuses (damaged by a past race) is reported, and the rest go on."""
    todo = []
    damaged: list[tuple[str, str]] = []
    for plan in sweep.plans:
        if is_complete(sweep.paths, plan):
            if not read_state(sweep.paths.state(plan.name)).get("submitted"):
                try:
                    submit_run(sweep.spec, sweep.paths, plan)
                except UsageError as err:
                    damaged.append((plan.name, not_on_board(plan, sweep.paths, err)))
                    table.state[plan.name] = "failed"
                    continue
            table.state[plan.name] = "done"
        else:
            todo.append(plan)
    print(
        f"sweep {sweep.spec.path}: {len(sweep.plans)} runs, {len(sweep.plans) - len(todo)} already done, "
        f"{len(todo)} to run; runs in {sweep.paths.root / 'runs'}, {sweep.boards}",
        file=stream,
        flush=True,
    )
    if not todo and not damaged:
        print(f"nothing to do: every run is done and on its board ({sweep.boards})", file=stream)
    return todo, damaged


def run_entry(plan: RunPlan, paths: SweepPaths, sweep_id: str, gpus: float) -> dict[str, Any]:
    """The arguments of ``task.execute`` for one grid run: every backend makes exactly this call."""
    return {
        "name": plan.name,
        "argv": list(plan.argv),
        "root": str(paths.root),
        "sweep_id": sweep_id,
        "gpus": gpus,
        "resumable": True,
    }


def collect_entries(spec: SweepSpec, paths: SweepPaths, sweep_id: str) -> list[dict[str, Any]]:
    """The arguments of ``task.collect_dataset`` for each ``[[collect]]`` dataset."""
    return [
        {
            "name": "collect-" + step.out.replace("/", "-"),
            "argv": step.argv(spec.data_dir),
            "root": str(paths.root),
            "sweep_id": sweep_id,
            "dataset_id": step.out,
            "data_dir": spec.data_dir,
        }
        for step in spec.collect
    ]


def collect_line(entry: dict[str, Any], outcome: dict[str, Any], paths: SweepPaths) -> str:
    """The status line for a finished ``[[collect]]`` entry."""
    name = entry["name"]
    if outcome["status"] != "done":
        return f"failed   {name}: {outcome['error']} (log: {paths.log(name)})"
    return f"dataset ready: {name}{' (already local)' if outcome.get('cached') else ''}"


def record_outcome(
    sweep: Sweep, plan: RunPlan, outcome: dict[str, Any], table: StatusTable, failures: list[tuple[str, str]]
) -> None:
    """A run's entry has ended: a done run goes on its board now; a run another process writes is
    left to it (docs/locks.md); a failure is reported."""
    if outcome["status"] == "busy":
        outcome = {**outcome, "error": f"left to its holder: {outcome['error']}"}
    elif outcome["status"] == "done":
        try:
            rows = submit_run(sweep.spec, sweep.paths, plan)
        except UsageError as err:  # a run with --eval-episodes 0 has no rows; a damaged one
            outcome = {"status": "failed", "error": not_on_board(plan, sweep.paths, err)}
        else:
            table.set(plan.name, "done", f"{outcome.get('seconds', 0):.0f}s, {rows} rows on the board")
    if outcome["status"] != "done":
        failures.append((plan.name, outcome["error"]))
        table.set(plan.name, "failed", f"{outcome['error']} (log: {sweep.paths.log(plan.name)})")


def show_running(sweep: Sweep, plan: RunPlan, sweep_id: str, table: StatusTable) -> None:
    """A run whose entry has started (its state says so under this ``sweep_id``) is running."""
    state = read_state(sweep.paths.state(plan.name))
    if state.get("sweep_id") == sweep_id and state.get("status") == "running":
        attempt = state.get("attempt", 1)
        table.set(plan.name, "running", f"(attempt {attempt})" if attempt > 1 else "")


def summary(sweep: Sweep, table: StatusTable, failures: list[tuple[str, str]], stream: TextIO) -> int:
    """The closing lines; 0 when every run is done, 1 if any failed."""
    table.close()
    done = sum(state == "done" for state in table.state.values())
    print(f"sweep finished: {done}/{len(sweep.plans)} done, {len(failures)} failed; {sweep.boards}", file=stream)
    for name, error in failures:
        print(f"  failed: {sweep.paths.run_dir(name)}: {error} (log: {sweep.paths.log(name)})", file=stream)
    return 1 if failures else 0
