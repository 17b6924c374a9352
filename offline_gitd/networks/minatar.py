"""The MinAtar network (Young & Tian 2019) as a torso: the CNN their DQN baselines use.

One 3x3 convolution with 16 channels, stride 1 and VALID padding, ReLU, flatten, then a fully
connected layer of 128 units with ReLU; the Q-value heads sit on those 128 features
(docs/minatar.md). On MinAtar's 10x10xC boards the flattened convolution output is 8x8x16 = 1,024.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from offline_gitd.networks.conv import Conv
from offline_gitd.networks.dense import Dense


class MinAtarCNN(nn.Module):
    """Young & Tian (2019): conv 16 3x3/1 VALID, ReLU, FC ``features``, ReLU.

    MinAtar's observations are 0/1 channels (stored as uint8 0/1) and are fed as they are, as in
    Young & Tian: dividing them by 255 like Atari pixels would shrink every input to 0.004.
    """

    features: int = 128

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = obs.astype(jnp.float32)
        x = nn.relu(Conv(16, (3, 3), (1, 1), padding="VALID")(x))
        x = x.reshape(x.shape[:-3] + (-1,))
        return nn.relu(Dense(self.features)(x))
