"""How long ``leaderboard show``, ``plot`` and ``html`` take (docs/leaderboard.md#speed).

    .venv/bin/python -m benchmarks.leaderboard_speed            # both boards, 2,000 replications
    .venv/bin/python -m benchmarks.leaderboard_speed --cli      # also whole CLI processes
    .venv/bin/python -m benchmarks.leaderboard_speed --repeat 3 # each command 3 times: the median

Two boards: the 625-row MinAtar board (``leaderboards/minatar_pilot/board.csv``) and a synthetic
board of the paper's size, 10 games x 8 methods x 10 seeds x 50 evaluations (40,000 rows, written
to a temporary directory; its returns are made up and say nothing about any method). Each command
is timed in this process after a first call has imported everything (the figure of merit: the
work a command does), and with ``--cli`` also as a fresh ``offline_gitd`` process (imports
included). For each, the phases: reading and normalising the board, the table's statistics,
the per-env table, the figures' numbers, building the figures and rendering them (PNG). The
targets (docs/leaderboard.md#speed): each command at most 2 s on the MinAtar board and 15 s on the synthetic one.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MINATAR = ROOT / "leaderboards" / "minatar_pilot" / "board.csv"
COLUMNS = (
    "suite,env,algorithm,critic,K,beta,seed,step,return,run_id,config_hash,package_version,created_at,method_config"
).split(",")


def synthetic_board(path: Path, games: int = 10, methods: int = 8, seeds: int = 10, points: int = 50) -> Path:
    """A board of ``games`` x ``methods`` x ``seeds`` learning curves of ``points`` evaluations."""
    rng = np.random.default_rng(0)
    critics = ["td", "tdrc", "itd", "gitd"]
    algorithms = ["cql", "offline-dqn"]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        for g in range(games):
            env = f"Game{g}-v0"
            scale = 10.0 ** rng.uniform(0, 3)
            for m in range(methods):
                algorithm, critic, K = algorithms[m // 4], critics[m % 4], 1 if m % 4 < 2 else 5
                skill = 1 + 0.1 * m + 0.2 * rng.standard_normal()
                for seed in range(seeds):
                    noise = 0.2 * rng.standard_normal()
                    for t in range(points):
                        value = scale * skill * (1 + noise) * (t + 1) / points + scale * 0.05 * rng.standard_normal()
                        writer.writerow(
                            [
                                "gym",
                                env,
                                algorithm,
                                critic,
                                K,
                                1.0,
                                seed,
                                1000 * (t + 1),
                                repr(float(value)),
                                f"run-{g}-{m}-{seed}",
                                f"cfg{m}",
                                "0.2.0",
                                "2026-01-01T00:00:00+00:00",
                                "defaults",
                            ]
                        )
    return path


def timed(label: str, call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Call and print wall and CPU seconds (CPU time is the work done; wall time also counts the
    waits of a machine shared with other jobs)."""
    start, cpu = time.perf_counter(), time.process_time()
    result = call(*args, **kwargs)
    print(
        f"    {label:<26}{time.perf_counter() - start:7.2f} s wall {time.process_time() - cpu:7.2f} s CPU", flush=True
    )
    return result


def in_process(board: Path, reps: int, out: Path) -> dict[str, float]:
    """Each command's phases, timed after everything is imported; the totals per command."""
    from offline_gitd.leaderboard.html import board_provenance, render_page, write_page
    from offline_gitd.leaderboard.per_env import per_env_lines
    from offline_gitd.leaderboard.plot import draw, figure_bytes, figure_data, write_figures
    from offline_gitd.leaderboard.show import load, render
    from offline_gitd.leaderboard.stats import summarise

    totals = {}
    for command in ("show", "plot", "html"):
        print(f"  {command}")
        start, cpu = time.perf_counter(), time.process_time()
        loaded = timed("read + normalise", load, board, "cql:td", "auto")
        summaries = timed("table statistics", summarise, loaded.scored, loaded.baseline, reps, 0)
        if command in ("show", "html"):
            per_env = timed("per-env table", per_env_lines, loaded.everything, loaded.baseline, reps, 0, loaded.flagged)
        if command == "show":
            render(summaries, "table", loaded.baseline, loaded.how, loaded, per_env)
        else:
            data = timed("figure numbers", figure_data, loaded.scored, summaries, loaded.how, reps, 0)
            drawn = timed("build figures", draw, data, loaded.baseline, loaded.how)
            figures = timed("render figures (PNG)", lambda: {k: figure_bytes(f) for k, f in drawn.items()})
            if command == "plot":
                write_figures(figures, out / "plot", data)
            else:
                page = render_page(
                    summaries,
                    figures,
                    loaded.baseline,
                    loaded.how,
                    board_provenance(board, len(loaded.scored)),
                    loaded=loaded,
                    per_env=per_env,
                )
                write_page(page, out / "html")
        totals[command] = time.perf_counter() - start
        totals[command + " cpu"] = time.process_time() - cpu
        print(f"    {'total':<26}{totals[command]:7.2f} s wall {totals[command + ' cpu']:7.2f} s CPU")
    return totals


def cli(board: Path, reps: int, out: Path) -> dict[str, float]:
    """Each command as a fresh process (imports included)."""
    totals = {}
    for command in ("show", "plot", "html"):
        argv = [
            sys.executable,
            "-m",
            "offline_gitd.cli",
            "leaderboard",
            command,
            "--board",
            str(board),
            "--reps",
            str(reps),
        ]
        if command != "show":
            argv += ["--out", str(out / f"cli-{command}")]
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
        totals[command] = time.perf_counter() - start
        print(f"  {command} (process) {totals[command]:7.2f} s", flush=True)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--cli", action="store_true", help="also time whole CLI processes")
    parser.add_argument("--repeat", type=int, default=1, help="time each board this many times; the median")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        synthetic = synthetic_board(out / "synthetic.csv")
        start = time.perf_counter()
        import matplotlib.figure  # noqa: F401
        import pandas  # noqa: F401

        from offline_gitd.leaderboard import html, per_env, plot, show, stats  # noqa: F401

        print(f"first import: {time.perf_counter() - start:.2f} s")
        results = {}
        for name, board in (("minatar (625 rows)", MINATAR), ("synthetic 10x8x10x50 (40,000 rows)", synthetic)):
            print(f"{name}: {board}")
            runs = [in_process(board, args.reps, out) for _ in range(args.repeat)]
            results[name] = {key: float(np.median([run[key] for run in runs])) for key in runs[0]}
            if args.cli:
                results[name + ", process"] = cli(board, args.reps, out)
        print(
            f"\nsummary (seconds, wall / CPU where timed in process, median of {args.repeat}): board, show, plot, html"
        )
        for name, totals in results.items():
            print(
                f"  {name}: "
                + ", ".join(
                    f"{totals[c]:.2f}" + (f" / {totals[c + ' cpu']:.2f}" if c + " cpu" in totals else "")
                    for c in ("show", "plot", "html")
                )
            )


if __name__ == "__main__":
    main()
