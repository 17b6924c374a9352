"""The names a user chooses among: head layouts, torsos, update drivers, frame placements, offline algorithms.

Plain data on the ground floor, so that building the command line (and ``--help``) imports no JAX:
the modules that implement each choice import its names from here. Critics, which third-party
packages can add, are :mod:`offline_gitd.critic_registry`'s records.
"""

from __future__ import annotations

# How the heads sit on the torso (docs/critics.md#head-layouts).
HEAD_LAYOUTS = ("shared_linear", "shared_nonlinear", "independent")
TORSOS = ("nature", "impala", "impala-gap", "minatar", "mlp")
# How updates reach compiled code: a lax.scan over a chunk, a loop over the jitted step, or the
# faster of the two for the torso and backend.
DRIVERS = ("auto", "scan", "loop")
# How the seeds of a run share one compiled program (offline_gitd.learners.drivers.choose_seed_strategy).
SEED_STRATEGIES = ("auto", "vmap", "per-seed")
# Where the offline loop gathers Atari frames for a batch.
FRAME_PLACEMENTS = ("auto", "device", "host")
# Offline algorithms (docs/offline.md#baselines): CQL over any critic, behaviour cloning (no critic),
# TD3+BC and IQL (continuous actions only).
OFFLINE_ALGOS = ("cql", "bc", "td3bc", "iql")
CONTINUOUS_ONLY_ALGOS = ("td3bc", "iql")
# The critic column of an algorithm that trains none (behaviour cloning).
NO_CRITIC = "none"
