"""What a board pools that it should not without saying so (docs/leaderboard.md#what-made-a-row).

A method's line on a board pools every row of its method key. Two things can hide in that pool:

- **one config over two recordings**: the same ``config_hash`` with two ``data_sha256`` values
  (or rows that record none beside rows that do): the dataset id was recorded twice, and the runs
  trained on different transitions;
- **the same seed twice**: one config's seed in two runs (two run ids), e.g. a CPU board and a GPU
  board concatenated. Same-numbered seeds share their initialisation and their batches, so the
  second is no new sample: the runs' spread understates the method's.

Neither is refused (a user may mean it); each is one warning line naming the config, the
digests, devices and run ids, so no statistic silently rests on it. Pure: frame in, lines out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from offline_gitd.leaderboard.schema import ResultRow

if TYPE_CHECKING:
    import pandas as pd


def _short(digest: str) -> str:
    return digest[:12] if digest else "not recorded"


def _seeds(seeds: list[int]) -> str:
    """``0-9`` for a contiguous range, else the seeds comma-separated."""
    seeds = sorted(seeds)
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


SAME_SEEDS = (
    "same-numbered seeds share their initialisation and batches, so they are not independent samples, yet "
    "each counts as a run here: show each board on its own (leaderboard compare sets two side by side)"
)
MAX_NAMED = 3  # configs named one line each; more share one line


def pooling_warnings(frame: pd.DataFrame) -> list[str]:
    """One line per config pooled over several data digests, and one per config whose seeds
    appear in several runs (one line for all of them where more than :data:`MAX_NAMED` do);
    ``frame`` has the board's columns and ``method``."""
    lines, repeats = [], []
    for config_hash, rows in frame.groupby("config_hash", sort=True):
        what = f"{', '.join(sorted(set(rows['method'])))} on {', '.join(sorted(set(rows['env'])))}"
        digests = sorted(set(rows["data_sha256"]), key=lambda digest: (not digest, digest))  # unknown last
        if len(digests) > 1:
            why = (
                "one dataset id recorded twice"
                if all(digests)
                else "rows that record their data's digest beside rows that do not: maybe two recordings"
            )
            lines.append(
                f"config {config_hash} ({what}) pools rows trained on {len(digests)} data digests "
                f"({', '.join(map(_short, digests))}): {why}; its statistics mix them"
            )
        # a seed is one run per method and env: the same config on two envs is two runs by design
        runs = rows.groupby(["method", "env", "seed"])["run_id"].nunique()
        repeated = sorted({int(seed) for (_, _, seed), count in runs.items() if count > 1})
        if repeated:
            devices = sorted({device or "not recorded" for device in rows["device"]})
            repeats.append((str(config_hash), what, repeated, int(runs.max()), devices))
    if 0 < len(repeats) <= MAX_NAMED:
        lines += [
            f"config {config_hash} ({what}): seed(s) {_seeds(seeds)} each come from {count} runs "
            f"(devices: {', '.join(devices)}); {SAME_SEEDS}"
            for config_hash, what, seeds, count, devices in repeats
        ]
    elif repeats:
        devices = sorted({device for *_, found in repeats for device in found})
        lines.append(
            f"{len(repeats)} configs have seeds that come from more than one run ({repeats[0][1]}, "
            f"{repeats[1][1]}, ...; devices: {', '.join(devices)}); {SAME_SEEDS}"
        )
    return lines


def made_by_summary(rows: Sequence[ResultRow]) -> dict[str, str]:
    """The commits (``+dirty`` where so), data digests and devices a board's rows record, each
    with its row count, unknown ones as ``not recorded``: the page's account of what made it."""
    from collections import Counter

    def tally(values: Counter[str]) -> str:
        known = sorted((value, count) for value, count in values.items() if value)
        parts = [f"{value} ({count} rows)" for value, count in known]
        if values.get("", 0):
            parts.append(f"not recorded ({values['']} rows)")
        return "; ".join(parts)

    commits = Counter(
        f"{row.commit[:12]}{'+dirty' if row.dirty == 'true' else ''}" if row.commit else "" for row in rows
    )
    return {
        "commits": tally(commits),
        "data digests": tally(Counter(row.data_sha256[:12] for row in rows)),
        "devices": tally(Counter(row.device for row in rows)),
    }
