"""Frozen-parameter rules, acting, seeds, optimiser and config validation (docs/critics.md)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from offline_gitd.critics import (
    CriticConfig,
    critic_loss,
    critic_optimizer,
    init_frozen,
    maintain,
    roll,
)
from offline_gitd.errors import ConfigError
from offline_gitd.networks import HEAD_LAYOUTS
from tests.critic_fixtures import random_batch, random_critic


def _equal(a, b) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _head(tree, k):
    return jax.tree.map(lambda x: x[k], tree)


@pytest.mark.parametrize("heads", HEAD_LAYOUTS)
def test_roll_shifts_heads_and_freezes_head_one(heads: str) -> None:
    cfg = CriticConfig(kind="gitd", K=4, heads=heads)
    net, params, frozen = random_critic(cfg)
    new_params, new_frozen = roll(cfg, net, params, frozen)
    target = new_frozen["target"]
    # theta_0 <- (torso, head 1)
    assert _equal(_head(target["q"], 0), _head(params["q"], 0))
    if heads == "independent":
        assert _equal(_head(target["torso"], 0), _head(params["torso"], 0))
    else:
        assert _equal(target["torso"], params["torso"])
    # head k <- old head k+1 for Q and H (and torsos if independent); last head kept
    groups = ["q", "h"] + (["torso"] if heads == "independent" else [])
    for group in groups:
        size = jax.tree.leaves(params[group])[0].shape[0]
        for k in range(size - 1):
            assert _equal(_head(new_params[group], k), _head(params[group], k + 1))
        assert _equal(_head(new_params[group], size - 1), _head(params[group], size - 1))
    if heads != "independent":
        assert _equal(new_params["torso"], params["torso"])
    # theta_0 now evaluates exactly like the old head 1
    obs = random_batch(0).obs
    np.testing.assert_allclose(net.q_values(target, obs)[0], net.q_values(params, obs)[0], rtol=1e-5, atol=1e-6)


def test_maintain_rolls_only_every_T_steps() -> None:
    cfg = CriticConfig(kind="itd", K=3, T=4)
    net, params, frozen = random_critic(cfg)
    step_fn = jax.jit(lambda p, f, s: maintain(cfg, net, p, f, s))
    for step in (1, 2, 3):
        p, f = step_fn(params, frozen, jnp.asarray(step))
        assert _equal(p, params) and _equal(f, frozen)
    p, f = step_fn(params, frozen, jnp.asarray(4))
    expected_p, expected_f = roll(cfg, net, params, frozen)
    assert _equal(p, expected_p) and _equal(f, expected_f) and not _equal(p, params)


def test_soft_update_moves_theta_0_by_tau_and_never_rolls() -> None:
    cfg = CriticConfig(kind="gitd", K=3, tau=0.25, T=1)
    net, params, frozen = random_critic(cfg)
    p, f = maintain(cfg, net, params, frozen, jnp.asarray(1))
    assert _equal(p, params)
    head_one = net.frozen_from(params)
    for new, old, online in zip(
        jax.tree.leaves(f["target"]), jax.tree.leaves(frozen["target"]), jax.tree.leaves(head_one), strict=True
    ):
        np.testing.assert_allclose(new, 0.25 * np.asarray(online) + 0.75 * np.asarray(old), rtol=1e-6)


def test_itd_stale_copies_sync_every_D_steps() -> None:
    cfg = CriticConfig(kind="itd", K=3, D=3, T=1000)
    net, params, frozen = random_critic(cfg)
    assert frozen["stale"] is not None
    step_fn = jax.jit(lambda p, f, s: maintain(cfg, net, p, f, s))
    moved = jax.tree.map(lambda x: x + 1.0, params)  # stands for parameters after some updates
    for step in (1, 2):
        _, f = step_fn(moved, frozen, jnp.asarray(step))
        assert _equal(f["stale"], frozen["stale"])
    _, f = step_fn(moved, frozen, jnp.asarray(3))
    assert _equal(f["stale"], {"torso": moved["torso"], "q": moved["q"]})
    # and the loss really bootstraps heads k >= 2 from the stale copy, not the online heads
    batch = random_batch(7)
    loss_stale = critic_loss(cfg, net, params, frozen, batch)[0]
    loss_synced = critic_loss(cfg, net, params, {**frozen, "stale": {"torso": moved["torso"], "q": moved["q"]}}, batch)[
        0
    ]
    assert float(loss_stale) != float(loss_synced)


def test_tdrc_has_no_target_network() -> None:
    cfg = CriticConfig(kind="tdrc")
    net, params, _ = random_critic(cfg)
    frozen = init_frozen(cfg, net, params)
    assert frozen == {"target": None, "stale": None}
    assert _equal(maintain(cfg, net, params, frozen, jnp.asarray(cfg.T))[0], params)


@pytest.mark.parametrize("heads", HEAD_LAYOUTS)
def test_greedy_action_is_argmax_of_mean_online_head(heads: str) -> None:
    cfg = CriticConfig(kind="gitd", K=4, heads=heads)
    net, params, _ = random_critic(cfg)
    obs = random_batch(8, batch_size=32).obs
    q = np.stack([np.asarray(net.q_values(params, obs))[k] for k in range(4)])
    np.testing.assert_array_equal(net.greedy_action(params, obs), q.mean(axis=0).argmax(axis=-1))


def test_loss_vmaps_over_a_leading_seed_axis() -> None:
    cfg = CriticConfig(kind="gitd", K=3)
    seeds = [0, 1, 2]
    critics = [random_critic(cfg, seed) for seed in seeds]
    batches = [random_batch(10 + seed) for seed in seeds]
    net = critics[0][0]
    stacked = lambda trees: jax.tree.map(lambda *xs: jnp.stack(xs), *trees)  # noqa: E731
    params, frozen, batch = stacked([c[1] for c in critics]), stacked([c[2] for c in critics]), stacked(batches)

    def loss_and_grad(p, f, b):
        return jax.value_and_grad(lambda q: critic_loss(cfg, net, q, f, b)[0])(p)

    values, grads = jax.jit(jax.vmap(loss_and_grad))(params, frozen, batch)
    for i, (_, p, f) in enumerate(critics):
        value, grad = loss_and_grad(p, f, batches[i])
        np.testing.assert_allclose(values[i], value, rtol=1e-6)
        for a, b in zip(jax.tree.leaves(_head(grads, i)), jax.tree.leaves(grad), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_weight_decay_applies_to_h_parameters_only() -> None:
    cfg = CriticConfig(kind="gitd", K=3, beta=0.5)
    net, params, _ = random_critic(cfg)
    optimizer = critic_optimizer(cfg, learning_rate=0.1, eps=1e-8)
    zero_grads = jax.tree.map(jnp.zeros_like, params)
    updates, _ = optimizer.update(zero_grads, optimizer.init(params), params)
    new = optax.apply_updates(params, updates)
    assert _equal(new["torso"], params["torso"]) and _equal(new["q"], params["q"])
    for after, before in zip(jax.tree.leaves(new["h"]), jax.tree.leaves(params["h"]), strict=True):
        np.testing.assert_allclose(after, np.asarray(before) * (1 - 0.1 * 0.5), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "dqn"}, "unknown critic kind 'dqn'"),
        ({"kind": "itd", "K": 0}, "K must be an integer >= 1"),
        ({"kind": "td", "K": 5}, "K must be 1"),
        ({"kind": "tdrc", "K": 2}, "K must be 1"),
        ({"kind": "gitd", "beta": -1.0}, "beta must be a finite number >= 0"),
        ({"kind": "gitd", "T": 0}, "T must be an integer >= 1"),
        ({"kind": "itd", "D": 0}, "D must be an integer >= 1"),
        ({"kind": "gitd", "tau": 1.5}, "tau must be in (0, 1]"),
        ({"kind": "gitd", "heads": "shared"}, "unknown head layout 'shared'"),
    ],
)
def test_config_refuses_bad_values_with_one_line(kwargs, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        CriticConfig(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_config_defaults_follow_the_paper() -> None:
    assert CriticConfig(kind="gitd").K == 5 and CriticConfig(kind="itd").K == 5
    assert CriticConfig(kind="td").K == 1 and CriticConfig(kind="gitd").beta == 1.0
    assert CriticConfig(kind="gitd").num_h == 4 and CriticConfig(kind="tdrc").num_h == 1
