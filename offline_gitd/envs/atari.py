"""The Atari evaluation protocol of Machado et al. (2018), as used by the paper and by RL Unplugged.

Protocol (Machado et al. 2018, "Revisiting the Arcade Learning Environment"; preprocessing of Mnih
et al. 2015 as implemented by Dopamine, which produced the RL Unplugged / DQN Replay data):

* sticky actions with p = 0.25, applied by ALE itself on every emulator frame
  (``repeat_action_probability``), so the agent cannot rely on a deterministic emulator;
* frame skip 4: one agent step repeats the action for 4 frames and sums their rewards;
* the observation is the pixel-wise max over the last two frames of the skip (removes the flicker of
  sprites drawn on alternate frames, Mnih et al. 2015), read as ALE's grayscale screen and resized
  to 84x84 with ``cv2.INTER_AREA`` (as Dopamine);
* a stack of the 4 most recent observations, channels last: ``uint8[84, 84, 4]``, oldest first. At
  reset the stack is zero-padded (``[0, 0, 0, o_0]``), as Dopamine's agent and replay buffer do, so
  that evaluation states look like the states the RL Unplugged data were collected from;
* the episode ends at game over, never at a life loss (Machado et al. 2018 recommend against
  life-loss terminals);
* at most 27,000 agent steps (108,000 frames); hitting the cap is a *truncation*, not a terminal,
  so learners bootstrap through it;
* the minimal action set; no no-op starts (the sticky actions provide the stochasticity);
* rewards are returned unclipped (the game score). Reward clipping to [-1, 1] (Mnih et al. 2015) is
  a learner choice; ``clip_rewards=True`` clips here and keeps the game reward in
  ``info["unclipped_reward"]``.

Action indices. ``env.action_space`` is ``Discrete(len(minimal set))`` and action ``i`` is
``ale.getMinimalActionSet()[i]`` (names: ``env.unwrapped.get_action_meanings()[i]``). RL Unplugged
Atari actions are indices into the same minimal action set (Dopamine builds its environments with
``full_action_space=False``), so dataset actions feed this environment unchanged, e.g. Pong has 6
actions: NOOP, FIRE, RIGHT, LEFT, RIGHTFIRE, LEFTFIRE.

Why not the stock ``gymnasium.wrappers.AtariPreprocessing``: in gymnasium 1.4.0 it max-pools
correctly mid-episode, but when the episode ends inside a frame skip (game over, or the frame cap,
which always falls on the 4th frame of step 27,000) it breaks out of the skip before reading the
screen and returns a stale, already pooled buffer from the previous step instead of the final
frames. The final observation of a truncated episode is the one learners bootstrap from, so this
module keeps its own short wrapper that always pools the two most recent emulator frames.
"""

from __future__ import annotations

import difflib
from typing import Any, SupportsFloat

import ale_py
import cv2
import gymnasium as gym
import numpy as np

from offline_gitd.errors import UsageError

gym.register_envs(ale_py)
# ALE writes a two-line banner to stderr for every emulator it starts: noise that would stand in
# front of a one-line error (docs/architecture.md#the-command-line-contract). Its real errors still come through.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

FRAME_SKIP = 4
SCREEN_SIZE = 84
STACK_SIZE = 4
STICKY_ACTION_PROB = 0.25
MAX_AGENT_STEPS = 27_000  # 108,000 frames (Machado et al. 2018)

#: The 46 RL Unplugged Atari games (docs/datasets.md#rl-unplugged-atari), spelled as in the dataset paths.
RLU_GAMES: tuple[str, ...] = (
    "Alien", "Amidar", "Assault", "Asterix", "Atlantis", "BankHeist", "BattleZone", "BeamRider",
    "Boxing", "Breakout", "Carnival", "Centipede", "ChopperCommand", "CrazyClimber", "DemonAttack",
    "DoubleDunk", "Enduro", "FishingDerby", "Freeway", "Frostbite", "Gopher", "Gravitar", "Hero",
    "IceHockey", "Jamesbond", "Kangaroo", "Krull", "KungFuMaster", "MsPacman", "NameThisGame",
    "Phoenix", "Pong", "Pooyan", "Qbert", "Riverraid", "RoadRunner", "Robotank", "Seaquest",
    "SpaceInvaders", "StarGunner", "TimePilot", "UpNDown", "VideoPinball", "WizardOfWor",
    "YarsRevenge", "Zaxxon",
)  # fmt: skip


def ale_games() -> dict[str, str]:
    """Map every game registered by ale-py (``ALE/{Game}-v5``) to its gymnasium id.

    RL Unplugged spells games exactly as ALE's v5 ids do (``MsPacman`` -> ``ALE/MsPacman-v5``), so
    the map doubles as the RLU-name -> ALE-id translation; it covers all 46 RLU games.
    """
    games: dict[str, str] = {}
    for env_id in gym.registry:
        if env_id.startswith("ALE/") and env_id.endswith("-v5"):
            games[env_id[len("ALE/") : -len("-v5")]] = env_id
    return games


def resolve_game(game: str) -> str:
    """Return the ALE v5 id of an RL Unplugged / ALE game name (case-insensitive).

    Raises:
        UsageError: the name is no ALE game; the message lists the closest names.
    """
    games = ale_games()
    if game in games:
        return games[game]
    by_lower = {name.lower(): name for name in games}
    if game.lower() in by_lower:
        return games[by_lower[game.lower()]]
    close = difflib.get_close_matches(game, list(games), n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; e.g. Pong, Breakout, MsPacman"
    raise UsageError(f"unknown Atari game {game!r}{hint}")


class MachadoAtariPreprocessing(gym.Wrapper):
    """Frame skip, max-pool of the last two frames, 84x84 grayscale, channels-last frame stack.

    Wraps an ALE v5 env built with ``frameskip=1`` and ``obs_type="grayscale"`` so that every
    inner ``step`` is one emulator frame (ALE applies the sticky actions per frame, as in
    Machado et al. 2018). Returns ``uint8[84, 84, 4]`` observations, oldest frame first.
    Truncation (the ALE frame cap) is reported only when the step is not also a game over.
    """

    def __init__(self, env: gym.Env, *, clip_rewards: bool = False) -> None:
        super().__init__(env)
        if getattr(env.unwrapped, "_frameskip", None) != 1:
            raise ValueError("the wrapped ALE env must use frameskip=1 (this wrapper skips frames)")
        if getattr(env.unwrapped, "_obs_type", None) != "grayscale":
            raise ValueError('the wrapped ALE env must use obs_type="grayscale"')
        self.clip_rewards = clip_rewards
        self.observation_space = gym.spaces.Box(0, 255, (SCREEN_SIZE, SCREEN_SIZE, STACK_SIZE), np.uint8)
        height, width = env.observation_space.shape
        # The two most recent raw frames, [older, newer]; pooled into one observation per step.
        self._frames = np.zeros((2, height, width), np.uint8)
        self._stack = np.zeros((SCREEN_SIZE, SCREEN_SIZE, STACK_SIZE), np.uint8)

    def _push_frame(self, frame: np.ndarray) -> None:
        self._frames[0] = self._frames[1]
        self._frames[1] = frame

    def _push_observation(self) -> np.ndarray:
        pooled = np.maximum(self._frames[0], self._frames[1])
        small = cv2.resize(pooled, (SCREEN_SIZE, SCREEN_SIZE), interpolation=cv2.INTER_AREA)
        self._stack[..., :-1] = self._stack[..., 1:]
        self._stack[..., -1] = small
        return self._stack.copy()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset the game; the stack is ``[0, 0, 0, o_0]`` and ``o_0`` the first screen."""
        frame, info = self.env.reset(seed=seed, options=options)
        self._frames[:] = 0
        self._stack[:] = 0
        self._push_frame(frame)
        return self._push_observation(), info

    def step(self, action: int) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Repeat ``action`` for 4 frames (fewer if the episode ends) and sum the rewards."""
        total_reward = 0.0
        terminated = truncated = False
        info: dict[str, Any] = {}
        for _ in range(FRAME_SKIP):
            frame, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            self._push_frame(frame)
            if terminated or truncated:
                break
        truncated = truncated and not terminated
        if self.clip_rewards:
            info["unclipped_reward"] = total_reward
            total_reward = float(np.clip(total_reward, -1.0, 1.0))
        return self._push_observation(), total_reward, terminated, truncated, info


def make_atari_env(
    game: str,
    seed: int,
    *,
    sticky: float = STICKY_ACTION_PROB,
    max_steps: int = MAX_AGENT_STEPS,
    clip_rewards: bool = False,
    render_mode: str | None = None,
) -> gym.Env:
    """Build the protocol Atari environment for an RL Unplugged game name (``Pong``, ``MsPacman``).

    The env is reset once with ``seed`` (this seeds ALE's sticky-action RNG), so a later
    ``reset()`` without a seed continues a deterministic stream; ``action_space`` is seeded too.

    Args:
        game: RL Unplugged / ALE game name, case-insensitive.
        seed: seed of the emulator's RNG and of ``action_space.sample()``.
        sticky: probability that ALE repeats the previous action on a frame (0.25 by protocol).
        max_steps: agent-step cap; the episode is truncated after ``max_steps * 4`` frames.
        clip_rewards: clip each step's summed reward to [-1, 1] (Mnih et al. 2015); off by
            default because RL Unplugged rewards arrive unclipped and clipping is the learner's.
        render_mode: ALE's, e.g. ``"rgb_array"`` to film the full-colour screen.

    Raises:
        UsageError: unknown game, or an out-of-range ``sticky`` / ``max_steps``.
    """
    env_id = resolve_game(game)
    if not 0.0 <= sticky <= 1.0:
        raise UsageError(f"sticky action probability must be in [0, 1], got {sticky}")
    if max_steps < 1:
        raise UsageError(f"max_steps must be >= 1, got {max_steps}")
    env = gym.make(
        env_id,
        obs_type="grayscale",
        frameskip=1,
        repeat_action_probability=sticky,
        full_action_space=False,
        max_num_frames_per_episode=max_steps * FRAME_SKIP,
        render_mode=render_mode,
    )
    env = MachadoAtariPreprocessing(env, clip_rewards=clip_rewards)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env
