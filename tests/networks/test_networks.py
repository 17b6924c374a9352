"""Torsos and multi-head layouts (docs/critics.md#networks)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from offline_gitd.errors import ConfigError
from offline_gitd.networks import HEAD_LAYOUTS, MultiHeadNetwork, make_torso
from offline_gitd.networks.heads import LinearHead


def test_nature_cnn_uses_valid_padding() -> None:
    """VALID padding: 84 -> 20 -> 9 -> 7, so the FC layer reads 7 * 7 * 64 = 3,136 features."""
    torso = make_torso("nature")
    params = torso.init(jax.random.key(0), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    assert params["params"]["Dense_0"]["kernel"].shape == (3136, 512)


@pytest.mark.parametrize("name, features", [("nature", 512), ("impala", 256), ("impala-gap", 256)])
def test_uint8_frames_are_scaled_inside(name: str, features: int) -> None:
    torso = make_torso(name)
    frames = np.random.default_rng(0).integers(0, 256, size=(2, 84, 84, 4), dtype=np.uint8)
    params = torso.init(jax.random.key(0), jnp.asarray(frames))
    from_uint8 = torso.apply(params, jnp.asarray(frames))
    from_float = torso.apply(params, jnp.asarray(frames, jnp.float32) / 255.0)
    assert from_uint8.shape == (2, features)
    np.testing.assert_allclose(from_uint8, from_float, rtol=1e-5, atol=1e-6)


def test_impala_gap_pools_space_away() -> None:
    """Global average pooling keeps the FC input at the channel count (32), not 11 * 11 * 32."""
    params = make_torso("impala-gap").init(jax.random.key(0), jnp.zeros((1, 84, 84, 4), jnp.uint8))
    assert params["params"]["Dense_0"]["kernel"].shape == (32, 256)


def test_independent_layout_is_one_network_per_head() -> None:
    net = MultiHeadNetwork(make_torso("mlp", (16,)), "independent", num_q=3, num_h=2, outputs=4)
    obs = jnp.asarray(np.random.default_rng(1).normal(size=(5, 6)), jnp.float32)
    params = net.init(jax.random.key(0), obs)
    q, h = net.apply(params, obs)
    assert q.shape == (3, 5, 4) and h.shape == (2, 5, 4)
    for k in range(3):
        torso_k = jax.tree.map(lambda x: x[k], params["torso"])
        head_k = jax.tree.map(lambda x: x[k], params["q"])
        alone = LinearHead(4).apply(head_k, net.torso.apply(torso_k, obs))
        np.testing.assert_allclose(q[k], alone, rtol=1e-6)
    # H-heads 2..K read networks 2..K
    torso_last = jax.tree.map(lambda x: x[2], params["torso"])
    np.testing.assert_allclose(
        h[1],
        LinearHead(4).apply(jax.tree.map(lambda x: x[1], params["h"]), net.torso.apply(torso_last, obs)),
        rtol=1e-6,
    )


@pytest.mark.parametrize("layout", HEAD_LAYOUTS)
def test_heads_have_their_own_initialisation(layout: str) -> None:
    net = MultiHeadNetwork(make_torso("mlp", (8,)), layout, num_q=3, num_h=0, outputs=2)
    obs = jnp.ones((4, 3))
    q = np.asarray(net.q_values(net.init(jax.random.key(0), obs), obs))
    assert not np.allclose(q[0], q[1]) and not np.allclose(q[1], q[2])


def test_continuous_network_reads_state_and_action() -> None:
    net = MultiHeadNetwork(make_torso("mlp", (16,)), "independent", num_q=2, num_h=1, outputs=1, continuous=True)
    obs, action = jnp.ones((5, 3)), jnp.zeros((5, 2))
    params = net.init(jax.random.key(0), obs, action)
    q, h = net.apply(params, obs, action)
    assert q.shape == (2, 5) and h.shape == (1, 5)
    assert not np.allclose(net.q_values(params, obs, action + 1.0), q)


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown torso 'resnet'"):
        make_torso("resnet")
    with pytest.raises(ConfigError, match="unknown head layout"):
        MultiHeadNetwork(make_torso("mlp"), "tied", 1, 0, 2)
