"""Torsos, heads and the multi-head network that the critics differentiate (docs/critics.md#networks)."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn

from offline_gitd.choices import HEAD_LAYOUTS, TORSOS
from offline_gitd.errors import ConfigError
from offline_gitd.networks.minatar import MinAtarCNN
from offline_gitd.networks.multihead import MultiHeadNetwork, Params
from offline_gitd.networks.torsos import MLP, ImpalaCNN, NatureCNN

# The smallest image side each VALID-padded CNN reads: nature's 8x8/4, 4x4/2 and 3x3/1 stack
# needs 36 pixels to leave one output; minatar's single 3x3 needs 3. IMPALA pads (SAME): any side.
MIN_IMAGE_SIDE = {"nature": 36, "minatar": 3, "impala": 1, "impala-gap": 1}
# MinAtar's boards (Young & Tian 2019) are 10x10xC; images up to this side get the MinAtar network.
MINATAR_SIDE = 10


def make_torso(name: str, mlp_hidden: Sequence[int] = (256, 256)) -> nn.Module:
    """Torso by name: ``nature`` (Mnih et al.), ``impala`` / ``impala-gap`` (with global average
    pooling, the strong baseline's IMPOOLA), ``minatar`` (Young & Tian), ``mlp`` (hidden sizes
    from ``mlp_hidden``)."""
    if name == "nature":
        return NatureCNN()
    if name == "impala":
        return ImpalaCNN(global_pool=False)
    if name == "impala-gap":
        return ImpalaCNN(global_pool=True)
    if name == "minatar":
        return MinAtarCNN()
    if name == "mlp":
        return MLP(tuple(mlp_hidden))
    raise ConfigError(f"unknown torso {name!r}; choose one of {', '.join(TORSOS)}")


def torso_for_shape(obs_shape: Sequence[int]) -> str:
    """The torso a run gets when it names none, from one observation's shape: images (H x W x C)
    -> ``minatar`` for MinAtar-sized boards (side <= 10), ``nature`` for larger frames; vectors ->
    ``mlp``."""
    if len(obs_shape) != 3:
        return "mlp"
    return "minatar" if max(obs_shape[:2]) <= MINATAR_SIDE else "nature"


def check_torso(torso: str, obs_shape: Sequence[int], what: str) -> None:
    """Refuse a torso that cannot read the observations, in one line naming one that can: the
    CNNs need images (H x W x C) at least their receptive field wide, the MLP needs vectors.
    Checked before any network is built, where a mismatch would surface as a JAX shape traceback."""
    shape = tuple(int(side) for side in obs_shape)
    images = len(shape) == 3
    if images == (torso == "mlp"):
        best = torso_for_shape(shape)
        others = [
            name for name in TORSOS if name not in ("mlp", best) and min(shape[:2] or (0,)) >= MIN_IMAGE_SIDE[name]
        ]
        need = f"--torso {best} (or {', '.join(others)})" if images else "--torso mlp"
        kind = "image" if images else "vector"
        raise ConfigError(f"{what} has {kind} observations of shape {shape}: use {need}, not --torso {torso}")
    if images and min(shape[:2]) < MIN_IMAGE_SIDE[torso]:
        readable = [name for name in TORSOS if name != "mlp" and min(shape[:2]) >= MIN_IMAGE_SIDE[name]]
        raise ConfigError(
            f"{what} has {shape[0]}x{shape[1]} images but --torso {torso} needs at least "
            f"{MIN_IMAGE_SIDE[torso]}x{MIN_IMAGE_SIDE[torso]}: use --torso {' or '.join(readable)}"
        )


__all__ = [
    "HEAD_LAYOUTS",
    "TORSOS",
    "MLP",
    "ImpalaCNN",
    "MinAtarCNN",
    "MultiHeadNetwork",
    "NatureCNN",
    "Params",
    "check_torso",
    "make_torso",
    "torso_for_shape",
]
