"""i-TD: iterated TD, K heads learning K consecutive Bellman iterations with semi-gradients.

Paper Section 3 (i-DQN); docs/critics.md#i-td. With Qbar_k the online head k (D = 1) or its copy
synced every D steps:

    y_1 = r + g max_a Q_0(s', a),   y_k = r + g max_a sg(Qbar_{k-1}(s', a))   (k >= 2)
    l = sum_k 1/2 (sg(y_k) - Q_k(s, a))^2,   gradient on head k: -delta_k dQ_k(s, a)

With K = 1 this is exactly TD.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.critics.inputs import CriticInputs


def itd_loss(x: CriticInputs) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Per-sample loss [B] and TD errors delta [..., K, B]."""
    previous = x.v_next_frozen[None]
    if x.v_next_stale is not None:
        previous = jnp.concatenate([previous, x.v_next_stale[:-1]], axis=0)
    y = jax.lax.stop_gradient(x.reward + x.discount * previous)
    delta = y - x.q_sa
    per_sample = 0.5 * jnp.square(delta).reshape(-1, delta.shape[-1]).sum(axis=0)
    return per_sample, delta
