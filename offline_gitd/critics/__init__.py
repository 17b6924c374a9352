"""The critics (docs/critics.md): pure loss functions over one multi-head network.

    loss, aux = critic_loss(cfg, net, params, frozen, batch)

``critic_loss`` evaluates the network (the discrete front end; continuous learners build their own
:class:`CriticInputs` and call :func:`loss_from_inputs`), applies the kind's loss per sample,
weights by the batch's importance weights and averages. Which loss a kind is, and what it reads, is
its record in :mod:`offline_gitd.critic_registry` (the paper's four, or a plug-in's). ``frozen``
follows the rules of :mod:`offline_gitd.critics.frozen`; the optimiser is :func:`critic_optimizer`.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from offline_gitd.batch import Batch
from offline_gitd.critics.config import CriticConfig
from offline_gitd.critics.frozen import init_frozen, maintain, roll, soft_update
from offline_gitd.critics.inputs import CriticInputs, discrete_inputs, needs_online_next
from offline_gitd.critics.optim import critic_optimizer, h_mask
from offline_gitd.networks import MultiHeadNetwork, Params, make_torso


def make_network(
    cfg: CriticConfig,
    outputs: int,
    torso: str = "nature",
    *,
    continuous: bool = False,
    mlp_hidden: tuple[int, ...] = (256, 256),
    head_hidden: int = 512,
) -> MultiHeadNetwork:
    """The multi-head network a critic needs: K Q-heads and ``cfg.num_h`` H-heads."""
    return MultiHeadNetwork(
        torso=make_torso(torso, mlp_hidden),
        layout=cfg.heads,
        num_q=cfg.K,
        num_h=cfg.num_h,
        outputs=outputs,
        continuous=continuous,
        head_hidden=head_hidden,
    )


def loss_from_inputs(
    cfg: CriticConfig, inputs: CriticInputs, weight: jnp.ndarray
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """Importance-weighted batch mean of the kind's per-sample loss, with per-head statistics.

    aux holds ``td_abs`` (per-sample mean |delta_k| over heads: PER's new priority) and per-head
    vectors ``bellman_error`` (mean delta_k^2), ``q_mean`` and ``h_mean``.
    """
    per_sample, delta = cfg.spec.load_loss()(inputs)
    loss = jnp.mean(weight * per_sample)
    heads_axis_delta = delta.reshape(-1, delta.shape[-2], delta.shape[-1])
    aux: dict[str, Any] = {
        "td_abs": jnp.abs(heads_axis_delta).mean(axis=(0, 1)),
        "bellman_error": jnp.square(heads_axis_delta).mean(axis=(0, 2)),
        "q_mean": inputs.q_sa.reshape(-1, inputs.q_sa.shape[-2], inputs.q_sa.shape[-1]).mean(axis=(0, 2)),
    }
    if inputs.h_sa is not None:
        aux["h_mean"] = inputs.h_sa.reshape(-1, inputs.h_sa.shape[-2], inputs.h_sa.shape[-1]).mean(axis=(0, 2))
    return loss, aux


def critic_loss(
    cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params, batch: Batch
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """Scalar loss whose gradient is the critic's update (docs/critics.md), and its statistics."""
    return loss_from_inputs(cfg, discrete_inputs(cfg, net, params, frozen, batch), batch.weight)


__all__ = [
    "CriticConfig",
    "CriticInputs",
    "critic_loss",
    "critic_optimizer",
    "discrete_inputs",
    "h_mask",
    "init_frozen",
    "loss_from_inputs",
    "maintain",
    "make_network",
    "needs_online_next",
    "roll",
    "soft_update",
]
