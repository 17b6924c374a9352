"""Behaviour cloning against independent computations.

The references run each network forward in NumPy from the parameter arrays and differentiate the
losses by hand (softmax minus one-hot for the cross-entropy; the chain rule through tanh for the
squared error), so the package's loss, its batching and JAX's gradient are all checked.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch
from offline_gitd.learners.bc import (
    ContinuousBCFamily,
    DiscreteBCFamily,
    continuous_bc_loss,
    discrete_bc_loss,
    make_continuous_bc_family,
    make_discrete_bc_family,
)

OBS_DIM, N_ACTIONS, ACT_DIM, HIDDEN, BATCH = 5, 4, 2, (16, 16), 7
LOW, HIGH = np.array([-2.0, 0.0]), np.array([2.0, 1.0])


@functools.cache
def discrete_family(lr: float = 1e-3) -> DiscreteBCFamily:
    return make_discrete_bc_family(
        N_ACTIONS, np.zeros((1, OBS_DIM), np.float32), torso="mlp", mlp_hidden=HIDDEN, lr=lr, adam_eps=1e-8
    )


@functools.cache
def continuous_family(lr: float = 1e-3) -> ContinuousBCFamily:
    return make_continuous_bc_family(
        ACT_DIM, np.zeros((1, OBS_DIM), np.float32), (LOW, HIGH), mlp_hidden=HIDDEN, lr=lr, adam_eps=1e-8
    )


def batch(seed: int, action: np.ndarray, size: int = BATCH) -> Batch:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(size, OBS_DIM)).astype(np.float32)
    zeros = np.zeros(size, np.float32)
    return Batch(obs, action, zeros, zeros, obs, rng.uniform(0.5, 1.5, size).astype(np.float32))


def dense(params: dict, x: np.ndarray) -> np.ndarray:
    return x @ np.asarray(params["kernel"], np.float64) + np.asarray(params["bias"], np.float64)


def mlp_features(layers: list[dict], x: np.ndarray) -> list[np.ndarray]:
    """Activations of a ReLU MLP, input first."""
    out = [np.asarray(x, np.float64)]
    for layer in layers:
        out.append(np.maximum(dense(layer, out[-1]), 0.0))
    return out


def test_discrete_loss_and_gradient_match_a_numpy_reference():
    family = discrete_family()
    params = family.init(jax.random.key(3)).params
    data = batch(0, np.random.default_rng(1).integers(0, N_ACTIONS, BATCH).astype(np.int32))
    (loss, aux), grads = jax.value_and_grad(lambda p: discrete_bc_loss(family.net, p, data), has_aux=True)(params)

    p = params["params"]
    torso = [p["MLP_0"][f"Dense_{i}"] for i in range(len(HIDDEN))]
    feats = mlp_features(torso, data.obs)[-1]
    logits = dense(p["Dense_0"], feats)
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    onehot = np.eye(N_ACTIONS)[data.action]
    nll = -np.log((probs * onehot).sum(axis=1))
    w = data.weight.astype(np.float64)
    np.testing.assert_allclose(float(loss), np.mean(w * nll), rtol=1e-5)
    np.testing.assert_allclose(float(aux["accuracy"]), np.mean(logits.argmax(axis=1) == data.action), rtol=1e-6)
    # d loss / d logits = w_i (softmax - onehot) / B; the last layer's gradients follow.
    dlogits = (w / BATCH)[:, None] * (probs - onehot)
    head = grads["params"]["Dense_0"]
    np.testing.assert_allclose(np.asarray(head["kernel"]), feats.T @ dlogits, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(np.asarray(head["bias"]), dlogits.sum(axis=0), rtol=1e-4, atol=1e-7)


def test_continuous_loss_and_gradient_match_a_numpy_reference():
    family = continuous_family()
    params = family.init(jax.random.key(4)).params
    unit = np.random.default_rng(2).uniform(-0.95, 0.95, (BATCH, ACT_DIM)).astype(np.float32)
    data = batch(1, unit)
    (loss, _), grads = jax.value_and_grad(lambda p: continuous_bc_loss(family.actor, p, data), has_aux=True)(params)

    p = params["params"]
    n = len(HIDDEN)
    feats = mlp_features([p[f"Dense_{i}"] for i in range(n)], data.obs)[-1]
    mode = np.tanh(dense(p[f"Dense_{n}"], feats))  # the mean head; Dense_{n+1} is the log-std head
    w = data.weight.astype(np.float64)
    np.testing.assert_allclose(float(loss), np.mean(w * np.mean((mode - unit) ** 2, axis=1)), rtol=1e-5)
    dmean = (w / BATCH)[:, None] * 2.0 * (mode - unit) / ACT_DIM * (1.0 - mode**2)
    mean_head = grads["params"][f"Dense_{n}"]
    np.testing.assert_allclose(np.asarray(mean_head["kernel"]), feats.T @ dmean, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(np.asarray(mean_head["bias"]), dmean.sum(axis=0), rtol=1e-4, atol=1e-7)
    assert not np.any(np.asarray(grads["params"][f"Dense_{n + 1}"]["kernel"]))  # the spread is not cloned


def test_continuous_step_maps_env_actions_into_the_box():
    """The step normalises env-unit actions: its loss is the unit-box loss of the mapped actions."""
    family = continuous_family()
    state = family.init(jax.random.key(0))
    unit = np.random.default_rng(3).uniform(-0.9, 0.9, (BATCH, ACT_DIM)).astype(np.float32)
    env_actions = (LOW + 0.5 * (unit + 1.0) * (HIGH - LOW)).astype(np.float32)
    _, aux = family.step(state, batch(2, env_actions))
    expected, _ = continuous_bc_loss(family.actor, state.params, batch(2, unit))
    np.testing.assert_allclose(float(aux["loss"]), float(expected), rtol=1e-5)


def train(family, data_fn, steps: int, seed: int = 0):
    step = jax.jit(family.step)
    state = family.init(jax.random.key(seed))
    for i in range(steps):
        state, aux = step(state, data_fn(i))
    return state, aux


def test_discrete_bc_recovers_a_deterministic_behaviour_policy():
    matrix = np.random.default_rng(7).normal(size=(OBS_DIM, N_ACTIONS))

    def data(i: int, size: int = 64) -> Batch:
        obs = np.random.default_rng([8, i]).normal(size=(size, OBS_DIM)).astype(np.float32)
        return batch(i, (obs @ matrix).argmax(axis=1).astype(np.int32), size)._replace(obs=obs, next_obs=obs)

    family = discrete_family(lr=1e-2)
    state, _ = train(family, data, 300)
    held_out = data(10_000, 500)
    chosen = np.asarray(family.act(state, jnp.asarray(held_out.obs), jax.random.key(0)))
    assert np.mean(chosen == held_out.action) > 0.9


def test_continuous_bc_recovers_a_deterministic_behaviour_policy():
    matrix = np.random.default_rng(9).normal(size=(OBS_DIM, ACT_DIM)) * 0.5

    def behaviour(obs: np.ndarray) -> np.ndarray:
        return (LOW + 0.5 * (np.tanh(obs @ matrix) + 1.0) * (HIGH - LOW)).astype(np.float32)

    def data(i: int, size: int = 64) -> Batch:
        obs = np.random.default_rng([10, i]).normal(size=(size, OBS_DIM)).astype(np.float32)
        return batch(i, behaviour(obs), size)._replace(obs=obs, next_obs=obs)

    family = continuous_family(lr=3e-3)
    state, _ = train(family, data, 400)
    held_out = data(10_000, 500)
    chosen = np.asarray(family.act(state, jnp.asarray(held_out.obs), jax.random.key(0)))
    assert chosen.shape == (500, ACT_DIM)
    # Within 5% of each dimension's range on average (an untrained policy is off by ~25%).
    assert np.all(np.abs(chosen - held_out.action).mean(axis=0) < 0.05 * (HIGH - LOW))


@pytest.mark.parametrize("kind", ["discrete", "continuous"])
def test_vmap_over_seeds_equals_each_seed_alone(kind):
    family = discrete_family() if kind == "discrete" else continuous_family()
    rng = np.random.default_rng(11)
    if kind == "discrete":
        actions = [rng.integers(0, N_ACTIONS, BATCH).astype(np.int32) for _ in range(3)]
    else:
        actions = [rng.uniform(LOW, HIGH, (BATCH, ACT_DIM)).astype(np.float32) for _ in range(3)]
    batches = [batch(i, a) for i, a in enumerate(actions)]
    seeds = jnp.arange(2)

    def run(key):
        state = family.init(key)
        for b in batches:
            state, aux = family.step(state, b)
        return state, aux["loss"]

    together = jax.jit(jax.vmap(run))(jax.vmap(jax.random.PRNGKey)(seeds))
    for i in range(len(seeds)):
        alone = jax.jit(run)(jax.random.PRNGKey(i))
        jax.tree.map(lambda a, b, i=i: np.testing.assert_allclose(a[i], b, rtol=1e-5, atol=1e-6), together, alone)
