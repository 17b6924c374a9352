"""Pure schedule arithmetic of the online loop: exploration and update-to-data ratio (UTD).

Kept free of state so that a resumed run computes exactly what a straight run would: every value
is a function of the env-step count alone.
"""

from __future__ import annotations

import math
from fractions import Fraction

from offline_gitd.errors import ConfigError


def utd_fraction(utd: float) -> Fraction:
    """The UTD as an exact fraction: an integer n >= 1 (n updates per env step) or 1/n (one
    update every n env steps), the two regimes of the paper's UTD study (1/32, 1/4, 4; MuJoCo
    0.1, 1, 10). Anything else is refused: "2.5 updates per step" has no agreed meaning."""
    if not (isinstance(utd, (int, float)) and math.isfinite(utd) and utd > 0):
        raise ConfigError(f"--utd must be a positive number, got {utd!r}")
    if utd >= 1:
        if float(utd).is_integer():
            return Fraction(int(utd))
    else:
        period = 1.0 / utd
        if abs(period - round(period)) < 1e-6:
            return Fraction(1, round(period))
    raise ConfigError(f"--utd must be an integer >= 1 or 1/n (e.g. 4, 1, 0.25, 0.1), got {utd}")


def total_updates(env_steps: int, utd: Fraction, initial_samples: int) -> int:
    """Updates done once ``env_steps`` steps are taken: none during the initial random samples,
    then ``floor((env_steps - initial_samples) * utd)``."""
    return math.floor(max(0, env_steps - initial_samples) * utd)


def updates_after_step(env_step: int, utd: Fraction, initial_samples: int) -> int:
    """Updates to run right after env step ``env_step`` (1-based): UTD n gives n every step,
    UTD 1/n gives one every n-th step."""
    return total_updates(env_step, utd, initial_samples) - total_updates(env_step - 1, utd, initial_samples)


def epsilon_at(env_step: int, start: float, end: float, decay_steps: int, initial_samples: int) -> float:
    """Linear epsilon decay from ``start`` to ``end`` over ``decay_steps`` env steps counted from
    the end of the initial random samples (Dopamine's ``linearly_decaying_epsilon``); the initial
    samples themselves are uniformly random (epsilon 1)."""
    if env_step < initial_samples:
        return 1.0
    if decay_steps <= 0:
        return end
    fraction = min(1.0, (env_step - initial_samples) / decay_steps)
    return start + fraction * (end - start)
