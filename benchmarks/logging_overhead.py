"""What progress lines and TensorBoard logging add to a run's wall time (docs/benchmarks.md#logging).

    .venv/bin/python -m benchmarks.logging_overhead

Runs a small online DQN run (CartPole-v1, Gi-DQN K = 3, 2 seeds, 5,000 env steps, a row every 500:
one progress update per env step, the worst case; offline runs update once per chunk of gradient
steps) in-process under cProfile, with progress lines (stdout redirected, as in a cluster job's log)
and TensorBoard on, and reports the time spent inside the progress code
(``offline_gitd/progress.py``) and the scalar logging code (``offline_gitd/rundir/scalars.py``, including
tensorboardX) as a share of the run. A share of the run's own profile is robust to the load of a
shared machine, where two wall-clock runs a minute apart differ by more than the effect measured.
"""

from __future__ import annotations

import contextlib
import cProfile
import io
import pstats
import tempfile
from pathlib import Path

RUN = [
    "online", "dqn", "--env", "CartPole-v1", "--critic", "gitd", "--K", "3", "--steps", "5000",
    "--log-every", "500", "--checkpoint-every", "5000", "--seeds", "0-1",
]  # fmt: skip


def _inclusive_seconds(stats: pstats.Stats, path_part: str) -> float:
    """Time inside functions of files whose path contains ``path_part``, counting each top-level
    entry once (callees in the same file are not added twice)."""
    total = 0.0
    for (filename, _, _), (_, _, _, cumulative, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if path_part in filename and not any(path_part in caller[0] for caller in callers):
            total += cumulative
    return total


def main() -> None:
    from offline_gitd.cli import main as cli

    with tempfile.TemporaryDirectory() as tmp:
        profile = cProfile.Profile()
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            profile.enable()
            assert cli([*RUN, "--out", str(Path(tmp) / "run")]) == 0
            profile.disable()
    stats = pstats.Stats(profile)
    total = stats.total_tt  # type: ignore[attr-defined]
    progress = _inclusive_seconds(stats, "offline_gitd/progress.py")
    scalars = _inclusive_seconds(stats, "offline_gitd/rundir/scalars.py")
    print(
        f"run: {total:.1f}s profiled, {log.getvalue().count(chr(10))} stdout lines, no carriage return: "
        f"{chr(13) not in log.getvalue()}"
    )
    print("| part | seconds | share of the run |")
    print("| --- | --- | --- |")
    for name, seconds in (("progress lines and summaries", progress), ("TensorBoard events", scalars)):
        print(f"| {name} | {seconds:.3f} | {100 * seconds / total:.2f}% |")


if __name__ == "__main__":
    main()
