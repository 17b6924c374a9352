"""SAC's tanh-Gaussian policy (Haarnoja et al. 2018, Appendix C "Enforcing action bounds").

The network outputs the mean and log-std of a Gaussian over pre-squash actions u; the action is
a = tanh(u) in [-1, 1]^d. By the change of variables (Haarnoja et al. 2018, Eq. 21)

    log pi(a|s) = log N(u; mu(s), sigma(s)) - sum_i log(1 - tanh(u_i)^2),

where log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)) is used instead of the literal form:
1 - tanh(u)^2 rounds to 0 in float32 once |u| > ~9, and the literal log would return -inf there
(the policy's samples do reach such u when sigma is large). The log-std is clipped to [-5, 2] so
that sigma neither collapses (log pi -> +inf) nor explodes early in training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp

from offline_gitd.networks.dense import Dense
from offline_gitd.networks.multihead import Params
from offline_gitd.networks.torsos import scale_observation

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class TanhGaussianPolicy(nn.Module):
    """MLP torso (ReLU) with two linear heads: the Gaussian's mean and its (clipped) log-std."""

    act_dim: int
    hidden: tuple[int, ...] = (256, 256)

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        x = scale_observation(obs).reshape(obs.shape[0], -1)
        for width in self.hidden:
            x = nn.relu(Dense(width)(x))
        mean = Dense(self.act_dim)(x)
        log_std = jnp.clip(Dense(self.act_dim)(x), LOG_STD_MIN, LOG_STD_MAX)
        return mean, log_std


def squashed_gaussian(mean: jnp.ndarray, log_std: jnp.ndarray, noise: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Reparameterised sample a = tanh(mean + exp(log_std) noise) and log pi(a|s) (Eq. 21), [B].

    A pure function of the noise, so a test (or CQL's proposal sampler) can reproduce a draw.
    """
    u = mean + jnp.exp(log_std) * noise
    gaussian = -0.5 * jnp.square(noise) - log_std - 0.5 * math.log(2.0 * math.pi)
    log_det_tanh = 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))  # log(1 - tanh(u)^2)
    return jnp.tanh(u), (gaussian - log_det_tanh).sum(axis=-1)


@dataclass(frozen=True)
class Actor:
    """The policy's shapes; parameters are the flax dict from :meth:`init`. Hashable (static)."""

    act_dim: int
    hidden: tuple[int, ...] = (256, 256)

    @property
    def module(self) -> TanhGaussianPolicy:
        return TanhGaussianPolicy(self.act_dim, tuple(self.hidden))

    def init(self, rng: jax.Array, obs: jnp.ndarray) -> Params:
        return self.module.init(rng, obs)

    def distribution(self, params: Params, obs: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
        """(mean, log_std) of the pre-squash Gaussian, each [B, act_dim]."""
        return self.module.apply(params, obs)

    def sample_action(self, params: Params, obs: jnp.ndarray, rng: jax.Array) -> tuple[jnp.ndarray, jnp.ndarray]:
        """a ~ pi(.|s) in [-1, 1]^d [B, act_dim] and log pi(a|s) [B]; differentiable in ``params``."""
        mean, log_std = self.distribution(params, obs)
        return squashed_gaussian(mean, log_std, jax.random.normal(rng, mean.shape, mean.dtype))

    def mode_action(self, params: Params, obs: jnp.ndarray) -> jnp.ndarray:
        """tanh(mean): the deterministic action used for evaluation."""
        return jnp.tanh(self.distribution(params, obs)[0])
