"""A learner family bundles what the run loop needs from an algorithm: init, step, act.

The offline loop (``offline/loop.py``) and the online loop (``online/loop.py``) drive any family
the same way, so the discrete (CQL-DQN / DQN) and continuous (CQL-SAC / SAC) families share every
line of looping, logging, checkpointing and resuming.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
import optax

from offline_gitd.batch import Batch
from offline_gitd.critics import CriticConfig, critic_optimizer, make_network
from offline_gitd.learners.action_box import action_box
from offline_gitd.learners.actor import Actor
from offline_gitd.learners.continuous import ActionBox, Optimizers, init_continuous_state, make_continuous_step
from offline_gitd.learners.discrete import init_discrete_state, make_discrete_step
from offline_gitd.networks import MultiHeadNetwork


class Family(Protocol):
    """What a run loop needs. ``init`` and ``step`` are pure and vmapped over seeds by the loop."""

    def init(self, rng: jax.Array) -> Any: ...

    def step(self, state: Any, batch: Batch) -> tuple[Any, dict[str, Any]]: ...

    def act(self, state: Any, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray: ...


def seed_states(family: Family, seeds: Sequence[int] | jax.Array, *, compiled: bool = True) -> Any:
    """Every seed's fresh learner state, stacked on a leading seed axis: seed ``s``'s is
    ``family.init(PRNGKey(s))``, so a seed starts from the same networks and optimiser state in
    every loop, in a resumed run's template and when a trained run is read back
    (docs/architecture.md#twin-pipelines). The keys are made eagerly; ``compiled`` jits the vmapped ``init``
    (one program, the loops' start), else it runs op by op as restoring templates and
    ``--init-from``'s fresh seeds always have: both are kept so that each caller's numbers stay
    bit for bit what they were."""
    keys = jax.vmap(jax.random.PRNGKey)(jnp.asarray(seeds))
    init = jax.vmap(family.init)
    return (jax.jit(init) if compiled else init)(keys)


class ActionSpace(Protocol):
    """The dataset's actions as a family builder reads them: :class:`offline_gitd.envs.make.SpaceInfo`,
    which the learners' floor may not import (docs/architecture.md#floors)."""

    @property
    def action_kind(self) -> str: ...  # "discrete" or "continuous"

    @property
    def action_size(self) -> int: ...  # number of actions (discrete) or action dimension (continuous)

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray] | None: ...  # (low, high) of a Box, else None


# What an algorithm's record names as its ``family`` (offline_gitd.algorithm_registry,
# docs/adding-a-learner.md): ``build(cfg, spaces, obs_example)`` from the run's resolved config
# (an ``OfflineConfig``, a floor above this one, so typed ``Any`` here), the dataset's actions and
# one network input (a batch of 1).
FamilyBuilder = Callable[[Any, ActionSpace, np.ndarray], Family]


def network_settings(cfg: Any) -> dict[str, Any]:
    """The MLP widths and Adam settings every family of the package reads from a run config."""
    return dict(mlp_hidden=cfg.hidden_sizes, lr=cfg.lr, adam_eps=cfg.adam_eps)


@dataclass(frozen=True)
class DiscreteFamily:
    """CQL-DQN (``cql_alpha > 0``) or DQN-style critics on discrete actions."""

    critic: CriticConfig
    net: MultiHeadNetwork
    obs_example: np.ndarray
    lr: float
    adam_eps: float
    cql_alpha: float

    @property
    def optimizer(self):
        return critic_optimizer(self.critic, self.lr, self.adam_eps)

    def init(self, rng: jax.Array) -> Any:
        return init_discrete_state(self.critic, self.net, self.optimizer, rng, jnp.asarray(self.obs_example))

    @property
    def step(self) -> Callable[[Any, Batch], tuple[Any, dict[str, Any]]]:
        return make_discrete_step(self.critic, self.net, self.optimizer, self.cql_alpha)

    def act(self, state: Any, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """Greedy in the mean of the online heads (epsilon is applied by the caller)."""
        return self.net.greedy_action(state.params, obs)


def make_discrete_family(
    critic: CriticConfig,
    n_actions: int,
    obs_example: np.ndarray,
    *,
    torso: str,
    mlp_hidden: tuple[int, ...],
    head_hidden: int,
    lr: float,
    adam_eps: float,
    cql_alpha: float,
) -> DiscreteFamily:
    net = make_network(critic, n_actions, torso, mlp_hidden=mlp_hidden, head_hidden=head_hidden)
    return DiscreteFamily(critic, net, obs_example, lr, adam_eps, cql_alpha)


@dataclass(frozen=True)
class ContinuousFamily:
    """CQL(H)-SAC (``cql_alpha > 0``) or SAC with the chosen critic on continuous actions.

    The networks work in [-1, 1]^d; ``box`` maps data actions in and the policy's actions out.
    """

    critic: CriticConfig
    net: MultiHeadNetwork
    actor: Actor
    obs_example: np.ndarray
    box: ActionBox
    lr: float
    adam_eps: float
    cql_alpha: float
    num_cql_samples: int

    @property
    def optimizers(self) -> Optimizers:
        """One learning rate for critic, actor and temperature (the paper's SAC table has one)."""
        return Optimizers(
            critic=critic_optimizer(self.critic, self.lr, self.adam_eps),
            actor=optax.adam(self.lr, eps=self.adam_eps),
            temperature=optax.adam(self.lr, eps=self.adam_eps),
        )

    def init(self, rng: jax.Array) -> Any:
        return init_continuous_state(
            self.critic, self.net, self.actor, self.optimizers, rng, jnp.asarray(self.obs_example)
        )

    @property
    def step(self) -> Callable[[Any, Batch], tuple[Any, dict[str, Any]]]:
        return make_continuous_step(
            self.critic, self.net, self.actor, self.optimizers, self.box, self.cql_alpha, self.num_cql_samples
        )

    def act(self, state: Any, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """Evaluation: the policy's deterministic mode tanh(mean), in env units (rng unused)."""
        return self.box.to_env(self.actor.mode_action(state.actor_params, obs))

    def explore(self, state: Any, obs: jnp.ndarray, rng: jax.Array) -> jnp.ndarray:
        """Online data collection: a ~ pi(.|s), in env units."""
        return self.box.to_env(self.actor.sample_action(state.actor_params, obs, rng)[0])


def make_continuous_family(
    critic: CriticConfig,
    act_dim: int,
    obs_example: np.ndarray,
    action_bounds: tuple[np.ndarray, np.ndarray],
    *,
    mlp_hidden: tuple[int, ...],
    lr: float,
    adam_eps: float,
    cql_alpha: float,
    actor_hidden: tuple[int, ...] = (256, 256),
    num_cql_samples: int = 10,
) -> ContinuousFamily:
    """``action_bounds`` = (low, high) of the env's Box, each broadcastable to [act_dim]."""
    box = action_box(act_dim, action_bounds)
    net = make_network(critic, 1, "mlp", continuous=True, mlp_hidden=mlp_hidden)
    actor = Actor(act_dim, tuple(actor_hidden))
    return ContinuousFamily(critic, net, actor, obs_example, box, lr, adam_eps, cql_alpha, num_cql_samples)


def build_cql_family(cfg: Any, spaces: ActionSpace, obs_example: np.ndarray) -> DiscreteFamily | ContinuousFamily:
    """``--algo cql``'s :data:`FamilyBuilder`: CQL-DQN on discrete actions, CQL(H)-SAC on continuous
    ones, each over the run's critic (``--cql-alpha 0``: offline DQN or SAC)."""
    if spaces.action_kind == "discrete":
        return make_discrete_family(
            cfg.critic_config(),
            spaces.action_size,
            obs_example,
            torso=cfg.torso,
            head_hidden=cfg.head_hidden,
            cql_alpha=cfg.cql_alpha,
            **network_settings(cfg),
        )
    # One --mlp-hidden sets the critics and the actor (the MuJoCo table has FC 256 - FC 256 for both), as online.
    return make_continuous_family(
        cfg.critic_config(),
        spaces.action_size,
        obs_example,
        spaces.action_bounds,
        actor_hidden=cfg.hidden_sizes,
        cql_alpha=cfg.cql_alpha,
        **network_settings(cfg),
    )
