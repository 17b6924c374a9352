"""What an env keeps across a reset that the reset's seed does not set (docs/online.md#resume).

An online run resumes an episode by resetting its env with the episode's seed and replaying the
episode's actions. That is exact only if the seed sets everything the episode depends on. MinAtar
does not: ``minatar.Environment.reset`` keeps ``last_action``, and a sticky action (probability 0.1)
on the new episode's first step repeats the previous episode's last action. So the loop records
this carry when an episode starts and puts it back before replaying. Evaluation starts every
episode from a new env's carry instead (:func:`offline_gitd.envs.make.evaluate_policies`).
"""

from __future__ import annotations

from typing import Any

# MinAtar's last action in a newly made env (minatar.Environment starts it at 0): evaluation starts
# every episode with it, so that an episode's return depends on its seed alone, not on which episode
# ran before it in the same env.
FRESH_CARRY = 0


def _minatar_game(env: Any) -> Any:
    """MinAtar's ``Environment`` under the wrappers, or ``None`` for any other env."""
    game = getattr(getattr(env, "unwrapped", env), "game", None)
    return game if hasattr(game, "last_action") and hasattr(game, "sticky_action_prob") else None


def env_carry(env: Any) -> int | None:
    """The env's carry at this moment: MinAtar's last action, ``None`` for envs that keep nothing."""
    game = _minatar_game(env)
    return None if game is None else int(game.last_action)


def set_env_carry(env: Any, carry: int | None) -> None:
    """Put a carry read by :func:`env_carry` back, after a reset (``None``: nothing to put back)."""
    game = _minatar_game(env)
    if carry is not None and game is not None:
        game.last_action = carry
