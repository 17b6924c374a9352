"""The package's ``Dense`` (a product with its own gradient rule) against ``flax.linen.Dense`` and
against the derivatives written out by hand.

``flax.linen.Dense`` stays the reference here, in the tests only: every network that uses the
package's layer must have the same parameters (names, shapes, initial values) and give the same
outputs, gradients and training steps, to float tolerance.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.critic_registry import critic_names
from offline_gitd.critics import CriticConfig
from offline_gitd.learners import actor, bc, iql
from offline_gitd.learners.bc import make_continuous_bc_family, make_discrete_bc_family
from offline_gitd.learners.family import make_continuous_family, make_discrete_family
from offline_gitd.networks import heads, minatar, torsos
from offline_gitd.networks.dense import Dense, matmul
from tests.learners.test_seed_strategy import ACT_DIM, N_ACTIONS, OBS_DIM, SEEDS, batches
from tests.support.trees import assert_trees_close

# every module that builds the package's Dense
MODULES_WITH_DENSE = (heads, minatar, torsos, actor, bc, iql)
RTOL, ATOL = 1e-5, 1e-6


@pytest.mark.parametrize("shape", [(4, 7), (3, 4, 7), (7,)])
def test_dense_matches_flax_dense(shape: tuple[int, ...]) -> None:
    """Same parameters and outputs; the same gradients for the parameters and the input."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=shape), jnp.float32)
    ours, ref = Dense(5), nn.Dense(5)
    params = ref.init(jax.random.key(1), x)
    assert_trees_close(ours.init(jax.random.key(1), x), params, rtol=0, atol=0)
    params = jax.tree.map(lambda p: p + 0.1, params)  # a non-zero bias too
    assert_trees_close(ours.apply(params, x), ref.apply(params, x))

    def loss(module: nn.Module, p: Any, inputs: jnp.ndarray) -> jnp.ndarray:
        return jnp.sum(jnp.sin(module.apply(p, inputs)))

    assert_trees_close(
        jax.grad(functools.partial(loss, ours), argnums=(0, 1))(params, x),
        jax.grad(functools.partial(loss, ref), argnums=(0, 1))(params, x),
        rtol=RTOL,
        atol=ATOL,
    )


def test_gradients_are_the_products_written_out() -> None:
    """For L = sum(c * (x W)): dL/dW = x^T c and dL/dx = c W^T, computed in NumPy (float64),
    alone and vmapped over per-seed kernels (each seed's gradient its own)."""
    rng = np.random.default_rng(1)
    x, kernel, c = rng.normal(size=(SEEDS, 9, 4)), rng.normal(size=(SEEDS, 4, 3)), rng.normal(size=(SEEDS, 9, 3))

    def loss(x: jnp.ndarray, kernel: jnp.ndarray, c: jnp.ndarray) -> jnp.ndarray:
        return jnp.sum(c * matmul(x, kernel))

    as32 = functools.partial(jnp.asarray, dtype=jnp.float32)
    dx, dkernel = jax.vmap(jax.grad(loss, argnums=(0, 1)))(as32(x), as32(kernel), as32(c))
    np.testing.assert_allclose(np.asarray(dkernel), np.einsum("sni,snj->sij", x, c), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(dx), np.einsum("snj,sij->sni", c, kernel), rtol=1e-5, atol=1e-5)
    dx0, dkernel0 = jax.grad(loss, argnums=(0, 1))(as32(x[0]), as32(kernel[0]), as32(c[0]))
    assert_trees_close((dx0, dkernel0), (dx[0], dkernel[0]), rtol=RTOL, atol=ATOL)


@pytest.fixture
def flax_dense(monkeypatch: pytest.MonkeyPatch):
    """Make every network build ``flax.linen.Dense`` (the reference) until the test ends."""

    def use() -> None:
        for module in MODULES_WITH_DENSE:
            monkeypatch.setattr(module, "Dense", nn.Dense)

    return use


def _family(case: str) -> tuple[Any, str]:
    """A tiny learner family of ``case`` ("cql-<critic>", "cql-sac", "bc" or "bc-continuous")."""
    obs = np.zeros((1, OBS_DIM), np.float32)
    bounds = (np.full(ACT_DIM, -1.0), np.full(ACT_DIM, 2.0))  # the range the shared batches draw from
    common = dict(mlp_hidden=(8, 8), lr=1e-2, adam_eps=1e-8)
    if case.startswith("cql-") and case != "cql-sac":
        kind = case.removeprefix("cql-")
        critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 3, T=1)
        return make_discrete_family(
            critic, N_ACTIONS, obs, torso="mlp", head_hidden=8, cql_alpha=0.5, **common
        ), "discrete"
    if case == "cql-sac":
        critic = CriticConfig(kind="td")
        family = make_continuous_family(
            critic, ACT_DIM, obs, bounds, actor_hidden=(8,), num_cql_samples=2, cql_alpha=0.5, **common
        )
        return family, "continuous"
    if case == "bc":
        return make_discrete_bc_family(N_ACTIONS, obs, torso="mlp", **common), "discrete"
    return make_continuous_bc_family(ACT_DIM, obs, bounds, **common), "continuous"


def _two_steps(case: str) -> tuple[Any, list[Any]]:
    family, action_space = _family(case)
    state = jax.vmap(family.init)(jax.vmap(jax.random.key)(jnp.arange(SEEDS)))
    step, batch = jax.jit(jax.vmap(family.step)), jax.tree.map(lambda x: x[0], batches(action_space))
    metrics = []
    for _ in range(2):
        state, aux = step(state, batch)
        metrics.append(aux)
    return state, metrics


# The layer is the same under every critic, which only changes the loss: td (one head) and gitd (K
# heads) by default, tdrc and itd in the slow run.
DEFAULT_CRITICS = ("td", "gitd")
STEP_CASES = [
    f"cql-{kind}" if kind in DEFAULT_CRITICS else pytest.param(f"cql-{kind}", marks=pytest.mark.slow)
    for kind in critic_names()
] + ["cql-sac", "bc", "bc-continuous"]


@pytest.mark.parametrize("case", STEP_CASES)
def test_training_steps_are_unchanged(case: str, flax_dense) -> None:
    """Every discrete critic (td and gitd by default, all four in the slow run), CQL-SAC and both BCs:
    the same losses and states after two vmapped steps."""
    state, metrics = _two_steps(case)
    flax_dense()
    expected_state, expected_metrics = _two_steps(case)
    assert_trees_close(metrics, expected_metrics, rtol=1e-4, atol=1e-5)
    assert_trees_close(state, expected_state, rtol=1e-4, atol=1e-6)
