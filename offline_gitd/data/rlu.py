"""RL Unplugged Atari episodes (``atari_episodes_ordered`` layout) read straight from shards.

One record of a shard is one whole episode: PNG frames (one 84x84x1 image per step, not
stacked), actions, unclipped and clipped rewards and discounts, in time order (docs/datasets.md#rl-unplugged-atari). Step ``t`` holds ``o_t, a_t, r_t, d_t``: the reward and discount of the
transition that leaves ``o_t``. If the last discount is 0 the episode ended in a terminal state;
otherwise it was truncated, and its last step has no next observation to bootstrap from.

No TensorFlow: :mod:`offline_gitd.data.tfrecord` reads the records and ``cv2.imdecode`` the
frames. :func:`~offline_gitd.data.rlu_tfds.iter_tfds_episodes` reads the same data through TFDS
when the optional ``tfds`` extra is installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from offline_gitd.data.tfrecord import TFRecordError, iter_tfrecords, parse_example

FRAME_SHAPE = (84, 84)
STEP_FEATURES = ("observations", "actions", "unclipped_rewards", "clipped_rewards", "discounts")
SCALAR_FEATURES = ("checkpoint_idx", "episode_idx", "episode_return", "clipped_episode_return")
# Feature names and kinds of one ``atari_episodes_ordered`` record (the bucket's format, which the
# tests' shard writer, tests/rlu_shards.py, follows too); the reader checks against it.
EPISODE_SCALAR_FEATURES: dict[str, str] = {
    "checkpoint_idx": "int64",
    "episode_idx": "int64",
    "episode_return": "float",
    "clipped_episode_return": "float",
}
EPISODE_STEP_FEATURES: dict[str, str] = {
    "observations": "bytes",
    "actions": "int64",
    "unclipped_rewards": "float",
    "clipped_rewards": "float",
    "discounts": "float",
}
FEATURE_KINDS = {**EPISODE_SCALAR_FEATURES, **EPISODE_STEP_FEATURES}


@dataclass(frozen=True)
class RLUEpisode:
    """One decoded episode; every per-step array has length T (``frames`` is uint8 [T, 84, 84])."""

    checkpoint_idx: int
    episode_idx: int
    episode_return: float
    clipped_episode_return: float
    frames: np.ndarray
    actions: np.ndarray
    unclipped_rewards: np.ndarray
    clipped_rewards: np.ndarray
    discounts: np.ndarray

    @property
    def terminal(self) -> bool:
        """Ended in a terminal state (last discount 0); otherwise truncated and bootstraps."""
        return bool(len(self.discounts)) and float(self.discounts[-1]) == 0.0


def decode_png_frames(pngs: Sequence[bytes]) -> np.ndarray:
    """Decode 84x84 grayscale PNGs into ``uint8 [T, 84, 84]``.

    ``cv2.imdecode`` is the fastest decoder measured here (docs/getting-started.md#install).
    """
    frames = np.empty((len(pngs), *FRAME_SHAPE), np.uint8)
    for t, png in enumerate(pngs):
        try:
            frame = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_GRAYSCALE)
        except cv2.error:  # an empty buffer fails OpenCV's own assertion instead of returning None
            frame = None
        if frame is None or frame.shape != FRAME_SHAPE:
            got = None if frame is None else frame.shape
            raise ValueError(f"frame {t}: not an 84x84 PNG (decoded shape {got})")
        frames[t] = frame
    return frames


def iter_rlu_records(path: str | os.PathLike[str]) -> Iterator[dict[str, list[bytes] | np.ndarray]]:
    """Yield each record of a shard as parsed features, checked for RLU's nine features.

    Raises :class:`TFRecordError` (file and record index) for a record that is not a well-formed
    episode: a missing feature, one of the wrong kind, a per-episode feature without exactly one
    value, or per-step lists of different lengths.
    """
    for index, record in enumerate(iter_tfrecords(path)):
        try:
            features = parse_example(record)
        except ValueError as error:
            raise TFRecordError(path, index, str(error)) from error
        missing = [k for k in (*SCALAR_FEATURES, *STEP_FEATURES) if k not in features]
        if missing:
            raise TFRecordError(path, index, f"not an RLU episode: missing features {missing}")
        for name, kind in FEATURE_KINDS.items():
            # An empty list reads as any kind: a Feature with no values may carry none.
            if len(features[name]) and _kind(features[name]) != kind:
                raise TFRecordError(path, index, f"feature {name!r} holds {_kind(features[name])}, expected {kind}")
        counts = {k: len(features[k]) for k in SCALAR_FEATURES if len(features[k]) != 1}
        if counts:
            raise TFRecordError(path, index, f"per-episode features must hold one value each: {counts}")
        lengths = {k: len(features[k]) for k in STEP_FEATURES}
        if len(set(lengths.values())) != 1:
            raise TFRecordError(path, index, f"per-step features differ in length: {lengths}")
        yield features


def _kind(values: list[bytes] | np.ndarray) -> str:
    """A parsed feature's kind, named as in :data:`FEATURE_KINDS`."""
    if isinstance(values, list):
        return "bytes"
    return "int64" if values.dtype == np.int64 else "float"


def count_rlu_steps(path: str | os.PathLike[str]) -> int:
    """Steps in a shard, read without decoding a frame (sizes a fractional decode)."""
    return sum(len(features["actions"]) for features in iter_rlu_records(path))


def iter_rlu_episodes(path: str | os.PathLike[str], max_steps: int | None = None) -> Iterator[RLUEpisode]:
    """Yield a shard's episodes in order with decoded frames; memory holds one episode at a time.

    With ``max_steps`` only the first that many steps are read: the episode that crosses the limit
    is cut short (its later frames are never decoded) and, its last kept discount being 1, reads
    as truncated; the offline protocol keeps only the start of each checkpoint, so this saves
    most of the decoding and disk.
    """
    remaining = max_steps
    for index, features in enumerate(iter_rlu_records(path)):
        if remaining is not None and remaining <= 0:
            return
        steps = len(features["actions"]) if remaining is None else remaining
        try:
            frames = decode_png_frames(features["observations"][:steps])  # type: ignore[arg-type]
        except ValueError as error:
            raise TFRecordError(path, index, str(error)) from error
        if remaining is not None:
            remaining -= len(frames)
        yield RLUEpisode(
            checkpoint_idx=int(features["checkpoint_idx"][0]),
            episode_idx=int(features["episode_idx"][0]),
            episode_return=float(features["episode_return"][0]),
            clipped_episode_return=float(features["clipped_episode_return"][0]),
            frames=frames,
            actions=np.asarray(features["actions"][:steps], np.int64),
            unclipped_rewards=np.asarray(features["unclipped_rewards"][:steps], np.float32),
            clipped_rewards=np.asarray(features["clipped_rewards"][:steps], np.float32),
            discounts=np.asarray(features["discounts"][:steps], np.float32),
        )
