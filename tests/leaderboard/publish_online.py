"""The MinAtar online board's published files, and the one command that rewrites them as cells land::

    python -m tests.leaderboard.publish_online

From the committed ``leaderboards/minatar_online/board.csv`` it rewrites every page's generated
blocks (:mod:`tests.published`, the board README's among them), ``iqm.md`` (:data:`SHOW`'s output),
``figures/`` (:data:`PLOT`) and ``figures/gidqn-dqn/`` (:data:`HEADLINE_PLOT`); once the replay-ratio pairs are on the board (one update per env
step, on Breakout and Asterix), also their tables at each ratio and the contrast of the two
ratios' gains (:data:`RATIOS`) and their figures (:data:`PAIR_PLOT`). The board README names every command, and
``tests/leaderboard/test_online_board.py`` checks that the committed files are their output.

The commands name the main grid's methods by their keys with the config in brackets, as the whole
grid will need them once the one-update-per-step pairs land beside them; on a board that holds one
config per critic the same words name the short keys (docs/leaderboard.md#online-boards), so the
commands do not change as cells land.
"""

from __future__ import annotations

from collections.abc import Iterable

from offline_gitd.leaderboard.schema import ResultRow, read_rows
from tests.published import PAGES, ROOT, regenerate, run

BOARD_DIR = "leaderboards/minatar_online"
IQM = f"{BOARD_DIR}/iqm.md"
FIGURES = f"{BOARD_DIR}/figures"
BEHAVIOUR = "leaderboards/minatar_offline/behaviour"
# DQN at one update per 4 env steps, and every method at that ratio (QRC, i-DQN and Gi-DQN).
MAIN_GRID = (
    f"--board {BOARD_DIR}/board.csv --baseline 'dqn:td [loop=compiled utd=0.25]' --method '*utd=0.25*' "
    "--normalise baseline"
)
SHOW = f"offline_gitd leaderboard show {MAIN_GRID} --per-env-auc --format markdown"
PLOT = f"offline_gitd leaderboard plot {MAIN_GRID} --per-env return --behaviour {BEHAVIOUR} --out {FIGURES}"
# The headline pair, Gi-DQN against DQN at the main grid's ratio: its figures cover every game both ran
# (the whole grid's aggregate and panels cover the games every method ran).
HEADLINE_FIGURES = f"{FIGURES}/gidqn-dqn"
HEADLINE_PLOT = (
    f"offline_gitd leaderboard plot --board {BOARD_DIR}/board.csv --baseline 'dqn:td [loop=compiled utd=0.25]' "
    f"--method 'dqn:gitd [loop=compiled utd=0.25]' --normalise baseline --per-env return --behaviour {BEHAVIOUR} "
    f"--out {HEADLINE_FIGURES}"
)

# The replay-ratio pairs (sweeps/minatar_online.toml): DQN and Gi-DQN at one update per env step on
# two games, each ratio's pair against its own DQN; the figures set both ratios beside Young & Tian
# and the behaviour agents, which ran at one update per env step.
PAIR_GAMES = f"--board {BOARD_DIR}/board.csv --env Breakout-v1 --env Asterix-v1"
RATIOS = {
    f"{BOARD_DIR}/ratio-{ratio}.md": (
        f"offline_gitd leaderboard show {PAIR_GAMES} --baseline 'dqn:td [{config}]' "
        f"--method 'dqn:gitd [{config}]' --normalise baseline --per-env-auc --format markdown"
    )
    for ratio, config in (("1", "loop=compiled"), ("0.25", "loop=compiled utd=0.25"))
}
# Gi-DQN's gain over DQN at one update per env step, over the same at one per 4 (docs/leaderboard.md#gain-contrast).
RATIOS[f"{BOARD_DIR}/ratio-contrast.md"] = (
    f"offline_gitd leaderboard contrast {PAIR_GAMES} --gain 'dqn:gitd [loop=compiled]' 'dqn:td [loop=compiled]' "
    "--gain 'dqn:gitd [loop=compiled utd=0.25]' 'dqn:td [loop=compiled utd=0.25]' --format markdown"
)
PAIR_FIGURES = f"{FIGURES}/ratio-pairs"
PAIR_PLOT = (
    f"offline_gitd leaderboard plot {PAIR_GAMES} --baseline 'dqn:td [loop=compiled]' "
    "--method 'dqn:gitd [loop=compiled]' --method 'dqn:td [loop=compiled utd=0.25]' "
    "--method 'dqn:gitd [loop=compiled utd=0.25]' --normalise baseline --per-env return "
    f"--behaviour {BEHAVIOUR} --out {PAIR_FIGURES}"
)


def pairs_landed(rows: Iterable[ResultRow]) -> bool:
    """Whether a whole replay-ratio pair is on the board: DQN (``td``) and Gi-DQN (``gitd``) both ran
    one game at one update per env step (a ``method_config`` naming no ``utd``, the ``minatar``
    default, where the main grid's names ``utd=0.25``). One cell of a pair alone has nothing to be
    set against, so its tables would compare a method with no rows."""
    critics_by_env: dict[str, set[str]] = {}
    for row in rows:
        if row.algorithm == "dqn" and not any(word.startswith("utd=") for word in row.method_config.split()):
            critics_by_env.setdefault(row.env, set()).add(row.critic)
    return any({"td", "gitd"} <= critics for critics in critics_by_env.values())


def main() -> None:
    for page in PAGES:
        if regenerate(page):
            print(f"rewrote {page}")
    (ROOT / IQM).write_text(run(SHOW) + "\n")
    print(f"wrote {IQM}")
    print(run(PLOT))
    print(run(HEADLINE_PLOT))
    if pairs_landed(row for _, row in read_rows(ROOT / BOARD_DIR / "board.csv")):
        for path, command in RATIOS.items():
            (ROOT / path).write_text(run(command) + "\n")
            print(f"wrote {path}")
        print(run(PAIR_PLOT))


if __name__ == "__main__":
    main()
