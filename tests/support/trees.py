"""Comparing pytrees leaf by leaf, for the tests that check one computation against another."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def assert_trees_close(actual: Any, expected: Any, rtol: float = 2e-5, atol: float = 2e-5) -> None:
    """Same structure, same shapes, and every leaf equal to float tolerance; a failure names the leaf."""
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for path, a, e in zip(
        jax.tree_util.tree_leaves_with_path(actual), jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True
    ):
        assert np.shape(a) == np.shape(e), path[0]
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol, err_msg=str(path[0]))
