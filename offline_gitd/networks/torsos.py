"""Feature extractors ("torsos") shared by all critics (docs/critics.md#networks).

Every torso maps observations to a flat feature vector. The Nature and IMPALA convolutions are XLA's own
(``flax.linen.Conv``): on the CPU each seed of a run takes its own single-seed step (each convolution at one seed's
speed); on accelerators the step is vmapped over seeds (docs/benchmarks.md#seeds-in-one-program). Observations arrive as uint8 frames when
they come from Atari (the cheapest thing to move from host to device) and are scaled to [0, 1]
here, inside the network, so no caller ever has to remember to do it.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp
from flax.linen import Conv

from offline_gitd.networks.dense import Dense


def scale_observation(obs: jnp.ndarray) -> jnp.ndarray:
    """uint8 pixels -> float32 in [0, 1]; float observations pass through unchanged."""
    if obs.dtype == jnp.uint8:
        return obs.astype(jnp.float32) / 255.0
    return obs.astype(jnp.float32)


class NatureCNN(nn.Module):
    """Mnih et al. (2015) torso: 32 8x8/4, 64 4x4/2, 64 3x3/1, FC 512, ReLU.

    VALID padding as in the paper: on 84x84 inputs the flattened conv output is 7x7x64 = 3,136.
    flax's default SAME padding would give 11x11x64 = 7,744 and a 2.5x larger FC layer.
    """

    features: int = 512

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = scale_observation(obs)
        for channels, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.relu(Conv(channels, (kernel, kernel), (stride, stride), padding="VALID")(x))
        x = x.reshape(x.shape[:-3] + (-1,))
        return nn.relu(Dense(self.features)(x))


class _ResidualBlock(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        y = Conv(self.channels, (3, 3))(nn.relu(x))
        y = Conv(self.channels, (3, 3))(nn.relu(y))
        return x + y


class ImpalaCNN(nn.Module):
    """Espeholt et al. (2018) IMPALA torso: stacks of (conv, max-pool /2, 2 residual blocks).

    ``global_pool=True`` replaces the flatten by global average pooling over space: the "IMPOOLA"
    torso of the paper's strong baseline (IMPALA + GAP), which keeps the FC layer small.
    """

    channels: Sequence[int] = (16, 32, 32)
    features: int = 256
    global_pool: bool = False

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = scale_observation(obs)
        for channels in self.channels:
            x = Conv(channels, (3, 3))(x)
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
            x = _ResidualBlock(channels)(x)
            x = _ResidualBlock(channels)(x)
        x = nn.relu(x)
        if self.global_pool:
            x = x.mean(axis=(-3, -2))
        else:
            x = x.reshape(x.shape[:-3] + (-1,))
        return nn.relu(Dense(self.features)(x))


class MLP(nn.Module):
    """Fully connected torso for vector observations (and (s, a) inputs of continuous critics)."""

    hidden: Sequence[int] = (256, 256)

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = scale_observation(obs)
        for width in self.hidden:
            x = nn.relu(Dense(width)(x))
        return x
