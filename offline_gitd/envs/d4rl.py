"""D4RL's ids and the Minari datasets that stand for them (docs/datasets.md#minari).

D4RL named a dataset by its gym environment id (``hopper-medium-v2``); its datasets are now
published through Minari, under new names (``D4RL/pen/human-v2``), and D4RL's Gym-MuJoCo datasets
have Minari counterparts recorded anew on the v5 MuJoCo environments (``mujoco/hopper/medium-v0``).
The package takes Minari ids, so a D4RL id typed where an environment or dataset id goes is
answered with the Minari name to use. Plain data and string matching: importing this module
imports no environment library.
"""

from __future__ import annotations

import re

# D4RL's Gym-MuJoCo environments and the gymnasium ids of their v5 versions.
MUJOCO_ENVS: dict[str, str] = {
    "halfcheetah": "HalfCheetah-v5",
    "hopper": "Hopper-v5",
    "walker2d": "Walker2d-v5",
    "ant": "Ant-v5",
}
# Minari's recordings on each of them (``mujoco/<env>/<data>-v0``): "medium" and "expert" are the
# counterparts of D4RL's datasets of the same names; D4RL's random, medium-replay, medium-expert
# and full-replay have none.
MINARI_MUJOCO_DATA = ("simple", "medium", "expert")

_MUJOCO = re.compile(r"(?P<env>halfcheetah|hopper|walker2d|ant)-(?P<data>[a-z-]+)-v[0-2]")
_ADROIT = re.compile(r"(?P<task>pen|hammer|relocate|door)-(?P<data>human|cloned|expert)-v[01]")
_KITCHEN = re.compile(r"kitchen-(?P<data>complete|partial|mixed)-v0")
_ANTMAZE = re.compile(
    r"antmaze-(?P<maze>umaze|umaze-diverse|medium-play|medium-diverse|large-play|large-diverse)-v[0-2]"
)
_MAZE2D = re.compile(r"maze2d-(?P<maze>open|umaze|medium|large)(?P<dense>-dense)?-v[01]")
_MINIGRID = re.compile(r"minigrid-fourrooms(?P<random>-random)?-v0")


def minari_name(d4rl_id: str) -> str | None:
    """The Minari dataset that stands for D4RL's ``d4rl_id``, or ``None`` where there is none (not
    a D4RL id, or a D4RL Gym-MuJoCo dataset Minari has not recorded, such as ``-medium-replay``)."""
    text = d4rl_id.strip().lower()
    if match := _MUJOCO.fullmatch(text):
        return f"mujoco/{match['env']}/{match['data']}-v0" if match["data"] in MINARI_MUJOCO_DATA[1:] else None
    if match := _ADROIT.fullmatch(text):
        return f"D4RL/{match['task']}/{match['data']}-v2"
    if match := _KITCHEN.fullmatch(text):
        return f"D4RL/kitchen/{match['data']}-v2"
    if match := _ANTMAZE.fullmatch(text):
        return f"D4RL/antmaze/{match['maze']}-v1"
    if match := _MAZE2D.fullmatch(text):
        return f"D4RL/pointmaze/{match['maze']}{match['dense'] or ''}-v2"
    if match := _MINIGRID.fullmatch(text):
        return f"D4RL/minigrid/fourrooms{match['random'] or ''}-v0"
    return None


def d4rl_hint(text: str) -> str:
    """The tail of a refusal when ``text`` is a D4RL id (``"; hopper-medium-v2 is a D4RL id: its
    environment is Hopper-v5, its Minari dataset minari:mujoco/hopper/medium-v0"``), else ``""``."""
    name = minari_name(text)
    mujoco = _MUJOCO.fullmatch(text.strip().lower())
    env = f"its environment is {MUJOCO_ENVS[mujoco['env']]}, " if mujoco else ""
    if name:
        return f"; {text} is a D4RL id: {env}its Minari dataset {'is ' * (not env)}minari:{name}"
    if mujoco:
        recorded = ", ".join(f"minari:mujoco/{mujoco['env']}/{data}-v0" for data in MINARI_MUJOCO_DATA)
        return f"; {text} is a D4RL id: {env}and Minari has no such dataset (it has {recorded})"
    return ""
