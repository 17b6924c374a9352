"""TD3+BC (Fujimoto & Gu 2021, "A Minimalist Approach to Offline Reinforcement Learning") with any critic.

TD3 (Fujimoto et al. 2018, Algorithm 1) with a behaviour-cloning term in the actor's objective
(Fujimoto & Gu 2021, Eq. 3-4), on a batch whose actions are mapped to the policy's box [-1, 1]^d
(docs/baselines-math.md). One step:

(a) critics, every step: the chosen critic's loss on both ensembles (clipped double Q) with the
    target policy smoothing action

        a' = clip(pi_target(s') + clip(eps, -c, c), -1, 1),   eps ~ N(0, sigma^2),

    i.e. :func:`~offline_gitd.critics.continuous_inputs.continuous_inputs` with that a', no
    log-probability and alpha = 0, so the bootstrap value is min_j Q^j_0(s', a'): with td (K = 1)
    this is exactly TD3's critic update; tdrc, itd and gitd regress on the same targets with their
    own losses (docs/critics.md);
(b) actor, every ``policy_delay``-th step, on the critics just updated: maximise
    lambda Q(s, pi(s)) - (pi(s) - a)^2, lambda = bc_alpha / mean|Q(s, pi(s))| (no gradient), with
    pi(s) = tanh(mean) of the package's actor network and Q the first ensemble's value, the mean of
    its K online heads (TD3 uses Q1; with K heads, the value the package acts on: docs/critics.md);
(c) targets, on the same delayed cadence (TD3's Algorithm 1): with soft updates (the critic's tau)
    the target actor and each ensemble's frozen parameters (the critic's rules,
    :func:`~offline_gitd.critics.maintain`) move by Polyak averaging after each actor update. With
    hard updates (tau unset) the critic's rules run every step, as their period T counts gradient
    steps, and the target actor is copied whenever theta_0 is (every T steps).

Skipped actor steps leave the actor, its Adam moments and the targets exactly as they were: the
update is computed and the old or new values are selected, so no Python branches on traced values.

As in the authors' code (github.com/sfujim/TD3_BC): lambda's normaliser is |Q| at the policy's
actions (Eq. 4 writes the batch pairs (s_i, a_i)) and the behaviour-cloning term is the mean squared
error over batch and action dimensions. Their state normalisation by the dataset's mean and standard
deviation is not done here: observations enter the networks as the dataset stores them.

The paper's hyperparameters (the configuration's table holds them): lr 3e-4 for actor and critic,
batch 256, gamma 0.99, tau 0.005, sigma 0.2, c 0.5, d 2, alpha 2.5, 256-256 MLPs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, critic_optimizer, loss_from_inputs, maintain, make_network
from offline_gitd.critics.continuous_inputs import continuous_inputs, ensemble_q_values
from offline_gitd.errors import ConfigError
from offline_gitd.learners.action_box import action_box
from offline_gitd.learners.actor import Actor
from offline_gitd.learners.continuous import ActionBox, as_key, init_critic_ensembles
from offline_gitd.learners.family import ActionSpace, network_settings
from offline_gitd.networks import MultiHeadNetwork, Params


class TD3BCState(NamedTuple):
    """Everything TD3+BC carries between updates, as one pytree (vmapped over seeds, checkpointed).
    Critic leaves have a leading ensemble axis E = 2; ``rng`` is raw key data (uint32)."""

    critic_params: Params
    frozen: Params
    critic_opt_state: Any
    actor_params: Params
    actor_target: Params
    actor_opt_state: Any
    rng: jnp.ndarray
    step: jnp.ndarray  # number of gradient updates done (int32)


class TD3BCOptimizers(NamedTuple):
    critic: optax.GradientTransformation
    actor: optax.GradientTransformation


def smoothed_target_action(
    actor: Actor, actor_target: Params, next_obs: jnp.ndarray, noise: jnp.ndarray, noise_clip: float
) -> jnp.ndarray:
    """TD3's target policy smoothing: clip(pi_target(s') + clip(noise, -c, c), -1, 1), [B, act_dim].

    ``noise`` is already sigma * N(0, 1); a pure function of it, so a test can reproduce a draw.
    """
    smoothing = jnp.clip(noise, -noise_clip, noise_clip)
    return jnp.clip(actor.mode_action(actor_target, next_obs) + smoothing, -1.0, 1.0)


def td3bc_critic_loss(
    cfg: CriticConfig, net: MultiHeadNetwork, params: Params, frozen: Params, batch: Batch, next_action: jnp.ndarray
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """The critic's loss on both ensembles with bootstrap value min_j Q^j(s', a') (no entropy term).

    ``batch.action`` and ``next_action`` are in [-1, 1]; ``next_action`` is a constant here.
    """
    no_entropy = jnp.zeros(next_action.shape[:1], jnp.float32)
    inputs = continuous_inputs(cfg, net, params, frozen, batch, next_action, no_entropy, jnp.zeros((), jnp.float32))
    loss, aux = loss_from_inputs(cfg, inputs, batch.weight)
    aux["loss"] = loss
    return loss, aux


def td3bc_actor_loss(
    actor: Actor,
    net: MultiHeadNetwork,
    actor_params: Params,
    critic_params: Params,
    obs: jnp.ndarray,
    data_action: jnp.ndarray,
    bc_alpha: float,
) -> tuple[jnp.ndarray, dict[str, jnp.ndarray]]:
    """-lambda mean Q(s, pi(s)) + mean (pi(s) - a)^2, lambda = bc_alpha / mean|Q(s, pi(s))| (Eq. 3-4).

    Q is the first ensemble's mean over its online heads; the critics and lambda are constants here.
    """
    policy_action = actor.mode_action(actor_params, obs)
    q = ensemble_q_values(net, jax.lax.stop_gradient(critic_params), obs, policy_action)[0].mean(axis=0)
    lmbda = bc_alpha / jax.lax.stop_gradient(jnp.mean(jnp.abs(q)))
    bc = jnp.mean(jnp.square(policy_action - data_action))
    return -lmbda * jnp.mean(q) + bc, {"bc_loss": bc, "lambda": lmbda}


def select(condition: jnp.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``condition`` holds, else ``old``, leaf by leaf (a skipped update, exactly)."""
    return jax.tree.map(lambda n, o: jnp.where(condition, n, o), new, old)


def polyak(tau: float, online: Params, target: Params) -> Params:
    """target <- tau online + (1 - tau) target."""
    return jax.tree.map(lambda new, old: tau * new + (1.0 - tau) * old, online, target)


def init_td3bc_state(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    actor: Actor,
    optimizers: TD3BCOptimizers,
    rng: jax.Array,
    obs_example: jnp.ndarray,
) -> TD3BCState:
    """Two critic ensembles from different keys, their frozen copies, the actor and its target copy."""
    key_critic, key_actor, carry = jax.random.split(as_key(rng), 3)
    critic_params, frozen = init_critic_ensembles(cfg, net, key_critic, obs_example, actor.act_dim)
    actor_params = actor.init(key_actor, obs_example)
    return TD3BCState(
        critic_params=critic_params,
        frozen=frozen,
        critic_opt_state=optimizers.critic.init(critic_params),
        actor_params=actor_params,
        actor_target=actor_params,
        actor_opt_state=optimizers.actor.init(actor_params),
        rng=jax.random.key_data(carry),
        step=jnp.zeros((), jnp.int32),
    )


def make_td3bc_step(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    actor: Actor,
    optimizers: TD3BCOptimizers,
    box: ActionBox,
    *,
    bc_alpha: float,
    policy_noise: float,
    noise_clip: float,
    policy_delay: int,
) -> Callable[[TD3BCState, Batch], tuple[TD3BCState, dict[str, Any]]]:
    """One critic update, a delayed actor update and the target rules. Pure."""

    def step(state: TD3BCState, batch: Batch) -> tuple[TD3BCState, dict[str, Any]]:
        carry, key_noise = jax.random.split(jax.random.wrap_key_data(state.rng))
        batch = batch._replace(action=box.normalise(batch.action))
        count = state.step + 1
        policy_step = count % policy_delay == 0

        # (a) critics, on TD3's smoothed target action.
        noise = policy_noise * jax.random.normal(key_noise, batch.action.shape, jnp.float32)
        next_action = smoothed_target_action(actor, state.actor_target, batch.next_obs, noise, noise_clip)
        critic_grads, aux = jax.grad(
            lambda p: td3bc_critic_loss(cfg, net, p, state.frozen, batch, next_action), has_aux=True
        )(state.critic_params)
        updates, critic_opt_state = optimizers.critic.update(critic_grads, state.critic_opt_state, state.critic_params)
        critic_params = optax.apply_updates(state.critic_params, updates)

        # (b) actor, kept (with its Adam moments) unless this is a policy step.
        (policy_loss, actor_aux), actor_grads = jax.value_and_grad(
            lambda p: td3bc_actor_loss(actor, net, p, critic_params, batch.obs, batch.action, bc_alpha), has_aux=True
        )(state.actor_params)
        updates, new_actor_opt_state = optimizers.actor.update(actor_grads, state.actor_opt_state, state.actor_params)
        actor_params, actor_opt_state = select(
            policy_step,
            (optax.apply_updates(state.actor_params, updates), new_actor_opt_state),
            (state.actor_params, state.actor_opt_state),
        )

        # (c) targets: TD3's delayed Polyak averaging, or the critic's hard rolls every T steps.
        maintained = jax.vmap(lambda p, f: maintain(cfg, net, p, f, count))(critic_params, state.frozen)
        if cfg.tau is not None:
            critic_params, frozen = select(policy_step, maintained, (critic_params, state.frozen))
            actor_target = select(policy_step, polyak(cfg.tau, actor_params, state.actor_target), state.actor_target)
        else:
            critic_params, frozen = maintained
            actor_target = select(count % cfg.T == 0, actor_params, state.actor_target)

        aux.update(actor_loss=policy_loss, **actor_aux)
        new_state = TD3BCState(
            critic_params=critic_params,
            frozen=frozen,
            critic_opt_state=critic_opt_state,
            actor_params=actor_params,
            actor_target=actor_target,
            actor_opt_state=actor_opt_state,
            rng=jax.random.key_data(carry),
            step=count,
        )
        return new_state, aux

    return step


@dataclass(frozen=True)
class TD3BCFamily:
    """TD3+BC with the chosen critic on continuous actions (a :class:`~offline_gitd.learners.family.Family`).

    The networks work in [-1, 1]^d; ``box`` maps data actions in and the policy's actions out.
    """

    critic: CriticConfig
    net: MultiHeadNetwork
    actor: Actor
    obs_example: np.ndarray
    box: ActionBox
    lr: float
    adam_eps: float
    bc_alpha: float
    policy_noise: float
    noise_clip: float
    policy_delay: int

    @property
    def optimizers(self) -> TD3BCOptimizers:
        """One learning rate for actor and critic (the paper's table has one)."""
        return TD3BCOptimizers(
            critic=critic_optimizer(self.critic, self.lr, self.adam_eps), actor=optax.adam(self.lr, eps=self.adam_eps)
        )

    def init(self, rng: jax.Array) -> TD3BCState:
        return init_td3bc_state(self.critic, self.net, self.actor, self.optimizers, rng, jnp.asarray(self.obs_example))

    @property
    def step(self) -> Callable[[TD3BCState, Batch], tuple[TD3BCState, dict[str, Any]]]:
        return make_td3bc_step(
            self.critic,
            self.net,
            self.actor,
            self.optimizers,
            self.box,
            bc_alpha=self.bc_alpha,
            policy_noise=self.policy_noise,
            noise_clip=self.noise_clip,
            policy_delay=self.policy_delay,
        )

    def act(self, state: TD3BCState, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """Evaluation: the deterministic policy tanh(mean), in env units (rng unused)."""
        return self.box.to_env(self.actor.mode_action(state.actor_params, obs))


def make_td3bc_family(
    critic: CriticConfig,
    act_dim: int,
    obs_example: np.ndarray,
    action_bounds: tuple[np.ndarray, np.ndarray],
    *,
    mlp_hidden: tuple[int, ...],
    lr: float,
    adam_eps: float,
    bc_alpha: float,
    policy_noise: float,
    noise_clip: float,
    policy_delay: int,
) -> TD3BCFamily:
    """``action_bounds`` = (low, high) of the env's Box; ``mlp_hidden`` sizes the critics and the actor."""
    if not bc_alpha > 0:
        raise ConfigError(f"TD3+BC's alpha must be > 0, got {bc_alpha!r}")
    if not (policy_noise >= 0 and noise_clip >= 0):
        raise ConfigError(f"TD3's policy noise and noise clip must be >= 0, got {policy_noise!r} and {noise_clip!r}")
    if isinstance(policy_delay, bool) or not isinstance(policy_delay, int) or policy_delay < 1:
        raise ConfigError(f"TD3's policy delay must be an integer >= 1, got {policy_delay!r}")
    box = action_box(act_dim, action_bounds)
    net = make_network(critic, 1, "mlp", continuous=True, mlp_hidden=tuple(mlp_hidden))
    actor = Actor(act_dim, tuple(mlp_hidden))
    return TD3BCFamily(
        critic, net, actor, obs_example, box, lr, adam_eps, bc_alpha, policy_noise, noise_clip, policy_delay
    )


def build_td3bc_family(cfg: Any, spaces: ActionSpace, obs_example: np.ndarray) -> TD3BCFamily:
    """``--algo td3bc``'s family builder (offline_gitd.algorithm_registry): continuous actions only,
    as its record says; its own hyperparameters are ``cfg.params``, a ``TD3BCParams``."""
    return make_td3bc_family(
        cfg.critic_config(),
        spaces.action_size,
        obs_example,
        spaces.action_bounds,
        **network_settings(cfg),
        bc_alpha=cfg.params.bc_alpha,
        policy_noise=cfg.params.policy_noise,
        noise_clip=cfg.params.noise_clip,
        policy_delay=cfg.params.policy_delay,
    )
