"""Gi-TD: gradient iterated TD, the paper's contribution (Section 4, Appendix A; docs/critics.md#gi-td).

i-TD's objective sum_k ||Gamma Q_{k-1} - Q_k||^2 differentiated *through its targets*: head k-1
also moves to reduce the k-th Bellman error. The double-sampling term E[delta_k | s, a] is replaced
by an H-estimator H_k(s, a) (TDRC style, weight decay beta), with H_1 = 0 (theta_0 is frozen):

    y_1 = r + g max_a Q_0(s', a),   y_k = r + g max_a Q_{k-1}(s', a)   (k >= 2, WITH gradient)
    delta_k = y_k - Q_k(s, a)
    l = sum_k [ y_k sg(H_k) - Q_k(s, a) sg(delta_k) + H_k sg(H_k - delta_k) ]

whose gradient is the paper's update:
    Delta theta_k = -delta_k dQ_k(s, a) + H_{k+1}(s, a) d[r + g max Q_k(s')]    (k < K)
    Delta theta_K = -delta_K dQ_K(s, a)
    Delta z_k     = (H_k - delta_k) dH_k   (+ beta z_k, decoupled, in the optimiser)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.critics.inputs import CriticInputs


def gitd_loss(x: CriticInputs) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Per-sample surrogate [B] and TD errors delta [..., K, B]."""
    sg = jax.lax.stop_gradient
    previous = sg(x.v_next_frozen)[None]
    h = jnp.zeros_like(x.q_sa[..., :1, :])
    if x.h_sa is not None:
        previous = jnp.concatenate([previous, x.v_next_online[:-1]], axis=0)
        h = jnp.concatenate([h, x.h_sa], axis=-2)
    y = x.reward + x.discount * previous
    delta = y - x.q_sa
    surrogate = y * sg(h) - x.q_sa * sg(delta) + h * sg(h - delta)
    return surrogate.reshape(-1, surrogate.shape[-1]).sum(axis=0), sg(delta)
