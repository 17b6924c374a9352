"""Adjusted p values for a family of tests (docs/leaderboard.md#per-env-table).

The per-env table tests every method against the baseline in every env: with 4 methods and 5
games that is 20 tests, and at p < 0.05 one of them comes out "significant" by chance even when
no method differs. Two standard adjustments say which findings survive:

- Holm (1979), "A simple sequentially rejective multiple test procedure": controls the
  family-wise error rate (the chance of even one false claim) at the level, under any dependence
  between the tests. Sorted ascending, p_(i) becomes max_{j <= i} min(1, (m - j + 1) p_(j)).
- Benjamini & Hochberg (1995), "Controlling the false discovery rate": controls the expected
  fraction of false claims among those made, for independent or positively dependent tests.
  Sorted ascending, p_(i) becomes min_{j >= i} min(1, m p_(j) / j).

A finding survives a correction at level alpha when its adjusted p is below alpha. Both are pure
functions of the raw p values; ``None`` and NaN (a line with no test) are not in the family and
stay as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _family(p_values: Sequence[float | None]) -> list[int]:
    """Positions of the actual tests (finite p), ordered by p (ties by position)."""
    tested = [i for i, p in enumerate(p_values) if p is not None and not math.isnan(p)]
    for i in tested:
        p = p_values[i]
        assert p is not None
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p value {p} is not in [0, 1]")
    return sorted(tested, key=lambda i: (p_values[i], i))


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p values, in the order given; the family is every finite p."""
    order = _family(p_values)
    m = len(order)
    out: list[float | None] = list(p_values)
    running = 0.0
    for rank, i in enumerate(order):  # rank 0 is the smallest p
        p = p_values[i]
        assert p is not None
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg step-up adjusted p values (q values), in the order given; the family is
    every finite p."""
    order = _family(p_values)
    m = len(order)
    out: list[float | None] = list(p_values)
    running = 1.0
    for rank in range(m - 1, -1, -1):  # from the largest p down
        i = order[rank]
        p = p_values[i]
        assert p is not None
        running = min(running, m * p / (rank + 1))
        out[i] = min(1.0, running)
    return out
