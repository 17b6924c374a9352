"""An unknown environment id is answered with ids that keep the evaluation protocol, and a D4RL id
with the Minari name the package takes (docs/reproducing.md#evaluation-protocol, docs/datasets.md#minari)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from offline_gitd.envs.atari import RLU_GAMES
from offline_gitd.envs.d4rl import MUJOCO_ENVS, d4rl_hint, minari_name
from offline_gitd.envs.make import env_suggestions, make_env, protocol_id
from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.reference import MINARI_TO_D4RL


@pytest.mark.parametrize(
    ("typed", "first"),
    [
        ("Pongg", "Pong"),  # an RL Unplugged game: the bare name plays the Machado protocol
        ("pong", "Pong"),  # case alone
        ("Breakout-v5", "Breakout"),  # gymnasium's raw id misspelt: the protocol name instead
        ("ALE/MsPacmn-v5", "MsPacman"),
        ("Tetriss", "atari:Tetris"),  # an ALE game outside RL Unplugged: atari:{Game}
        ("CartPol-v1", "CartPole-v1"),  # not Atari: gymnasium's id as it is
        ("MinAtar/Breakot-v1", "MinAtar/Breakout-v1"),  # registered on first use, found all the same
    ],
)
def test_suggestions_lead_with_the_id_that_keeps_the_protocol(typed: str, first: str) -> None:
    assert env_suggestions(typed)[0] == first


def test_no_suggestion_skips_the_atari_protocol() -> None:
    """gymnasium's own Atari ids (ALE/Pong-v5, Pong-v4, PongNoFrameskip-v4) play without sticky
    actions or the frame cap of the paper's protocol: never offered, whatever is typed."""
    ale_ids = {env_id for env_id, spec in gym.registry.items() if spec.entry_point == "ale_py.env:AtariEnv"}
    assert {"Pong-v4", "ALE/Pong-v5"} <= ale_ids
    for typed in ("Pongg", "Pong-v5", "ALE/Pongg-v5", "PongNoFrameskip-v5", "Breakout-v4x", "SpaceInvader"):
        offered = env_suggestions(typed)
        assert offered and not ale_ids & set(offered), (typed, offered)


def test_the_protocol_name_of_a_game() -> None:
    assert protocol_id("Pong") == "Pong" and protocol_id("Tetris") == "atari:Tetris"
    assert all(protocol_id(game) == game for game in RLU_GAMES)


def test_make_env_names_the_protocol_id_of_a_misspelt_game() -> None:
    with pytest.raises(UsageError, match=r"unknown environment 'Pongg'; did you mean Pong\?$"):
        make_env("Pongg", seed=0)


@pytest.mark.parametrize(
    ("d4rl_id", "minari"),
    [
        ("hopper-medium-v2", "mujoco/hopper/medium-v0"),
        ("halfcheetah-expert-v2", "mujoco/halfcheetah/expert-v0"),
        ("pen-human-v1", "D4RL/pen/human-v2"),
        ("kitchen-mixed-v0", "D4RL/kitchen/mixed-v2"),
        ("antmaze-large-diverse-v2", "D4RL/antmaze/large-diverse-v1"),
        ("maze2d-umaze-dense-v1", "D4RL/pointmaze/umaze-dense-v2"),
        ("minigrid-fourrooms-random-v0", "D4RL/minigrid/fourrooms-random-v0"),
        ("hopper-medium-replay-v2", None),  # D4RL recorded it; Minari has no counterpart
        ("Hopper-v5", None),  # not a D4RL id
        ("CartPole-v1", None),
    ],
)
def test_a_d4rl_id_maps_to_its_minari_name(d4rl_id: str, minari: str | None) -> None:
    assert minari_name(d4rl_id) == minari


def test_the_map_agrees_with_the_leaderboards_reference_scores() -> None:
    """The leaderboard normalises a Minari dataset's returns with its D4RL counterpart's reference
    scores (offline_gitd/leaderboard/reference.py): both directions must name the same pairs."""
    assert MINARI_TO_D4RL
    for minari, d4rl in MINARI_TO_D4RL.items():
        assert minari_name(d4rl) == minari, d4rl


def test_a_d4rl_id_where_an_environment_goes_is_answered_with_both_names() -> None:
    with pytest.raises(UsageError) as refused:
        make_env("hopper-medium-v2", seed=0)
    assert str(refused.value) == (
        "unknown environment 'hopper-medium-v2'; hopper-medium-v2 is a D4RL id: its environment is Hopper-v5, "
        "its Minari dataset minari:mujoco/hopper/medium-v0"
    )
    assert "Minari has no such dataset" in d4rl_hint("walker2d-medium-expert-v2")
    assert set(MUJOCO_ENVS.values()) <= set(gym.registry)


def test_a_d4rl_id_where_a_dataset_id_goes_is_answered_with_its_minari_name() -> None:
    from offline_gitd.data.registry import parse_dataset_id

    with pytest.raises(UsageError, match=r"minari:mujoco/hopper/medium-v0"):
        parse_dataset_id("hopper-medium-v2")
    with pytest.raises(UsageError) as refused:
        parse_dataset_id("Pong/1")  # not a D4RL id: no hint
    assert "D4RL" not in str(refused.value)
