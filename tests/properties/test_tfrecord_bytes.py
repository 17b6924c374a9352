"""The TFRecord reader and the ``tf.train.Example`` decoder (``offline_gitd.data.tfrecord``, and
the RLU episode reader on top) on Examples from the package's writer, random bytes, and records
with bytes flipped, inserted, cut or with a forged length: each is the records and features
written, decoded as the protobuf library decodes them, or one line of ``ValueError`` /
:class:`TFRecordError` (refusing more than protobuf is allowed: groups, for one, never occur)."""

from __future__ import annotations

import atexit
import gzip
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import event, example, given
from hypothesis import strategies as st

from offline_gitd.data.crc32c import masked_crc32c
from offline_gitd.data.rlu import iter_rlu_episodes
from offline_gitd.data.tfrecord import TFRecordError, iter_tfrecords, parse_example
from tests.properties.checks import assert_one_line, share
from tests.rlu_shards import (
    decode_example,
    encode_example,
    episode_features,
    make_synthetic_episode,
    tfrecord_frame,
)

SCRATCH = Path(tempfile.mkdtemp(prefix="tfrecords-"))  # one file rewritten per example; removed at exit
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)

VALUES = (
    st.lists(st.binary(max_size=6), min_size=1, max_size=4)
    | st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=4).map(lambda v: np.array(v, np.int64))
    | st.lists(st.floats(width=32), min_size=1, max_size=4).map(lambda v: np.array(v, np.float32))
)
FEATURES = st.dictionaries(st.text(max_size=6), VALUES, max_size=4)


def same_features(ours: dict, reference: dict) -> bool:
    """Equal names and values; floats compared bit for bit (NaN payloads included)."""
    if ours.keys() != reference.keys():
        return False
    for name, value in ours.items():
        other = reference[name]
        if isinstance(value, list) or isinstance(other, list):
            if list(value) != list(other) and (len(value) or len(other)):
                return False
        elif value.dtype != other.dtype and len(value) + len(other) or value.tobytes() != other.tobytes():
            return False
    return True


@share(0.3)
@given(features=FEATURES)
def test_examples_from_the_writer_decode_to_their_features(features: dict) -> None:
    record = encode_example(features)
    assert same_features(parse_example(record), features)
    assert same_features(parse_example(record), decode_example(record))


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one to three bytes flipped, inserted, deleted or the tail cut off."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(out)))
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        if action == "flip" and at < len(out):
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=3) | st.sampled_from([b"\xff" * 11, b"\x0a\x7f"]))
        elif action == "delete":
            del out[at : at + draw(st.integers(1, 3))]
        elif action == "truncate":
            del out[at:]
    return bytes(out)


def decoded_or_error(record: bytes) -> dict | None:
    """The protobuf library's decoding, or None where it refuses the bytes."""
    from google.protobuf.message import DecodeError

    try:
        return decode_example(record)
    except DecodeError:
        return None


def check_example_bytes(record: bytes) -> None:
    try:
        ours = parse_example(record)
    except ValueError as error:
        assert_one_line(error)
        event("refused")
        return
    event("decoded")
    reference = decoded_or_error(record)
    assert reference is not None, "decoded bytes that protobuf refuses"
    assert same_features(ours, reference)


@given(record=st.binary(max_size=64))
# Each was a bug: OverflowErrors (a varint past 64 bits in 10 bytes, and in 11), a bytes value
# read on into the next field, a field number 0 and an entry that protobuf drops decoded.
@example(record=b"\n\x14\n\x12\n\x01a\x12\r\x1a\x0b\x08" + b"\xff" * 9 + b"\x7f")  # protobuf: [-1]
@example(record=b"\n\x15\n\x13\n\x01a\x12\x0e\x1a\x0c\x08" + b"\xff" * 10 + b"\x01")
@example(record=b"\n\x0c\n\n\x12\x05\n\x03\n\x05A\n\x01a")  # was {"a": [b"A\n\x01a"]}
@example(record=b"\x02\n\n\x08\n\x00\x12\x04\n\x02\n\x00")  # field number 0: protobuf refuses it
@example(record=b"\n\n\n\x08\x1a\x00\x12\x04\n\x02\n\x00")  # an entry with an unknown field: protobuf drops it
def test_any_bytes_are_an_example_or_one_line(record: bytes) -> None:
    check_example_bytes(record)


@share(0.5)
@given(data=st.data(), features=FEATURES.filter(bool))
def test_mutated_examples_decode_as_protobuf_does_or_one_line(data: st.DataObject, features: dict) -> None:
    check_example_bytes(data.draw(mutated(encode_example(features))))


def file_bytes(records: list[bytes], compressed: bool) -> bytes:
    framed = b"".join(tfrecord_frame(record) for record in records)
    return gzip.compress(framed, mtime=0) if compressed else framed


def read_file(data: bytes, compressed: bool) -> list[bytes]:
    path = SCRATCH / "shard.tfrecord"
    path.write_bytes(data)
    return list(iter_tfrecords(path, compressed=compressed))


def check_file_bytes(data: bytes, compressed: bool) -> None:
    """Read whole, every byte accounted for (the records framed again are the file), or one line."""
    try:
        records = read_file(data, compressed)
    except TFRecordError as error:
        assert_one_line(error)
        event("refused")
        return
    event("read")
    framed = b"".join(tfrecord_frame(record) for record in records)
    assert framed == (gzip.decompress(data) if compressed else data)


@share(0.5)
@given(records=st.lists(st.binary(max_size=40), max_size=4), compressed=st.booleans())
def test_framed_records_read_back(records: list[bytes], compressed: bool) -> None:
    assert read_file(file_bytes(records, compressed), compressed) == records


@share(0.5)
@given(data=st.data(), records=st.lists(st.binary(max_size=40), min_size=1, max_size=3), compressed=st.booleans())
def test_mutated_files_read_whole_or_one_line(data: st.DataObject, records: list[bytes], compressed: bool) -> None:
    check_file_bytes(data.draw(mutated(file_bytes(records, compressed))), compressed)


@share(0.3)
@given(data=st.binary(max_size=100), compressed=st.booleans())
def test_any_bytes_are_a_file_or_one_line(data: bytes, compressed: bool) -> None:
    check_file_bytes(data, compressed)


@share(0.3)
@given(
    records=st.lists(st.binary(max_size=40), min_size=1, max_size=3),
    which=st.integers(0, 2),
    length=st.integers(0, 2**64 - 1) | st.sampled_from([2**40, 2**63 + 5, 2**64 - 1]),
    compressed=st.booleans(),
)
@example(records=[b"abc"], which=0, length=2**40, compressed=False)  # was a MemoryError (read(length) up front)
@example(records=[b"abc"], which=0, length=2**63 + 5, compressed=True)  # was an OverflowError
def test_a_forged_length_with_a_valid_crc_is_one_line(records, which, length, compressed) -> None:
    """A length field rewritten with its CRC recomputed: only the payload CRC or the file's end
    can tell, and memory must not follow the claimed length."""
    which = min(which, len(records) - 1)
    framed = [bytearray(tfrecord_frame(record)) for record in records]
    header = struct.pack("<Q", length)
    framed[which][:12] = header + struct.pack("<I", masked_crc32c(header))
    data = b"".join(framed)
    check_file_bytes(gzip.compress(data, mtime=0) if compressed else data, compressed)


FEATURES_OF_EPISODE = episode_features(make_synthetic_episode(np.random.default_rng(0), 2, 3, 4, terminal=True))
EPISODE = encode_example(FEATURES_OF_EPISODE)


def check_rlu_record(record: bytes) -> None:
    """A shard of one record reads as well-formed episodes, or one line."""
    path = SCRATCH / "run_1-00000-of-00050"
    path.write_bytes(file_bytes([record], compressed=True))
    try:
        episodes = list(iter_rlu_episodes(path))
    except TFRecordError as error:
        assert_one_line(error)
        event("refused")
        return
    event("episodes")
    for episode in episodes:
        steps = len(episode.actions)
        assert episode.frames.shape == (steps, 84, 84) and episode.frames.dtype == np.uint8
        for name in ("unclipped_rewards", "clipped_rewards", "discounts"):
            assert getattr(episode, name).shape == (steps,)


@share(0.3)
@given(name=st.sampled_from(sorted(FEATURES_OF_EPISODE)), value=VALUES | st.just([]))
@example(name="checkpoint_idx", value=[])  # was an IndexError: a per-episode feature with no value
@example(name="episode_idx", value=[b"x"])  # was a ValueError traceback: int(b"x")
@example(name="observations", value=np.zeros(2, np.float32))  # floats where PNGs belong
@example(name="observations", value=[b"", b""])  # was a cv2.error: OpenCV asserts on an empty buffer
def test_rlu_records_with_a_feature_of_another_kind_are_one_line(name: str, value) -> None:
    """One feature of a real episode replaced by a list of any kind and length."""
    check_rlu_record(encode_example(FEATURES_OF_EPISODE | {name: value}))


@share(0.3)
@given(data=st.data())
@example(data=None)  # the record as written
def test_mutated_rlu_episodes_are_episodes_or_one_line(data: st.DataObject | None) -> None:
    """An RLU episode record changed inside its Example and framed with valid CRCs (so the
    Example and episode checks, not the CRCs, must catch it)."""
    check_rlu_record(EPISODE if data is None else data.draw(mutated(EPISODE)))
