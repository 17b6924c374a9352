"""The names a user chooses among: head layouts, torsos, update drivers, online loops, frame placements.

Plain data on the ground floor, so that building the command line (and ``--help``) imports no JAX:
the modules that implement each choice import its names from here. Critics and offline algorithms,
which third-party packages can add, are the records of :mod:`offline_gitd.critic_registry` and
:mod:`offline_gitd.algorithm_registry`. :func:`did_you_mean` is how a name outside any closed set (a
flag's choices, a subcommand, a config file's keys) is refused: with the closest names, so that a
typo costs one look at the message (docs/getting-started.md#the-command-line).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How the heads sit on the torso (docs/critics.md#heads-and-h-estimators).
HEAD_LAYOUTS = ("shared_linear", "shared_nonlinear", "independent")
TORSOS = ("nature", "impala", "impala-gap", "minatar", "mlp")
# How updates reach compiled code: a lax.scan over a chunk, a loop over the jitted step, or the
# faster of the two for the torso and backend.
DRIVERS = ("auto", "scan", "loop")
# How the seeds of a run share one compiled program (offline_gitd.learners.drivers.choose_seed_strategy).
SEED_STRATEGIES = ("auto", "vmap", "per-seed")
# Where the offline loop gathers Atari frames for a batch.
FRAME_PLACEMENTS = ("auto", "device", "host")
# Which loop steps an online DQN run: the Python loop (gymnasium envs on the host, any env) or one
# compiled program per logging window (offline_gitd.online.compiled), for the envs written in JAX:
# the gymnasium ids of JAX_ENV_IDS, each with a twin in offline_gitd.online.compiled.JAX_ENVS.
# auto: compiled where the env exists in JAX and the run's options allow it, python otherwise.
LOOPS = ("auto", "python", "compiled")
JAX_ENV_IDS = (
    "CartPole-v1",
    "MinAtar/Asterix-v1",
    "MinAtar/Breakout-v1",
    "MinAtar/Freeway-v1",
    "MinAtar/Seaquest-v1",
    "MinAtar/SpaceInvaders-v1",
)
# The critic column of an algorithm that trains none (behaviour cloning). The offline algorithms,
# which third-party packages can add, are offline_gitd.algorithm_registry's records.
NO_CRITIC = "none"


def close_names(value: str, names: Iterable[str], limit: int = 3) -> list[str]:
    """The names of ``names`` closest to ``value``, best first: a name equal but for case first
    (``Gitd``), then difflib's close matches (``gitdd`` -> ``gitd``); empty where none is close."""
    names = list(dict.fromkeys(names))
    same_but_case = [name for name in names if name.lower() == value.lower() and name != value]
    close = difflib.get_close_matches(value, names, n=limit, cutoff=0.6)
    return list(dict.fromkeys(same_but_case + close))[:limit]


def did_you_mean(value: str, names: Iterable[str]) -> str:
    """``"; did you mean 'gitd'?"`` for the names closest to ``value``, or ``""`` where none is
    close: the tail of a refusal's one line."""
    close = close_names(value, names)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
