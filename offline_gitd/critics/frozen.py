"""The rules for a critic's frozen parameters (docs/critics.md): theta_0, head rolls, soft updates and
i-TD's stale copies. Pure functions of (params, frozen, step), jit- and scan-friendly.

``frozen`` is a dict: ``{"target": theta_0 or None, "stale": Qbar copy or None}``. TDRC keeps no
target (QRC uses none); only i-TD with D > 1 keeps stale copies.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.critics.config import CriticConfig
from offline_gitd.networks.multihead import MultiHeadNetwork, Params


def _online_q_network(params: Params) -> Params:
    """The Q part of the online parameters (torso and Q-heads, no H-heads)."""
    return {"torso": params["torso"], "q": params["q"]}


def init_frozen(cfg: CriticConfig, net: MultiHeadNetwork, params: Params) -> Params:
    """theta_0 starts as the network of head 1; stale copies start as the online heads."""
    return {
        "target": net.frozen_from(params) if cfg.uses_target_network else None,
        "stale": _online_q_network(params) if cfg.uses_stale_copies else None,
    }


def roll(cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params) -> tuple[Params, Params]:
    """Hard update: theta_0 <- (torso, head 1); heads k <- k+1 for Q and H; the last head is kept.

    Stale copies shift with their heads so that Qbar_k keeps meaning "a copy of head k". The
    optimiser's moments are not shifted (as in the authors' code).
    """
    frozen = dict(frozen)
    frozen["target"] = net.frozen_from(params)
    if frozen.get("stale") is not None:
        frozen["stale"] = net.shift(frozen["stale"])
    return net.shift(params), frozen


def soft_update(cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params) -> Params:
    """theta_0 <- tau theta_1 + (1 - tau) theta_0 (the soft variant; SAC's default)."""
    tau = cfg.tau
    target = jax.tree.map(lambda new, old: tau * new + (1.0 - tau) * old, net.frozen_from(params), frozen["target"])
    return {**frozen, "target": target}


def maintain(
    cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params, step: jnp.ndarray
) -> tuple[Params, Params]:
    """Apply the frozen-parameter rules after gradient update number ``step`` (1-based).

    Hard mode rolls when ``step % T == 0``; soft mode updates theta_0 every step and never rolls.
    i-TD with D > 1 re-syncs its stale copies when ``step % D == 0``.
    """
    if not cfg.uses_target_network:
        return params, frozen
    if cfg.tau is not None:
        frozen = soft_update(cfg, net, params, frozen)
    else:
        params, frozen = jax.lax.cond(
            step % cfg.T == 0,
            lambda p, f: roll(cfg, net, p, f),
            lambda p, f: (p, f),
            params,
            frozen,
        )
    if cfg.uses_stale_copies:
        frozen = jax.lax.cond(
            step % cfg.D == 0,
            lambda f: {**f, "stale": _online_q_network(params)},
            lambda f: f,
            frozen,
        )
    return params, frozen
