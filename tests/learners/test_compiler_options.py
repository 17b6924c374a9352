"""The training step built with the XLA options :func:`choose_compiler_options` picks on the CPU
(YNNPACK for single matrix products only, docs/benchmarks.md#compiler-options) gives the updates of
XLA's default build: the options change which library computes the products, not the update.

For every critic (gitd by default, the four in the slow run), the same state and batches go through
two updates of a Nature-torso CQL step (36 x 36 frames, the torso's smallest, to keep each compile to
seconds) built with the picked options and with XLA's defaults: states and metrics agree to float
tolerance (the two builds sum in different orders). The MLP's step is checked the same way for td
(and gitd in the slow run). The options reach the compiled program: its YNNPACK calls are matrix
products, none a convolution.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import YNNPACK_DOTS_ONLY, choose_compiler_options, make_chunk_runner
from offline_gitd.learners.family import make_discrete_family
from tests.critic_fixtures import discrete_batch

SEEDS, UPDATES, BATCH, SIDE, N_ACTIONS = 1, 2, 4, 36, 3
# the paper's Adam epsilon for Atari keeps near-zero gradients (which sum to a different rounding in each
# build) from turning into full-size steps of opposite signs
RTOL, ATOL = 1e-4, 1e-5
OBS_SHAPES = {"nature": (SIDE, SIDE, 4), "mlp": (6,)}
OBS_DTYPES = {"nature": np.uint8, "mlp": np.float32}


@functools.cache
def family(kind: str, torso: str = "nature"):
    critic = CriticConfig(kind=kind, K=None if kind in ("td", "tdrc") else 3, T=1)
    obs = np.zeros((1, *OBS_SHAPES[torso]), OBS_DTYPES[torso])
    return make_discrete_family(
        critic,
        N_ACTIONS,
        obs,
        torso=torso,
        mlp_hidden=() if torso == "nature" else (32, 32),
        head_hidden=16,
        lr=1e-3,
        adam_eps=3.125e-4,
        cql_alpha=0.5,
    )


def batches(torso: str = "nature") -> list[Batch]:
    rng = np.random.default_rng(0)
    lead = (SEEDS, BATCH)

    def obs() -> np.ndarray:
        if torso == "nature":
            return rng.integers(0, 256, (*lead, *OBS_SHAPES[torso]), dtype=np.uint8)
        return rng.normal(size=(*lead, *OBS_SHAPES[torso])).astype(np.float32)

    return [discrete_batch(rng, lead, obs, N_ACTIONS) for _ in range(UPDATES)]


def run(kind: str, options: dict, torso: str = "nature"):
    fam = family(kind, torso)
    state = jax.jit(jax.vmap(fam.init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(SEEDS)))
    return make_chunk_runner(fam.step, "loop", "per-seed", options)(state, batches(torso))


def ynn_calls(compiled_text: str) -> list[str]:
    """The HLO opcodes (``convolution``, ``dot``, ...) each YNNPACK call of a compiled program computes.

    Read from the called computations, not from the call's ``op_name`` metadata: XLA may merge a
    vmapped product and the sum over its mapped axis into one product that keeps the sum's name.
    """
    calls = re.findall(r"fusion\(.*kind=kCustom, calls=(%[\w.]+).*__ynn_fusion", compiled_text)
    opcodes = []
    for name in calls:
        body = compiled_text[compiled_text.index(f"\n{name} ") :]
        body = body[: body.index("\n}")]
        found = re.findall(r"= \S+ (\w+)\(", body)
        opcodes += [op for op in found if op not in ("parameter", "bitcast", "constant", "broadcast")]
    return opcodes


# two compiles of a step per case: by default the CNN's gitd step (the one the options were measured on)
# and the MLP's td step, each critic and torso once; the CNN's td, tdrc and itd steps and the MLP's gitd
# step in the slow run
@pytest.mark.parametrize(
    ("kind", "torso"),
    [
        ("gitd", "nature"),
        ("td", "mlp"),
        *(pytest.param(kind, "nature", marks=pytest.mark.slow) for kind in ("td", "tdrc", "itd")),
        pytest.param("gitd", "mlp", marks=pytest.mark.slow),
    ],
)
def test_the_cpu_build_matches_the_default_build(kind: str, torso: str) -> None:
    options = choose_compiler_options("cpu")
    assert options == YNNPACK_DOTS_ONLY
    (state, metrics), (ref_state, ref_metrics) = run(kind, options, torso), run(kind, {}, torso)
    for got, want in zip(jax.tree.leaves((state, metrics)), jax.tree.leaves((ref_state, ref_metrics)), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)
    # the updates moved the weights, so agreeing is not agreeing on an unchanged state
    init = jax.jit(jax.vmap(family(kind, torso).init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(SEEDS)))
    assert not np.allclose(np.asarray(jax.tree.leaves(init.params)[0]), np.asarray(jax.tree.leaves(state.params)[0]))


def test_the_options_reach_the_compiled_program() -> None:
    fam = family("td")
    state = jax.jit(fam.init)(jax.random.PRNGKey(0))
    batch = jax.tree.map(lambda x: x[0], batches()[0])
    lowered = jax.jit(fam.step).lower(state, batch)
    # the pinned jaxlib hands the CNN's convolutions and products to YNNPACK by default; with the
    # options only the products go
    default = ynn_calls(lowered.compile().as_text())
    assert "convolution" in default and "dot" in default
    picked = ynn_calls(lowered.compile(choose_compiler_options("cpu")).as_text())
    assert picked and set(picked) == {"dot"}


def test_options_are_chosen_per_backend() -> None:
    assert choose_compiler_options("cpu") == YNNPACK_DOTS_ONLY
    assert choose_compiler_options("gpu") == {}
    # a caller's edits do not leak into the constant
    choose_compiler_options("cpu")["xla_cpu_enable_fast_math"] = True
    assert choose_compiler_options("cpu") == YNNPACK_DOTS_ONLY
