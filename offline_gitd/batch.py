"""The transition batch that every data source produces and every critic consumes.

The replay computes the bootstrap discount ``gamma**n * (1 - terminal)`` itself (it needs gamma
anyway for n-step returns), so critics never see gamma, n or the terminal flag separately: a
truncated episode keeps a non-zero discount (it bootstraps), a terminal one has discount 0.
"""

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np


class Batch(NamedTuple):
    """A batch of (possibly n-step) transitions; every field has leading batch axis B.

    obs:       s_t, uint8 frames [B, 84, 84, stack] or float vectors [B, obs_dim].
    action:    a_t, int32 [B] (discrete) or float32 [B, act_dim] (continuous).
    reward:    sum_{i<n} gamma**i r_{t+i}, float32 [B].
    discount:  gamma**n * (1 - terminal), float32 [B]; the factor in front of the bootstrap.
    next_obs:  s_{t+n}, same layout as obs.
    weight:    importance weight per sample (prioritised replay), float32 [B]; ones if uniform.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    next_obs: np.ndarray
    weight: np.ndarray


class FrameRefs(NamedTuple):
    """A frame batch as references into a frame pool; the compiled step builds the stacks.

    Sample i's observation stack is pool rows ``frames[i, 0:stack]`` and its next observation's
    is ``frames[i, m:m + stack]`` with ``m = next_offset[i]`` (the n-step transition advanced ``m``
    rows, ``0 <= m <= n``), so each sample names ``stack + n`` frames once instead of ``2 stack``.
    The first ``pad[i]`` window positions lie before the episode's first frame and read as zeros,
    as :meth:`~offline_gitd.data.replay.Replay.observations` stacks them. The pool is either the
    whole frame store kept on the device or the frames of one chunk gathered on the host.

    frames:       int32 [B, stack + n]: pool row of each window position (oldest first).
    pad:          int32 [B]: leading window positions that are zero frames.
    next_offset:  int32 [B]: m above.
    action, reward, discount, weight: as in :class:`Batch`.
    """

    frames: np.ndarray
    pad: np.ndarray
    next_offset: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    discount: np.ndarray
    weight: np.ndarray


def expand_frame_refs(pool: Any, refs: FrameRefs, stack: int) -> Batch:
    """The :class:`Batch` that ``refs`` describe, built from ``pool`` (uint8 [P, H, W]) inside a
    compiled step: one gather of ``stack + n`` frames per sample, channels-last stacks."""
    window = refs.frames.shape[-1]
    frames = jnp.take(pool, refs.frames, axis=0, mode="clip")  # [B, window, H, W]
    inside = jnp.arange(window) >= refs.pad[:, None]
    frames = jnp.where(inside[:, :, None, None], frames, jnp.zeros((), frames.dtype))
    positions = refs.next_offset[:, None] + jnp.arange(stack)  # [B, stack]
    next_frames = jnp.take_along_axis(frames, positions[:, :, None, None], axis=1)
    return Batch(
        obs=jnp.moveaxis(frames[:, :stack], 1, -1),
        action=refs.action,
        reward=refs.reward,
        discount=refs.discount,
        next_obs=jnp.moveaxis(next_frames, 1, -1),
        weight=refs.weight,
    )


def stack_seeds(batches: list[Batch]) -> Batch:
    """Per-seed batches -> one batch with a leading seed axis."""
    return Batch(*(np.stack(field) for field in zip(*batches, strict=True)))
