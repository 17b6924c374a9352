"""IQL (Kostrikov, Nair & Levine 2022, "Offline Reinforcement Learning with Implicit Q-Learning").

Implicit Q-learning never queries the critic at an action the data does not hold: a state-value
network V fitted by expectile regression on the target critics replaces the max over actions, and
the policy is extracted by advantage-weighted regression (docs/baselines-math.md). On a batch whose
actions are mapped to [-1, 1]^d, one step follows the authors' update order (Algorithm 1, as their
code runs it):

(a) V (Eq. 5): L_V = mean L2^tau(Q_hat(s, a) - V(s)),  L2^tau(u) = |tau - 1(u < 0)| u^2,
    Q_hat = min_j Q^j_0(s, a), the two frozen (target) critics; ``expectile`` is tau;
(b) policy (Eq. 7), with the V just updated: L_pi = -mean min(exp(beta (Q_hat(s, a) - V(s))), 100)
    log pi(a|s), beta = ``temperature``;
(c) Q (Eq. 6), with the V just updated: the critic's loss on both ensembles with bootstrap value
    V(s') (no gradient) in place of theta_0's, i.e. 1/2 (r + g V(s') - Q^j(s, a))^2 for td
    (docs/critics.md#why-the-one-half; the authors' code drops the 1/2, which Adam does not see);
(d) each ensemble's frozen parameters follow the critic's rules (soft update with tau 0.005).

Which critics: those whose targets read theta_0 only (``td`` and plug-ins declaring frozen
targets), since IQL's bootstrap value is V(s'), one number per transition. TDRC bootstraps from its
own online head at (s', a') and i-TD / Gi-TD chain head k's target to head k-1 at (s', a'): with
V(s') as every bootstrap value there is no next action and nothing left to chain, so
:func:`make_iql_family` refuses them.

Deviations, stated: the policy is the package's tanh-Gaussian actor (state-dependent log-std,
log-probabilities through the tanh change of variables, data actions kept strictly inside (-1, 1)
by :class:`~offline_gitd.learners.continuous.ActionBox`), where the authors use a Gaussian with
state-independent log-std and no squashing; the authors' cosine decay of the actor's learning rate
is not applied (constant 3e-4); and their MuJoCo reward scaling (1000 / the dataset's return range)
is not done here. Only the importance weights of the batch weigh the critic's loss; V and the
policy take the plain batch mean, as the SAC-family actor does. The step draws no random numbers,
so the state carries no key.

The paper's MuJoCo hyperparameters (the configuration's table holds them): lr 3e-4 everywhere,
batch 256, 256-256 MLPs, expectile 0.7, beta 3.0, Polyak 0.005, gamma 0.99.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, critic_optimizer, loss_from_inputs, maintain, make_network
from offline_gitd.critics.continuous_inputs import ensemble_q_values
from offline_gitd.critics.inputs import CriticInputs
from offline_gitd.errors import ConfigError
from offline_gitd.learners.action_box import action_box
from offline_gitd.learners.actor import Actor
from offline_gitd.learners.continuous import ActionBox, as_key, init_critic_ensembles
from offline_gitd.learners.family import ActionSpace, network_settings
from offline_gitd.networks import MultiHeadNetwork, Params
from offline_gitd.networks.dense import Dense
from offline_gitd.networks.torsos import scale_observation

ADVANTAGE_WEIGHT_MAX = 100.0  # the authors' clip of exp(beta A) (their code, all tasks)


class ValueNetwork(nn.Module):
    """V(s): an MLP (ReLU) on the observation with one linear output, [B]."""

    hidden: tuple[int, ...] = (256, 256)

    @nn.compact
    def __call__(self, obs: jnp.ndarray) -> jnp.ndarray:
        x = scale_observation(obs).reshape(obs.shape[0], -1)
        for width in self.hidden:
            x = nn.relu(Dense(width)(x))
        return Dense(1)(x)[:, 0]


class IQLState(NamedTuple):
    """Everything IQL carries between updates, as one pytree (vmapped over seeds, checkpointed).
    Critic leaves have a leading ensemble axis E = 2."""

    critic_params: Params
    frozen: Params
    critic_opt_state: Any
    value_params: Params
    value_opt_state: Any
    actor_params: Params
    actor_opt_state: Any
    step: jnp.ndarray  # number of gradient updates done (int32)


class IQLOptimizers(NamedTuple):
    critic: optax.GradientTransformation
    value: optax.GradientTransformation
    actor: optax.GradientTransformation


def expectile_loss(diff: jnp.ndarray, expectile: float) -> jnp.ndarray:
    """L2^tau(u) = |tau - 1(u < 0)| u^2, elementwise (Eq. 5)."""
    return jnp.abs(expectile - (diff < 0).astype(diff.dtype)) * jnp.square(diff)


def target_q(net: MultiHeadNetwork, frozen: Params, obs: jnp.ndarray, action: jnp.ndarray) -> jnp.ndarray:
    """Q_hat(s, a) = min_j Q^j_0(s, a) over the two frozen critics, no gradient: [B]."""
    return jax.lax.stop_gradient(ensemble_q_values(net, frozen["target"], obs, action)[:, 0].min(axis=0))


def value_loss(
    value: ValueNetwork, value_params: Params, q_hat: jnp.ndarray, obs: jnp.ndarray, expectile: float
) -> tuple[jnp.ndarray, jnp.ndarray]:
    """mean L2^tau(Q_hat - V(s)) and V(s) [B]."""
    v = value.apply(value_params, obs)
    return jnp.mean(expectile_loss(q_hat - v, expectile)), v


def tanh_gaussian_log_prob(mean: jnp.ndarray, log_std: jnp.ndarray, action: jnp.ndarray) -> jnp.ndarray:
    """log pi(a|s) of an action a in (-1, 1)^d under a = tanh(u), u ~ N(mean, exp(log_std)^2): [B].

    log N(atanh(a); mean, sigma) - sum log(1 - a^2) (Haarnoja et al. 2018, Eq. 21, read backwards);
    the Jacobian term is written log1p(-a) + log1p(a) so that a near +-1 keeps its precision.
    """
    u = jnp.arctanh(action)
    gaussian = -0.5 * jnp.square((u - mean) / jnp.exp(log_std)) - log_std - 0.5 * math.log(2.0 * math.pi)
    return (gaussian - jnp.log1p(-action) - jnp.log1p(action)).sum(axis=-1)


def awr_actor_loss(
    actor: Actor,
    actor_params: Params,
    obs: jnp.ndarray,
    data_action: jnp.ndarray,
    q_hat: jnp.ndarray,
    v: jnp.ndarray,
    temperature: float,
) -> tuple[jnp.ndarray, dict[str, jnp.ndarray]]:
    """-mean min(exp(beta (Q_hat - V)), 100) log pi(a|s) (Eq. 7); the weights are constants."""
    weight = jax.lax.stop_gradient(jnp.minimum(jnp.exp(temperature * (q_hat - v)), ADVANTAGE_WEIGHT_MAX))
    mean, log_std = actor.distribution(actor_params, obs)
    log_prob = tanh_gaussian_log_prob(mean, log_std, data_action)
    return -jnp.mean(weight * log_prob), {"awr_weight": jnp.mean(weight), "data_log_prob": jnp.mean(log_prob)}


def iql_critic_loss(
    cfg: CriticConfig, net: MultiHeadNetwork, params: Params, batch: Batch, next_value: jnp.ndarray
) -> tuple[jnp.ndarray, dict[str, Any]]:
    """The critic's loss on both ensembles with bootstrap value V(s') [B] (a constant) for every head."""
    q_sa, h_sa = jax.vmap(net.apply, in_axes=(0, None, None))(params, batch.obs, batch.action)
    inputs = CriticInputs(
        q_sa=q_sa,
        h_sa=h_sa,
        v_next_frozen=jax.lax.stop_gradient(next_value),
        v_next_online=None,
        v_next_stale=None,
        reward=batch.reward.astype(jnp.float32),
        discount=batch.discount.astype(jnp.float32),
    )
    loss, aux = loss_from_inputs(cfg, inputs, batch.weight)
    aux["loss"] = loss
    return loss, aux


def init_iql_state(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    value: ValueNetwork,
    actor: Actor,
    optimizers: IQLOptimizers,
    rng: jax.Array,
    obs_example: jnp.ndarray,
) -> IQLState:
    """Two critic ensembles from different keys, their frozen copies, V and the actor."""
    key_critic, key_value, key_actor = jax.random.split(as_key(rng), 3)
    critic_params, frozen = init_critic_ensembles(cfg, net, key_critic, obs_example, actor.act_dim)
    value_params = value.init(key_value, obs_example)
    actor_params = actor.init(key_actor, obs_example)
    return IQLState(
        critic_params=critic_params,
        frozen=frozen,
        critic_opt_state=optimizers.critic.init(critic_params),
        value_params=value_params,
        value_opt_state=optimizers.value.init(value_params),
        actor_params=actor_params,
        actor_opt_state=optimizers.actor.init(actor_params),
        step=jnp.zeros((), jnp.int32),
    )


def make_iql_step(
    cfg: CriticConfig,
    net: MultiHeadNetwork,
    value: ValueNetwork,
    actor: Actor,
    optimizers: IQLOptimizers,
    box: ActionBox,
    *,
    expectile: float,
    temperature: float,
) -> Callable[[IQLState, Batch], tuple[IQLState, dict[str, Any]]]:
    """One V, policy and critic update, then the frozen-parameter rules. Pure and deterministic."""

    def step(state: IQLState, batch: Batch) -> tuple[IQLState, dict[str, Any]]:
        batch = batch._replace(action=box.normalise(batch.action))
        q_hat = target_q(net, state.frozen, batch.obs, batch.action)

        # (a) V by expectile regression on the target critics.
        (v_loss, _), value_grads = jax.value_and_grad(
            lambda p: value_loss(value, p, q_hat, batch.obs, expectile), has_aux=True
        )(state.value_params)
        updates, value_opt_state = optimizers.value.update(value_grads, state.value_opt_state, state.value_params)
        value_params = optax.apply_updates(state.value_params, updates)

        # (b) policy by advantage-weighted regression, with the new V.
        v = value.apply(value_params, batch.obs)
        (policy_loss, actor_aux), actor_grads = jax.value_and_grad(
            lambda p: awr_actor_loss(actor, p, batch.obs, batch.action, q_hat, v, temperature), has_aux=True
        )(state.actor_params)
        updates, actor_opt_state = optimizers.actor.update(actor_grads, state.actor_opt_state, state.actor_params)
        actor_params = optax.apply_updates(state.actor_params, updates)

        # (c) critics on r + g V(s'), with the new V.
        next_value = value.apply(value_params, batch.next_obs)
        critic_grads, aux = jax.grad(lambda p: iql_critic_loss(cfg, net, p, batch, next_value), has_aux=True)(
            state.critic_params
        )
        updates, critic_opt_state = optimizers.critic.update(critic_grads, state.critic_opt_state, state.critic_params)
        critic_params = optax.apply_updates(state.critic_params, updates)

        # (d) each ensemble's theta_0 follows the critic's rules.
        count = state.step + 1
        critic_params, frozen = jax.vmap(lambda p, f: maintain(cfg, net, p, f, count))(critic_params, state.frozen)

        aux.update(value_loss=v_loss, actor_loss=policy_loss, v_mean=jnp.mean(v), **actor_aux)
        new_state = IQLState(
            critic_params=critic_params,
            frozen=frozen,
            critic_opt_state=critic_opt_state,
            value_params=value_params,
            value_opt_state=value_opt_state,
            actor_params=actor_params,
            actor_opt_state=actor_opt_state,
            step=count,
        )
        return new_state, aux

    return step


@dataclass(frozen=True)
class IQLFamily:
    """IQL with a frozen-target critic on continuous actions (a :class:`~offline_gitd.learners.family.Family`).

    The networks work in [-1, 1]^d; ``box`` maps data actions in and the policy's actions out.
    """

    critic: CriticConfig
    net: MultiHeadNetwork
    value: ValueNetwork
    actor: Actor
    obs_example: np.ndarray
    box: ActionBox
    lr: float
    adam_eps: float
    expectile: float
    temperature: float

    @property
    def optimizers(self) -> IQLOptimizers:
        """One learning rate for critic, V and actor (the paper's table has one)."""
        return IQLOptimizers(
            critic=critic_optimizer(self.critic, self.lr, self.adam_eps),
            value=optax.adam(self.lr, eps=self.adam_eps),
            actor=optax.adam(self.lr, eps=self.adam_eps),
        )

    def init(self, rng: jax.Array) -> IQLState:
        return init_iql_state(
            self.critic, self.net, self.value, self.actor, self.optimizers, rng, jnp.asarray(self.obs_example)
        )

    @property
    def step(self) -> Callable[[IQLState, Batch], tuple[IQLState, dict[str, Any]]]:
        return make_iql_step(
            self.critic,
            self.net,
            self.value,
            self.actor,
            self.optimizers,
            self.box,
            expectile=self.expectile,
            temperature=self.temperature,
        )

    def act(self, state: IQLState, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """Evaluation: the policy's deterministic mode tanh(mean), in env units (rng unused)."""
        return self.box.to_env(self.actor.mode_action(state.actor_params, obs))


def make_iql_family(
    critic: CriticConfig,
    act_dim: int,
    obs_example: np.ndarray,
    action_bounds: tuple[np.ndarray, np.ndarray],
    *,
    mlp_hidden: tuple[int, ...],
    lr: float,
    adam_eps: float,
    expectile: float,
    temperature: float,
) -> IQLFamily:
    """``action_bounds`` = (low, high) of the env's Box; ``mlp_hidden`` sizes critics, V and actor."""
    if critic.spec.targets != "frozen":
        raise ConfigError(
            f"IQL takes critics that bootstrap from a target network only (td): {critic.kind!r} bootstraps from "
            "online Q-heads (or their copies) at (s', a'), and IQL's bootstrap is V(s'), with no next action"
        )
    if not 0.0 < expectile < 1.0:
        raise ConfigError(f"IQL's expectile must be in (0, 1), got {expectile!r}")
    if not temperature >= 0:
        raise ConfigError(f"IQL's temperature must be >= 0, got {temperature!r}")
    box = action_box(act_dim, action_bounds)
    hidden = tuple(mlp_hidden)
    net = make_network(critic, 1, "mlp", continuous=True, mlp_hidden=hidden)
    return IQLFamily(
        critic,
        net,
        ValueNetwork(hidden),
        Actor(act_dim, hidden),
        obs_example,
        box,
        lr,
        adam_eps,
        expectile,
        temperature,
    )


def build_iql_family(cfg: Any, spaces: ActionSpace, obs_example: np.ndarray) -> IQLFamily:
    """``--algo iql``'s family builder (offline_gitd.algorithm_registry): continuous actions only,
    as its record says; its own hyperparameters are ``cfg.params``, an ``IQLParams``."""
    return make_iql_family(
        cfg.critic_config(),
        spaces.action_size,
        obs_example,
        spaces.action_bounds,
        **network_settings(cfg),
        expectile=cfg.params.expectile,
        temperature=cfg.params.iql_temperature,
    )
