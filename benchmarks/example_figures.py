"""The example figures kept in ``leaderboards/figures/``, and the numbers they are drawn from.

    .venv/bin/python -m benchmarks.example_figures            # rewrite leaderboards/figures/

One of each figure ``leaderboard plot`` draws, from the Gym ablation board with 8 methods (the
legend and line-style case), data 10%, T = 10, baseline CQL, 2,000 bootstrap replications:
``aggregate``, ``per_env`` (normalised scores), ``per_env_return`` (raw returns), ``intervals``
and ``profile``, with ``figure_data.json``. ``tests/leaderboard/test_figures.py`` regenerates the data and
compares it with the committed file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BOARD = ROOT / "leaderboards" / "gym_offline" / "board-data10-T10.csv"
OUT = ROOT / "leaderboards" / "figures"
BASELINE = "cql:td"
REPS = 2000
SEED = 0


def example_data(reps: int = REPS) -> dict[str, Any]:
    """figure name -> its data; ``per_env_return`` is the per-env figure in raw returns."""
    from offline_gitd.leaderboard.curves import per_env_data
    from offline_gitd.leaderboard.plot import figure_data
    from offline_gitd.leaderboard.show import load_scored
    from offline_gitd.leaderboard.stats import summarise

    scored, key = load_scored(BOARD, BASELINE, "baseline")
    data = figure_data(scored, summarise(scored, key, reps, SEED), "baseline", reps, SEED)
    data["per_env_return"] = per_env_data(scored, data["aggregate"]["methods"], "return", reps, SEED)
    return data


def main() -> None:
    from offline_gitd.leaderboard.plot import DATA_FILE, draw, figure_bytes, per_env_figure

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=REPS)
    args = parser.parse_args()
    data = example_data(args.reps)
    OUT.mkdir(parents=True, exist_ok=True)
    figures = draw(data, BASELINE, "baseline")
    figures["per_env_return"] = per_env_figure(data["per_env_return"], "baseline")
    for name, figure in figures.items():
        (OUT / f"{name}.png").write_bytes(figure_bytes(figure))
        print(f"wrote {OUT / name}.png")
    (OUT / DATA_FILE).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT / DATA_FILE}")


if __name__ == "__main__":
    main()
