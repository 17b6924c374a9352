"""What a sweep says of a run that finished but cannot go on its board (docs/locks.md).

A run directory damaged by a past race of two writers (rows of one seed and step that disagree,
or that carry two run ids) stops nothing but itself: the sweep finishes the other runs and
reports this one with the command that fixes it, the run redone from scratch under the sweep's
own command line.
"""

from __future__ import annotations

import shlex

from offline_gitd.leaderboard.repeats import RowsDisagree
from offline_gitd.sweeps.spec import RunPlan
from offline_gitd.sweeps.state import SweepPaths

RESULTS_FILE = "results.csv"


def not_on_board(plan: RunPlan, paths: SweepPaths, error: Exception) -> str:
    """The one line for a finished run whose rows the board refused; where the refusal is about
    the run's own file alone (both lines it names are there), with the command that fixes it."""
    run_dir = paths.run_dir(plan.name)
    line = f"finished, but not on the board: {error}"
    if isinstance(error, RowsDisagree) or str(error).count(str(run_dir / RESULTS_FILE)) >= 2:
        again = shlex.join(["offline_gitd", *plan.command_line(run_dir, False), "--overwrite"])
        line += f"; to redo it from scratch: {again}, then run this sweep again to submit it"
    return line
