"""Datasets, from a source on the internet to the batches a training step consumes (docs/datasets.md).

The modules, by job (docs/architecture.md#a-map-of-data):

Sources and fetching
    ``registry`` dataset ids and the RL Unplugged Atari registry (``rlu_atari.json``);
    ``paths`` where data lives (the data root, ``--data-dir``); ``command`` the ``fetch`` and
    ``datasets`` commands; ``rlu_fetch`` fetches a run's shards in parallel through
    ``http_download`` (one shard: resume, retries, a minimum rate), checked by
    ``shard_verification`` (the server's promises) and recorded in ``lock_book`` (each shard's
    first verified download); ``inventory`` what is on disk already; ``minari_fetch`` downloads
    a Minari dataset; ``manifest`` what a recorded Minari dataset holds, small enough to commit.

Formats
    ``tfrecord`` streams GZIP TFRecord files and parses ``tf.train.Example`` without TensorFlow;
    ``crc32c`` their checksums; ``rlu`` reads RL Unplugged Atari episodes from shards
    (``rlu_tfds`` through TFDS, an optional extra); ``rlds`` RLDS-shaped episodes;
    ``minari_checkpoints`` the checkpoint boundaries of a DQN-replay Minari dataset. Shards are
    only read here: the writer the tests and benchmarks use is ``tests/rlu_shards.py``.

Storage
    ``episode_store`` rows of transitions grouped into episodes (:class:`EpisodeStore`), several
    memory maps read as one, the paper's first-fraction cut; ``cache_writer`` decodes one RLU
    shard into its cache folder, ``cache_reader`` opens and checks one, ``cache`` builds a run's
    caches and loads them as one store; ``minari_source`` a Minari dataset as a store;
    ``random_access`` advises the kernel that a memory-mapped store is read at random.

Sampling
    ``replay`` batches from a store (stacks, n-step returns, prioritised draws) and the
    :class:`~offline_gitd.data.replay.Sampler` protocol a loop uses; ``sumtree`` prioritised
    replay's sum tree; ``datasets`` a dataset id opened once
    (:class:`~offline_gitd.data.datasets.OpenedDataset`) and turned into what the offline loop
    needs (:class:`~offline_gitd.data.datasets.OfflineData`: a replay and an evaluation env).
"""
