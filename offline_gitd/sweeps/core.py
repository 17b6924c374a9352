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

The board also stands for run directories that are gone (another machine, lost scratch space): a
run whose rows are all on its board, found by its config hash (``on_board.py``), is not run again,
and a ``[[collect]]`` dataset is recorded only when a run that trains on it is to run
(``needed_collect``). Each dataset recorded and each run finished is timed, on its status line, in
the closing summary and in ``timings.csv`` beside the board (``timings.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from offline_gitd.errors import UsageError
from offline_gitd.sweeps.behaviour import write_behaviour_curve
from offline_gitd.sweeps.damaged import not_on_board
from offline_gitd.sweeps.on_board import BoardCheck, collected_dataset, recorded_hash
from offline_gitd.sweeps.spec import CollectStep, RunPlan, SweepSpec, expand
from offline_gitd.sweeps.state import SweepPaths, read_state, update_state, write_state
from offline_gitd.sweeps.status import StatusTable
from offline_gitd.sweeps.timings import Piece, append_piece, timings_path

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class Sweep:
    """An opened sweep: its spec, its runs and where it writes."""

    spec: SweepSpec
    plans: list[RunPlan]
    paths: SweepPaths
    check: BoardCheck = field(init=False, repr=False)  # what the boards hold of each run
    pieces: list[Piece] = field(default_factory=list)  # what this pass recorded and trained, timed
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        object.__setattr__(self, "check", BoardCheck(self.spec))

    @property
    def boards(self) -> str:
        return boards_text(self.plans, self.paths.root)

    def board(self, plan: RunPlan) -> Path:
        return board_path(plan, self.paths.root)


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


ON_BOARD = "on board (skip)"
CONFLICT = "refused"


def action(paths: SweepPaths, plan: RunPlan, check: BoardCheck | None = None) -> str:
    """What a sweep does with a run now: skip it (done here, or all its rows on its board),
    refuse it (partly on the board, see ``on_board.py``), resume its run directory, or start it."""
    if is_complete(paths, plan) and (check is None or not check.trained_on_other_data(plan, paths.run_dir(plan.name))):
        return "done (skip)"
    if check is not None:
        verdict = check.verdict(plan, board_path(plan, paths.root), paths.run_dir(plan.name))
        if verdict.complete:
            return ON_BOARD
        if verdict.conflict:
            return CONFLICT
    return "resume" if (paths.run_dir(plan.name) / "config.json").exists() else "new"


def needed_collect(spec: SweepSpec, todo: list[RunPlan]) -> tuple[CollectStep, ...]:
    """The ``[[collect]]`` datasets some run still to run trains on, in the spec's order: one
    that only finished runs (here or on the board) train on is not recorded again."""
    wanted = {step for plan in todo if (step := collected_dataset(spec, plan)) is not None}
    return tuple(step for step in spec.collect if step in wanted)


def plan_table(spec: SweepSpec, plans: list[RunPlan], paths: SweepPaths) -> str:
    """``--dry-run``'s table: each run, what the sweep would do with it, and its command; then
    the datasets it would record first."""
    check = BoardCheck(spec)
    rows = []
    for plan in plans:
        command = "offline_gitd " + " ".join(plan.command_line(paths.run_dir(plan.name), False))
        rows.append((plan.name, action(paths, plan, check), command))
    width = max(len(name) for name, _, _ in rows)
    lines = [f"{'run':<{width}}  {'action':<15}  command", f"{'-' * width}  {'-' * 15}  -------"]
    lines += [f"{name:<{width}}  {act:<15}  {command}" for name, act, command in rows]
    lines += ["", f"results go to {boards_text(plans, paths.root)}"]
    todo = [plan for plan, (_, act, _) in zip(plans, rows, strict=True) if act in ("new", "resume")]
    needed = needed_collect(spec, todo)
    lines += [f"collect first (if absent): offline_gitd {' '.join(step.argv(spec.data_dir))}" for step in needed]
    skipped = len(spec.collect) - len(needed)
    if skipped:
        lines.append(f"not collected: {skipped} of {len(spec.collect)} datasets (no run left to run trains on them)")
    on_board = sum(act == ON_BOARD for _, act, _ in rows)
    if on_board and not todo:
        lines.append(f"every run is on its board ({on_board} without a run directory here): nothing would run")
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
    report = submit(
        [run_dir], board_path(plan, paths.root), spec.allow_new_env, skip_existing=True, allow_mixed=spec.allow_mixed
    )
    update_state(paths.state(plan.name), submitted=True, rows=report.added[run_dir])
    return report.added[run_dir]


def settle_complete(sweep: Sweep, table: StatusTable, stream: TextIO) -> tuple[list[RunPlan], list[tuple[str, str]]]:
    """Mark the complete runs done (submitting any the board still lacks) and say what is left to
    run; a done run the board refuses (damaged by a past race) is reported, and the rest go on.

    A run not done here whose rows are all on its board is done too: its run directory is gone
    (another machine, lost scratch space) or was never here, and the board, found by the run's
    config hash, says it finished (``on_board.py``). A run partly on the board whose missing
    points would split a seed's curve over two runs is refused with the reason."""
    todo = []
    damaged: list[tuple[str, str]] = []
    from_board = []
    undigested = 0
    for plan in sweep.plans:
        board, run_dir = sweep.board(plan), sweep.paths.run_dir(plan.name)
        other_data = sweep.check.trained_on_other_data(plan, run_dir) if is_complete(sweep.paths, plan) else None
        if other_data:
            print(f"note: {plan.name} is due again: {other_data}", file=stream, flush=True)
        elif is_complete(sweep.paths, plan):
            if not read_state(sweep.paths.state(plan.name)).get("submitted"):
                if not run_dir.is_dir() and sweep.check.verdict(plan, board, run_dir).complete:
                    from_board.append(plan.name)  # its state survived its run directory
                    table.state[plan.name] = "done"
                    continue
                try:
                    submit_run(sweep.spec, sweep.paths, plan)
                except UsageError as err:
                    damaged.append((plan.name, not_on_board(plan, sweep.paths, err)))
                    table.state[plan.name] = "failed"
                    continue
                sweep.check.forget(board)
            table.state[plan.name] = "done"
            continue
        verdict = sweep.check.verdict(plan, board, run_dir)
        if verdict.complete:
            from_board.append(plan.name)
            undigested += verdict.undigested
            table.state[plan.name] = "done"
        elif verdict.conflict:
            damaged.append((plan.name, f"not run: {verdict.conflict}"))
            table.state[plan.name] = "failed"
        else:
            todo.append(plan)
    if undigested:
        print(
            f"note: {undigested} board rows taken as done record no data digest (written before it was "
            "recorded): their config hash alone matched (docs/sweeps.md#moving-a-sweep-to-another-machine)",
            file=stream,
            flush=True,
        )
    update_state(sweep.paths.root / SWEEP_FILE, on_board=from_board)  # for --status (watch.py)
    done = len(sweep.plans) - len(todo) - len(damaged)
    board_only = f" ({len(from_board)} of them on the board alone: no run directory here)" if from_board else ""
    print(
        f"sweep {sweep.spec.path}: {len(sweep.plans)} runs, {done} already done{board_only}, "
        f"{len(todo)} to run; runs in {sweep.paths.root / 'runs'}, {sweep.boards}",
        file=stream,
        flush=True,
    )
    if not todo and not damaged:
        print(f"nothing to do: every run is on its board, no dataset to record ({sweep.boards})", file=stream)
    return todo, damaged


def run_entry(plan: RunPlan, paths: SweepPaths, sweep_id: str, gpus: float, cpus: float) -> dict[str, Any]:
    """The arguments of ``task.execute`` for one grid run: every backend makes exactly this call.
    ``cpus``: the cores the spec gives each run, which its seeds spread over (docs/offline.md#seeds)."""
    return {
        "name": plan.name,
        "argv": list(plan.argv),
        "root": str(paths.root),
        "sweep_id": sweep_id,
        "gpus": gpus,
        "resumable": True,
        "cpus": cpus,
    }


def collect_name(step: CollectStep) -> str:
    """The sweep entry that records ``step``'s dataset (its log, its state)."""
    return "collect-" + step.out.replace("/", "-")


def collect_entries(
    spec: SweepSpec, paths: SweepPaths, sweep_id: str, steps: tuple[CollectStep, ...] | None = None
) -> list[dict[str, Any]]:
    """The arguments of ``task.collect_dataset`` for each ``[[collect]]`` dataset in ``steps``
    (default: all of the spec's; a sweep passes ``needed_collect``'s). The behaviour run is kept
    as the entry's run directory (``runs/collect-ID/``): its metrics.csv is the behaviour agent's
    learning curve, which a published dataset is judged by (docs/minatar.md)."""
    return [
        {
            "name": collect_name(step),
            "argv": [*step.argv(spec.data_dir), "--run-dir", str(paths.run_dir(collect_name(step)))],
            "root": str(paths.root),
            "sweep_id": sweep_id,
            "dataset_id": step.out,
            "data_dir": spec.data_dir,
            "cpus": spec.resources.cpus,  # as a run's: the first task of a reused worker sets its devices
            "record_missing": spec.record_missing,
        }
        for step in (spec.collect if steps is None else steps)
    ]


def collect_line(entry: dict[str, Any], outcome: dict[str, Any], paths: SweepPaths) -> str:
    """The status line for a finished ``[[collect]]`` entry, with the time recording took."""
    name = entry["name"]
    if outcome["status"] != "done":
        return f"failed   {name}: {outcome['error']} (log: {paths.log(name)})"
    if outcome.get("fetched"):
        return f"dataset ready: {name} (fetched from a mirror in {outcome.get('seconds', 0):.1f} s)"
    if outcome.get("cached"):
        return f"dataset ready: {name} (already local)"
    return f"dataset ready: {name} (recorded in {outcome.get('seconds', 0):.1f} s)"


def record_collect(sweep: Sweep, entry: dict[str, Any], outcome: dict[str, Any], table: StatusTable) -> None:
    """A ``[[collect]]`` entry has ended: its line, and a dataset it recorded is timed beside the
    board of every run that trains on it."""
    table.line(collect_line(entry, outcome, sweep.paths))
    if outcome["status"] != "done" or outcome.get("cached"):
        return
    step = next((step for step in sweep.spec.collect if collect_name(step) == entry["name"]), None)
    if step is None:
        return
    piece = Piece(
        spec=sweep.spec.path.name,
        kind="dataset",
        name=step.out,
        seconds=float(outcome.get("seconds") or 0.0),
        attempt=int(outcome.get("attempt") or 1),
        host=str(outcome.get("host") or ""),
        cpus=1.0,
    )
    boards = {sweep.board(plan) for plan in sweep.plans if collected_dataset(sweep.spec, plan) == step}
    beside = sorted(boards) or [board_path(sweep.plans[0], sweep.paths.root)]
    _keep(sweep, piece, beside)
    write_behaviour_curve(sweep.paths.run_dir(entry["name"]), step.out, beside)


def _keep(sweep: Sweep, piece: Piece, boards: list[Path]) -> None:
    """Note a timed piece for the summary and append it beside each of ``boards``."""
    sweep.pieces.append(piece)
    for path in sorted({timings_path(board) for board in boards}):
        append_piece(path, piece)


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
            sweep.check.forget(sweep.board(plan))
            seconds = float(outcome.get("seconds") or 0.0)
            recorded = recorded_hash(sweep.paths.run_dir(plan.name)) or ""
            table.set(plan.name, "done", f"{seconds:.1f} s, {rows} rows on the board")
            expected = sweep.check.expected(plan)
            if expected is not None and recorded and expected.config_hash != recorded:
                table.line(
                    f"note: {plan.name} recorded config hash {recorded}, the sweep computed {expected.config_hash}: "
                    "without its run directory the board cannot tell this run is done (docs/sweeps.md)"
                )
            piece = Piece(
                spec=sweep.spec.path.name,
                kind="run",
                name=plan.name,
                seconds=seconds,
                config_hash=recorded,
                resumed=bool(outcome.get("resumed")),
                attempt=int(outcome.get("attempt") or 1),
                host=str(outcome.get("host") or ""),
                cpus=float(sweep.spec.resources.cpus),
                gpus=float(sweep.spec.resources.gpus),
            )
            _keep(sweep, piece, [sweep.board(plan)])
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
    print(timing_summary(sweep), file=stream)
    return 1 if failures else 0


def timing_summary(sweep: Sweep) -> str:
    """The wall time of each piece this pass recorded or trained, and of the pass itself."""
    wall = time.monotonic() - sweep.started
    if not sweep.pieces:
        return f"wall time {wall:.1f} s; nothing recorded or trained in this pass"
    width = max(len(piece.name) for piece in sweep.pieces)
    lines = [f"wall time {wall:.1f} s; each piece (also in {_timings_where(sweep)}):"]
    for kind in ("dataset", "run"):
        pieces = [piece for piece in sweep.pieces if piece.kind == kind]
        lines += [
            f"  {kind:<7}  {piece.name:<{width}}  {piece.seconds:8.1f} s{'  (resumed)' if piece.resumed else ''}"
            for piece in pieces
        ]
        if len(pieces) > 1:
            lines.append(f"  {kind + 's':<8} {'(sum)':<{width}}  {sum(piece.seconds for piece in pieces):9.1f} s")
    return "\n".join(lines)


def _timings_where(sweep: Sweep) -> str:
    paths = sorted({str(timings_path(sweep.board(plan))) for plan in sweep.plans})
    return paths[0] if len(paths) == 1 else f"{len(paths)} timings files beside the boards"
