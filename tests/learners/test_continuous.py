"""The continuous family (CQL(H)-SAC / SAC) against independent computations.

Every reference below is written from the papers' formulas, not from the package's losses:
SAC's critic, actor and temperature losses (Haarnoja et al. 2018, Eq. 5-7 and 18), CQL(H)'s
importance-sampled penalty (Kumar et al. 2020, Appendix F), the tanh change of variables (Eq. 21),
and Gi-TD's update (paper Section 4) assembled from per-sample Jacobians as in
``tests/critics/test_critic_gradients.py``. The references evaluate each ensemble and each proposal action
with separate network calls, so the package's stacking, broadcasting and reshaping are checked too.

Only two family shapes are used (td, and gitd with K = 3) and the checks are jitted, so that JAX
compiles each computation once: the whole file runs in well under a minute on two CPU cores.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.stats import norm

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.learners.actor import LOG_STD_MAX, LOG_STD_MIN, squashed_gaussian
from offline_gitd.learners.continuous import ContinuousState, actor_loss, continuous_critic_loss, temperature_loss
from offline_gitd.learners.cql import cql_proposals
from offline_gitd.learners.family import ContinuousFamily, make_continuous_family
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
ALPHA = 0.3  # entropy temperature in the loss checks (not 1, so that a missing factor shows)


@functools.cache
def make_family(kind: str = "td", K: int = 1) -> ContinuousFamily:
    cfg = CriticConfig(kind=kind, K=K, tau=0.005, heads="independent")
    return make_continuous_family(
        cfg,
        ACT_DIM,
        np.zeros((1, OBS_DIM), np.float32),
        (LOW, HIGH),
        mlp_hidden=(HIDDEN, HIDDEN),
        lr=1e-3,
        adam_eps=1e-8,
        cql_alpha=1.0 if kind == "gitd" else 0.0,
        actor_hidden=(HIDDEN, HIDDEN),
        num_cql_samples=3,
    )


def gitd_family() -> ContinuousFamily:
    return make_family("gitd", K=3)


@functools.cache
def _jitted_init(kind: str, K: int):
    return jax.jit(make_family(kind, K).init)


def initial_state(family: ContinuousFamily, seed: int) -> ContinuousState:
    """Initial state of a test family's shape (learning rate and CQL weight do not enter init)."""
    return _cached_state(family.critic.kind, family.critic.K, seed)


@functools.cache
def _cached_state(kind: str, K: int, seed: int) -> ContinuousState:
    return _jitted_init(kind, K)(jax.random.key(seed))


def critic_setup(family: ContinuousFamily, seed: int = 0):
    """Online critics, a *different* theta_0 (another init), next actions a' and log pi(a'|s')."""
    rng = np.random.default_rng(seed)
    next_action = jnp.asarray(rng.uniform(-0.99, 0.99, (BATCH, ACT_DIM)), jnp.float32)
    next_log_prob = jnp.asarray(rng.normal(size=BATCH), jnp.float32)
    return initial_state(family, seed).critic_params, initial_state(family, seed + 1).frozen, next_action, next_log_prob


def q_head(net, params, obs, action, head: int = 0):
    """Head ``head`` of one ensemble's network at (s, a): [B]."""
    return net.q_values(params, obs, action)[head]


def ours_value_and_grad(family, cql_alpha, frozen, batch, next_action, next_log_prob, proposals=None):
    def loss(p):
        return continuous_critic_loss(
            family.critic, family.net, cql_alpha, p, frozen, batch, next_action, next_log_prob, ALPHA, proposals
        )[0]

    return jax.jit(jax.value_and_grad(loss))


def sac_critic_loss(net, params, frozen, batch, next_action, next_log_prob, alpha):
    """Haarnoja et al. 2018 Eq. 5-6 with clipped double Q: weighted mean of sum_j 1/2 (y - Q^j(s, a))^2,
    y = r + g (min(Qbar^1, Qbar^2)(s', a') - alpha log pi(a'|s'))."""
    target_1 = q_head(net, ensemble(frozen["target"], 0), batch.next_obs, next_action)
    target_2 = q_head(net, ensemble(frozen["target"], 1), batch.next_obs, next_action)
    y = jax.lax.stop_gradient(batch.reward + batch.discount * (jnp.minimum(target_1, target_2) - alpha * next_log_prob))
    squared = sum(0.5 * (y - q_head(net, ensemble(params, j), batch.obs, batch.action)) ** 2 for j in range(2))
    return jnp.mean(batch.weight * squared)


def test_td_critic_is_sac() -> None:
    family = make_family("td")
    params, frozen, next_action, next_log_prob = critic_setup(family)
    batch = unit_batch(1)
    value, grads = ours_value_and_grad(family, 0.0, frozen, batch, next_action, next_log_prob)(params)
    expected, expected_grads = jax.jit(
        jax.value_and_grad(lambda p: sac_critic_loss(family.net, p, frozen, batch, next_action, next_log_prob, ALPHA))
    )(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL


def test_td_cql_is_published_cql_h_sac() -> None:
    cql_alpha, n = 2.0, 4
    family = make_family("td")
    params, frozen, next_action, next_log_prob = critic_setup(family)
    batch = unit_batch(2)
    actor_params = initial_state(family, 7).actor_params
    proposals = jax.jit(
        lambda key: cql_proposals(
            lambda o, k: family.actor.sample_action(actor_params, o, k), batch.obs, batch.next_obs, ACT_DIM, n, key
        )
    )(jax.random.key(3))
    # The proposals are Appendix F's: N uniform (density 2^-d), N from pi(.|s), N from pi(.|s').
    actions, log_density = (np.asarray(x, np.float64) for x in proposals)
    assert actions.shape == (BATCH, 3 * n, ACT_DIM) and log_density.shape == (BATCH, 3 * n)
    assert np.all(np.abs(actions) <= 1.0)
    np.testing.assert_allclose(log_density[:, :n], ACT_DIM * math.log(0.5))
    for states, block in ((batch.obs, slice(n, 2 * n)), (batch.next_obs, slice(2 * n, 3 * n))):
        mean, log_std = (np.asarray(x, np.float64)[:, None] for x in family.actor.distribution(actor_params, states))
        a = actions[:, block]
        density = norm_log_pdf(np.arctanh(a), mean, np.exp(log_std)) - np.log(1.0 - a**2)
        np.testing.assert_allclose(log_density[:, block], density.sum(-1), rtol=1e-3, atol=1e-3)

    def published(p):
        """SAC's loss + alpha sum_j mean_b [logsumexp_i (Q^j(s, a_i) - log mu(a_i)) - Q^j(s, a_b)]."""
        penalty = 0.0
        for j in range(2):
            pj = ensemble(p, j)
            q_props = jnp.stack([q_head(family.net, pj, batch.obs, proposals[0][:, i]) for i in range(3 * n)], axis=1)
            logsumexp = jax.nn.logsumexp(q_props - proposals[1], axis=1)
            penalty = penalty + jnp.mean(logsumexp - q_head(family.net, pj, batch.obs, batch.action))
        return sac_critic_loss(family.net, p, frozen, batch, next_action, next_log_prob, ALPHA) + cql_alpha * penalty

    value, grads = ours_value_and_grad(family, cql_alpha, frozen, batch, next_action, next_log_prob, proposals)(params)
    expected, expected_grads = jax.jit(jax.value_and_grad(published))(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL


def norm_log_pdf(u: np.ndarray, mean: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    return -0.5 * ((u - mean) / sigma) ** 2 - np.log(sigma * np.sqrt(2.0 * np.pi))


def weighted_sum(jacobians, coefficients: np.ndarray):
    """sum_{b, k} coefficients[b, k] jacobians[b, k] in float64 (leaves [B, K, ...])."""
    return jax.tree.map(lambda g: np.tensordot(coefficients, np.asarray(g, np.float64), axes=2), jacobians)


def add(a, b):
    return jax.tree.map(lambda x, y: x + y, a, b)


def test_gitd_gradient_follows_the_min_through_the_targets() -> None:
    """Gi-TD on two ensembles: each ensemble e regresses its head k on the shared target
    y_k = r + g V_{k-1}(s'), V_k = min_j Q^j_k(s', a') - alpha log pi(a'|s'), so the target's
    gradient reaches only the argmin ensemble j*_k, with coefficient sum_e H^e_{k+1}(s, a):

        Delta theta^j_k = -delta^j_k dQ^j_k(s, a) + [j = j*_k] (sum_e H^e_{k+1}(s, a)) g dQ^j_k(s', a')
        Delta z^j_k     = (H^j_k - delta^j_k) dH^j_k(s, a)
    """
    family = gitd_family()
    net, K = family.net, family.critic.K
    params, frozen, next_action, next_log_prob = critic_setup(family, seed=4)
    batch = unit_batch(5)
    r, g = np.asarray(batch.reward, np.float64), np.asarray(batch.discount, np.float64)
    mean_w = np.asarray(batch.weight, np.float64) / BATCH
    entropy_term = ALPHA * np.asarray(next_log_prob, np.float64)

    # Per-sample Jacobians of every head, [B, heads, ...], one ensemble at a time.
    q_jacobian = jax.jit(jax.vmap(jax.jacrev(lambda p, o, a: net.q_values(p, o[None], a[None])[:, 0]), (None, 0, 0)))
    h_of = jax.jacrev(lambda hp, p, o, a: net.apply({**p, "h": hp}, o[None], a[None])[1][:, 0])
    h_jacobian = jax.jit(jax.vmap(h_of, (None, None, 0, 0)))
    values_at = jax.jit(lambda p, o, a: net.apply(p, o, a))
    q_sa, h_sa, q_next, q0_next = [], [], [], []
    for e in range(2):
        q, h = values_at(ensemble(params, e), batch.obs, batch.action)
        q_sa.append(np.asarray(q, np.float64))
        h_sa.append(np.asarray(h, np.float64))
        q_next.append(np.asarray(values_at(ensemble(params, e), batch.next_obs, next_action)[0], np.float64))
        theta_0 = ensemble(frozen["target"], e)
        q0_next.append(np.asarray(net.q_values(theta_0, batch.next_obs, next_action)[0], np.float64))
    q_sa, h_sa, q_next, q0_next = map(np.stack, (q_sa, h_sa, q_next, q0_next))  # [E, K|K-1, B], [E, B]
    values = np.concatenate([q0_next.min(0)[None], q_next.min(0)]) - entropy_term  # V_0 .. V_K: [K + 1, B]
    delta = r + g * values[:K] - q_sa  # [E, K, B]
    argmin = q_next.argmin(0)  # j*_k per head and sample: [K, B]
    assert 0 < argmin[: K - 1].sum() < argmin[: K - 1].size  # the min picks each ensemble somewhere

    expected = []
    for e in range(2):
        pe = ensemble(params, e)
        total = weighted_sum(q_jacobian(pe, batch.obs, batch.action), (-mean_w * delta[e]).T)
        # Online head k (0-based, k < K - 1) is bootstrapped by head k + 1, whose H is h_sa[:, k].
        through_target = np.zeros((BATCH, K))
        through_target[:, : K - 1] = (mean_w * g * h_sa.sum(0) * (argmin[: K - 1] == e)).T
        total = add(total, weighted_sum(q_jacobian(pe, batch.next_obs, next_action), through_target))
        h_coefficient = (mean_w * (h_sa[e] - delta[e, 1:])).T
        total["h"] = add(total["h"], weighted_sum(h_jacobian(pe["h"], pe, batch.obs, batch.action), h_coefficient))
        expected.append(total)
    expected = jax.tree.map(lambda a, b: np.stack([a, b]), *expected)

    _, grads = ours_value_and_grad(family, 0.0, frozen, batch, next_action, next_log_prob)(params)
    for group in ("torso", "q", "h"):
        error = relative_error(grads[group], expected[group])
        assert error < RTOL, f"gradient on {group!r} off by {error:.2e}"


def test_actor_and_temperature_losses() -> None:
    """J_pi = mean(alpha log pi(a|s) - min_j mean_k Q^j_k(s, a)), a = tanh(mu + sigma eps), and
    J(alpha) = -log alpha mean(log pi + target_entropy), from the literal formulas."""
    family = gitd_family()
    state = initial_state(family, 0)
    obs = unit_batch(6).obs
    rng = jax.random.key(11)
    net, actor = family.net, family.actor

    def reference(actor_params):
        mean, log_std = actor.module.apply(actor_params, obs)
        u = mean + jnp.exp(log_std) * jax.random.normal(rng, mean.shape)
        # log|d tanh(u)/du| = log sech^2(u) = -2 log cosh(u)
        log_prob = (norm.logpdf(u, mean, jnp.exp(log_std)) + 2.0 * jnp.log(jnp.cosh(u))).sum(-1)
        q = [net.q_values(ensemble(state.critic_params, j), obs, jnp.tanh(u)).mean(0) for j in range(2)]
        return jnp.mean(ALPHA * log_prob - jnp.minimum(*q)), log_prob

    def ours(actor_params, critic_params):
        return actor_loss(actor, net, actor_params, critic_params, ALPHA, obs, rng)

    (value, log_prob), (grads, critic_grads) = jax.jit(jax.value_and_grad(ours, argnums=(0, 1), has_aux=True))(
        state.actor_params, state.critic_params
    )
    (expected, expected_log_prob), expected_grads = jax.jit(jax.value_and_grad(reference, has_aux=True))(
        state.actor_params
    )
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(log_prob), np.asarray(expected_log_prob), rtol=RTOL, atol=1e-5)
    assert relative_error(grads, expected_grads) < 1e-4
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(critic_grads))  # the actor never moves Q

    target = -float(ACT_DIM)
    value, grad = jax.value_and_grad(temperature_loss)(jnp.asarray(-0.7), log_prob, target)
    gap = float(np.mean(np.asarray(log_prob, np.float64) + target))
    np.testing.assert_allclose(float(value), 0.7 * gap, rtol=RTOL)
    np.testing.assert_allclose(float(grad), -gap, rtol=RTOL)
    # Entropy below target (log pi above -target_entropy): descending the loss raises alpha.
    assert float(jax.grad(temperature_loss)(jnp.asarray(-0.7), jnp.full(BATCH, 5.0), target)) < 0


def test_tanh_gaussian_log_prob_is_the_change_of_variables() -> None:
    """log pi(a) = log N(u; mu, sigma) - sum log|d tanh(u)/du|, in float64 (sech^2 written as
    1 / cosh^2, which float64 keeps exact where 1 - tanh^2 would cancel), up to |u| ~ 20, where the
    literal float32 form is -inf."""
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(50, ACT_DIM)) * 3.0
    log_std = rng.uniform(LOG_STD_MIN, LOG_STD_MAX, size=(50, ACT_DIM))
    noise = rng.normal(size=(50, ACT_DIM))
    mean[0], log_std[0], noise[0] = [9.0, -9.5], [0.0, 0.0], [1.0, -0.5]  # u = (10, -10)
    action, log_prob = squashed_gaussian(*(jnp.asarray(x, jnp.float32) for x in (mean, log_std, noise)))
    u = mean + np.exp(log_std) * noise
    expected = (norm_log_pdf(u, mean, np.exp(log_std)) + 2.0 * np.log(np.cosh(u))).sum(-1)
    assert np.abs(u).max() > 10 and np.all(np.isfinite(np.asarray(log_prob)))
    # float32 rounding of u = mean + sigma eps moves log|det| by ~2 |du|: tolerance scales with |u|.
    atol = 1e-6 * np.abs(u).sum(-1).max()
    np.testing.assert_allclose(np.asarray(log_prob, np.float64), expected, rtol=1e-5, atol=atol)
    np.testing.assert_allclose(np.asarray(action, np.float64), np.tanh(u), atol=1e-6)

    family = make_family()
    params = initial_state(family, 0).actor_params
    obs = unit_batch(0).obs
    mean_out, _ = family.actor.distribution(params, obs)
    mode = np.asarray(family.actor.mode_action(params, obs))
    np.testing.assert_allclose(mode, np.tanh(np.asarray(mean_out)), rtol=1e-6)
    huge = jax.tree.map(lambda x: 1e3 * x, params)  # log-std outputs far outside [-5, 2]
    log_std_out = np.asarray(family.actor.distribution(huge, obs)[1])
    assert log_std_out.min() == LOG_STD_MIN and log_std_out.max() == LOG_STD_MAX


def test_actions_are_mapped_between_env_units_and_the_unit_box() -> None:
    family = make_family()
    state = initial_state(family, 0)
    obs = unit_batch(0).obs
    for act in (family.act(state, obs, jax.random.key(1)), family.explore(state, obs, jax.random.key(1))):
        act = np.asarray(act)
        assert act.shape == (BATCH, ACT_DIM) and np.all(act >= LOW) and np.all(act <= HIGH)
    mode = np.asarray(family.actor.mode_action(state.actor_params, obs))
    env_scale = LOW + 0.5 * (mode + 1.0) * (HIGH - LOW)
    np.testing.assert_allclose(np.asarray(family.act(state, obs, None)), env_scale, rtol=1e-6)
    unit = np.asarray(family.box.normalise(jnp.asarray([LOW, HIGH, (LOW + HIGH) / 2], jnp.float32)))
    np.testing.assert_allclose(unit, [[-1, -1], [1, 1], [0, 0]], atol=2e-6)
    assert np.all(np.abs(unit) < 1.0)


def stack(*trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


@pytest.mark.e2e
def test_seeds_vmapped_under_jit_equal_each_seed_alone() -> None:
    family = gitd_family()
    singles = [initial_state(family, i) for i in range(2)]
    states = stack(*singles)
    seeded, alone = jax.jit(jax.vmap(family.step)), jax.jit(family.step)
    for t in range(2):  # two steps: the carried key must advance identically
        batch = stack(env_batch(2 * t), env_batch(2 * t + 1))
        states, aux = seeded(states, batch)
        for i in range(2):
            singles[i], single_aux = alone(singles[i], jax.tree.map(lambda x: x[i], batch))
            for a, b in zip(jax.tree.leaves((states, aux)), jax.tree.leaves((singles[i], single_aux)), strict=True):
                np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert isinstance(states, ContinuousState) and np.all(np.asarray(states.step) == 2)
    assert set(aux) == {
        "loss",
        "actor_loss",
        "alpha",
        "entropy",
        "cql_penalty",
        "bellman_error",
        "q_mean",
        "h_mean",
        "td_abs",
    }
    assert not np.array_equal(np.asarray(states.rng[0]), np.asarray(states.rng[1]))


@pytest.mark.e2e
def test_learns_a_contextual_reach_task() -> None:
    """Reach: the state holds a position p in [-1, 1]^2, the target action is a*(p) = (2 p_1,
    (1 + p_2) / 2) inside the box, reward -|a - a*(p)|^2; random behaviour actions, discount 0.5.
    300 CQL-Gi-SAC updates lower the Bellman error and rank a*(p) far above a mirrored action."""
    steps, batch_size = 300, 32
    family = dataclasses.replace(gitd_family(), lr=3e-3)
    rng = np.random.default_rng(0)

    def states(shape):
        return np.concatenate([rng.uniform(-1, 1, shape + (2,)), np.zeros(shape + (1,))], -1).astype(np.float32)

    def target_action(obs):
        return np.stack([2.0 * obs[..., 0], 0.5 * (1.0 + obs[..., 1])], -1)

    obs = states((steps, batch_size))
    action = rng.uniform(LOW, HIGH, (steps, batch_size, ACT_DIM)).astype(np.float32)
    batches = Batch(
        obs=obs,
        action=action,
        reward=-np.square(action - target_action(obs)).sum(-1).astype(np.float32),
        discount=np.full((steps, batch_size), 0.5, np.float32),
        next_obs=states((steps, batch_size)),
        weight=np.ones((steps, batch_size), np.float32),
    )
    state, aux = jax.jit(lambda s, b: jax.lax.scan(family.step, s, b))(initial_state(family, 0), batches)
    bellman = np.asarray(aux["bellman_error"]).sum(-1)
    assert bellman[-30:].mean() < 0.5 * bellman[:30].mean()

    probe = jnp.asarray(states((64,)))
    good = target_action(np.asarray(probe))
    bad = np.stack([-good[:, 0], 1.0 - good[:, 1]], -1)
    q = [
        float(family.net.q_values(ensemble(state.critic_params, 0), probe, family.box.normalise(a)).mean())
        for a in (jnp.asarray(good), jnp.asarray(bad))
    ]
    assert q[0] > q[1] + 0.5, q
