"""Heads: the per-k part of a multi-head network (docs/critics.md#networks).

``shared_linear`` uses :class:`LinearHead`; ``shared_nonlinear`` uses :class:`NonlinearHead`
(two linear layers with a ReLU between, the paper's ablation); ``independent`` puts a whole
torso under a linear head for every k.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from offline_gitd.networks.dense import Dense


class LinearHead(nn.Module):
    outputs: int

    @nn.compact
    def __call__(self, features: jnp.ndarray) -> jnp.ndarray:
        return Dense(self.outputs)(features)


class NonlinearHead(nn.Module):
    outputs: int
    hidden: int = 512

    @nn.compact
    def __call__(self, features: jnp.ndarray) -> jnp.ndarray:
        return Dense(self.outputs)(nn.relu(Dense(self.hidden)(features)))
