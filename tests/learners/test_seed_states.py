"""Every seed's fresh state comes from one function (docs/architecture.md#twin-pipelines).

The loops, a resumed run's template, ``--init-from`` and a trained run read back all stack
``family.init(PRNGKey(seed))`` over their seeds through ``seed_states``: each row is that seed's
own init bit for bit, whatever the seeds' order, compiled or op by op.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from offline_gitd.critics import CriticConfig
from offline_gitd.learners.family import make_discrete_family, seed_states


@pytest.fixture(scope="module")
def family():
    obs = np.zeros((1, 4), np.float32)
    return make_discrete_family(
        CriticConfig(kind="td", K=None, T=1), 3, obs, torso="mlp", head_hidden=8,
        mlp_hidden=(8,), lr=1e-2, adam_eps=1e-8, cql_alpha=0.5,
    )  # fmt: skip


@pytest.mark.parametrize("compiled", [True, False])
def test_each_row_is_its_seeds_own_init(family, compiled):
    seeds = [7, 0, 3]
    states = seed_states(family, seeds, compiled=compiled)
    for row, seed in enumerate(seeds):
        alone = family.init(jax.random.PRNGKey(seed))
        for got, want in zip(jax.tree.leaves(states), jax.tree.leaves(alone), strict=True):
            np.testing.assert_array_equal(np.asarray(got)[row], np.asarray(want))


def test_seeds_differ(family):
    states = seed_states(family, [1, 2])
    leaves = [np.asarray(x) for x in jax.tree.leaves(states) if np.issubdtype(np.asarray(x).dtype, np.floating)]
    assert any(not np.array_equal(x[0], x[1]) for x in leaves if x[0].size > 1)
