"""A toy learner, the example of docs/adding-a-learner.md: the one module a new algorithm adds.

Discrete behaviour cloning at its smallest: a linear softmax policy over the flattened
observation, fit by plain gradient descent on the cross-entropy of the data's actions plus an L2
penalty on its weights, and greedy when it acts. tests/learners/test_algorithm_registry.py gives it
one record, whose parameter dataclass adds ``--toy-l2``, and trains it through the command line.
Its update logs ``toy_accuracy`` and ``toy_penalty`` besides the ``loss`` every family logs, so a
run's metrics show which learner trained it, and with which penalty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.learners.family import ActionSpace


class ToyState(NamedTuple):
    """The policy's logits are ``flat(obs) @ weights + bias``."""

    weights: jnp.ndarray  # [obs_dim, n_actions]
    bias: jnp.ndarray  # [n_actions]


@dataclass(frozen=True)
class ToyFamily:
    """``init``, ``step`` and ``act``: what the run loop needs (offline_gitd.learners.family.Family)."""

    obs_dim: int
    n_actions: int
    lr: float
    l2: float  # the penalty's weight: the record's own hyperparameter, --toy-l2

    def init(self, rng: jax.Array) -> ToyState:
        weights = 0.01 * jax.random.normal(rng, (self.obs_dim, self.n_actions))
        return ToyState(weights, jnp.zeros(self.n_actions))

    def logits(self, state: ToyState, obs: jnp.ndarray) -> jnp.ndarray:
        return obs.reshape(obs.shape[0], -1).astype(jnp.float32) @ state.weights + state.bias

    def step(self, state: ToyState, batch: Batch) -> tuple[ToyState, dict[str, jnp.ndarray]]:
        action = batch.action.astype(jnp.int32)

        def loss(params: ToyState) -> tuple[jnp.ndarray, jnp.ndarray]:
            logits = self.logits(params, batch.obs)
            chosen = jnp.take_along_axis(logits, action[:, None], axis=-1)[:, 0]
            penalty = 0.5 * self.l2 * jnp.sum(jnp.square(params.weights))
            return jnp.mean(batch.weight * (jax.nn.logsumexp(logits, axis=-1) - chosen)) + penalty, penalty

        (value, penalty), grads = jax.value_and_grad(loss, has_aux=True)(state)
        accuracy = jnp.mean(jnp.argmax(self.logits(state, batch.obs), axis=-1) == action)
        new = jax.tree.map(lambda p, g: p - self.lr * g, state, grads)
        return new, {"loss": value, "toy_accuracy": accuracy, "toy_penalty": penalty}

    def act(self, state: ToyState, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        return jnp.argmax(self.logits(state, obs), axis=-1).astype(jnp.int32)


def build_toy_family(cfg: Any, spaces: ActionSpace, obs_example: np.ndarray) -> ToyFamily:
    """The record's ``family``: the run's resolved config (the record's own parameters as
    ``cfg.params``), the dataset's actions, one network input."""
    return ToyFamily(int(np.prod(obs_example.shape[1:])), spaces.action_size, cfg.lr, cfg.params.toy_l2)
