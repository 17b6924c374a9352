"""Behaviour cloning: the offline floor, a policy fit to the data's actions with no critic (docs/offline.md#baselines).

Discrete actions: the cross-entropy of the data action under softmax of the logits of the
domain's torso followed by one linear layer of A outputs (the critics' network with a single
``shared_linear`` head, its outputs read as logits), minimised by Adam; the agent acts greedily
in the logits (the loop applies the evaluation epsilon).

Continuous actions: the deterministic BC of TD3+BC (Fujimoto & Gu 2021, the BC term of Eq. 3),
d3rlpy's ``BC`` and CORL's ``any_percent_bc``: the squared error between the policy's action
tanh(mean) and the data action, averaged over the action's dimensions, in the policy's box
[-1, 1]^d (:class:`~offline_gitd.learners.continuous.ActionBox`; on MuJoCo's symmetric [-1, 1]
boxes this is their loss exactly). The policy is SAC's :class:`~offline_gitd.learners.actor.Actor`,
evaluated at its mode, so BC and the actor-critic baselines act through the same network; its
log-std head receives no gradient. A maximum-likelihood Gaussian BC would also fit the spread of
the data, which evaluation (at the mode) never uses.

Both are pure functions of their state and batches (``init``/``step``/``act`` of
:class:`~offline_gitd.learners.family.Family`): vmappable over seeds and checkpointed as one pytree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from offline_gitd.batch import Batch
from offline_gitd.learners.action_box import action_box
from offline_gitd.learners.actor import Actor
from offline_gitd.learners.continuous import ActionBox, as_key
from offline_gitd.learners.family import ActionSpace, network_settings
from offline_gitd.networks import Params, make_torso
from offline_gitd.networks.dense import Dense


class BCState(NamedTuple):
    """A behaviour-cloning learner between updates: the policy, its Adam state and the update count."""

    params: Params
    opt_state: Any
    step: jnp.ndarray  # number of gradient updates done (int32)


class LogitsNetwork(nn.Module):
    """The domain's torso (by name) and one linear layer of ``n_actions`` logits."""

    torso: str
    n_actions: int
    mlp_hidden: tuple[int, ...] = (256, 256)

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        return Dense(self.n_actions)(make_torso(self.torso, self.mlp_hidden)(obs))


def discrete_bc_loss(net: LogitsNetwork, params: Params, batch: Batch) -> tuple[jnp.ndarray, dict[str, jnp.ndarray]]:
    """mean_i w_i (logsumexp_a l(s_i)_a - l(s_i)_{a_i}): the negative log-likelihood of the data
    actions under softmax(logits), weighted by ``batch.weight``; aux adds the greedy accuracy."""
    logits = net.apply(params, batch.obs)
    action = batch.action.astype(jnp.int32)
    chosen = jnp.take_along_axis(logits, action[:, None], axis=-1)[:, 0]
    nll = jax.nn.logsumexp(logits, axis=-1) - chosen
    loss = jnp.mean(batch.weight * nll)
    accuracy = jnp.mean((jnp.argmax(logits, axis=-1) == action).astype(jnp.float32))
    return loss, {"loss": loss, "accuracy": accuracy}


def continuous_bc_loss(actor: Actor, params: Params, batch: Batch) -> tuple[jnp.ndarray, dict[str, jnp.ndarray]]:
    """mean_i w_i mean_j (tanh(mu(s_i))_j - a_ij)^2 with ``batch.action`` already in [-1, 1]^d."""
    error = jnp.square(actor.mode_action(params, batch.obs) - batch.action.astype(jnp.float32))
    loss = jnp.mean(batch.weight * error.mean(axis=-1))
    return loss, {"loss": loss}


def make_bc_step(
    loss_fn: Callable[[Params, Batch], tuple[jnp.ndarray, dict[str, Any]]],
    optimizer: optax.GradientTransformation,
    prepare: Callable[[Batch], Batch] = lambda batch: batch,
) -> Callable[[BCState, Batch], tuple[BCState, dict[str, Any]]]:
    """One Adam step on ``loss_fn`` after ``prepare`` (the continuous family maps actions into its box). Pure."""

    def step(state: BCState, batch: Batch) -> tuple[BCState, dict[str, Any]]:
        grads, aux = jax.grad(loss_fn, has_aux=True)(state.params, prepare(batch))
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        return BCState(optax.apply_updates(state.params, updates), opt_state, state.step + 1), aux

    return step


def _init_state(init: Callable[[jax.Array], Params], optimizer: optax.GradientTransformation, rng: jax.Array):
    params = init(as_key(rng))
    return BCState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


@dataclass(frozen=True)
class DiscreteBCFamily:
    """Behaviour cloning on discrete actions: softmax cross-entropy, greedy in the logits."""

    net: LogitsNetwork
    obs_example: np.ndarray
    lr: float
    adam_eps: float

    @property
    def optimizer(self) -> optax.GradientTransformation:
        return optax.adam(self.lr, eps=self.adam_eps)

    def init(self, rng: jax.Array) -> BCState:
        return _init_state(lambda key: self.net.init(key, jnp.asarray(self.obs_example)), self.optimizer, rng)

    @property
    def step(self) -> Callable[[BCState, Batch], tuple[BCState, dict[str, Any]]]:
        return make_bc_step(lambda params, batch: discrete_bc_loss(self.net, params, batch), self.optimizer)

    def act(self, state: BCState, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """argmax of the logits (epsilon is applied by the caller)."""
        return jnp.argmax(self.net.apply(state.params, obs), axis=-1).astype(jnp.int32)


@dataclass(frozen=True)
class ContinuousBCFamily:
    """Deterministic behaviour cloning on continuous actions: MSE of tanh(mean) to the data action."""

    actor: Actor
    obs_example: np.ndarray
    box: ActionBox
    lr: float
    adam_eps: float

    @property
    def optimizer(self) -> optax.GradientTransformation:
        return optax.adam(self.lr, eps=self.adam_eps)

    def init(self, rng: jax.Array) -> BCState:
        return _init_state(lambda key: self.actor.init(key, jnp.asarray(self.obs_example)), self.optimizer, rng)

    @property
    def step(self) -> Callable[[BCState, Batch], tuple[BCState, dict[str, Any]]]:
        return make_bc_step(
            lambda params, batch: continuous_bc_loss(self.actor, params, batch),
            self.optimizer,
            lambda batch: batch._replace(action=self.box.normalise(batch.action)),
        )

    def act(self, state: BCState, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """tanh(mean) in env units (rng unused)."""
        return self.box.to_env(self.actor.mode_action(state.params, obs))


def make_discrete_bc_family(
    n_actions: int,
    obs_example: np.ndarray,
    *,
    torso: str,
    mlp_hidden: tuple[int, ...],
    lr: float,
    adam_eps: float,
) -> DiscreteBCFamily:
    return DiscreteBCFamily(LogitsNetwork(torso, n_actions, tuple(mlp_hidden)), obs_example, lr, adam_eps)


def make_continuous_bc_family(
    act_dim: int,
    obs_example: np.ndarray,
    action_bounds: tuple[np.ndarray, np.ndarray],
    *,
    mlp_hidden: tuple[int, ...],
    lr: float,
    adam_eps: float,
) -> ContinuousBCFamily:
    """``action_bounds`` = (low, high) of the env's Box, each broadcastable to [act_dim]."""
    box = action_box(act_dim, action_bounds)
    return ContinuousBCFamily(Actor(act_dim, tuple(mlp_hidden)), obs_example, box, lr, adam_eps)


def build_bc_family(cfg: Any, spaces: ActionSpace, obs_example: np.ndarray) -> DiscreteBCFamily | ContinuousBCFamily:
    """``--algo bc``'s family builder (offline_gitd.algorithm_registry): the discrete family on the
    domain's torso, the continuous one on SAC's actor."""
    if spaces.action_kind == "discrete":
        return make_discrete_bc_family(spaces.action_size, obs_example, torso=cfg.torso, **network_settings(cfg))
    return make_continuous_bc_family(spaces.action_size, obs_example, spaces.action_bounds, **network_settings(cfg))
