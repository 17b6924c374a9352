"""TDRC: TD with gradient correction and a regularised h (Ghiassian et al. 2020), docs/critics.md#tdrc.

Bootstraps from its own online head (no target network, as QRC):

    y = r + g max_a Q_1(s', a),   delta = y - Q_1(s, a),   h = H_1(s, a)
    l = y sg(h) - Q_1(s, a) sg(delta) + h sg(h - delta)

so that  d l / d theta = -delta dQ_1(s, a) + h d[r + g max Q_1(s')]   (TDC's corrected gradient)
and      d l / d z     = (h - delta) dh        (h regresses on delta; weight decay beta is the
optimiser's, applied to the H parameters only).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.critics.inputs import CriticInputs


def tdrc_loss(x: CriticInputs) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Per-sample surrogate [B] and TD errors delta [..., 1, B]."""
    sg = jax.lax.stop_gradient
    y = x.reward + x.discount * x.v_next_online[:1]
    delta = y - x.q_sa
    h = x.h_sa
    surrogate = y * sg(h) - x.q_sa * sg(delta) + h * sg(h - delta)
    return surrogate.reshape(-1, surrogate.shape[-1]).sum(axis=0), sg(delta)
