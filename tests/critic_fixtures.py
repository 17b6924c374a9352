"""Small random networks and batches shared by the critic tests."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, init_frozen, make_network

OBS_DIM, N_ACTIONS, BATCH = 5, 3, 6


def random_batch(seed: int, batch_size: int = BATCH) -> Batch:
    """Random transitions with terminal (discount 0), 1-step and 2-step discounts and uneven
    importance weights, so that every factor of the update is exercised."""
    rng = np.random.default_rng(seed)
    return Batch(
        obs=jnp.asarray(rng.normal(size=(batch_size, OBS_DIM)), jnp.float32),
        action=jnp.asarray(rng.integers(0, N_ACTIONS, batch_size), jnp.int32),
        reward=jnp.asarray(rng.normal(size=batch_size), jnp.float32),
        discount=jnp.asarray(rng.choice([0.0, 0.9, 0.81], size=batch_size), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=(batch_size, OBS_DIM)), jnp.float32),
        weight=jnp.asarray(rng.uniform(0.2, 1.0, batch_size), jnp.float32),
    )


def discrete_batch(
    rng: np.random.Generator, lead: tuple[int, ...], obs: Callable[[], np.ndarray], n_actions: int
) -> Batch:
    """A host batch with leading axes ``lead`` (e.g. [updates, seeds, batch]): ``obs()`` draws each
    observation array, actions are uniform, discounts terminal or 0.99, weights one."""
    return Batch(
        obs=obs(),
        action=rng.integers(0, n_actions, lead).astype(np.int32),
        reward=rng.normal(size=lead).astype(np.float32),
        discount=rng.choice([0.0, 0.99], size=lead).astype(np.float32),
        next_obs=obs(),
        weight=np.ones(lead, np.float32),
    )


def random_critic(cfg: CriticConfig, seed: int = 0):
    """(net, params, frozen) with theta_0 made *different* from head 1 (a fresh init), so that a
    test cannot pass by confusing the frozen and the online network."""
    net = make_network(cfg, N_ACTIONS, "mlp", mlp_hidden=(8, 8), head_hidden=8)
    obs = jnp.zeros((1, OBS_DIM), jnp.float32)
    params = net.init(jax.random.key(seed), obs)
    other = net.init(jax.random.key(seed + 1000), obs)
    frozen = init_frozen(cfg, net, other)
    return net, params, frozen
