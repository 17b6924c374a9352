"""Write RL Unplugged Atari shards byte-for-byte in the bucket's format, without TensorFlow.

Not part of the package: nothing in ``offline_gitd`` writes shards, only reads them
(:mod:`offline_gitd.data.rlu`, whose feature table this writer follows). The fetcher's tests, the
shard reader's tests and the benchmarks (``benchmarks/ingest.py``) all need real-looking shards
offline: GZIP-compressed TFRecord files of serialized ``tf.train.Example`` protos carrying the
``atari_episodes_ordered`` features (docs/datasets.md#rl-unplugged-atari). TensorFlow is not a
dependency, so the ``Example`` message classes are built at run time from descriptors that mirror
``tensorflow/core/example/{feature,example}.proto`` (same package, names and field numbers, hence
the same wire format) and are registered in a private descriptor pool, so they never clash with
TensorFlow's own classes when both are imported.

TFRecord framing of one record: ``uint64 length`` (little-endian), ``uint32 masked_crc32c(length
bytes)``, ``data``, ``uint32 masked_crc32c(data)``.
"""

from __future__ import annotations

import functools
import gzip
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from offline_gitd.data.crc32c import masked_crc32c

FRAME_SHAPE = (84, 84)
NUM_ATARI_ACTIONS = 18

FeatureValue = Sequence[bytes] | np.ndarray | int | float


class ExampleClasses(NamedTuple):
    """The generated ``tensorflow.*`` message classes needed for ``tf.train.Example``."""

    Example: Any
    Features: Any
    Feature: Any
    BytesList: Any
    FloatList: Any
    Int64List: Any


@functools.cache
def example_message_classes() -> ExampleClasses:
    """Build (once) the ``tf.train.Example`` message classes from hand-written descriptors."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FieldDescriptorProto
    feature_file = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/feature.proto", package="tensorflow", syntax="proto3"
    )

    def add_list(name: str, field_type: int) -> None:
        message = feature_file.message_type.add(name=name)
        message.field.add(name="value", number=1, label=fdp.LABEL_REPEATED, type=field_type)

    add_list("BytesList", fdp.TYPE_BYTES)
    add_list("FloatList", fdp.TYPE_FLOAT)
    add_list("Int64List", fdp.TYPE_INT64)

    feature = feature_file.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (field_name, type_name) in enumerate(
        [("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List")],
        start=1,
    ):
        feature.field.add(
            name=field_name,
            number=number,
            label=fdp.LABEL_OPTIONAL,
            type=fdp.TYPE_MESSAGE,
            type_name=f".tensorflow.{type_name}",
            oneof_index=0,
        )

    # ``map<string, Feature> feature = 1;`` is sugar for a repeated nested map-entry message.
    features = feature_file.message_type.add(name="Features")
    entry = features.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=fdp.LABEL_OPTIONAL, type=fdp.TYPE_STRING)
    entry.field.add(
        name="value",
        number=2,
        label=fdp.LABEL_OPTIONAL,
        type=fdp.TYPE_MESSAGE,
        type_name=".tensorflow.Feature",
    )
    features.field.add(
        name="feature",
        number=1,
        label=fdp.LABEL_REPEATED,
        type=fdp.TYPE_MESSAGE,
        type_name=".tensorflow.Features.FeatureEntry",
    )

    example_file = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/example.proto",
        package="tensorflow",
        syntax="proto3",
        dependency=["tensorflow/core/example/feature.proto"],
    )
    example = example_file.message_type.add(name="Example")
    example.field.add(
        name="features",
        number=1,
        label=fdp.LABEL_OPTIONAL,
        type=fdp.TYPE_MESSAGE,
        type_name=".tensorflow.Features",
    )

    pool = descriptor_pool.DescriptorPool()
    pool.Add(feature_file)
    pool.Add(example_file)

    def message_class(full_name: str) -> Any:
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))

    return ExampleClasses(
        *(
            message_class(f"tensorflow.{name}")
            for name in ("Example", "Features", "Feature", "BytesList", "FloatList", "Int64List")
        )
    )


def encode_example(features: Mapping[str, FeatureValue]) -> bytes:
    """Serialize a ``tf.train.Example``; each value's type picks its list kind.

    A sequence of ``bytes`` becomes a ``BytesList``; integers (Python or numpy) an ``Int64List``;
    floats a ``FloatList`` (stored as float32, as TensorFlow does). Scalars become 1-element lists.
    """
    classes = example_message_classes()
    example = classes.Example()
    for name, value in features.items():
        feature = example.features.feature[name]
        if isinstance(value, (list, tuple)) and all(isinstance(v, bytes) for v in value):
            feature.bytes_list.value.extend(value)
            continue
        array = np.atleast_1d(np.asarray(value))
        if array.dtype.kind in "iub":
            feature.int64_list.value.extend(array.astype(np.int64).tolist())
        elif array.dtype.kind == "f":
            feature.float_list.value.extend(array.astype(np.float32).tolist())
        else:
            raise TypeError(f"feature {name!r}: unsupported value of dtype {array.dtype}")
    return example.SerializeToString()


def decode_example(data: bytes) -> dict[str, list[bytes] | np.ndarray]:
    """Parse a serialized ``tf.train.Example`` into ``{name: [bytes] | int64/float32 array}``."""
    example = example_message_classes().Example.FromString(data)
    decoded: dict[str, list[bytes] | np.ndarray] = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        if kind == "bytes_list":
            decoded[name] = list(feature.bytes_list.value)
        elif kind == "int64_list":
            decoded[name] = np.asarray(feature.int64_list.value, dtype=np.int64)
        elif kind == "float_list":
            decoded[name] = np.asarray(feature.float_list.value, dtype=np.float32)
        else:
            decoded[name] = np.zeros(0, dtype=np.float32)
    return decoded


def tfrecord_frame(record: bytes) -> bytes:
    """One record in TFRecord framing: length, masked CRC of length, data, masked CRC of data."""
    length = struct.pack("<Q", len(record))
    return b"".join(
        (
            length,
            struct.pack("<I", masked_crc32c(length)),
            record,
            struct.pack("<I", masked_crc32c(record)),
        )
    )


def write_tfrecord_gz(path: str | os.PathLike[str], records: Iterable[bytes]) -> None:
    """Write ``records`` as a GZIP-compressed TFRecord file (the bucket's shard format)."""
    with gzip.open(path, "wb") as out:
        for record in records:
            out.write(tfrecord_frame(record))


def encode_png_frames(observations: np.ndarray) -> list[bytes]:
    """PNG-encode ``uint8[T, 84, 84]`` frames as 84x84x1 grayscale PNGs, like the bucket's."""
    import cv2

    frames = np.asarray(observations)
    if frames.dtype != np.uint8 or frames.ndim != 3:
        raise ValueError(f"observations must be uint8[T, H, W], got {frames.dtype}{frames.shape}")
    encoded = []
    for frame in frames:
        ok, png = cv2.imencode(".png", frame)
        if not ok:
            raise ValueError("cv2.imencode failed to encode a frame as PNG")
        encoded.append(png.tobytes())
    return encoded


def episode_features(episode: Mapping[str, Any]) -> dict[str, FeatureValue]:
    """The ``atari_episodes_ordered`` features of one episode dict (``make_synthetic_episode``)."""
    length = len(episode["observations"])
    for name in ("actions", "unclipped_rewards", "clipped_rewards", "discounts"):
        if len(episode[name]) != length:
            raise ValueError(f"{name} has {len(episode[name])} steps, observations {length}")
    return {
        "checkpoint_idx": int(episode["checkpoint_idx"]),
        "episode_idx": int(episode["episode_idx"]),
        "episode_return": float(episode["episode_return"]),
        "clipped_episode_return": float(episode["clipped_episode_return"]),
        "observations": encode_png_frames(episode["observations"]),
        "actions": np.asarray(episode["actions"], dtype=np.int64),
        "unclipped_rewards": np.asarray(episode["unclipped_rewards"], dtype=np.float32),
        "clipped_rewards": np.asarray(episode["clipped_rewards"], dtype=np.float32),
        "discounts": np.asarray(episode["discounts"], dtype=np.float32),
    }


def write_rlu_episodes_shard(path: str | os.PathLike[str], episodes: Iterable[Mapping[str, Any]]) -> None:
    """Write episodes as one ``atari_episodes_ordered`` shard (GZIP TFRecord of Examples).

    Each episode dict has ``checkpoint_idx: int, episode_idx: int, episode_return: float,
    clipped_episode_return: float, observations: uint8[T, 84, 84], actions: int64[T],
    unclipped_rewards, clipped_rewards, discounts: float32[T]``.
    """
    write_tfrecord_gz(path, (encode_example(episode_features(ep)) for ep in episodes))


def make_synthetic_episode(
    rng: np.random.Generator,
    length: int,
    checkpoint_idx: int,
    episode_idx: int,
    terminal: bool,
    num_actions: int = NUM_ATARI_ACTIONS,
) -> dict[str, Any]:
    """A small, deterministic episode in the shape ``write_rlu_episodes_shard`` takes.

    Frames are a dark screen with one bright 8x8 block at a random place, and the first row stamps
    ``(checkpoint_idx, episode_idx, t)`` so every frame is distinct (a reader test can tell which
    step a decoded frame came from) while the PNGs stay a few hundred bytes. Rewards are sparse and
    unclipped (RLU stores them unclipped); ``terminal`` sets the last discount to 0, RLU's terminal
    flag, else the episode was truncated and every discount is 1.
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    observations = np.zeros((length, *FRAME_SHAPE), dtype=np.uint8)
    rows = rng.integers(0, FRAME_SHAPE[0] - 8, size=length)
    cols = rng.integers(0, FRAME_SHAPE[1] - 8, size=length)
    for t in range(length):
        observations[t, rows[t] + 1 : rows[t] + 9, cols[t] : cols[t] + 8] = 200
        observations[t, 0, :5] = [
            checkpoint_idx % 256,
            episode_idx % 256,
            (episode_idx // 256) % 256,
            t % 256,
            t // 256 % 256,
        ]
    unclipped = rng.choice(np.array([0.0, 0.0, 0.0, 0.0, 1.0, -1.0, 5.0]), size=length)
    unclipped = unclipped.astype(np.float32)
    clipped = np.clip(unclipped, -1.0, 1.0).astype(np.float32)
    discounts = np.ones(length, dtype=np.float32)
    if terminal:
        discounts[-1] = 0.0
    return {
        "checkpoint_idx": int(checkpoint_idx),
        "episode_idx": int(episode_idx),
        "episode_return": float(unclipped.sum()),
        "clipped_episode_return": float(clipped.sum()),
        "observations": observations,
        "actions": rng.integers(0, num_actions, size=length, dtype=np.int64),
        "unclipped_rewards": unclipped,
        "clipped_rewards": clipped,
        "discounts": discounts,
    }
