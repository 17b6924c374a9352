"""Read RL Unplugged Atari checkpoints through TFDS (optional ``tfds`` extra), as :class:`RLUEpisode`.

TFDS serves RL Unplugged Atari as RLDS episodes (``rlu_atari_checkpoints_ordered``);
:func:`~offline_gitd.data.rlds.rlu_episode_from_rlds` turns them back into the episodes that
:mod:`offline_gitd.data.rlu` reads straight from the shards, so both paths give the same data.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from offline_gitd.data.rlds import rlu_episode_from_rlds
from offline_gitd.data.rlu import RLUEpisode


def iter_tfds_episodes(
    game: str, run: int, checkpoint: int, data_dir: str | os.PathLike[str] | None = None
) -> Iterator[RLUEpisode]:
    """Read one checkpoint through TFDS ``rlu_atari_checkpoints_ordered/{game}_run_{run}``.

    The builder config is ``{game}_run_{run}`` (game capitalised as in the bucket, e.g.
    ``Pong_run_1``) and the split ``checkpoint_{checkpoint:02d}``, the checkpoint's shard of
    ``gs://rl_unplugged/atari_episodes_ordered``. Without prepared data in ``data_dir`` (default
    ``~/tensorflow_datasets``) ``tfds.load`` first prepares the whole run, every checkpoint, from
    that bucket. TFDS keeps only the unclipped rewards, so the clipped ones are recomputed by
    clipping, and stores a terminal episode's discounts one step earlier, which
    :func:`~offline_gitd.data.rlds.rlu_episode_from_rlds` moves back: the episodes equal
    :func:`~offline_gitd.data.rlu.iter_rlu_episodes`'s on the same shard.

    Needs the optional ``tfds`` extra; ``make test-tfds`` runs ``tests/data/test_rlu_tfds.py`` in its
    own venv. Those tests run TFDS's real builder, not the real data (the bucket was not reachable
    where they were written): the config and split names are checked against the builder's, for
    every game and run of the registry; ``tfds.testing.mock_data`` (random episodes through the
    builder's real feature spec) checks the conversion's shapes, dtypes and flags; and a run that
    the builder itself prepared from local shards in the bucket's layout checks that these
    episodes equal :func:`~offline_gitd.data.rlu.iter_rlu_episodes`'s.
    """
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError("reading through TFDS needs the optional extra: pip install 'offline-gitd[tfds]'") from error
    dataset = tfds.load(
        f"rlu_atari_checkpoints_ordered/{game}_run_{run}",
        split=f"checkpoint_{checkpoint:02d}",
        data_dir=None if data_dir is None else str(Path(data_dir)),
        shuffle_files=False,
    )
    for episode in tfds.as_numpy(dataset):
        yield rlu_episode_from_rlds(episode)
