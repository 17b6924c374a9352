"""The continuous-action family: CQL(H)-SAC offline and SAC online share this one training step.

One step (Haarnoja et al. 2018, Algorithm 1, with policy delay 1) on a batch whose actions are
mapped to the policy's box [-1, 1]^d:

(a) critics: the chosen critic's loss on both ensembles (clipped double Q, soft targets, see
    :mod:`offline_gitd.critics.continuous_inputs`) plus ``cql_alpha`` times CQL(H)'s penalty
    (Kumar et al. 2020, Eq. 4 with the Appendix F importance-sampled logsumexp); with td, K = 1 and
    ``cql_alpha = 0`` this is exactly SAC's critic update (Haarnoja et al. 2018, Eq. 5-6);
(b) actor: J_pi = E[alpha log pi(a|s) - min_i mean_k Q^i_k(s, a)], a ~ pi reparameterised
    (Eq. 7 and 11), on the critics just updated; the mean over the K online heads is the same value
    the discrete family acts greedily on (docs/critics.md);
(c) temperature: J(alpha) = E[-alpha (log pi(a|s) + target_entropy)] (Haarnoja et al. 2018b,
    Eq. 18), optimised in log alpha so alpha stays positive, target entropy -act_dim;
(d) each ensemble's frozen parameters follow the critic's rules (soft update with tau).

The key is carried in the state and split inside the step, so a run is a pure function of its
initial state and batches: deterministic, vmappable over seeds and resumable from a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, init_frozen, loss_from_inputs, maintain
from offline_gitd.critics.continuous_inputs import continuous_inputs, ensemble_q_values
from offline_gitd.learners.actor import Actor
from offline_gitd.learners.cql import continuous_cql_penalty, cql_proposals
from offline_gitd.networks import MultiHeadNetwork, Params

NUM_ENSEMBLES = 2  # clipped double Q
# Data actions at the box's edges would map to tanh(+-inf): keep them strictly inside (-1, 1) so that
# log pi(a_data|s) is finite for any consumer (behaviour-cloning terms, diagnostics).
ACTION_MARGIN = 1e-6


class ContinuousState(NamedTuple):
    """Everything a continuous learner carries between updates, as one pytree (seeds vmap over
    it, a checkpoint saves it). Critic leaves have a leading ensemble axis E = 2; ``rng`` is raw
    key data (uint32) so that checkpoints need no special key handling."""

    critic_params: Params
    frozen: Params
    critic_opt_state: Any
    actor_params: Params
    actor_opt_state: Any
    log_alpha: jnp.ndarray
    alpha_opt_state: Any
    rng: jnp.ndarray
    step: jnp.ndarray  # number of gradient updates done (int32)


class Optimizers(NamedTuple):
    critic: optax.GradientTransformation
    actor: optax.GradientTransformation
    temperature: optax.GradientTransformation


class ActionBox(NamedTuple):
    """The environment's action bounds, as tuples so that the family stays hashable."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    def normalise(self, action: jnp.ndarray) -> jnp.ndarray:
        """Env-scale actions -> [-1 + m, 1 - m], the policy's and critics' action space."""
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        unit = 2.0 * (action.astype(jnp.float32) - low) / (high - low) - 1.0
        return jnp.clip(unit, -1.0 + ACTION_MARGIN, 1.0 - ACTION_MARGIN)

    def to_env(self, action: jnp.ndarray) -> jnp.ndarray:
        """[-1, 1] -> env-scale actions (inverse of :meth:`normalise`)."""
        low, high = jnp.asarray(self.low), jnp.asarray(self.high)
        return low + 0.5 * (action + 1.0) * (high - low)


def as_key(rng: jax.Array) -> jax.Array:
    """A typed PRNG key from either a key or its raw data (what states and checkpoints carry)."""
    return rng if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key) else jax.random.wrap_key_data(rng)


def init_critic_ensembles(
    cfg: CriticConfig, net: MultiHeadNetwork, key: jax.Array, obs_example: jnp.ndarray, act_dim: int
) -> tuple[Params, Params]:
    """Clipped double Q's two critic ensembles from different keys (leading axis E) and their
    frozen copies under the critic's rules: the critic half of every continuous learner's state."""
    action_example = jnp.zeros((obs_example.shape[0], act_dim), jnp.float32)
    critic_params = jax.vmap(net.init, in_axes=(0, None, None))(
        jax.random.split(key, NUM_ENSEMBLES), obs_example, action_example
    )
    return critic_params, jax.vmap(lambda p: init_frozen(cfg, net, p))(critic_params)


def init_continuous_state(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    actor: Actor,
    optimizers: Optimizers,
    rng: jax.Array,
    obs_example: jnp.ndarray,
) -> ContinuousState:
    """Two critic ensembles from different keys, their frozen copies, the actor and alpha = 1."""
    key_critic, key_actor, carry = jax.random.split(as_key(rng), 3)
    critic_params, frozen = init_critic_ensembles(cfg, net, key_critic, obs_example, actor.act_dim)
    actor_params = actor.init(key_actor, obs_example)
    log_alpha = jnp.zeros((), jnp.float32)
    return ContinuousState(
        critic_params=critic_params,
        frozen=frozen,
        critic_opt_state=optimizers.critic.init(critic_params),
        actor_params=actor_params,
        actor_opt_state=optimizers.actor.init(actor_params),
        log_alpha=log_alpha,
        alpha_opt_state=optimizers.temperature.init(log_alpha),
        rng=jax.random.key_data(carry),
        step=jnp.zeros((), jnp.int32),
    )


def continuous_critic_loss(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    cql_alpha: float,
    params: Params,
    frozen: Params,
    batch: Batch,
    next_action: jnp.ndarray,
    next_log_prob: jnp.ndarray,
    alpha: jnp.ndarray,
    proposals: tuple[jnp.ndarray, jnp.ndarray] | None,
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """Critic loss on both ensembles plus ``cql_alpha`` times CQL(H)'s penalty on every online head.

    ``batch.action`` is already in [-1, 1]; ``proposals`` = (actions [B, 3N, d], log-densities
    [B, 3N]) from :func:`cql_proposals`, unused (may be None) when ``cql_alpha`` is 0.
    """
    inputs = continuous_inputs(cfg, net, params, frozen, batch, next_action, next_log_prob, alpha)
    loss, aux = loss_from_inputs(cfg, inputs, batch.weight)
    if cql_alpha:
        actions, log_density = proposals
        batch_size, num, act_dim = actions.shape
        repeated_obs = jnp.repeat(batch.obs, num, axis=0)
        q_proposals = ensemble_q_values(net, params, repeated_obs, actions.reshape(batch_size * num, act_dim))
        q_proposals = q_proposals.reshape(q_proposals.shape[:-1] + (batch_size, num))
        penalty = jnp.mean(continuous_cql_penalty(q_proposals, log_density, inputs.q_sa))
        aux["cql_penalty"] = penalty
        loss = loss + cql_alpha * penalty
    aux["loss"] = loss
    return loss, aux


def actor_loss(
    actor: Actor,
    net: MultiHeadNetwork,
    actor_params: Params,
    critic_params: Params,
    alpha: jnp.ndarray,
    obs: jnp.ndarray,
    rng: jax.Array,
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """SAC's policy loss mean(alpha log pi(a|s) - min_i mean_k Q^i_k(s, a)) and log pi(a|s) [B].

    Critics and alpha are constants here: only the policy moves, through the reparameterised a.
    """
    action, log_prob = actor.sample_action(actor_params, obs, rng)
    q = ensemble_q_values(net, jax.lax.stop_gradient(critic_params), obs, action)
    value = q.mean(axis=1).min(axis=0)
    return jnp.mean(jax.lax.stop_gradient(alpha) * log_prob - value), log_prob


def temperature_loss(log_alpha: jnp.ndarray, log_prob: jnp.ndarray, target_entropy: float) -> jnp.ndarray:
    """-log alpha * mean(sg(log pi + target_entropy)): alpha grows while the entropy is below target.

    Differentiated in log alpha, as the SAC authors' code does: the gradient sign is that of
    Haarnoja et al. 2018b Eq. 18, and alpha = exp(log alpha) can never become negative.
    """
    return -log_alpha * jnp.mean(jax.lax.stop_gradient(log_prob + target_entropy))


def make_continuous_step(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    actor: Actor,
    optimizers: Optimizers,
    box: ActionBox,
    cql_alpha: float,
    num_cql_samples: int,
) -> Callable[[ContinuousState, Batch], tuple[ContinuousState, dict[str, Any]]]:
    """One critic, actor and temperature update, then the frozen-parameter rules. Pure."""
    target_entropy = -float(actor.act_dim)

    def step(state: ContinuousState, batch: Batch) -> tuple[ContinuousState, dict[str, Any]]:
        carry, key_next, key_cql, key_actor = jax.random.split(jax.random.wrap_key_data(state.rng), 4)
        batch = batch._replace(action=box.normalise(batch.action))
        alpha = jnp.exp(state.log_alpha)

        # (a) critics, with a' ~ pi(.|s') and CQL's proposals drawn from the current policy.
        next_action, next_log_prob = actor.sample_action(state.actor_params, batch.next_obs, key_next)
        proposals = None
        if cql_alpha:
            proposals = cql_proposals(
                lambda o, k: actor.sample_action(state.actor_params, o, k),
                batch.obs,
                batch.next_obs,
                actor.act_dim,
                num_cql_samples,
                key_cql,
            )
        critic_grads, aux = jax.grad(
            lambda p: continuous_critic_loss(
                cfg, net, cql_alpha, p, state.frozen, batch, next_action, next_log_prob, alpha, proposals
            ),
            has_aux=True,
        )(state.critic_params)
        updates, critic_opt_state = optimizers.critic.update(critic_grads, state.critic_opt_state, state.critic_params)
        critic_params = optax.apply_updates(state.critic_params, updates)

        # (b) actor on the updated critics.
        (policy_loss, log_prob), actor_grads = jax.value_and_grad(
            lambda p: actor_loss(actor, net, p, critic_params, alpha, batch.obs, key_actor), has_aux=True
        )(state.actor_params)
        updates, actor_opt_state = optimizers.actor.update(actor_grads, state.actor_opt_state, state.actor_params)
        actor_params = optax.apply_updates(state.actor_params, updates)

        # (c) temperature, from the entropy of the actor step's samples.
        alpha_grad = jax.grad(temperature_loss)(state.log_alpha, log_prob, target_entropy)
        updates, alpha_opt_state = optimizers.temperature.update(alpha_grad, state.alpha_opt_state, state.log_alpha)
        log_alpha = optax.apply_updates(state.log_alpha, updates)

        # (d) each ensemble's theta_0 (and stale copies) follow the critic's rules.
        count = state.step + 1
        critic_params, frozen = jax.vmap(lambda p, f: maintain(cfg, net, p, f, count))(critic_params, state.frozen)

        aux.update(actor_loss=policy_loss, alpha=alpha, entropy=-jnp.mean(log_prob))
        new_state = ContinuousState(
            critic_params=critic_params,
            frozen=frozen,
            critic_opt_state=critic_opt_state,
            actor_params=actor_params,
            actor_opt_state=actor_opt_state,
            log_alpha=log_alpha,
            alpha_opt_state=alpha_opt_state,
            rng=jax.random.key_data(carry),
            step=count,
        )
        return new_state, aux

    return step
