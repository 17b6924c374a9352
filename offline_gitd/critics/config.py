"""The one configuration object of a critic (docs/critics.md), validated on construction."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from offline_gitd.choices import HEAD_LAYOUTS
from offline_gitd.critic_registry import CriticSpec, critic_spec
from offline_gitd.errors import ConfigError


@dataclass(frozen=True)
class CriticConfig:
    """What a critic is, independent of where its data comes from.

    kind:  a registered critic (:mod:`offline_gitd.critic_registry`): ``td`` | ``tdrc`` | ``itd`` |
           ``gitd`` or an installed plug-in's.
    K:     number of online Q-heads (1 for td and tdrc; ``None`` means the critic's default, the
           paper's K = 5 for the iterated critics).
    beta:  weight decay on the H-heads only (TDRC's and Gi-TD's regulariser).
    T:     period, in gradient steps, of the hard target update / head roll.
    D:     i-TD's period for syncing the stale copies Qbar_k used in targets (1: use the heads).
    tau:   soft update theta_0 <- tau theta_1 + (1 - tau) theta_0 every step instead of rolls.
    heads: ``shared_linear`` | ``shared_nonlinear`` | ``independent``.
    """

    kind: str = "td"
    K: int | None = None
    beta: float = 1.0
    T: int = 8000
    D: int = 1
    tau: float | None = None
    heads: str = "shared_linear"

    def __post_init__(self) -> None:
        spec = critic_spec(self.kind)
        if self.K is None:
            object.__setattr__(self, "K", spec.default_K)
        _require_int("K", self.K, 1)
        if spec.max_K == 1 and self.K != 1:
            raise ConfigError(
                f"critic {self.kind!r} has a single online head: K must be 1, got {self.K} (use itd or gitd for K > 1)"
            )
        if spec.max_K is not None and self.K > spec.max_K:
            raise ConfigError(f"critic {self.kind!r} takes at most {spec.max_K} online heads, got K = {self.K}")
        if not (isinstance(self.beta, (int, float)) and math.isfinite(self.beta) and self.beta >= 0):
            raise ConfigError(f"beta must be a finite number >= 0, got {self.beta!r}")
        _require_int("T", self.T, 1)
        _require_int("D", self.D, 1)
        if self.tau is not None and not (isinstance(self.tau, (int, float)) and 0.0 < self.tau <= 1.0):
            raise ConfigError(f"tau must be in (0, 1] (or unset for hard updates), got {self.tau!r}")
        if self.heads not in HEAD_LAYOUTS:
            raise ConfigError(f"unknown head layout {self.heads!r}; choose one of {', '.join(HEAD_LAYOUTS)}")
        if self.heads not in spec.layouts:
            raise ConfigError(
                f"critic {self.kind!r} supports the head layouts {', '.join(spec.layouts)}, not {self.heads!r}"
            )

    @property
    def spec(self) -> CriticSpec:
        """The critic's registry record."""
        return critic_spec(self.kind)

    @property
    def num_h(self) -> int:
        """H-heads the critic needs: TDRC's h for head 1; Gi-TD's H_2..H_K (H_1 is identically 0)."""
        return self.spec.num_h(self.K)

    @property
    def uses_target_network(self) -> bool:
        """TDRC bootstraps from its own online head (QRC uses no target network)."""
        return self.spec.uses_target_network

    @property
    def uses_stale_copies(self) -> bool:
        """i-TD with D > 1 bootstraps heads k >= 2 from copies synced every D steps."""
        return self.spec.targets == "iterated" and self.K > 1 and self.D > 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _require_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
