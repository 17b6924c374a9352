"""Every critic's gradient equals the paper's update, assembled independently (docs/critics.md).

The reference below never calls the critics' losses: it evaluates the network for values, builds
per-sample, per-head Jacobians dQ_k(s, a), dQ_k(s', a*), dH_k(s, a) with ``jax.grad`` of scalar
functions, and combines them with the coefficients of the paper's updates (Section 4, Appendix A):

    Delta theta_k = -delta_k dQ_k(s, a) + H_{k+1}(s, a) g dQ_k(s', a*_k)     (Gi-TD, k < K)
    Delta z_k     = (H_k - delta_k) dH_k(s, a)

The reference reads which network each target bootstraps from, and which H-heads exist, from the
critic's registry record, so a critic added to the package's records is checked here too (a
plug-in's loss may follow another rule, as a Huber loss does: it is not held to this one).
A misplaced stop-gradient (target gradient leaking into i-TD, missing into Gi-TD, H training the
torso) changes one of these sums and fails the comparison.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.critic_registry import BUILTIN, critic_spec
from offline_gitd.critics import CriticConfig, critic_loss
from offline_gitd.networks import HEAD_LAYOUTS
from tests.critic_fixtures import random_batch, random_critic

RTOL = 1e-5


def _per_sample_grads(scalar_fn, params, *per_sample_args):
    """Gradient of scalar_fn(params, *args_b) for every sample b: pytree with leading batch axis."""
    return jax.vmap(jax.grad(scalar_fn), in_axes=(None,) + (0,) * len(per_sample_args))(params, *per_sample_args)


def _weighted_sum(grads, coefficients: np.ndarray):
    """sum_b coefficients[b] * grads[b] in float64."""
    return jax.tree.map(lambda g: np.tensordot(coefficients, np.asarray(g, np.float64), axes=1), grads)


def _add(a, b):
    return jax.tree.map(lambda x, y: x + y, a, b)


def paper_update(cfg: CriticConfig, net, params, frozen, batch):
    """The expected gradient pytree, from values and explicit Jacobians only."""
    obs, next_obs = batch.obs, batch.next_obs
    action = np.asarray(batch.action)
    r = np.asarray(batch.reward, np.float64)
    g = np.asarray(batch.discount, np.float64)
    mean_w = np.asarray(batch.weight, np.float64) / len(r)  # the loss is a weighted batch *mean*
    K = cfg.K
    rows = np.arange(len(r))

    q_online, h_online = net.apply(params, obs)
    q_sa = np.asarray(q_online, np.float64)[:, rows, action]  # [K, B]
    h_sa = None if h_online is None else np.asarray(h_online, np.float64)[:, rows, action]
    q_next = np.asarray(net.q_values(params, next_obs), np.float64)  # [K, B, A]
    greedy_next = q_next.argmax(-1)  # a*_k per sample

    # Targets y_k (values): which network each head bootstraps from, as the critic's record says.
    targets = cfg.spec.targets
    if targets == "online":
        previous = q_next.max(-1)[:1]
    else:
        previous = [np.asarray(net.q_values(frozen["target"], next_obs), np.float64)[0].max(-1)]
        previous += [q_next.max(-1)[k - 1] for k in range(1, K)]
        previous = np.stack(previous)
    y = r + g * previous
    delta = y - q_sa  # [K, B]

    def q_at(p, o, a, k):
        return net.q_values(p, o[None])[k, 0, a]

    expected = jax.tree.map(lambda x: np.zeros(x.shape, np.float64), params)
    for k in range(K):  # semi-gradient part, every critic: -delta_k dQ_k(s, a)
        grads = _per_sample_grads(lambda p, o, a: q_at(p, o, a, k), params, obs, batch.action)
        expected = _add(expected, _weighted_sum(grads, -mean_w * delta[k]))

    # Gradient through the targets: h * g * dQ_{k}(s', a*_k) for the head each H corrects.
    corrections = []  # (H index j, head it corrects k for the delta, head bootstrapped in y)
    if targets == "online":
        corrections = [(0, 0, 0)]
    elif targets == "iterated_gradient":
        corrections = [(j, j + 1, j) for j in range(K - 1)]  # H_{k+1} on head k
    for j, corrected_head, bootstrap_head in corrections:
        grads = _per_sample_grads(
            lambda p, o, a: q_at(p, o, a, bootstrap_head), params, next_obs, jnp.asarray(greedy_next[bootstrap_head])
        )
        expected = _add(expected, _weighted_sum(grads, mean_w * h_sa[j] * g))

        # Delta z_j = (H_j - delta) dH_j, with the Jacobian taken over the H parameters alone.
        def h_at(h_params, o, a, j=j):
            return net.apply({**params, "h": h_params}, o[None])[1][j, 0, a]

        h_grads = _per_sample_grads(h_at, params["h"], obs, batch.action)
        expected["h"] = _add(expected["h"], _weighted_sum(h_grads, mean_w * (h_sa[j] - delta[corrected_head])))
    return expected


def _relative_error(actual, expected) -> float:
    a = np.concatenate([np.ravel(x) for x in jax.tree.leaves(actual)])
    e = np.concatenate([np.ravel(x) for x in jax.tree.leaves(expected)])
    return float(np.linalg.norm(a - e) / max(np.linalg.norm(e), 1e-12))


@pytest.mark.parametrize("heads", HEAD_LAYOUTS)
@pytest.mark.parametrize("kind", [spec.name for spec in BUILTIN])
def test_gradient_equals_paper_update(kind: str, heads: str) -> None:
    cfg = CriticConfig(kind=kind, K=None if critic_spec(kind).max_K == 1 else 3, heads=heads)
    net, params, frozen = random_critic(cfg)
    batch = random_batch(1)
    grads = jax.grad(lambda p: critic_loss(cfg, net, p, frozen, batch)[0])(params)
    expected = paper_update(cfg, net, params, frozen, batch)
    assert set(grads) == set(expected)
    for group in grads:  # torso, q and (tdrc, gitd) h, compared separately
        error = _relative_error(grads[group], expected[group])
        assert error < RTOL, f"{kind}/{heads}: gradient on {group!r} off by {error:.2e}"
        assert np.linalg.norm(np.concatenate([np.ravel(x) for x in jax.tree.leaves(expected[group])])) > 0


@pytest.mark.parametrize("kind", ["tdrc", "gitd"])
def test_h_heads_do_not_train_the_torso(kind: str) -> None:
    """Only the -delta dQ and H dQ(s') terms reach the torso: zeroing the Q-loss leaves nothing."""
    cfg = CriticConfig(kind=kind, K=1 if kind == "tdrc" else 3)
    net, params, _ = random_critic(cfg)
    batch = random_batch(2)
    torso_grad = jax.grad(lambda p: net.apply(p, batch.obs)[1].sum())(params)["torso"]
    assert all(np.all(np.asarray(x) == 0) for x in jax.tree.leaves(torso_grad))


@pytest.mark.parametrize("kind", ["td", "itd", "gitd"])
def test_theta_0_gets_no_gradient(kind: str) -> None:
    cfg = CriticConfig(kind=kind, K=1 if kind == "td" else 3)
    net, params, frozen = random_critic(cfg)
    grads = jax.grad(lambda f: critic_loss(cfg, net, params, f, random_batch(3))[0])(frozen)
    leaves = jax.tree.leaves(grads)
    assert leaves and all(np.all(np.asarray(x) == 0) for x in leaves)


@pytest.mark.parametrize("heads", HEAD_LAYOUTS)
def test_itd_with_one_head_is_td(heads: str) -> None:
    td_cfg, itd_cfg = CriticConfig(kind="td", heads=heads), CriticConfig(kind="itd", K=1, heads=heads)
    net, params, frozen = random_critic(td_cfg)
    batch = random_batch(4)
    (td_value, _), td_grad = jax.value_and_grad(critic_loss, argnums=2, has_aux=True)(
        td_cfg, net, params, frozen, batch
    )
    (itd_value, _), itd_grad = jax.value_and_grad(critic_loss, argnums=2, has_aux=True)(
        itd_cfg, net, params, frozen, batch
    )
    assert float(td_value) == float(itd_value)
    for a, b in zip(jax.tree.leaves(td_grad), jax.tree.leaves(itd_grad), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("heads", HEAD_LAYOUTS)
def test_gitd_with_zero_h_has_the_itd_gradient_on_its_own_terms(heads: str) -> None:
    """H = 0 removes the target terms: what is left on torso and Q-heads is i-TD's (D = 1)."""
    gitd_cfg = CriticConfig(kind="gitd", K=4, heads=heads)
    itd_cfg = CriticConfig(kind="itd", K=4, heads=heads)
    net, params, frozen = random_critic(gitd_cfg)
    params = {**params, "h": jax.tree.map(jnp.zeros_like, params["h"])}
    batch = random_batch(5)
    gitd_grad = jax.grad(lambda p: critic_loss(gitd_cfg, net, p, frozen, batch)[0])(params)
    itd_params = {"torso": params["torso"], "q": params["q"]}
    itd_net = net.__class__(**{**net.__dict__, "num_h": 0})
    itd_grad = jax.grad(lambda p: critic_loss(itd_cfg, itd_net, p, frozen, batch)[0])(itd_params)
    for group in ("torso", "q"):
        assert _relative_error(gitd_grad[group], itd_grad[group]) < RTOL
    # ... while the real Gi-TD (random H) differs from i-TD, so the comparison above has teeth.
    _, random_params, _ = random_critic(gitd_cfg)
    live = jax.grad(lambda p: critic_loss(gitd_cfg, net, p, frozen, batch)[0])(random_params)
    semi = jax.grad(lambda p: critic_loss(itd_cfg, itd_net, p, frozen, batch)[0])(
        {"torso": random_params["torso"], "q": random_params["q"]}
    )
    assert _relative_error(live["q"], semi["q"]) > 1e-3
