"""Expected TD / TDRC / i-TD / Gi-TD updates on a controlled MDP (paper Section 5).

Every update is plain gradient descent, ``w <- w - lr * grad L(w)``, on the loss below; which
targets carry a gradient is the only difference between the methods, exactly as in the critics'
table (docs/critics.md), with ``sg`` = ``jax.lax.stop_gradient``:

- ``td``:   ``L = 1/2 ||sg(T V_w) - V_w||_d^2``. The target network is the online one (T = 1), so
  the gradient is the semi-gradient ``-sum_s d(s) (T V_w(s) - V_w(s)) grad V_w(s)``.
- ``tdrc``: ``L = 1/2 ||T V_w - V_w||_d^2`` with the gradient through the target. TDRC's
  H-estimator exists to estimate the expectation inside ``T``; expected updates are given the
  true operator, so H is exact and TDRC is residual gradient (Baird 1995).
- ``itd``:  ``L = sum_{k=1..K} 1/2 ||sg(T V_{k-1}) - V_k||_d^2`` over a sequence with its own
  weights ``w_1..w_K``; ``V_0`` is the frozen initial function (never rolled), D = 1 (each
  target is the current online ``V_{k-1}``), all K functions step at once.
- ``gitd``: the same sum with the gradient through every target ``T V_{k-1}``, k >= 2 (``V_0`` stays
  frozen). The H-estimators of Gi-TD are exact under expected updates, so this is the exact
  gradient of the sum of Bellman errors.

Metrics, logged at step 0 and every ``log_every`` steps:

- ``value_error``: ``||V||_d`` (state-weighted root mean square, the norm the Bellman errors use) of
  the learned estimate, the LAST online function (``V_K`` for itd / gitd, ``V_w`` for td / tdrc),
  against the true value 0.
- ``sum_bellman_errors``: ``sum_k ||T V_{k-1} - V_k||_d^2`` for itd / gitd; for td / tdrc the
  "sequence" is the single function, ``||T V_w - V_w||_d^2``.

The last function of i-TD equals TD's exactly for the first K steps: all ``w_k`` start equal, and
the frozen ``V_0`` reaches ``V_k`` only after k steps (one index per step, D = 1). With K = 300 the
two curves therefore coincide on star and hall for hundreds of steps.

Everything runs in float64 (``jax.enable_x64``) because the diverging runs (td / itd on star,
triangle with eps = -1) leave float32's range within a few hundred steps; float64 lets them be
followed longer before they overflow. Once a run overflows its metrics are non-finite (inf / nan)
from then on; :mod:`offline_gitd.mdps.report` writes those as JSON null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from offline_gitd.mdps.processes import ControlledMDP

CRITICS: tuple[str, ...] = ("td", "tdrc", "itd", "gitd")
SEQUENCE_CRITICS: frozenset[str] = frozenset({"itd", "gitd"})
GRADIENT_THROUGH_TARGETS: frozenset[str] = frozenset({"tdrc", "gitd"})


def weighted_sq_norm(x: jnp.ndarray, state_weights: np.ndarray) -> jnp.ndarray:
    """``||x||_d^2`` over the last axis."""
    return jnp.sum(state_weights * x**2, axis=-1)


def _maybe_stop(x: jnp.ndarray, through_targets: bool) -> jnp.ndarray:
    return x if through_targets else jax.lax.stop_gradient(x)


def single_loss(w: jnp.ndarray, mdp: ControlledMDP, through_target: bool) -> jnp.ndarray:
    """td (``through_target=False``) and tdrc (True): one function bootstrapping on itself."""
    values = mdp.value(w)
    target = _maybe_stop(mdp.bellman(values), through_target)
    return 0.5 * weighted_sq_norm(target - values, mdp.state_weights)


def sequence_values(ws: jnp.ndarray, w0: jnp.ndarray, mdp: ControlledMDP) -> jnp.ndarray:
    """``(V_0, V_1, ..., V_K)`` stacked, shape ``(K + 1, n_states)``; ``V_0`` is frozen."""
    v0 = jax.lax.stop_gradient(mdp.value(w0))
    return jnp.concatenate([v0[None], jax.vmap(mdp.value)(ws)])


def sequence_loss(ws: jnp.ndarray, w0: jnp.ndarray, mdp: ControlledMDP, through_targets: bool) -> jnp.ndarray:
    """itd (``through_targets=False``) and gitd (True): ``sum_k 1/2 ||T V_{k-1} - V_k||_d^2``."""
    values = sequence_values(ws, w0, mdp)
    targets = _maybe_stop(mdp.bellman(values[:-1]), through_targets)
    return 0.5 * jnp.sum(weighted_sq_norm(targets - values[1:], mdp.state_weights))


def metrics(params: jnp.ndarray, w0: jnp.ndarray, mdp: ControlledMDP, sequence: bool) -> jnp.ndarray:
    """``(value_error, sum_bellman_errors)`` of the current parameters (see module docstring)."""
    if sequence:
        values = sequence_values(params, w0, mdp)
        residuals = mdp.bellman(values[:-1]) - values[1:]
        last = values[-1]
    else:
        last = mdp.value(params)
        residuals = mdp.bellman(last) - last
    value_error = jnp.sqrt(weighted_sq_norm(last, mdp.state_weights))
    return jnp.stack([value_error, jnp.sum(weighted_sq_norm(residuals, mdp.state_weights))])


def initial_params(mdp: ControlledMDP, critic: str, K: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(params, w0)``: td / tdrc train one weight vector; itd / gitd train ``K`` of them, all
    starting at the initial weights, with ``w0`` (the same weights) frozen as ``V_0``."""
    w0 = jnp.asarray(mdp.init_weights, dtype=jnp.float64)
    params = jnp.tile(w0, (K, 1)) if critic in SEQUENCE_CRITICS else w0
    return params, w0


def loss_fn(critic: str, mdp: ControlledMDP) -> Callable[[jnp.ndarray, jnp.ndarray], jnp.ndarray]:
    """The critic's loss as ``f(params, w0)``; ``w0`` is unused by td / tdrc."""
    through = critic in GRADIENT_THROUGH_TARGETS
    if critic in SEQUENCE_CRITICS:
        return partial(sequence_loss, mdp=mdp, through_targets=through)
    return lambda params, w0: single_loss(params, mdp, through)


@dataclass(frozen=True)
class History:
    """Logged metrics of one run: ``steps[i]`` is the number of updates done when logged;
    ``final_params`` the weights after the last step (shape ``(K, dim)`` for itd / gitd)."""

    steps: np.ndarray
    value_error: np.ndarray
    sum_bellman_errors: np.ndarray
    final_params: np.ndarray


def log_points(steps: int, log_every: int) -> np.ndarray:
    """Steps at which metrics are logged: 0, log_every, 2 log_every, ..., and ``steps``."""
    return np.unique(np.append(np.arange(0, steps, log_every), steps))


def run(mdp: ControlledMDP, critic: str, *, steps: int, lr: float, K: int, log_every: int) -> History:
    """Run ``steps`` expected updates of ``critic`` on ``mdp`` and return the logged metrics.

    The whole run is one jitted program: a ``lax.scan`` over logging chunks, each a
    ``lax.fori_loop`` of updates, so the host syncs once at the end, not per step.
    """
    if critic not in CRITICS:
        raise ValueError(f"unknown critic {critic!r}; expected one of {', '.join(CRITICS)}")
    sequence = critic in SEQUENCE_CRITICS
    points = log_points(steps, log_every)
    with jax.enable_x64(True):
        params, w0 = initial_params(mdp, critic, K)
        grad = jax.grad(loss_fn(critic, mdp))

        @jax.jit
        def train(params: jnp.ndarray, chunk_lengths: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
            def update(_: jnp.ndarray, p: jnp.ndarray) -> jnp.ndarray:
                return p - lr * grad(p, w0)

            def chunk(p: jnp.ndarray, length: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
                p = jax.lax.fori_loop(0, length, update, p)
                return p, metrics(p, w0, mdp, sequence)

            final, logged = jax.lax.scan(chunk, params, chunk_lengths)
            return final, jnp.concatenate([metrics(params, w0, mdp, sequence)[None], logged])

        final, logged = jax.device_get(train(params, jnp.asarray(np.diff(points))))
    return History(
        steps=points,
        value_error=logged[:, 0],
        sum_bellman_errors=logged[:, 1],
        final_params=final,
    )
