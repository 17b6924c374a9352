"""The action box of a continuous learner, built from an environment's bounds and checked once.

Every continuous learner (CQL-SAC, TD3+BC, IQL) works in [-1, 1]^d and maps data actions in and
policy actions out with :class:`~offline_gitd.learners.continuous.ActionBox`; this builds one from
the (low, high) of a Box space, so that a bad bound is one clear error at construction, not NaNs
in the first update.
"""

from __future__ import annotations

import numpy as np

from offline_gitd.errors import ConfigError
from offline_gitd.learners.continuous import ActionBox


def action_box(act_dim: int, action_bounds: tuple[np.ndarray, np.ndarray]) -> ActionBox:
    """``action_bounds`` = (low, high), each broadcastable to [act_dim], finite with high > low."""
    low, high = (np.broadcast_to(np.asarray(b, np.float32), (act_dim,)) for b in action_bounds)
    if not np.all(np.isfinite(low) & np.isfinite(high) & (high > low)):
        raise ConfigError(f"continuous actions need finite bounds with high > low, got {low} and {high}")
    return ActionBox(tuple(float(x) for x in low), tuple(float(x) for x in high))
