"""The transition batch that every data source produces and every critic consumes.

The replay computes the bootstrap discount ``gamma**n * (1 - terminal)`` itself (it needs gamma
anyway for n-step returns), so critics never see gamma, n or the terminal flag separately: a
truncated episode keeps a non-zero discount (it bootstraps), a terminal one has discount 0.
"""

from typing import NamedTuple

import numpy as np


class Batch(NamedTuple):
    """A batch of (possibly n-step) transitions; every field has leading batch axis B.

    obs:       s_t, uint8 frames [B, 84, 84, stack] or float vectors [B, obs_dim].
    action:    a_t, int32 [B] (discrete) or float32 [B, act_dim] (continuous).
    reward:    sum_{i<n} gamma**i r_{t+i}, float32 [B].
    discount:  gamma**n * (1 - terminal), float32 [B]; the factor in front of the bootstrap.
    next_obs:  s_{t+n}, same layout as obs.
    weight:    importance weight per sample (prioritised replay), float32 [B]; ones if uniform.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    next_obs: np.ndarray
    weight: np.ndarray
