"""Torsos, heads and the multi-head network that the critics differentiate (DESIGN §3)."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn

from offline_gitd.choices import HEAD_LAYOUTS, TORSOS
from offline_gitd.errors import ConfigError
from offline_gitd.networks.multihead import MultiHeadNetwork, Params
from offline_gitd.networks.torsos import MLP, ImpalaCNN, NatureCNN


def make_torso(name: str, mlp_hidden: Sequence[int] = (256, 256)) -> nn.Module:
    """Torso by name: ``nature`` (Mnih et al.), ``impala`` / ``impala-gap`` (with global average
    pooling, the strong baseline's IMPOOLA), ``mlp`` (hidden sizes from ``mlp_hidden``)."""
    if name == "nature":
        return NatureCNN()
    if name == "impala":
        return ImpalaCNN(global_pool=False)
    if name == "impala-gap":
        return ImpalaCNN(global_pool=True)
    if name == "mlp":
        return MLP(tuple(mlp_hidden))
    raise ConfigError(f"unknown torso {name!r}; choose one of {', '.join(TORSOS)}")


__all__ = ["HEAD_LAYOUTS", "TORSOS", "MLP", "ImpalaCNN", "MultiHeadNetwork", "NatureCNN", "Params", "make_torso"]
