"""The Nature CNN's step compiled without YNNPACK fusions gives the updates of XLA's default build
(docs/benchmarks.md#compiler-options): the option changes which library computes the products, not
the update.

For every critic, the same state and batches go through two updates of a Nature-torso CQL step
(36 x 36 frames, the torso's smallest, to keep each compile to seconds) built with the options
:func:`choose_compiler_options` picks on the CPU and with XLA's defaults: states and metrics agree
to float tolerance (the two builds sum in different orders), and the options reach the compiled
program.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import NO_YNNPACK, choose_compiler_options, make_chunk_runner
from offline_gitd.learners.family import make_discrete_family

SEEDS, UPDATES, BATCH, SIDE, N_ACTIONS = 1, 2, 4, 36, 3
# the paper's Adam epsilon for Atari keeps near-zero gradients (which sum to a different rounding in each
# build) from turning into full-size steps of opposite signs
RTOL, ATOL = 1e-4, 1e-5


@functools.cache
def family(kind: str):
    critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 3, T=1)
    obs = np.zeros((1, SIDE, SIDE, 4), np.uint8)
    return make_discrete_family(
        critic, N_ACTIONS, obs, torso="nature", mlp_hidden=(), head_hidden=16, lr=1e-3, adam_eps=3.125e-4, cql_alpha=0.5
    )


def batches() -> list[Batch]:
    rng = np.random.default_rng(0)
    lead = (SEEDS, BATCH)
    return [
        Batch(
            obs=rng.integers(0, 256, (*lead, SIDE, SIDE, 4), dtype=np.uint8),
            action=rng.integers(0, N_ACTIONS, lead).astype(np.int32),
            reward=rng.normal(size=lead).astype(np.float32),
            discount=rng.choice([0.0, 0.99], size=lead).astype(np.float32),
            next_obs=rng.integers(0, 256, (*lead, SIDE, SIDE, 4), dtype=np.uint8),
            weight=np.ones(lead, np.float32),
        )
        for _ in range(UPDATES)
    ]


def run(kind: str, options: dict):
    fam = family(kind)
    state = jax.jit(jax.vmap(fam.init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(SEEDS)))
    return make_chunk_runner(fam.step, "loop", "per-seed", options)(state, batches())


# two compiles of a CNN step per critic: td and gitd (the one the options were measured on) by default,
# tdrc and itd in the slow run
@pytest.mark.parametrize(
    "kind", ["td", "gitd", *(pytest.param(kind, marks=pytest.mark.slow) for kind in ("tdrc", "itd"))]
)
def test_nature_step_without_ynnpack_matches_the_default_build(kind: str) -> None:
    options = choose_compiler_options("nature", "cpu")
    assert options == NO_YNNPACK
    (state, metrics), (ref_state, ref_metrics) = run(kind, options), run(kind, {})
    for got, want in zip(jax.tree.leaves((state, metrics)), jax.tree.leaves((ref_state, ref_metrics)), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)
    # the updates moved the weights, so agreeing is not agreeing on an unchanged state
    init = jax.jit(jax.vmap(family(kind).init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(SEEDS)))
    assert not np.allclose(np.asarray(jax.tree.leaves(init.params)[0]), np.asarray(jax.tree.leaves(state.params)[0]))


def test_the_options_reach_the_compiled_program() -> None:
    fam = family("td")
    state = jax.jit(fam.init)(jax.random.PRNGKey(0))
    batch = jax.tree.map(lambda x: x[0], batches()[0])
    lowered = jax.jit(fam.step).lower(state, batch)
    # the pinned jaxlib fuses the CNN's products into YNNPACK calls by default; the options remove them
    assert "ynn_fusion" in lowered.compile().as_text()
    assert "ynn_fusion" not in lowered.compile(NO_YNNPACK).as_text()


def test_options_are_chosen_per_backend_and_torso() -> None:
    assert choose_compiler_options("nature", "cpu") == NO_YNNPACK
    for torso in ("impala", "impala-gap", "minatar", "mlp", None):
        assert choose_compiler_options(torso, "cpu") == {}
    assert choose_compiler_options("nature", "gpu") == {}
    # a caller's edits do not leak into the table
    choose_compiler_options("nature", "cpu")["xla_cpu_enable_fast_math"] = True
    assert choose_compiler_options("nature", "cpu") == NO_YNNPACK
