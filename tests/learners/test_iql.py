"""IQL against independent computations (Kostrikov, Nair & Levine 2022, Eq. 5-7 and Algorithm 1).

The references are written from the paper's formulas with one network call per ensemble, in plain
jnp / numpy: the expectile loss on the target critics' min, the critic's regression on
r + g V(s'), and advantage-weighted regression with the tanh change of variables written out
(log N(atanh a) - log(1 - a^2)). Values and gradients are compared; then one whole step against the
paper's update order, the critics IQL refuses, determinism, seeds under vmap, and two learning
checks (V converges to the expectile of a known distribution; the policy moves to the better actions).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.scipy.stats import norm

from offline_gitd.batch import Batch
from offline_gitd.critic_registry import CriticSpec, register_critic, unregister_critic
from offline_gitd.critics import CriticConfig
from offline_gitd.errors import ConfigError
from offline_gitd.learners.iql import (
    IQLFamily,
    IQLState,
    awr_actor_loss,
    iql_critic_loss,
    make_iql_family,
    target_q,
    value_loss,
)
from tests.learners.continuous_fixtures import (
    ACT_DIM,
    BATCH,
    HIDDEN,
    HIGH,
    LOW,
    OBS_DIM,
    ensemble,
    env_batch,
    relative_error,
    unit_batch,
)

RTOL = 1e-5
EXPECTILE, BETA, TAU = 0.7, 3.0, 0.05


@functools.cache
def make_family(kind: str = "td", lr: float = 1e-3) -> IQLFamily:
    return make_iql_family(
        CriticConfig(kind=kind, tau=TAU, heads="independent"),
        ACT_DIM,
        np.zeros((1, OBS_DIM), np.float32),
        (LOW, HIGH),
        mlp_hidden=(HIDDEN, HIDDEN),
        lr=lr,
        adam_eps=1e-8,
        expectile=EXPECTILE,
        temperature=BETA,
    )


# Families hold a numpy observation example and are not hashable: cache by the (cached) family's identity.
_compiled: dict[tuple[int, str], object] = {}


def compiled(family: IQLFamily, name: str):
    key = (id(family), name)
    if key not in _compiled:
        _compiled[key] = jax.jit(getattr(family, name))
    return _compiled[key]


def initial_state(family: IQLFamily, seed: int) -> IQLState:
    return compiled(family, "init")(jax.random.key(seed))


def tree_equal(a, b) -> bool:
    leaves = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in leaves)


def reference_q_hat(family: IQLFamily, frozen, obs, action):
    """min(Q0^1, Q0^2)(s, a), one network call per target critic."""
    net = family.net
    return jnp.minimum(*[net.q_values(ensemble(frozen["target"], j), obs, action)[0] for j in range(2)])


def reference_value_loss(family: IQLFamily, value_params, q_hat, obs):
    """Eq. 5: mean |tau - 1(u < 0)| u^2, u = Q_hat - V(s)."""
    u = q_hat - family.value.apply(value_params, obs)
    return jnp.mean(jnp.where(u < 0, 1.0 - EXPECTILE, EXPECTILE) * u**2)


def reference_log_prob(family: IQLFamily, actor_params, obs, action):
    """log pi(a|s) of a = tanh(u), u ~ N(mu, sigma): log N(atanh a; mu, sigma) - sum log(1 - a^2)."""
    mean, log_std = family.actor.module.apply(actor_params, obs)
    u = 0.5 * jnp.log((1.0 + action) / (1.0 - action))
    return (norm.logpdf(u, mean, jnp.exp(log_std)) - jnp.log(1.0 - action**2)).sum(-1)


def reference_actor_loss(family: IQLFamily, actor_params, obs, action, q_hat, v):
    """Eq. 7 with the authors' clip: -mean min(exp(beta (Q_hat - V)), 100) log pi(a|s)."""
    weight = jax.lax.stop_gradient(jnp.minimum(jnp.exp(BETA * (q_hat - v)), 100.0))
    return -jnp.mean(weight * reference_log_prob(family, actor_params, obs, action))


def reference_critic_loss(family: IQLFamily, params, value_params, batch):
    """Eq. 6 on both ensembles (with the package's 1/2): mean w sum_j 1/2 (r + g V(s') - Q^j(s, a))^2."""
    y = jax.lax.stop_gradient(batch.reward + batch.discount * family.value.apply(value_params, batch.next_obs))
    squared = sum(
        0.5 * (y - family.net.q_values(ensemble(params, j), batch.obs, batch.action)[0]) ** 2 for j in range(2)
    )
    return jnp.mean(batch.weight * squared)


def test_value_loss_is_expectile_regression_on_the_target_min() -> None:
    """Q_hat = min of the two frozen critics; Eq. 5 on targets on both sides of V(s)."""
    family = make_family()
    state, other = initial_state(family, 0), initial_state(family, 1)
    batch = unit_batch(1)
    q_hat = reference_q_hat(family, other.frozen, batch.obs, batch.action)
    np.testing.assert_allclose(
        np.asarray(target_q(family.net, other.frozen, batch.obs, batch.action)), np.asarray(q_hat), rtol=RTOL
    )
    v = np.asarray(family.value.apply(state.value_params, batch.obs))
    q_hat = jnp.asarray(v + np.array([-1.0, 0.5, -0.2, 0.3, 2.0, -0.7]), jnp.float32)  # both sides of the asymmetry
    (value, v_out), grads = jax.jit(
        jax.value_and_grad(lambda p: value_loss(family.value, p, q_hat, batch.obs, EXPECTILE), has_aux=True)
    )(state.value_params)
    expected, expected_grads = jax.jit(jax.value_and_grad(lambda p: reference_value_loss(family, p, q_hat, batch.obs)))(
        state.value_params
    )
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(v_out), v, rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL


def test_actor_loss_is_awr_with_the_tanh_gaussian_log_prob() -> None:
    """The weights clip at 100 where beta A > log 100; log pi(a|s) checked in float64 too."""
    family = make_family()
    state = initial_state(family, 2)
    batch = unit_batch(3)
    rng = np.random.default_rng(0)
    v = jnp.asarray(rng.normal(size=BATCH), jnp.float32)
    q_hat = v + jnp.asarray([-1.0, 0.0, 0.5, 1.0, 2.0, -0.3], jnp.float32)  # exp(3 * 2) > 100: clipped

    (value, aux), grads = jax.jit(
        jax.value_and_grad(
            lambda p: awr_actor_loss(family.actor, p, batch.obs, batch.action, q_hat, v, BETA), has_aux=True
        )
    )(state.actor_params)
    expected, expected_grads = jax.jit(
        jax.value_and_grad(lambda p: reference_actor_loss(family, p, batch.obs, batch.action, q_hat, v))
    )(state.actor_params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < 1e-4
    weights = np.minimum(np.exp(BETA * (np.asarray(q_hat, np.float64) - np.asarray(v, np.float64))), 100.0)
    np.testing.assert_allclose(float(aux["awr_weight"]), weights.mean(), rtol=RTOL)

    mean, log_std = (np.asarray(x, np.float64) for x in family.actor.module.apply(state.actor_params, batch.obs))
    a = np.asarray(batch.action, np.float64)
    u, sigma = np.arctanh(a), np.exp(log_std)
    log_prob = (-0.5 * ((u - mean) / sigma) ** 2 - np.log(sigma * np.sqrt(2 * np.pi)) - np.log(1 - a**2)).sum(-1)
    np.testing.assert_allclose(float(aux["data_log_prob"]), log_prob.mean(), rtol=1e-4)

    # Data actions at the box's edges are kept inside (-1, 1): the log-probability stays finite.
    edge = family.box.normalise(jnp.asarray([LOW, HIGH], jnp.float32))
    _, edge_aux = awr_actor_loss(family.actor, state.actor_params, batch.obs[:2], edge, q_hat[:2], v[:2], BETA)
    assert np.isfinite(float(edge_aux["data_log_prob"]))


def test_critic_regresses_on_r_plus_g_v_next() -> None:
    """Eq. 6 on both ensembles; V(s') is a constant of the critic's loss (no gradient reaches V)."""
    family = make_family()
    state, other = initial_state(family, 4), initial_state(family, 5)
    batch = unit_batch(6)

    def ours(params, value_params):
        next_value = family.value.apply(value_params, batch.next_obs)
        return iql_critic_loss(family.critic, family.net, params, batch, next_value)[0]

    value, (grads, value_grads) = jax.jit(jax.value_and_grad(ours, argnums=(0, 1)))(
        state.critic_params, other.value_params
    )
    expected, expected_grads = jax.jit(
        jax.value_and_grad(lambda p: reference_critic_loss(family, p, other.value_params, batch))
    )(state.critic_params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(value_grads))


def test_one_step_follows_the_papers_update_order() -> None:
    """Algorithm 1 as the authors run it: V on the old target critics; the policy with the new V; Q on
    r + g V_new(s'); then theta_0 <- tau theta + (1 - tau) theta_0. Rebuilt here from the reference
    losses and compared, update by update, with the family's step on env-unit actions. The step
    starts after three others (Adam's first step is lr sign(g), blind to the weights' scale) and
    with a large learning rate, so that taking the old V anywhere changes the updates visibly."""
    family = make_family(lr=0.05)
    step = compiled(family, "step")
    state = initial_state(family, 7)
    for t in range(3):
        state, _ = step(state, env_batch(20 + t))
    env = env_batch(8)
    unit = env._replace(action=jnp.asarray(2.0 * (np.asarray(env.action) - LOW) / (HIGH - LOW) - 1.0, jnp.float32))
    optimizers = family.optimizers

    def apply(optimizer, params, grads, opt_state):
        return optax.apply_updates(params, optimizer.update(grads, opt_state, params)[0])

    @jax.jit
    def reference(state):
        q_hat = reference_q_hat(family, state.frozen, unit.obs, unit.action)
        value_grads = jax.grad(lambda p: reference_value_loss(family, p, q_hat, unit.obs))(state.value_params)
        value_params = apply(optimizers.value, state.value_params, value_grads, state.value_opt_state)
        v = family.value.apply(value_params, unit.obs)
        actor_grads = jax.grad(lambda p: reference_actor_loss(family, p, unit.obs, unit.action, q_hat, v))
        actor_params = apply(
            optimizers.actor, state.actor_params, actor_grads(state.actor_params), state.actor_opt_state
        )
        critic_grads = jax.grad(lambda p: reference_critic_loss(family, p, value_params, unit))(state.critic_params)
        critic_params = apply(optimizers.critic, state.critic_params, critic_grads, state.critic_opt_state)
        target = jax.tree.map(lambda o, f: TAU * o + (1 - TAU) * f, critic_params, state.frozen["target"])
        return value_params, actor_params, critic_params, target

    def moved(new, old):
        return jax.tree.map(lambda n, o: np.asarray(n, np.float64) - np.asarray(o, np.float64), new, old)

    new, aux = step(state, env)
    value_params, actor_params, critic_params, target = reference(state)
    assert relative_error(moved(new.value_params, state.value_params), moved(value_params, state.value_params)) < 1e-4
    assert relative_error(moved(new.actor_params, state.actor_params), moved(actor_params, state.actor_params)) < 1e-4
    assert (
        relative_error(moved(new.critic_params, state.critic_params), moved(critic_params, state.critic_params)) < 1e-4
    )
    assert (
        relative_error(moved(new.frozen["target"], state.frozen["target"]), moved(target, state.frozen["target"]))
        < 1e-4
    )
    assert int(new.step) == 4
    assert set(aux) == {
        "loss",
        "value_loss",
        "actor_loss",
        "v_mean",
        "awr_weight",
        "data_log_prob",
        "bellman_error",
        "q_mean",
        "td_abs",
    }


def stack(*trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def test_deterministic_and_seeds_vmapped_equal_each_seed_alone() -> None:
    family = make_family()
    step = compiled(family, "step")
    singles = [initial_state(family, i) for i in range(2)]
    states = stack(*singles)
    seeded = jax.jit(jax.vmap(family.step))
    for t in range(2):
        batch = stack(env_batch(2 * t), env_batch(2 * t + 1))
        states, aux = seeded(states, batch)
        for i in range(2):
            singles[i], single_aux = step(singles[i], jax.tree.map(lambda x: x[i], batch))
            for a, b in zip(jax.tree.leaves((states, aux)), jax.tree.leaves((singles[i], single_aux)), strict=True):
                np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-5, atol=1e-6)
    again = initial_state(family, 0)
    for t in range(2):
        again, _ = step(again, env_batch(2 * t))
    assert tree_equal(again, singles[0])
    assert not tree_equal(singles[0].critic_params, singles[1].critic_params)


def test_critics_with_chained_or_online_targets_are_refused() -> None:
    kwargs = dict(mlp_hidden=(4,), lr=1e-3, adam_eps=1e-8, expectile=EXPECTILE, temperature=BETA)
    obs = np.zeros((1, OBS_DIM), np.float32)
    for kind in ("tdrc", "itd", "gitd"):
        with pytest.raises(ConfigError, match="IQL takes critics that bootstrap from a target network only"):
            make_iql_family(CriticConfig(kind=kind), ACT_DIM, obs, (LOW, HIGH), **kwargs)
    for bad in (dict(expectile=1.0), dict(expectile=0.0), dict(temperature=-1.0)):
        with pytest.raises(ConfigError):
            make_iql_family(CriticConfig(kind="td", tau=TAU), ACT_DIM, obs, (LOW, HIGH), **{**kwargs, **bad})
    # A plug-in critic with frozen targets is taken: it reads V(s') as its bootstrap value.
    register_critic(CriticSpec("iql_test_critic", "offline_gitd.critics.td:td_loss", "test", targets="frozen"))
    try:
        family = make_iql_family(CriticConfig(kind="iql_test_critic", tau=TAU), ACT_DIM, obs, (LOW, HIGH), **kwargs)
        assert family.critic.kind == "iql_test_critic"
    finally:
        unregister_critic("iql_test_critic")


def expectile_of(samples: np.ndarray, tau: float) -> float:
    """The tau-expectile m: tau E[(x - m)_+] = (1 - tau) E[(m - x)_+], by bisection."""
    lo, hi = samples.min(), samples.max()
    for _ in range(100):
        m = 0.5 * (lo + hi)
        gap = tau * np.maximum(samples - m, 0).mean() - (1 - tau) * np.maximum(m - samples, 0).mean()
        lo, hi = (m, hi) if gap > 0 else (lo, m)
    return 0.5 * (lo + hi)


def test_value_converges_to_the_expectile_of_q() -> None:
    """One state whose Q_hat over the data actions is a known sample (exponential: skewed, so the
    0.7-expectile is far from the mean): 1,500 Adam steps on Eq. 5 put V(s) on that expectile."""
    family = make_family()
    samples = np.random.default_rng(0).exponential(2.0, 256)
    q_hat = jnp.asarray(samples, jnp.float32)
    obs = jnp.tile(jnp.asarray([[0.3, -0.2, 0.1]], jnp.float32), (samples.size, 1))
    adam = optax.adam(1e-2)

    @jax.jit
    def train(params):
        def body(carry, _):
            params, opt_state = carry
            grads = jax.grad(lambda p: value_loss(family.value, p, q_hat, obs, EXPECTILE)[0])(params)
            updates, opt_state = adam.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), None

        return jax.lax.scan(body, (params, adam.init(params)), None, length=1500)[0][0]

    v = float(family.value.apply(train(initial_state(family, 0).value_params), obs[:1])[0])
    target = expectile_of(samples, EXPECTILE)
    assert abs(v - target) < 0.02 * target
    assert abs(target - samples.mean()) > 0.2  # the expectile, not the mean


def test_bandit_policy_picks_the_better_data_action() -> None:
    """One state, half the data at a good action (reward 1), half at a bad one (reward 0), no
    bootstrap. Behaviour cloning would sit between them; AWR weights the good one e^beta = 20 times
    more, so after 300 updates the policy's action is within 10% of their distance from the good
    one, and V(s) is the 0.7-expectile of the rewards: 0.7 (0.7 * 0.5 (1 - m) = 0.3 * 0.5 m)."""
    steps, batch_size = 300, 64
    family = make_family(lr=3e-3)
    rng = np.random.default_rng(1)
    good, bad = np.array([1.0, 0.7]), np.array([-1.0, 0.2])
    obs = np.tile(np.array([0.5, -0.5, 1.0], np.float32), (steps, batch_size, 1))
    is_good = rng.random((steps, batch_size)) < 0.5
    action = np.where(is_good[..., None], good, bad) + rng.normal(0, 0.02, (steps, batch_size, ACT_DIM))
    batches = Batch(
        obs=obs,
        action=action.astype(np.float32),
        reward=is_good.astype(np.float32),
        discount=np.zeros((steps, batch_size), np.float32),
        next_obs=obs,
        weight=np.ones((steps, batch_size), np.float32),
    )
    state, aux = jax.jit(lambda s, b: jax.lax.scan(family.step, s, b))(initial_state(family, 0), batches)
    after = np.asarray(family.act(state, obs[0, :1], None))[0]
    assert np.linalg.norm(after - good) < 0.1 * np.linalg.norm(good - bad)
    assert abs(float(family.value.apply(state.value_params, obs[0, :1])[0]) - 0.7) < 0.05
    bellman = np.asarray(aux["bellman_error"]).sum(-1)
    assert bellman[-30:].mean() < 0.01 * bellman[:30].mean()
