"""TD: the DQN critic (Mnih et al. 2015), docs/critics.md#td.

    y = r + g max_a Q_0(s', a)                        (theta_0 frozen)
    l = 1/2 (sg(y) - Q_1(s, a))^2,   gradient  -delta_1 dQ_1(s, a)

The 1/2 (docs/critics.md#why-the-one-half; present in CQL's Eq. 2) gives every critic the same scale:
the gradient is exactly the paper's -delta dQ, so K = 1 i-TD, TD and Gi-TD with H = 0 agree.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.critics.inputs import CriticInputs


def td_loss(x: CriticInputs) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Per-sample loss [B] and TD errors delta [..., 1, B]."""
    y = x.reward + x.discount * x.v_next_frozen
    delta = jax.lax.stop_gradient(y) - x.q_sa
    per_sample = 0.5 * jnp.square(delta).reshape(-1, delta.shape[-1]).sum(axis=0)
    return per_sample, delta
