"""The discrete-action family: CQL-DQN offline and DQN online share this one training step.

``cql_alpha = 0`` gives plain (offline or online) DQN with the chosen critic: TD -> DQN,
TDRC -> QRC, i-TD -> i-DQN, Gi-TD -> Gi-DQN; with ``cql_alpha > 0`` the CQL-family versions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, discrete_inputs, init_frozen, loss_from_inputs, maintain
from offline_gitd.learners.cql import discrete_cql_penalty
from offline_gitd.networks import MultiHeadNetwork, Params


class DiscreteState(NamedTuple):
    """Everything a discrete learner carries between updates: one pytree, so that seeds vmap
    over it and a checkpoint is "save the pytree"."""

    params: Params
    frozen: Params
    opt_state: Any
    step: jnp.ndarray  # number of gradient updates done (int32)


def init_discrete_state(
    cfg: CriticConfig, net: MultiHeadNetwork, optimizer: optax.GradientTransformation, rng: jax.Array, obs_example
) -> DiscreteState:
    params = net.init(rng, obs_example)
    return DiscreteState(params, init_frozen(cfg, net, params), optimizer.init(params), jnp.zeros((), jnp.int32))


def discrete_loss(
    cfg: CriticConfig, net: MultiHeadNetwork, cql_alpha: float, params: Params, frozen: Params, batch: Batch
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """Critic loss (docs/critics.md) plus alpha times the CQL penalty on every online head."""
    inputs = discrete_inputs(cfg, net, params, frozen, batch)
    loss, aux = loss_from_inputs(cfg, inputs, batch.weight)
    if cql_alpha:
        penalty = jnp.mean(discrete_cql_penalty(inputs.q_all, inputs.q_sa))
        aux["cql_penalty"] = penalty
        loss = loss + cql_alpha * penalty
    aux["loss"] = loss
    return loss, aux


def make_discrete_step(
    cfg: CriticConfig, net: MultiHeadNetwork, optimizer: optax.GradientTransformation, cql_alpha: float
) -> Callable[[DiscreteState, Batch], tuple[DiscreteState, dict[str, Any]]]:
    """One gradient update followed by the critic's frozen-parameter rules. Pure; jit/vmap/scan it."""

    def step(state: DiscreteState, batch: Batch) -> tuple[DiscreteState, dict[str, Any]]:
        grads, aux = jax.grad(lambda p: discrete_loss(cfg, net, cql_alpha, p, state.frozen, batch), has_aux=True)(
            state.params
        )
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        count = state.step + 1
        params, frozen = maintain(cfg, net, params, state.frozen, count)
        return DiscreteState(params, frozen, opt_state, count), aux

    return step
