"""Conservative Q-learning penalties (Kumar et al. 2020), applied to every online head.

Discrete, CQL(H) with the data's actions (Kumar et al. 2020, Eq. 4 specialised to discrete
actions):  alpha * E_s[ logsumexp_a Q_k(s, a) - Q_k(s, a_data) ],  summed over heads k, so that K = 1
TD-CQL is exactly published CQL: 1/2 (y - Q)^2 + alpha (logsumexp Q - Q).

Continuous, CQL(H) with an importance-sampled logsumexp over proposal actions (Kumar et al. 2020,
Appendix F), summed over both critic ensembles and every online head, so that K = 1 TD-CQL-SAC is
exactly the published CQL(H)-SAC critic penalty.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp


def discrete_cql_penalty(q_all: jnp.ndarray, q_sa: jnp.ndarray) -> jnp.ndarray:
    """Per-sample penalty [B]: sum_k logsumexp_a Q_k(s, a) - Q_k(s, a_data).

    q_all: [K, B, A] all-action values; q_sa: [K, B] values of the data's actions.
    """
    return (jax.nn.logsumexp(q_all, axis=-1) - q_sa).sum(axis=0)


def cql_proposals(
    sample_policy: Callable[[jnp.ndarray, jax.Array], tuple[jnp.ndarray, jnp.ndarray]],
    obs: jnp.ndarray,
    next_obs: jnp.ndarray,
    act_dim: int,
    num_samples: int,
    rng: jax.Array,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """CQL(H)'s importance-sampling proposals (Kumar et al. 2020, Appendix F, "CQL(H)"), per state.

    N actions uniform on [-1, 1]^d (log density d log(1/2)), N from pi(.|s) and N from pi(.|s'),
    as the official code does, with the log-density of each under the distribution that drew it.
    ``sample_policy(obs, rng) -> (actions [B, d], log_prob [B])`` is the actor's sampler; both
    outputs are stop-gradient: the proposals only estimate the critic's logsumexp.
    Returns actions [B, 3N, d] and log-densities [B, 3N].
    """
    batch = obs.shape[0]
    key_uniform, key_now, key_next = jax.random.split(rng, 3)
    uniform = jax.random.uniform(key_uniform, (batch, num_samples, act_dim), minval=-1.0, maxval=1.0)
    uniform_log_density = jnp.full((batch, num_samples), act_dim * math.log(0.5))

    def from_policy(states: jnp.ndarray, key: jax.Array) -> tuple[jnp.ndarray, jnp.ndarray]:
        actions, log_prob = jax.vmap(sample_policy, in_axes=(None, 0))(states, jax.random.split(key, num_samples))
        return actions.swapaxes(0, 1), log_prob.T  # [N, B, ...] -> [B, N, ...]

    now, now_log_prob = from_policy(obs, key_now)
    nxt, nxt_log_prob = from_policy(next_obs, key_next)
    actions = jnp.concatenate([uniform, now, nxt], axis=1)
    log_density = jnp.concatenate([uniform_log_density, now_log_prob, nxt_log_prob], axis=1)
    return jax.lax.stop_gradient(actions), jax.lax.stop_gradient(log_density)


def continuous_cql_penalty(q_proposals: jnp.ndarray, log_density: jnp.ndarray, q_sa: jnp.ndarray) -> jnp.ndarray:
    """Per-sample CQL(H) penalty [B] with the importance-sampled logsumexp (Kumar et al. 2020, App. F):

        sum_{j, k} [ logsumexp_i (Q^j_k(s, a_i) - log mu(a_i)) - Q^j_k(s, a_data) ],

    the log of an importance-sampled estimate of the integral of exp Q(s, .) over the action box
    (up to the constant log 3N, which the official code also drops: it has no gradient).
    q_proposals: [..., K, B, 3N] values of the proposals; log_density: [B, 3N]; q_sa: [..., K, B].
    """
    penalty = jax.nn.logsumexp(q_proposals - log_density, axis=-1) - q_sa
    return penalty.reshape(-1, penalty.shape[-1]).sum(axis=0)
