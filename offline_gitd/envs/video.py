"""Film one episode of a policy to an .mp4 / .avi file.

gymnasium's ``RecordVideo`` writes through moviepy, which this package does not depend on; OpenCV
(already a dependency, for Atari frame resizing) has a video writer, so frames rendered by the env
(``render_mode="rgb_array"``) go straight to it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from offline_gitd.errors import UsageError

# container suffix -> OpenCV fourcc
CODECS = {".mp4": "mp4v", ".avi": "MJPG"}


def check_video_path(path: Path) -> None:
    """Refuse an unknown container or a missing folder before any work is done."""
    if path.suffix.lower() not in CODECS:
        raise UsageError(f"--video {path}: use a {' or '.join(CODECS)} file name")
    if not path.parent.exists():
        raise UsageError(f"--video {path}: folder {path.parent} does not exist")


def record_episode(
    policy: Callable[[np.ndarray], np.ndarray],
    env: Any,
    path: Path,
    *,
    seed: int,
    epsilon: float = 0.0,
    fps: int | None = None,
) -> float:
    """Play one episode of ``policy`` (batch in, batch out) in ``env`` (built with
    ``render_mode="rgb_array"``), write every rendered frame to ``path``; returns the episode's return.
    With probability ``epsilon`` a discrete action is replaced by a uniform one, as in evaluation."""
    import cv2

    check_video_path(path)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    frame = env.render()
    if frame is None:
        env.close()
        raise UsageError("this environment renders no frames (it needs render_mode='rgb_array')")
    height, width = frame.shape[:2]
    fps = fps or int(env.metadata.get("render_fps") or 30)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*CODECS[path.suffix.lower()]), fps, (width, height))
    total = 0.0
    try:
        while True:
            writer.write(cv2.cvtColor(np.asarray(frame, np.uint8), cv2.COLOR_RGB2BGR))
            action = np.asarray(policy(np.asarray(obs)[None]))[0]
            if epsilon > 0 and rng.random() < epsilon:
                action = env.action_space.sample()
            if np.ndim(action) == 0:
                action = int(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            frame = env.render()
            if terminated or truncated:
                writer.write(cv2.cvtColor(np.asarray(frame, np.uint8), cv2.COLOR_RGB2BGR))
                return total
    finally:
        writer.release()
        env.close()
