"""Every network the package builds goes through every JAX transformation (docs/critics.md#networks).

``jax.grad``, ``jax.jvp``, ``jax.jacfwd``, ``jax.jacrev``, ``jax.hessian`` and ``jax.vmap`` of each,
per torso, per head layout and for the continuous learners' own networks. Researchers take
Jacobian-vector products of Q-networks (NTK, feature-rank and sensitivity analyses), so the
products' gradient rule (offline_gitd/networks/dense.py) must not refuse forward mode.

The reference is the same network built from ``flax.linen.Dense`` and a plain product in the
patches convolution (no rule of the package's), with the same parameters: every derivative here
must equal its derivative to float tolerance, and first derivatives also central differences.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.choices import HEAD_LAYOUTS, TORSOS
from offline_gitd.learners import actor, bc, iql
from offline_gitd.networks import MultiHeadNetwork, conv, heads, make_torso, minatar, torsos

# every module that builds the package's Dense, and so the layer the reference replaces
MODULES_WITH_DENSE = (heads, minatar, torsos, actor, bc, iql)
RTOL, ATOL = 1e-4, 1e-5
# one observation's shape per torso: the smallest images each CNN reads, MinAtar's boards, vectors
OBS_SHAPES = {"nature": (36, 36, 4), "impala": (12, 12, 3), "impala-gap": (12, 12, 3), "minatar": (10, 10, 4)}
BATCH, OUTPUTS = 2, 3


class Case:
    """A network as ``apply(params, x) -> [BATCH, OUTPUTS]`` (a fixed random projection of its
    outputs, so that Jacobians stay small), its parameters, an input and a direction in both."""

    def __init__(self, name: str, outputs: Callable[[Any, jnp.ndarray], jnp.ndarray], params: Any, x: jnp.ndarray):
        self.name, self.params, self.x = name, params, x
        width = jax.eval_shape(outputs, params, x).shape[-1]
        projection = jnp.asarray(np.random.default_rng(1).normal(size=(width, OUTPUTS)) / np.sqrt(width), jnp.float32)
        self.apply = lambda p, inputs: jnp.tanh(outputs(p, inputs)) @ projection
        self.dparams, self.dx = _directions(params, x)

    def along(self, t: jnp.ndarray) -> jnp.ndarray:
        """The outputs at params + t0 dparams, x + t1 dx: a function of two numbers."""
        params = jax.tree.map(lambda p, d: p + t[0] * d, self.params, self.dparams)
        return self.apply(params, self.x + t[1] * self.dx)


@jax.jit
def _directions(params: Any, x: jnp.ndarray) -> tuple[Any, jnp.ndarray]:
    """A random direction in the parameters and in the input (one program: drawn op by op, a large
    CNN's leaves would each compile their own)."""
    keys = iter(jax.random.split(jax.random.key(2), len(jax.tree.leaves(params)) + 1))
    # each leaf moved at a tenth of its own scale: far enough for a derivative, near enough
    # that central differences over +-1e-3 of it rarely cross a ReLU's kink
    dparams = jax.tree.map(
        lambda p: 0.1 * jnp.sqrt(jnp.mean(p**2)) * jax.random.normal(next(keys), p.shape, p.dtype), params
    )
    return dparams, 0.1 * jax.random.normal(next(keys), x.shape, x.dtype)


def _init(module: nn.Module, x: jnp.ndarray) -> Any:
    """``module``'s parameters from key 0, biases shifted (``_nonzero``), built in one program."""
    return jax.jit(lambda inputs: _nonzero(module.init(jax.random.key(0), inputs)))(x)


def _input(shape: tuple[int, ...], seed: int = 0) -> jnp.ndarray:
    return jnp.asarray(np.random.default_rng(seed).uniform(0.0, 1.0, size=(BATCH, *shape)), jnp.float32)


def _case(name: str) -> Case:
    """The network ``name`` (a torso, a head layout over a small MLP, or a continuous learner's
    own network) with every output flattened to [BATCH, width]."""
    x = _input(OBS_SHAPES.get(name, (5,)))
    if name in TORSOS:
        torso = make_torso(name, (16, 8))
        return Case(name, torso.apply, _init(torso, x), x)
    if name in HEAD_LAYOUTS:
        # Q-heads only: the H-heads read stop-gradient features, which differences would see
        net = MultiHeadNetwork(make_torso("mlp", (8,)), name, num_q=3, num_h=0, outputs=4, head_hidden=6)

        def heads_out(p: Any, inputs: jnp.ndarray) -> jnp.ndarray:
            return net.q_values(p, inputs).transpose(1, 0, 2).reshape(BATCH, -1)  # [heads, B, outputs]

        return Case(name, heads_out, _init(net, x), x)
    if name == "policy":
        policy = actor.TanhGaussianPolicy(act_dim=2, hidden=(8, 8))
        outputs = lambda p, inputs: jnp.concatenate(policy.apply(p, inputs), axis=-1)  # noqa: E731
        return Case(name, outputs, _init(policy, x), x)
    value = iql.ValueNetwork((8, 8))
    outputs = lambda p, inputs: value.apply(p, inputs)[:, None]  # noqa: E731
    return Case(name, outputs, _init(value, x), x)


def _nonzero(params: Any) -> Any:
    """Biases start at zero; shift them so that no derivative hides behind one (kernels are left
    alone: shifted too, a wide layer's outputs would saturate the projection's tanh)."""
    return jax.tree_util.tree_map_with_path(lambda path, p: p + 0.05 if "bias" in str(path[-1]) else p, params)


CASES = [*TORSOS, *HEAD_LAYOUTS, "policy", "value"]
# Each case of test_every_transformation compiles 17 derivative programs: the large CNNs about a
# minute each on 2 cores, the others ~7 s a case. By default it takes one network of each kind (the
# MinAtar conv torso, the per-head layout over an MLP torso, the continuous learners' policy); the
# rest, which build the same Dense and patches product into other shapes, are slow. Every network's
# jvp (test_jvp_of_every_network) runs by default.
EVERY_TRANSFORMATION_BY_DEFAULT = ("minatar", "independent", "policy")
EVERY_TRANSFORMATION = [
    n if n in EVERY_TRANSFORMATION_BY_DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in CASES
]


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Make every network build ``flax.linen.Dense`` and a plain patches product until the test ends."""

    def use() -> None:
        for module in MODULES_WITH_DENSE:
            monkeypatch.setattr(module, "Dense", nn.Dense)
        monkeypatch.setattr(conv, "dense_product", lambda x, kernel: x @ kernel)

    return use


def _close(actual: Any, expected: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        assert np.shape(a) == np.shape(e)
        assert np.all(np.isfinite(np.asarray(a)))
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol)


TS = jnp.asarray([[0.0, 0.0], [0.1, -0.2], [-0.3, 0.05]], jnp.float32)  # points along the direction


def _functions(case: Case) -> dict[str, Callable[..., Any]]:
    """The case's transformations, each jitted (its own program: the reference recompiles them)."""
    total = lambda t: jnp.sum(jnp.sin(case.along(t)))  # noqa: E731 - a scalar for grad and hessian
    return {
        "jvp": jax.jit(lambda p, x, dp, dx: jax.jvp(case.apply, (p, x), (dp, dx))),
        "grad": jax.jit(jax.grad(lambda p, x: jnp.sum(jnp.sin(case.apply(p, x))), argnums=(0, 1))),
        "jacfwd": jax.jit(jax.jacfwd(case.along)),
        "jacrev": jax.jit(jax.jacrev(case.along)),
        "hessian": jax.jit(jax.hessian(total)),
        "grad along": jax.jit(jax.grad(total)),
        "jvp along": jax.jit(lambda t: jax.jvp(case.along, (t,), (jnp.ones(2),))),
    }


def _differences(case: Case, eps: float = 1e-3) -> jnp.ndarray:
    """Central differences of the outputs along (dparams, dx)."""
    along = jax.jit(case.along)  # one program for both points (run eagerly, a CNN compiles op by op)
    ahead, behind = along(jnp.asarray([eps, eps])), along(jnp.asarray([-eps, -eps]))
    return (ahead - behind) / (2 * eps)


def _check_against_differences(tangent: jnp.ndarray, differences: jnp.ndarray) -> None:
    """float32 differences over thousands of ReLUs: within a tenth of the derivative's size (a
    missing or doubled term is of its whole size); the reference checks to float tolerance."""
    assert np.abs(np.asarray(tangent)).max() > 1e-2  # a derivative that is there to compare
    np.testing.assert_allclose(tangent, differences, atol=0.1 * float(np.abs(differences).max()))


@pytest.mark.parametrize("name", CASES)
def test_jvp_of_every_network(name: str, reference: Callable[[], None]) -> None:
    """jax.jvp in parameters and input together equals central differences and the flax network's."""
    case = _case(name)
    jvp = jax.jit(lambda p, x, dp, dx: jax.jvp(case.apply, (p, x), (dp, dx)))
    ours = jvp(case.params, case.x, case.dparams, case.dx)
    _check_against_differences(ours[1], _differences(case))
    reference()
    _close(
        ours,
        jax.jit(lambda p, x, dp, dx: jax.jvp(case.apply, (p, x), (dp, dx)))(case.params, case.x, case.dparams, case.dx),
    )


@pytest.mark.parametrize("name", EVERY_TRANSFORMATION)
def test_every_transformation(name: str, reference: Callable[[], None]) -> None:
    """jvp equals central differences; jacfwd equals jacrev; the Hessian is symmetric; vmap of
    grad, jvp, jacfwd and hessian (over points, over per-seed parameters with a shared input and
    over inputs with shared parameters) equals each derivative taken one at a time; and grad, jvp,
    jacfwd and hessian equal the flax network's, to float tolerance."""
    case = _case(name)
    f = _functions(case)
    t0 = TS[0]
    jvp, grad, jacfwd, hessian = (
        f["jvp"](case.params, case.x, case.dparams, case.dx),
        f["grad"](case.params, case.x),
        f["jacfwd"](t0),
        f["hessian"](t0),
    )
    _check_against_differences(jvp[1], _differences(case))
    _close(jacfwd, f["jacrev"](t0))
    np.testing.assert_allclose(hessian, hessian.T, rtol=RTOL, atol=ATOL)
    # vmapped, against the same jitted derivatives called point by point
    one_by_one = lambda fn, *args: jax.tree.map(lambda *xs: jnp.stack(xs), *(fn(*a) for a in zip(*args)))  # noqa: E731
    _close(jax.jit(jax.vmap(jax.grad(lambda t: jnp.sum(jnp.sin(case.along(t))))))(TS), one_by_one(f["grad along"], TS))
    _close(jax.jit(jax.vmap(lambda t: jax.jvp(case.along, (t,), (jnp.ones(2),))))(TS), one_by_one(f["jvp along"], TS))
    _close(jax.jit(jax.vmap(jax.jacfwd(case.along)))(TS), one_by_one(f["jacfwd"], TS))
    _close(jax.jit(jax.vmap(jax.hessian(lambda t: jnp.sum(jnp.sin(case.along(t))))))(TS), one_by_one(f["hessian"], TS))
    seeds = jax.tree.map(lambda p, d: jnp.stack([p, p + 0.1 * d, p - 0.2 * d]), case.params, case.dparams)
    dseeds = jax.tree.map(lambda d: jnp.stack([d, -d, 0.5 * d]), case.dparams)
    unstack = lambda tree: [jax.tree.map(lambda leaf: leaf[i], tree) for i in range(3)]  # noqa: E731
    per_seed = jax.jit(jax.vmap(lambda p, dp: jax.jvp(case.apply, (p, case.x), (dp, case.dx))))
    _close(
        per_seed(seeds, dseeds),
        one_by_one(lambda p, dp: f["jvp"](p, case.x, dp, case.dx), unstack(seeds), unstack(dseeds)),
    )
    inputs = jnp.stack([case.x, case.x + 0.1 * case.dx, case.x * 0.5])
    per_input = jax.jit(jax.vmap(lambda x, dx: jax.jvp(case.apply, (case.params, x), (case.dparams, dx))))
    _close(
        per_input(inputs, -inputs),
        one_by_one(lambda x, dx: f["jvp"](case.params, x, case.dparams, dx), inputs, -inputs),
    )
    reference()
    expected = _functions(case)
    _close(jvp, expected["jvp"](case.params, case.x, case.dparams, case.dx))
    _close(grad, expected["grad"](case.params, case.x))
    _close(jacfwd, expected["jacfwd"](t0))
    _close(hessian, expected["hessian"](t0))


def test_second_derivatives_in_every_parameter() -> None:
    """The full Hessian of a small MLP critic over all its parameters, against the flax network's
    (the reference swapped in by hand: one network, both layers)."""
    net = MultiHeadNetwork(make_torso("mlp", (3,)), "shared_linear", num_q=2, num_h=0, outputs=2)
    x = _input((2,))
    params = _init(net, x)
    loss = lambda p: jnp.sum(jnp.sin(net.q_values(p, x)))  # noqa: E731
    # jitted: run eagerly, a Hessian over every parameter pair dispatches thousands of small ops
    # (~10 s); each jit traces when called, so the second one traces the flax network
    ours = jax.jit(jax.hessian(loss))(params)
    original = torsos.Dense, heads.Dense
    try:
        torsos.Dense = heads.Dense = nn.Dense
        expected = jax.jit(jax.hessian(loss))(params)
    finally:
        torsos.Dense, heads.Dense = original
    _close(ours, expected)
