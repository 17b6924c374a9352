"""The MinAtar online board's published files, and the one command that rewrites them as cells land::

    python -m tests.leaderboard.publish_online

From the committed ``leaderboards/minatar_online/board.csv`` it rewrites every page's generated
blocks (:mod:`tests.published`, the board README's among them), ``iqm.md`` (:data:`SHOW`'s output)
and ``figures/`` (:data:`PLOT`). The board README names both commands, and
``tests/leaderboard/test_online_board.py`` checks that the committed files are their output.

The commands name the main grid's methods by their keys with the config in brackets, as the whole
grid will need them once the one-update-per-step pairs land beside them; on a board that holds one
config per critic the same words name the short keys (docs/leaderboard.md#online-boards), so the
commands do not change as cells land.
"""

from __future__ import annotations

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


def main() -> None:
    for page in PAGES:
        if regenerate(page):
            print(f"rewrote {page}")
    (ROOT / IQM).write_text(run(SHOW) + "\n")
    print(f"wrote {IQM}")
    print(run(PLOT))


if __name__ == "__main__":
    main()
