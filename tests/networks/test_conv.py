"""The patches-times-matrix convolution against ``flax.linen.Conv``, the reference it replaces.

``flax.linen.Conv`` stays the reference here, in the tests only: the torso that uses patches (MinAtar's;
the Nature and IMPALA torsos use ``flax.linen.Conv`` itself) must have the same parameters (names,
shapes, initial values) and give the same outputs and the same training steps, every critic (two by
default, the four in the slow run), to float tolerance.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch
from offline_gitd.critic_registry import critic_names
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.family import make_discrete_family
from offline_gitd.networks import make_torso, minatar
from offline_gitd.networks.conv import Conv
from tests.support.trees import assert_trees_close

# torso -> a small frame size it accepts
SMALL_FRAMES = {"minatar": 10}


@pytest.fixture
def reference_conv(monkeypatch: pytest.MonkeyPatch):
    """Make the MinAtar torso build ``nn.Conv`` (the reference) until the test ends."""

    def use() -> None:
        monkeypatch.setattr(minatar, "Conv", nn.Conv)

    return use


@pytest.mark.parametrize(
    "kernel, strides, padding, size",
    [
        ((8, 8), (4, 4), "VALID", 44),  # Nature's first layer
        ((4, 4), (2, 2), "VALID", 10),
        ((3, 3), (1, 1), "VALID", 10),  # the MinAtar-sized layer
        ((3, 3), (1, 1), "SAME", 11),  # IMPALA's layers, odd size
        ((3, 3), (2, 2), "SAME", 11),  # kernel not a multiple of the stride, SAME
        ((5, 3), (2, 3), "VALID", 13),  # rectangular, size not a multiple of the stride
        ((2, 2), (3, 3), "SAME", 8),  # stride larger than the kernel
    ],
)
def test_conv_matches_flax_conv(kernel, strides, padding, size) -> None:
    """Same parameters and the same output, alone and vmapped over per-seed parameters."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, size, size + 2, 5)), jnp.float32)
    ours, ref = Conv(7, kernel, strides, padding), nn.Conv(7, kernel, strides, padding)
    params = ref.init(jax.random.key(1), x)
    assert_trees_close(ours.init(jax.random.key(1), x), params, rtol=0, atol=0)
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias too
    assert_trees_close(ours.apply(params, x), ref.apply(params, x))
    # per-seed parameters drawn by NumPy: a vmapped flax init would compile JAX's PRNG for every shape
    rng = np.random.default_rng(2)
    seeds = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=(4, *p.shape)), jnp.float32), params)
    xs = jnp.stack([x + i for i in range(4)])
    assert_trees_close(jax.vmap(ours.apply)(seeds, xs), jax.vmap(ref.apply)(seeds, xs))


@pytest.mark.parametrize("name", list(SMALL_FRAMES))
def test_torsos_keep_their_parameters_and_outputs(name: str, reference_conv) -> None:
    """Parameter trees (so checkpoints) are unchanged, values included; outputs and gradients match."""
    size = SMALL_FRAMES[name]
    frames = jnp.asarray(np.random.default_rng(0).integers(0, 2, size=(4, size, size, 4), dtype=np.uint8))
    torso = make_torso(name)
    params = torso.init(jax.random.key(0), frames)
    out = torso.apply(params, frames)
    grads = jax.grad(lambda p: jnp.sum(torso.apply(p, frames) ** 2))(params)
    reference_conv()
    reference = make_torso(name)
    assert_trees_close(params, reference.init(jax.random.key(0), frames), rtol=0, atol=0)
    assert_trees_close(out, reference.apply(params, frames))
    assert_trees_close(grads, jax.grad(lambda p: jnp.sum(reference.apply(p, frames) ** 2))(params), rtol=1e-4)


def _frame_batches(size: int, seeds: int, count: int) -> list[Batch]:
    rng = np.random.default_rng(3)

    def frames() -> np.ndarray:
        return rng.integers(0, 2, size=(seeds, 4, size, size, 4), dtype=np.uint8)  # MinAtar's 0/1 boards

    return [
        Batch(
            obs=frames(),
            action=rng.integers(0, 3, size=(seeds, 4)).astype(np.int32),
            reward=rng.normal(size=(seeds, 4)).astype(np.float32),
            discount=rng.choice([0.0, 0.99], size=(seeds, 4)).astype(np.float32),
            next_obs=frames(),
            weight=rng.uniform(0.5, 1.0, size=(seeds, 4)).astype(np.float32),
        )
        for _ in range(count)
    ]


def _train(kind: str, torso: str, batches: list[Batch]) -> tuple[Any, list[Any]]:
    """Two vmapped-over-seeds CQL steps (the second rolls the heads: T = 1) from seeds 0 and 1."""
    critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 3, T=1)
    obs_example = np.zeros((1, *batches[0].obs.shape[2:]), np.uint8)
    family = make_discrete_family(
        critic, 3, obs_example, torso=torso, mlp_hidden=(8,), head_hidden=8, lr=1e-3, adam_eps=1e-4, cql_alpha=0.1
    )
    state = jax.vmap(family.init)(jax.vmap(jax.random.key)(jnp.arange(2)))
    step = jax.jit(jax.vmap(family.step))
    metrics = []
    for batch in batches:
        state, aux = step(state, batch)
        metrics.append(aux)
    return state, metrics


# The convolution is the same under every critic, which only changes the loss: td (one head) and gitd
# (K heads) by default, tdrc and itd in the slow run.
DEFAULT_CRITICS = ("td", "gitd")


@pytest.mark.parametrize("torso", list(SMALL_FRAMES))
@pytest.mark.parametrize(
    "kind",
    [kind if kind in DEFAULT_CRITICS else pytest.param(kind, marks=pytest.mark.slow) for kind in critic_names()],
)
def test_training_steps_are_unchanged(kind: str, torso: str, reference_conv) -> None:
    """Every critic's vmapped training step (td's and gitd's by default, all four in the slow run) gives
    the reference's losses and parameters."""
    batches = _frame_batches(SMALL_FRAMES[torso], seeds=2, count=2)
    state, metrics = _train(kind, torso, batches)
    reference_conv()
    expected_state, expected_metrics = _train(kind, torso, batches)
    assert_trees_close(metrics, expected_metrics, rtol=1e-4, atol=1e-5)
    assert_trees_close(state, expected_state, rtol=1e-4, atol=1e-6)
