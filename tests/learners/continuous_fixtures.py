"""Shared shapes and transitions of the continuous learners' tests (SAC/CQL-SAC, TD3+BC, IQL).

Tiny networks and a batch with terminal and n-step discounts and uneven weights, so that a missing
discount, weight or mask factor changes every loss the tests recompute by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.batch import Batch

OBS_DIM, ACT_DIM, HIDDEN, BATCH = 3, 2, 8, 6
# an asymmetric action box, so that a missing map between env units and [-1, 1] shows
LOW, HIGH = np.array([-2.0, 0.0]), np.array([2.0, 1.0])


def unit_batch(seed: int, batch_size: int = BATCH) -> Batch:
    """Transitions with actions strictly inside (-1, 1), terminal and n-step discounts, uneven weights."""
    rng = np.random.default_rng(seed)
    return Batch(
        obs=jnp.asarray(rng.normal(size=(batch_size, OBS_DIM)), jnp.float32),
        action=jnp.asarray(rng.uniform(-0.99, 0.99, (batch_size, ACT_DIM)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=batch_size), jnp.float32),
        discount=jnp.asarray(rng.choice([0.0, 0.9, 0.81], size=batch_size), jnp.float32),
        next_obs=jnp.asarray(rng.normal(size=(batch_size, OBS_DIM)), jnp.float32),
        weight=jnp.asarray(rng.uniform(0.2, 1.0, batch_size), jnp.float32),
    )


def env_batch(seed: int) -> Batch:
    """The same, with actions in the env's units (what a family's step receives)."""
    b = unit_batch(seed)
    return b._replace(action=jnp.asarray(LOW + 0.5 * (np.asarray(b.action) + 1.0) * (HIGH - LOW), jnp.float32))


def ensemble(tree, j: int):
    """Ensemble ``j``'s parameters out of a tree with a leading ensemble axis."""
    return jax.tree.map(lambda x: x[j], tree)


def relative_error(actual, expected) -> float:
    """||actual - expected|| / ||expected|| over every leaf (expected must not be all zeros)."""
    a = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(actual)])
    e = np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in jax.tree.leaves(expected)])
    assert np.linalg.norm(e) > 0
    return float(np.linalg.norm(a - e) / np.linalg.norm(e))
