"""The critic optimiser: Adam on Q parameters, AdamW (decoupled weight decay beta) on H only.

docs/critics.md#optimiser: beta regularises the H-estimators (TDRC's "regularised correction"),
never the Q-function, so the decay is masked to the ``h`` subtree of the parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import optax

from offline_gitd.critics.config import CriticConfig


def h_mask(params: dict[str, Any]) -> dict[str, Any]:
    """True on every leaf of the H-heads, False elsewhere."""
    return {name: jax.tree.map(lambda _: name == "h", subtree) for name, subtree in params.items()}


def critic_optimizer(cfg: CriticConfig, learning_rate: float, eps: float) -> optax.GradientTransformation:
    """Adam(lr, eps) everywhere plus decoupled weight decay ``beta`` on the H parameters."""
    return optax.adamw(learning_rate, eps=eps, weight_decay=cfg.beta, mask=h_mask)
