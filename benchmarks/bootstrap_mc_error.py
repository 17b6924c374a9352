"""The Monte-Carlo error of ``leaderboard show``'s interval endpoints (docs/leaderboard.md#monte-carlo-error).

    .venv/bin/python -m benchmarks.bootstrap_mc_error                    # the MinAtar board, 10,000 reps
    .venv/bin/python -m benchmarks.bootstrap_mc_error --reps 2000 --seeds 30

Draws the board's bootstrap again with ``--seeds`` different seeds and prints, for each kind of
endpoint, the largest and the median standard deviation over seeds (the Monte-Carlo standard error
of one draw) and how often, and by how much, a printed endpoint differs from the first seed's at
the precision ``show`` prints it: the summary's IQM, IQM AUC and P(improvement) (two decimals), the per-env
P(improvement) (two decimals) and the per-env mean's interval (exact: zero).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "leaderboards" / "minatar_offline" / "board.csv"


def main() -> None:
    from offline_gitd.leaderboard.per_env import per_env_lines
    from offline_gitd.leaderboard.show import load
    from offline_gitd.leaderboard.stats import summarise

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", type=Path, default=BOARD)
    parser.add_argument("--baseline", default="cql:td")
    parser.add_argument("--normalise", default="dqn-replay")
    parser.add_argument("--reps", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    loaded = load(args.board, args.baseline, args.normalise)
    kinds: dict[str, list[list[float]]] = {"summary": [], "per-env P(improvement)": [], "per-env mean": []}
    for seed in range(args.seeds):
        summaries = summarise(loaded.scored, loaded.baseline, args.reps, seed)
        kinds["summary"].append(
            [
                value
                for s in summaries
                for interval in (s.iqm, s.auc, s.improvement)
                if interval is not None
                for value in (interval.low, interval.high)
            ]
        )
        lines = per_env_lines(loaded.everything, loaded.baseline, args.reps, seed, loaded.flagged)
        kinds["per-env P(improvement)"].append(
            [v for line in lines if line.p_value is not None for v in (line.improvement.low, line.improvement.high)]
        )
        kinds["per-env mean"].append([v for line in lines for v in (line.mean.low, line.mean.high)])
    print(f"{args.board.name}: {args.seeds} draws of {args.reps} replications")
    for kind, values in kinds.items():
        draws = np.array(values)
        sd = draws.std(axis=0, ddof=1)
        printed = np.round(draws, 2)
        differs = (printed[1:] != printed[0]).mean()
        apart = np.abs(printed[1:] - printed[0]).max()
        print(
            f"  {kind}: {draws.shape[1]} endpoints, Monte-Carlo SE max {sd.max():.4f}, median {np.median(sd):.4f}; "
            f"printed to 2 decimals, {differs:.1%} differ from the first draw's (at most by {apart:.2f})"
        )


if __name__ == "__main__":
    main()
