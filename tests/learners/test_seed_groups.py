"""Seeds in groups over the CPU devices give the updates of one vmapped program, to float rounding
(offline_gitd/learners/seed_groups.py, docs/benchmarks.md#seeds-over-the-cores).

The test processes have two CPU devices (tests/conftest.py, as the command line asks for on a
2-core machine), so the groups run on devices of their own here, as in a run.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.drivers import choose_driver, make_chunk_runner
from offline_gitd.learners.family import make_discrete_family
from offline_gitd.learners.seed_groups import cpu_seed_devices, over_devices, seed_groups
from tests.critic_fixtures import discrete_batch

UPDATES, BATCH, N_ACTIONS = 3, 6, 3
RTOL, ATOL = 1e-5, 1e-6  # float rounding: a batched product of 3 seeds may round unlike one of 5


@pytest.mark.parametrize("seeds", range(1, 12))
@pytest.mark.parametrize("groups", range(1, 5))
def test_groups_are_contiguous_even_and_cover_every_seed(seeds: int, groups: int) -> None:
    found = seed_groups(seeds, groups)
    assert len(found) == min(seeds, groups)
    assert [s.start for s in found] == [0, *[s.stop for s in found[:-1]]] and found[-1].stop == seeds
    sizes = [s.stop - s.start for s in found]
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_only_the_scanned_vmapped_step_on_the_cpu_is_grouped() -> None:
    assert len(jax.devices("cpu")) == 2, "tests/conftest.py asks XLA for two CPU devices"
    assert cpu_seed_devices("scan", "vmap", "cpu") == tuple(jax.devices("cpu"))
    assert cpu_seed_devices("loop", "vmap", "cpu") == ()
    assert cpu_seed_devices("scan", "per-seed", "cpu") == ()
    assert cpu_seed_devices("scan", "vmap", "gpu") == ()


@functools.cache
def family(kind: str, torso: str):
    critic = CriticConfig(kind=kind, K=None if kind == "td" else 3, T=1)
    common = dict(mlp_hidden=(8, 8), head_hidden=8, lr=1e-2, adam_eps=1e-8, cql_alpha=0.5)
    if torso == "minatar":  # the patches convolution, as on the CPU
        return make_discrete_family(critic, N_ACTIONS, np.zeros((1, 10, 10, 2), np.uint8), torso="minatar", **common)
    return make_discrete_family(critic, N_ACTIONS, np.zeros((1, 4), np.float32), torso="mlp", **common)


def chunk(torso: str, seeds: int) -> Batch:
    """Leaves [UPDATES, seeds, BATCH, ...]: a different batch for every update and seed."""
    rng = np.random.default_rng(seeds)
    lead = (UPDATES, seeds, BATCH)

    def obs() -> np.ndarray:
        if torso == "minatar":
            return rng.integers(0, 2, (*lead, 10, 10, 2)).astype(np.uint8)
        return rng.normal(size=(*lead, 4)).astype(np.float32)

    return discrete_batch(rng, lead, obs, N_ACTIONS)


# Each case compiles a scanned step three times (whole, two groups, up to four): by default two cases
# that between them take every seed count (5: uneven groups, more groups than devices; 2: fewer seeds
# than groups), critic and torso once; the other six combinations in the slow run.
GROUP_CASES = [
    (seeds, kind, torso)
    if (seeds, kind, torso) in {(5, "gitd", "mlp"), (2, "td", "minatar")}
    else pytest.param(seeds, kind, torso, marks=pytest.mark.slow)
    for seeds in (5, 2)
    for kind in ("td", "gitd")
    for torso in ("mlp", "minatar")
]


@pytest.mark.parametrize(("seeds", "kind", "torso"), GROUP_CASES)
def test_grouped_seeds_update_as_one_program_does(kind: str, torso: str, seeds: int) -> None:
    fam = family(kind, torso)
    run = make_chunk_runner(fam.step, "scan", "vmap")
    states = jax.jit(jax.vmap(fam.init))(jax.vmap(jax.random.PRNGKey)(jnp.arange(seeds)))
    batches = chunk(torso, seeds)
    whole = run(jax.tree.map(jnp.copy, states), batches)
    for devices in (jax.devices("cpu"), jax.devices("cpu") * 2):  # two groups; then up to four, devices reused
        grouped = over_devices(run, devices)(jax.tree.map(jnp.copy, states), batches)
        assert jax.tree.structure(grouped) == jax.tree.structure(whole)
        for got, want in zip(jax.tree.leaves(grouped), jax.tree.leaves(whole), strict=True):
            assert got.shape == want.shape and got.devices() == {jax.devices("cpu")[0]}
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    ("torso", "backend", "chunks", "driver"),
    [
        ("nature", "cpu", True, "loop"),  # XLA's convolutions stay out of scan bodies on the CPU
        ("impala", "cpu", True, "loop"),
        ("minatar", "cpu", True, "scan"),  # patches: offline chunks are scanned
        ("minatar", "cpu", False, "loop"),  # one update per env step online
        ("mlp", "cpu", False, "scan"),
        ("nature", "gpu", False, "scan"),
    ],
)
def test_auto_driver(torso: str, backend: str, chunks: bool, driver: str) -> None:
    assert choose_driver("auto", torso, backend, chunks=chunks) == driver
    assert choose_driver("loop", torso, backend, chunks=chunks) == "loop"
