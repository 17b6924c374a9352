"""TD3+BC against independent computations (Fujimoto et al. 2018, Algorithm 1; Fujimoto & Gu 2021, Eq. 3-4).

The references below are written from the papers' formulas with one network call per ensemble and
head, not from the package's losses: TD3's target policy smoothing and clipped double-Q critic, the
TDRC, i-TD and Gi-TD losses on the same targets (docs/critics.md), and TD3+BC's normalised actor
objective. Values and gradients are compared; then the delayed policy update, the targets'
cadence, determinism, seeds under vmap and a small learning task.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig
from offline_gitd.errors import ConfigError
from offline_gitd.learners.td3bc import (
    TD3BCFamily,
    TD3BCState,
    make_td3bc_family,
    smoothed_target_action,
    td3bc_actor_loss,
    td3bc_critic_loss,
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
BC_ALPHA, SIGMA, NOISE_CLIP, TAU = 2.5, 0.2, 0.5, 0.05


@functools.cache
def make_family(
    kind: str = "td", K: int = 1, tau: float | None = TAU, delay: int = 2, lr: float = 1e-3, noise: float = SIGMA
) -> TD3BCFamily:
    cfg = CriticConfig(kind=kind, K=K, tau=tau, T=3, heads="independent" if kind != "tdrc" else "shared_linear")
    return make_td3bc_family(
        cfg,
        ACT_DIM,
        np.zeros((1, OBS_DIM), np.float32),
        (LOW, HIGH),
        mlp_hidden=(HIDDEN, HIDDEN),
        lr=lr,
        adam_eps=1e-8,
        bc_alpha=BC_ALPHA,
        policy_noise=noise,
        noise_clip=NOISE_CLIP,
        policy_delay=delay,
    )


# Families hold a numpy observation example and are not hashable: cache by the (cached) family's identity.
_compiled: dict[tuple[int, str], object] = {}


def initial_state(family: TD3BCFamily, seed: int) -> TD3BCState:
    key = (id(family), "init")
    if key not in _compiled:
        _compiled[key] = jax.jit(family.init)
    return _compiled[key](jax.random.key(seed))


def jitted_step(family: TD3BCFamily):
    key = (id(family), "step")
    if key not in _compiled:
        _compiled[key] = jax.jit(family.step)
    return _compiled[key]


def critic_setup(family: TD3BCFamily, seed: int = 0):
    """Online critics, a *different* theta_0 (another seed's) and a next action a' in [-1, 1]."""
    rng = np.random.default_rng(seed)
    next_action = jnp.asarray(rng.uniform(-1.0, 1.0, (BATCH, ACT_DIM)), jnp.float32)
    return initial_state(family, seed).critic_params, initial_state(family, seed + 1).frozen, next_action


def ours(family: TD3BCFamily, frozen, batch, next_action):
    return jax.jit(
        jax.value_and_grad(lambda p: td3bc_critic_loss(family.critic, family.net, p, frozen, batch, next_action)[0])
    )


def test_target_action_is_td3_policy_smoothing() -> None:
    """a' = clip(tanh(mu_target(s')) + clip(eps, -c, c), -1, 1), from the network's raw mean."""
    family = make_family()
    target_params = initial_state(family, 3).actor_params
    obs = unit_batch(0).obs
    noise = np.array([[0.1, -0.2], [0.9, -0.9], [-3.0, 0.0], [0.49, 0.51], [2.0, 2.0], [-0.6, 0.3]], np.float32)
    got = np.asarray(smoothed_target_action(family.actor, target_params, obs, jnp.asarray(noise), NOISE_CLIP))
    mean = np.asarray(family.actor.module.apply(target_params, obs)[0], np.float64)
    expected = np.clip(np.tanh(mean) + np.clip(noise, -0.5, 0.5), -1.0, 1.0)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_td_critic_is_td3() -> None:
    """mean_b w_b sum_j 1/2 (y - Q^j(s, a))^2, y = r + g min(Q0^1, Q0^2)(s', a'): TD3's critic."""
    family = make_family("td")
    net = family.net
    params, frozen, next_action = critic_setup(family)
    batch = unit_batch(1)

    def reference(p):
        targets = [net.q_values(ensemble(frozen["target"], j), batch.next_obs, next_action)[0] for j in range(2)]
        y = jax.lax.stop_gradient(batch.reward + batch.discount * jnp.minimum(*targets))
        squared = sum(0.5 * (y - net.q_values(ensemble(p, j), batch.obs, batch.action)[0]) ** 2 for j in range(2))
        return jnp.mean(batch.weight * squared)

    value, grads = ours(family, frozen, batch, next_action)(params)
    expected, expected_grads = jax.jit(jax.value_and_grad(reference))(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL


def test_tdrc_critic_corrects_through_its_online_bootstrap() -> None:
    """TDRC on TD3's targets, no target network: y = r + g min_j Q^j(s', a') WITH gradient, and per
    ensemble l = y sg(h^j) - Q^j(s, a) sg(delta^j) + h^j sg(h^j - delta^j) (docs/critics.md#tdrc)."""
    family = make_family("tdrc")
    net = family.net
    params, frozen, next_action = critic_setup(family, seed=6)
    batch = unit_batch(7)
    sg = jax.lax.stop_gradient

    def reference(p):
        y = batch.reward + batch.discount * jnp.minimum(
            *[net.q_values(ensemble(p, j), batch.next_obs, next_action)[0] for j in range(2)]
        )
        total = 0.0
        for j in range(2):
            q, h = net.apply(ensemble(p, j), batch.obs, batch.action)
            delta = y - q[0]
            total = total + y * sg(h[0]) - q[0] * sg(delta) + h[0] * sg(h[0] - delta)
        return jnp.mean(batch.weight * total)

    value, grads = ours(family, frozen, batch, next_action)(params)
    expected, expected_grads = jax.jit(jax.value_and_grad(reference))(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    for group in ("torso", "q", "h"):
        assert relative_error(grads[group], expected_grads[group]) < RTOL, group


def test_itd_critic_chains_its_heads_on_td3_targets() -> None:
    """i-TD (K = 2, D = 1): head 1 on r + g min_j Q0^j(s', a'), head 2 on r + g min_j sg(Q^j_1(s', a'))."""
    family = make_family("itd", K=2)
    net = family.net
    params, frozen, next_action = critic_setup(family, seed=2)
    batch = unit_batch(3)

    def reference(p):
        v0 = jnp.minimum(
            *[net.q_values(ensemble(frozen["target"], j), batch.next_obs, next_action)[0] for j in range(2)]
        )
        v1 = jnp.minimum(*[net.q_values(ensemble(p, j), batch.next_obs, next_action)[0] for j in range(2)])
        total = 0.0
        for j in range(2):
            q = net.q_values(ensemble(p, j), batch.obs, batch.action)
            for k, v in enumerate((v0, v1)):
                y = jax.lax.stop_gradient(batch.reward + batch.discount * v)
                total = total + 0.5 * (y - q[k]) ** 2
        return jnp.mean(batch.weight * total)

    value, grads = ours(family, frozen, batch, next_action)(params)
    expected, expected_grads = jax.jit(jax.value_and_grad(reference))(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL


def test_gitd_critic_differentiates_through_td3_targets() -> None:
    """Gi-TD (K = 3) on TD3's targets, the surrogate of docs/critics.md written out per ensemble:
    y_1 = r + g min_j Q0^j(s', a'), y_k = r + g min_j Q^j_{k-1}(s', a') WITH gradient,
    l = sum_j sum_k [y_k sg(H^j_k) - Q^j_k sg(delta^j_k) + H^j_k sg(H^j_k - delta^j_k)], H_1 = 0."""
    family = make_family("gitd", K=3)
    net = family.net
    params, frozen, next_action = critic_setup(family, seed=4)
    batch = unit_batch(5)
    sg = jax.lax.stop_gradient

    def reference(p):
        v = [
            jnp.minimum(
                *[net.q_values(ensemble(frozen["target"], j), batch.next_obs, next_action)[0] for j in range(2)]
            )
        ]
        q_next = [net.q_values(ensemble(p, j), batch.next_obs, next_action) for j in range(2)]
        v += [jnp.minimum(q_next[0][k], q_next[1][k]) for k in range(2)]
        total = 0.0
        for j in range(2):
            q, h = net.apply(ensemble(p, j), batch.obs, batch.action)
            for k in range(3):
                y = batch.reward + batch.discount * (sg(v[0]) if k == 0 else v[k])
                delta = y - q[k]
                hk = jnp.zeros_like(y) if k == 0 else h[k - 1]
                total = total + y * sg(hk) - q[k] * sg(delta) + hk * sg(hk - delta)
        return jnp.mean(batch.weight * total)

    value, grads = ours(family, frozen, batch, next_action)(params)
    expected, expected_grads = jax.jit(jax.value_and_grad(reference))(params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    for group in ("torso", "q", "h"):
        assert relative_error(grads[group], expected_grads[group]) < RTOL, group


def test_actor_loss_is_td3_bc() -> None:
    """-lambda mean Q(s, pi(s)) + mean_{b,i} (pi_i(s_b) - a_{b,i})^2, lambda = 2.5 / mean|Q(s, pi(s))|,
    Q the first ensemble's mean over its K = 3 heads, pi(s) = tanh(mu(s)); the critic never moves."""
    family = make_family("gitd", K=3)
    state = initial_state(family, 0)
    batch = unit_batch(6)
    net = family.net

    def reference(actor_params):
        pi = jnp.tanh(family.actor.module.apply(actor_params, batch.obs)[0])
        q = net.q_values(ensemble(state.critic_params, 0), batch.obs, pi).mean(axis=0)
        lmbda = BC_ALPHA / jax.lax.stop_gradient(jnp.abs(q).mean())
        return -lmbda * q.mean() + jnp.mean((pi - batch.action) ** 2)

    def loss(actor_params, critic_params):
        return td3bc_actor_loss(family.actor, net, actor_params, critic_params, batch.obs, batch.action, BC_ALPHA)

    (value, aux), (grads, critic_grads) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
        state.actor_params, state.critic_params
    )
    expected, expected_grads = jax.jit(jax.value_and_grad(reference))(state.actor_params)
    np.testing.assert_allclose(float(value), float(expected), rtol=RTOL)
    assert relative_error(grads, expected_grads) < RTOL
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(critic_grads))
    # The log-std head is not part of TD3's deterministic policy: no gradient reaches it.
    log_std_head = [k for k in grads["params"] if k.startswith("Dense")][-1]
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(grads["params"][log_std_head]))
    pi = np.tanh(np.asarray(family.actor.module.apply(state.actor_params, batch.obs)[0], np.float64))
    np.testing.assert_allclose(float(aux["bc_loss"]), np.mean((pi - np.asarray(batch.action)) ** 2), rtol=RTOL)


def tree_equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def test_policy_delay_and_soft_targets() -> None:
    """d = 2: step 1 moves only the critics (actor, its Adam state, the target actor and theta_0 stay
    bit-identical); step 2 moves the actor, then target actor and theta_0 by Polyak tau."""
    family = make_family("td", delay=2)
    step = jitted_step(family)
    s0 = initial_state(family, 0)
    s1, _ = step(s0, env_batch(0))
    assert not tree_equal(s1.critic_params, s0.critic_params)
    for name in ("actor_params", "actor_opt_state", "actor_target", "frozen"):
        assert tree_equal(getattr(s1, name), getattr(s0, name)), name
    s2, _ = step(s1, env_batch(1))
    assert not tree_equal(s2.actor_params, s1.actor_params)
    assert not tree_equal(s2.actor_opt_state, s1.actor_opt_state)
    for new, online, old in zip(
        jax.tree.leaves(s2.actor_target),
        jax.tree.leaves(s2.actor_params),
        jax.tree.leaves(s1.actor_target),
        strict=True,
    ):
        np.testing.assert_allclose(
            np.asarray(new), TAU * np.asarray(online) + (1 - TAU) * np.asarray(old), rtol=1e-6, atol=1e-7
        )
    expected_target = jax.tree.map(
        lambda online, old: TAU * online[:, :1] + (1 - TAU) * old,
        {"torso": s2.critic_params["torso"], "q": s2.critic_params["q"]},
        s1.frozen["target"],
    )
    assert relative_error(s2.frozen["target"], expected_target) < 1e-6
    assert np.asarray(s2.step) == 2


def test_hard_targets_follow_the_critic_period() -> None:
    """tau unset, T = 3, d = 2: theta_0 and the target actor stay until step 3, then are copies of the
    online network (head 1) and of the actor of that step."""
    family = make_family("td", tau=None, delay=2)
    step = jitted_step(family)
    states = [initial_state(family, 1)]
    for t in range(3):
        states.append(step(states[-1], env_batch(10 + t))[0])
    for s in states[1:3]:
        assert tree_equal(s.actor_target, states[0].actor_target) and tree_equal(s.frozen, states[0].frozen)
    assert not tree_equal(states[2].actor_params, states[0].actor_params)  # the actor moved at step 2
    assert tree_equal(states[3].actor_target, states[3].actor_params)
    assert tree_equal(states[3].actor_params, states[2].actor_params)  # step 3 is not a policy step
    # K = 1: theta_0 is the whole online Q-network (torso and head) of step 3.
    online = {"torso": states[3].critic_params["torso"], "q": states[3].critic_params["q"]}
    assert tree_equal(states[3].frozen["target"], online)
    assert not tree_equal(states[3].frozen["target"], states[0].frozen["target"])


def test_one_step_is_td3_bc_algorithm_1() -> None:
    """A policy step rebuilt from the reference losses: the critic on a' = tanh(mu_target(s')) from the
    *target* actor (noise 0 here, the smoothing is checked above), the actor on the critic just updated,
    then the target actor and theta_0 by Polyak tau. The state has run three steps before (actor and
    target actor differ, Adam's moments are not fresh) and the learning rate is large, so that any
    other network in any role changes the updates visibly."""
    family = make_family("td", lr=0.05, noise=0.0)
    step = jitted_step(family)
    state = initial_state(family, 5)
    for t in range(3):
        state, _ = step(state, env_batch(30 + t))
    assert not tree_equal(state.actor_params, state.actor_target)
    env = env_batch(9)
    unit = env._replace(action=jnp.asarray(2.0 * (np.asarray(env.action) - LOW) / (HIGH - LOW) - 1.0, jnp.float32))
    net, optimizers = family.net, family.optimizers

    def apply(optimizer, params, grads, opt_state):
        return optax.apply_updates(params, optimizer.update(grads, opt_state, params)[0])

    @jax.jit
    def reference(state):
        next_action = jnp.tanh(family.actor.module.apply(state.actor_target, unit.next_obs)[0])
        targets = [net.q_values(ensemble(state.frozen["target"], j), unit.next_obs, next_action)[0] for j in range(2)]
        y = unit.reward + unit.discount * jnp.minimum(*targets)

        def critic_loss(p):
            squared = sum(0.5 * (y - net.q_values(ensemble(p, j), unit.obs, unit.action)[0]) ** 2 for j in range(2))
            return jnp.mean(unit.weight * squared)

        grads = jax.grad(critic_loss)(state.critic_params)
        critic_params = apply(optimizers.critic, state.critic_params, grads, state.critic_opt_state)

        def actor_loss(p):
            pi = jnp.tanh(family.actor.module.apply(p, unit.obs)[0])
            q = net.q_values(ensemble(critic_params, 0), unit.obs, pi)[0]
            return -BC_ALPHA / jax.lax.stop_gradient(jnp.abs(q).mean()) * q.mean() + jnp.mean((pi - unit.action) ** 2)

        grads = jax.grad(actor_loss)(state.actor_params)
        actor_params = apply(optimizers.actor, state.actor_params, grads, state.actor_opt_state)
        polyak = functools.partial(jax.tree.map, lambda o, t: TAU * o + (1 - TAU) * t)
        return (
            critic_params,
            actor_params,
            polyak(actor_params, state.actor_target),
            polyak(critic_params, state.frozen["target"]),
        )

    def moved(new, old):
        return jax.tree.map(lambda n, o: np.asarray(n, np.float64) - np.asarray(o, np.float64), new, old)

    new, _ = step(state, env)
    expected = reference(state)
    olds = (state.critic_params, state.actor_params, state.actor_target, state.frozen["target"])
    news = (new.critic_params, new.actor_params, new.actor_target, new.frozen["target"])
    for name, got, want, old in zip(("critic", "actor", "target actor", "theta_0"), news, expected, olds, strict=True):
        assert relative_error(moved(got, old), moved(want, old)) < 1e-5, name


def stack(*trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def test_deterministic_and_seeds_vmapped_equal_each_seed_alone() -> None:
    family = make_family()
    step = jitted_step(family)
    singles = [initial_state(family, i) for i in range(2)]
    states = stack(*singles)
    seeded = jax.jit(jax.vmap(family.step))
    for t in range(2):  # two steps: the carried key advances and the delayed update runs
        batch = stack(env_batch(2 * t), env_batch(2 * t + 1))
        states, aux = seeded(states, batch)
        for i in range(2):
            singles[i], single_aux = step(singles[i], jax.tree.map(lambda x: x[i], batch))
            for a, b in zip(jax.tree.leaves((states, aux)), jax.tree.leaves((singles[i], single_aux)), strict=True):
                np.testing.assert_allclose(np.asarray(a[i]), np.asarray(b), rtol=1e-5, atol=1e-6)
    again = initial_state(family, 0)
    for t in range(2):
        again, _ = step(again, env_batch(2 * t))
    assert tree_equal(again, singles[0])  # same seed and batches: the same run, bit for bit
    assert not np.array_equal(np.asarray(states.rng[0]), np.asarray(states.rng[1]))
    assert {"loss", "actor_loss", "bc_loss", "lambda", "bellman_error", "q_mean", "td_abs"} == set(aux)


def test_actions_are_in_env_units() -> None:
    family = make_family()
    state = initial_state(family, 0)
    obs = unit_batch(0).obs
    act = np.asarray(family.act(state, obs, None))
    mode = np.tanh(np.asarray(family.actor.module.apply(state.actor_params, obs)[0], np.float64))
    np.testing.assert_allclose(act, LOW + 0.5 * (mode + 1.0) * (HIGH - LOW), rtol=1e-5, atol=1e-6)


def test_bad_hyperparameters_are_config_errors() -> None:
    cfg = CriticConfig(kind="td", tau=TAU)
    common = dict(
        mlp_hidden=(4,), lr=1e-3, adam_eps=1e-8, bc_alpha=2.5, policy_noise=0.2, noise_clip=0.5, policy_delay=2
    )
    obs = np.zeros((1, OBS_DIM), np.float32)
    for bad in (dict(policy_delay=0), dict(policy_delay=1.5), dict(bc_alpha=0.0), dict(noise_clip=-1.0)):
        with pytest.raises(ConfigError):
            make_td3bc_family(cfg, ACT_DIM, obs, (LOW, HIGH), **{**common, **bad})
    with pytest.raises(ConfigError, match="finite bounds"):
        make_td3bc_family(cfg, ACT_DIM, obs, (HIGH, LOW), **common)


def test_bandit_actor_reaches_the_best_data_action() -> None:
    """One state; data actions a* + noise in env units, reward -|a - a*|^2, no bootstrap. Both terms of
    the actor's objective point at a*: after 300 updates the policy's action is within 0.1 of it."""
    steps, batch_size = 300, 32
    family = make_family("td", lr=3e-3)
    rng = np.random.default_rng(0)
    best = np.array([1.0, 0.25])
    obs = np.tile(np.array([0.5, -0.5, 1.0], np.float32), (steps, batch_size, 1))
    action = np.clip(best + rng.normal(0, [0.6, 0.15], (steps, batch_size, ACT_DIM)), LOW + 1e-3, HIGH - 1e-3)
    batches = Batch(
        obs=obs,
        action=action.astype(np.float32),
        reward=-np.square(action - best).sum(-1).astype(np.float32),
        discount=np.zeros((steps, batch_size), np.float32),
        next_obs=obs,
        weight=np.ones((steps, batch_size), np.float32),
    )
    start = initial_state(family, 0)
    state, aux = jax.jit(lambda s, b: jax.lax.scan(family.step, s, b))(start, batches)
    before = np.asarray(family.act(start, obs[0, :1], None))[0]
    after = np.asarray(family.act(state, obs[0, :1], None))[0]
    assert np.abs(after - best).max() < 0.1 < np.abs(before - best).max()
    bellman = np.asarray(aux["bellman_error"]).sum(-1)
    assert bellman[-30:].mean() < 0.2 * bellman[:30].mean()
