"""One network, K online Q-heads, optional H-heads: the object every critic differentiates.

Parameters are a plain dict ``{"torso": ..., "q": ..., "h": ...}`` in which every head's
parameters are stacked on a leading head axis (docs/critics.md):

* ``shared_linear`` / ``shared_nonlinear``: one torso, ``q`` stacked [K, ...], ``h`` [num_h, ...].
* ``independent``: the torso is stacked too ([K, ...]), so "independent networks" is the same code
  vmapped over the torso as well.

Stacking makes the target roll an index shift and lets ``jax.vmap`` evaluate all heads at once.
The frozen network theta_0 is the same structure with a head axis of size 1, so one ``q_values``
serves online heads and theta_0 alike.

H-heads (TDRC's and Gi-TD's estimators of the expected TD error) read **stop-gradient** torso
features: they must not train the torso (the authors' DQN code does the same: docs/critics.md#heads-and-h-estimators).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from offline_gitd.choices import HEAD_LAYOUTS
from offline_gitd.errors import ConfigError
from offline_gitd.networks.heads import LinearHead, NonlinearHead
from offline_gitd.networks.torsos import scale_observation

Params = dict[str, Any]


def stack_first(tree: Any) -> Any:
    """The first entry of every stacked leaf, keeping a head axis of size 1."""
    return jax.tree.map(lambda x: x[:1], tree)


def shift_heads(tree: Any) -> Any:
    """Head k <- head k+1 along the leading axis; the last head keeps its values (docs/critics.md)."""
    return jax.tree.map(lambda x: jnp.concatenate([x[1:], x[-1:]], axis=0), tree)


@dataclass(frozen=True)
class MultiHeadNetwork:
    """Describes shapes only; parameters live in the dict returned by :meth:`init`.

    ``outputs`` is the number of actions for discrete critics and 1 for continuous ones, whose
    torso reads the concatenation (s, a) and whose heads return one value per (s, a).
    Frozen (hashable), so it can be a static argument of jitted functions.
    """

    torso: nn.Module
    layout: str
    num_q: int
    num_h: int
    outputs: int
    continuous: bool = False
    head_hidden: int = 512

    def __post_init__(self) -> None:
        if self.layout not in HEAD_LAYOUTS:
            raise ConfigError(f"unknown head layout {self.layout!r}; choose one of {', '.join(HEAD_LAYOUTS)}")
        if self.num_q < 1 or self.num_h < 0:
            raise ConfigError(f"a network needs num_q >= 1 and num_h >= 0, got {self.num_q}, {self.num_h}")

    @property
    def independent(self) -> bool:
        return self.layout == "independent"

    @property
    def head(self) -> nn.Module:
        if self.layout == "shared_nonlinear":
            return NonlinearHead(self.outputs, self.head_hidden)
        return LinearHead(self.outputs)

    def _torso_input(self, obs: jnp.ndarray, action: jnp.ndarray | None) -> jnp.ndarray:
        if not self.continuous:
            return obs
        if action is None:
            raise ValueError("a continuous critic needs the action as input")
        flat = scale_observation(obs).reshape(obs.shape[0], -1)
        return jnp.concatenate([flat, action.astype(jnp.float32)], axis=-1)

    def init(self, rng: jax.Array, obs: jnp.ndarray, action: jnp.ndarray | None = None) -> Params:
        """Random parameters; every head (and every torso, if independent) has its own key."""
        x = self._torso_input(obs, action)
        key_torso, key_q, key_h = jax.random.split(rng, 3)
        if self.independent:
            torso = jax.vmap(self.torso.init, in_axes=(0, None))(jax.random.split(key_torso, self.num_q), x)
            features = self.torso.apply(jax.tree.map(lambda t: t[0], torso), x)
        else:
            torso = self.torso.init(key_torso, x)
            features = self.torso.apply(torso, x)
        init_heads = jax.vmap(self.head.init, in_axes=(0, None))
        params: Params = {"torso": torso, "q": init_heads(jax.random.split(key_q, self.num_q), features)}
        if self.num_h:
            params["h"] = init_heads(jax.random.split(key_h, self.num_h), features)
        return params

    def features(self, params: Params, obs: jnp.ndarray, action: jnp.ndarray | None = None) -> jnp.ndarray:
        """Torso output: [B, F] when shared, [num_torsos, B, F] when independent."""
        x = self._torso_input(obs, action)
        if self.independent:
            return jax.vmap(self.torso.apply, in_axes=(0, None))(params["torso"], x)
        return self.torso.apply(params["torso"], x)

    def _heads(self, head_params: Any, features: jnp.ndarray) -> jnp.ndarray:
        feature_axis = 0 if features.ndim == 3 else None
        out = jax.vmap(self.head.apply, in_axes=(0, feature_axis))(head_params, features)
        return out[..., 0] if self.continuous else out

    def apply(
        self, params: Params, obs: jnp.ndarray, action: jnp.ndarray | None = None
    ) -> tuple[jnp.ndarray, jnp.ndarray | None]:
        """(Q, H) from one torso pass: Q [heads, B, outputs] (or [heads, B] if continuous), H likewise.

        H is ``None`` when the parameters hold no H-heads (theta_0, td, itd). Independent H-heads
        k = K - num_h + 1 .. K read the features of their own network (for Gi-TD H_2..H_K read
        networks 2..K; for TDRC H_1 reads network 1).
        """
        features = self.features(params, obs, action)
        return self._heads(params["q"], features), self._h_values(params, features)

    def apply_with_next(
        self,
        params: Params,
        obs: jnp.ndarray,
        next_obs: jnp.ndarray,
        action: jnp.ndarray | None = None,
        next_action: jnp.ndarray | None = None,
    ) -> tuple[jnp.ndarray, jnp.ndarray | None, jnp.ndarray]:
        """(Q, H) at s as :meth:`apply`, and the online Q-heads at s', from ONE torso pass.

        Critics that bootstrap from their own heads (TDRC, Gi-TD, i-TD with D = 1) need the online
        network at s and at s'. One pass over the concatenated batch does the same arithmetic as two
        passes in half the operations, with matrix products twice as tall.
        """
        batch = obs.shape[0]
        both = jnp.concatenate([obs, next_obs])
        both_actions = None if action is None else jnp.concatenate([action, next_action])
        features = self.features(params, both, both_actions)
        q_both = self._heads(params["q"], features)
        q, q_next = q_both[:, :batch], q_both[:, batch:]
        return q, self._h_values(params, features[..., :batch, :]), q_next

    def _h_values(self, params: Params, features: jnp.ndarray) -> jnp.ndarray | None:
        """H-heads on stop-gradient features, or None when ``params`` has none."""
        if "h" not in params:
            return None
        frozen_features = jax.lax.stop_gradient(features)
        if self.independent:
            frozen_features = frozen_features[-self.num_h :]
        return self._heads(params["h"], frozen_features)

    def q_values(self, params: Params, obs: jnp.ndarray, action: jnp.ndarray | None = None) -> jnp.ndarray:
        """Q-values of every head in ``params``: [heads, B, outputs] (discrete) or [heads, B]."""
        features = self.features(params, obs, action)
        return self._heads(params["q"], features)

    def greedy_action(self, params: Params, obs: jnp.ndarray) -> jnp.ndarray:
        """argmax_a of the mean of the online heads (docs/critics.md, "Acting"); theta_0 is not used."""
        return jnp.argmax(self.q_values(params, obs).mean(axis=0), axis=-1)

    def frozen_from(self, params: Params) -> Params:
        """theta_0 <- (torso, head 1): the network of the first online head, with no H-heads."""
        torso = stack_first(params["torso"]) if self.independent else params["torso"]
        return {"torso": torso, "q": stack_first(params["q"])}

    def shift(self, params: Params) -> Params:
        """Heads k <- k+1 for Q and H (and the torsos when independent); the last head is kept."""
        shifted = dict(params)
        shifted["q"] = shift_heads(params["q"])
        if "h" in params:
            shifted["h"] = shift_heads(params["h"])
        if self.independent:
            shifted["torso"] = shift_heads(params["torso"])
        return shifted
