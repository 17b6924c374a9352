"""The continuous-action front end of the critics: SAC's clipped double Q (docs/critics.md).

Two critic ensembles j = 1, 2 (Fujimoto et al. 2018's clipped double Q, as in Haarnoja et al.
2018's SAC), each a full multi-head network with K online heads, stored as one pytree whose leaves
carry a leading ensemble axis E = 2 so that both are evaluated by one ``vmap``. The bootstrap value
of head set k is SAC's soft value (Haarnoja et al. 2018, Eq. 3, with the clipped double Q):

    V_k(s') = min_j Q^j_k(s', a') - alpha log pi(a'|s'),   a' ~ pi(.|s') (one sample per transition)

Every ensemble regresses on the same targets: ``q_sa`` is [E, K, B], the bootstrap values are
[K, B] and broadcast in the losses, so the loss is the sum over ensembles of the kind's loss (with
td and K = 1, SAC's two 1/2 squared errors). For Gi-TD the objective is therefore
sum_e sum_k ||Gamma V_{k-1} - Q^e_k||^2, and its gradient through target k + 1 is
(sum_e H^e_{k+1}(s, a)) g d min_j Q^j_k(s', a'): it reaches only the ensemble attaining the min,
because the target *is* the min (the clipped double-Q estimate both ensembles chase).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from offline_gitd.batch import Batch
from offline_gitd.critics.config import CriticConfig
from offline_gitd.critics.inputs import CriticInputs, bootstrap_values, needs_online_next
from offline_gitd.networks.multihead import MultiHeadNetwork, Params


def ensemble_q_values(net: MultiHeadNetwork, params: Params, obs: jnp.ndarray, action: jnp.ndarray) -> jnp.ndarray:
    """Q-values of every head of every ensemble in ``params`` (leading axis E): [E, heads, B]."""
    return jax.vmap(net.q_values, in_axes=(0, None, None))(params, obs, action)


def continuous_inputs(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    params: Params,
    frozen: Params,
    batch: Batch,
    next_action: jnp.ndarray,
    next_log_prob: jnp.ndarray,
    alpha: jnp.ndarray,
) -> CriticInputs:
    """Critic inputs for both ensembles; actions (data and ``next_action``) are in [-1, 1].

    ``next_action`` [B, act_dim] and ``next_log_prob`` [B] are a' ~ pi(.|s') and log pi(a'|s'),
    drawn once per transition by the caller; they and the temperature ``alpha`` are constants of
    the critic's loss (the actor is trained by its own loss).
    """
    sg = jax.lax.stop_gradient
    entropy_bonus = sg(alpha * next_log_prob)
    next_action = sg(next_action)

    def soft_value(q_next: jnp.ndarray) -> jnp.ndarray:
        """[E, heads, B] -> min over ensembles minus alpha log pi: [heads, B]."""
        return q_next.min(axis=0) - entropy_bonus

    v_online = None
    if needs_online_next(cfg):
        q_sa, h_sa, q_next = jax.vmap(net.apply_with_next, in_axes=(0, None, None, None, None))(
            params, batch.obs, batch.next_obs, batch.action, next_action
        )
        v_online = soft_value(q_next)
    else:
        q_sa, h_sa = jax.vmap(net.apply, in_axes=(0, None, None))(params, batch.obs, batch.action)
    v_frozen, v_stale = bootstrap_values(
        cfg, lambda p: soft_value(ensemble_q_values(net, p, batch.next_obs, next_action)), frozen, v_online
    )
    return CriticInputs(
        q_sa=q_sa,
        h_sa=h_sa,
        v_next_frozen=v_frozen,
        v_next_online=v_online,
        v_next_stale=v_stale,
        reward=batch.reward.astype(jnp.float32),
        discount=batch.discount.astype(jnp.float32),
    )
