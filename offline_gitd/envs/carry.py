"""What an env keeps across a reset that the reset's seed does not set (docs/online.md#resume).

An online run resumes an episode by resetting its env with the episode's seed and replaying the
episode's actions. That is exact only if the seed sets everything the episode depends on. MinAtar
does not: ``minatar.Environment.reset`` keeps ``last_action``, and a sticky action (probability 0.1)
on the new episode's first step repeats the previous episode's last action. So the loop records
this carry when an episode starts and puts it back before replaying.
"""

from __future__ import annotations

from typing import Any


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
