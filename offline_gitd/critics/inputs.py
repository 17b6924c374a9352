"""What a critic's loss reads: network outputs at (s, a) and bootstrap values at s'.

The four losses (``td.py``, ``tdrc.py``, ``itd.py``, ``gitd.py``), and a plug-in critic's, are
written over these arrays so they read like the table of docs/critics.md and serve discrete and
continuous critics alike. A front end
(:func:`discrete_inputs` here; the continuous one lives with the SAC-family learners) evaluates the
network *inside* the differentiated function, so gradients reach the parameters through them.

Shapes: B = batch, K = online heads. ``q_sa`` and ``h_sa`` may carry extra leading axes (the two
critic ensembles of continuous control); targets are shared across them and broadcast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from offline_gitd.batch import Batch
from offline_gitd.critics.config import CriticConfig
from offline_gitd.networks.multihead import MultiHeadNetwork, Params


class CriticInputs(NamedTuple):
    """Per-sample quantities, batch axis last.

    q_sa:          Q_k(s, a) of the online heads, [..., K, B].
    h_sa:          H-head outputs at (s, a), [..., num_h, B], or None.
    v_next_frozen: bootstrap value of theta_0 at s' (already stop-gradient), [B], or None (TDRC).
    v_next_online: bootstrap values of the online heads at s', **with gradient**, [K, B], or None.
    v_next_stale:  i-TD's Qbar_k bootstrap values (stop-gradient), [K, B], or None.
    reward:        (n-step) reward, [B].
    discount:      gamma**n (1 - terminal), [B].
    q_all:         all-action online Q-values [K, B, A] (discrete; CQL's logsumexp reads them).
    """

    q_sa: jnp.ndarray
    h_sa: jnp.ndarray | None
    v_next_frozen: jnp.ndarray | None
    v_next_online: jnp.ndarray | None
    v_next_stale: jnp.ndarray | None
    reward: jnp.ndarray
    discount: jnp.ndarray
    q_all: jnp.ndarray | None = None


def needs_online_next(cfg: CriticConfig) -> bool:
    """Whether the loss bootstraps from the online heads at s' (and so pays an online pass on s')."""
    targets = cfg.spec.targets
    if targets == "online":
        return True
    if targets == "iterated_gradient":
        return cfg.K > 1
    if targets == "iterated":
        return cfg.K > 1 and cfg.D == 1
    return False


def _take_action(values: jnp.ndarray, action: jnp.ndarray) -> jnp.ndarray:
    """values [heads, B, A], action [B] -> values[:, b, action[b]] of shape [heads, B]."""
    return jnp.take_along_axis(values, action[None, :, None].astype(jnp.int32), axis=-1)[..., 0]


def bootstrap_values(
    cfg: CriticConfig, value_at_next: Callable[[Params], jnp.ndarray], frozen: Params, v_online: jnp.ndarray | None
) -> tuple[jnp.ndarray | None, jnp.ndarray | None]:
    """(v_next_frozen, v_next_stale) for the critic's kind, computing only what it reads.

    ``value_at_next(p)`` is the bootstrap value of every head in ``p`` at s', shape [heads, B]:
    max_a Q(s', a) for discrete critics, min over ensembles of Q(s', a') - alpha log pi for SAC.
    ``v_online`` is that of the online heads, with gradient, computed by the caller together with
    the online pass at s when :func:`needs_online_next` (else None).
    """
    sg = jax.lax.stop_gradient
    v_frozen = sg(value_at_next(frozen["target"])[0]) if cfg.uses_target_network else None
    v_stale = None
    if cfg.spec.targets == "iterated" and cfg.K > 1:
        v_stale = sg(value_at_next(frozen["stale"]) if cfg.uses_stale_copies else v_online)
    return v_frozen, v_stale


def discrete_inputs(
    cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params, batch: Batch
) -> CriticInputs:
    """Discrete actions: bootstrap value of a head is max_a Q(s', a)."""
    v_online = None
    if needs_online_next(cfg):
        q_all, h_all, q_next = net.apply_with_next(params, batch.obs, batch.next_obs)
        v_online = q_next.max(axis=-1)
    else:
        q_all, h_all = net.apply(params, batch.obs)
    v_frozen, v_stale = bootstrap_values(cfg, lambda p: net.q_values(p, batch.next_obs).max(axis=-1), frozen, v_online)
    return CriticInputs(
        q_sa=_take_action(q_all, batch.action),
        h_sa=None if h_all is None else _take_action(h_all, batch.action),
        v_next_frozen=v_frozen,
        v_next_online=v_online,
        v_next_stale=v_stale,
        reward=batch.reward.astype(jnp.float32),
        discount=batch.discount.astype(jnp.float32),
        q_all=q_all,
    )
