"""The three controlled Markov processes of the paper's Section 5: star, hall and triangle.

Each process is a frozen dataclass holding what the expected updates need: the transition matrix
``P`` of the evaluated policy, the discount, the state weights ``d`` of the norm, the value
function ``V_w`` (linear features or the triangle's spiral), the initial weights and the paper's
defaults (learning rate, sequence length K, and a number of steps that shows the paper's claims).
The reward is 0 everywhere, so the true value is 0 and the Bellman operator is ``T V = gamma P V``
(a terminal transition is a row of ``P`` that sums to less than 1: the terminal state's value is 0).

Sources for the layouts:

- Star: Baird (1995), "Residual algorithms: reinforcement learning with function approximation"
  (ICML), in the 7-state / 8-weight form of Sutton & Barto (2018), Figure 11.1.
- Hall: Baird (1995), same paper (the "hall" problem on which residual gradient is slow). The text
  of that paper was not available here; the layout below is a reconstruction, see :func:`hall`.
- Triangle: Tsitsiklis & Van Roy (1997), "An analysis of temporal-difference learning with function
  approximation" (IEEE TAC), the 3-state spiral counterexample to nonlinear TD, in the simplified
  form the Gi-TD paper states (docs/reproducing.md#controlled-mdps).

``default_steps`` is the horizon ``offline_gitd mdp`` runs by default, long enough for the paper's
claims to be plain on a log scale: star 1,000 (td / i-TD have grown by 8 decades, tdrc / Gi-TD have
settled), hall 1,000 (the value errors are spread over 3 decades), triangle 5,000 (lr is 40x
smaller). Two claims are transients of a finite horizon, not limits: on star, i-TD's frozen ``V_0``
makes its expected dynamics block-triangular with stable diagonal blocks, so after peaking near
1e21 (step ~2,000) it converges (value error 7e-9 by step 8,000); on the triangle with eps = +1,
tdrc overtakes Gi-TD near step 20,000: Gi-TD levels off near 0.8 while tdrc keeps falling, since
with ``V_0`` never rolled Gi-TD minimises a fixed objective whose minimiser on the spiral is not 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class ControlledMDP:
    """A Markov reward process evaluated with expected (all-state, synchronous) updates.

    ``state_weights`` is the distribution ``d`` of the norm ``||x||_d^2 = sum_s d(s) x(s)^2``
    (uniform in all three problems, as in the paper). Subclasses give the value function.
    """

    name: str
    transition: np.ndarray  # P[s, s'] under the evaluated (target) policy
    gamma: float
    init_weights: np.ndarray
    lr: float
    K: int
    default_steps: int
    state_weights: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        n_states = self.transition.shape[0]
        object.__setattr__(self, "state_weights", np.full(n_states, 1.0 / n_states))

    @property
    def n_states(self) -> int:
        return self.transition.shape[0]

    def value(self, w: jnp.ndarray) -> jnp.ndarray:
        """``V_w`` over all states, shape ``(n_states,)``."""
        raise NotImplementedError

    def bellman(self, values: jnp.ndarray) -> jnp.ndarray:
        """``T V = r + gamma P V`` with ``r = 0``; acts on the last axis, so a stack of value
        vectors ``(K, n_states)`` maps to its stack of targets."""
        return self.gamma * values @ jnp.asarray(self.transition).T


@dataclass(frozen=True)
class LinearMDP(ControlledMDP):
    """``V_w = Phi w`` with one feature row per state."""

    features: np.ndarray = field(kw_only=True)

    def value(self, w: jnp.ndarray) -> jnp.ndarray:
        return jnp.asarray(self.features) @ w


# The triangle's spiral: two orthogonal directions of length sqrt(2) spanning the plane orthogonal
# to (1, 1, 1); (1, -2, 1) / sqrt(3) is -(1, 1, 1)/sqrt(3) x (1, 0, -1), so eps = +1 turns the spiral
# the positive (right-hand) way about (1, 1, 1) as w grows, eps = -1 the negative way.
TRIANGLE_A = np.array([1.0, 0.0, -1.0])
TRIANGLE_B = np.array([1.0, -2.0, 1.0])
TRIANGLE_GROWTH = 0.15
TRIANGLE_TURN = 0.866


@dataclass(frozen=True)
class TriangleMDP(ControlledMDP):
    """Tsitsiklis & Van Roy (1997) spiral with scalar weight ``w`` (stored as shape ``(1,)``):
    ``V_w = exp(0.15 w) [cos(0.866 w) (1, 0, -1) - sin(0.866 w) (eps / sqrt 3) (1, -2, 1)]``."""

    eps: float = field(kw_only=True)

    def value(self, w: jnp.ndarray) -> jnp.ndarray:
        theta = w[0]
        return jnp.exp(TRIANGLE_GROWTH * theta) * (
            jnp.cos(TRIANGLE_TURN * theta) * TRIANGLE_A
            - jnp.sin(TRIANGLE_TURN * theta) * (self.eps / np.sqrt(3.0)) * TRIANGLE_B
        )


def star() -> LinearMDP:
    """Baird's (1995) star counterexample as drawn in Sutton & Barto (2018), Figure 11.1.

    Seven states, eight weights: upper state i (i = 1..6) has ``V = 2 w_i + w_8``, the lower state
    ``V = w_7 + 2 w_8``. The target policy always takes the solid action to the lower state, so
    under it every row of ``P`` puts probability 1 on state 7; the expected update weighs the seven
    states uniformly (the behaviour policy's stationary distribution in Sutton & Barto), which
    makes the problem off-policy. Paper settings: gamma 0.99, lr 0.08, K = 300, weights 0 except
    w_6 = 1 (the sixth weight, index 5).
    """
    n_states = 7
    features = np.zeros((n_states, 8))
    for upper in range(6):
        features[upper, upper] = 2.0
        features[upper, 7] = 1.0
    features[6, 6] = 1.0
    features[6, 7] = 2.0
    transition = np.zeros((n_states, n_states))
    transition[:, 6] = 1.0
    init = np.zeros(8)
    init[5] = 1.0
    return LinearMDP(
        name="star",
        transition=transition,
        gamma=0.99,
        init_weights=init,
        lr=0.08,
        K=300,
        default_steps=1000,
        features=features,
    )


HALL_LENGTH = 5


def hall(length: int = HALL_LENGTH) -> LinearMDP:
    """Baird's (1995) hall problem, reconstructed (the paper's text was not available here).

    Assumed layout: a corridor of ``length`` states (5 by default) walked left to right, one state
    per step, the last state moving to a terminal state whose value is 0 (its row of ``P`` is all
    zero); a lookup table, i.e. linear with one-hot features (``Phi = I``), so information must
    travel down the hall one state per Bellman backup. That is the property Baird uses the hall
    for: direct (semi-gradient) methods pass values backwards only and are fast, residual gradient
    also pulls earlier states toward later ones and is slow. The Gi-TD paper only says "linear";
    the length 5 and the terminal at the end are assumptions. Paper settings: gamma 0.9, lr 0.08,
    K = 300, all weights 1.
    """
    transition = np.zeros((length, length))
    for state in range(length - 1):
        transition[state, state + 1] = 1.0
    return LinearMDP(
        name="hall",
        transition=transition,
        gamma=0.9,
        init_weights=np.ones(length),
        lr=0.08,
        K=300,
        default_steps=1000,
        features=np.eye(length),
    )


def triangle_transition() -> np.ndarray:
    """``P = (I + C) / 2`` with C the cycle 1 -> 2 -> 3 -> 1: stay or move on with probability 1/2.

    On the plane orthogonal to (1, 1, 1), ``(C V)(s) = V(s + 1)`` rotates by -120 degrees about
    (1, 1, 1) (right-hand rule), so ``(I + C) / 2`` has eigenvalues ``(1 + e^{-2i pi/3}) / 2 =
    e^{-i pi/3} / 2``: it halves such a vector and rotates it by -60 degrees, the operator the
    Gi-TD paper describes. ``T = gamma P`` then also shrinks by gamma = 0.99 (so by 0.495 in all).
    A pure permutation (no self-loop) would rotate by 120 degrees and not halve; the inverse cycle
    would rotate by +60 degrees.
    """
    cycle = np.roll(np.eye(3), 1, axis=1)  # row s has its 1 in column s + 1
    return 0.5 * (np.eye(3) + cycle)


def triangle(eps: float = -1.0) -> TriangleMDP:
    """Tsitsiklis & Van Roy's (1997) spiral, on-policy (the evaluated policy's stationary
    distribution is uniform, the state weights). Paper settings: gamma 0.99, lr 0.002, K = 10,
    w = 14. eps = -1: the expected semi-gradient update drives w up the spiral (divergence);
    eps = +1: down it (convergence)."""
    if eps not in (-1.0, 1.0):
        raise ValueError(f"triangle eps must be -1 or +1, got {eps}")
    return TriangleMDP(
        name="triangle",
        transition=triangle_transition(),
        gamma=0.99,
        init_weights=np.array([14.0]),
        lr=0.002,
        K=10,
        default_steps=5000,
        eps=float(eps),
    )
