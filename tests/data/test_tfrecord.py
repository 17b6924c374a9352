"""TFRecord streaming and the minimal Example decoder, against the real protobuf-encoded writer."""

import gzip
import struct

import numpy as np
import pytest

from offline_gitd.data.tfrecord import TFRecordError, iter_tfrecords, parse_example
from tests.rlu_shards import (
    decode_example,
    encode_example,
    episode_features,
    make_synthetic_episode,
    tfrecord_frame,
    write_tfrecord_gz,
)


def assert_same_features(ours, theirs):
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        if isinstance(value, list):
            assert ours[name] == value, name
        else:
            assert ours[name].dtype == value.dtype, name
            np.testing.assert_array_equal(ours[name], value, err_msg=name)


def test_parse_example_matches_protobuf_on_rlu_episode():
    episode = make_synthetic_episode(np.random.default_rng(0), 25, 3, 7, terminal=True)
    record = encode_example(episode_features(episode))
    assert_same_features(parse_example(record), decode_example(record))


def test_parse_example_edge_values():
    record = encode_example(
        {
            "neg": np.array([-1, -(2**63), 2**63 - 1, 0, 127, 128, 300]),
            "f": np.array([1.5, -0.0, np.inf, 3.4e38], np.float32),
            "b": [b"", b"\x00\xff" * 200],
            "scalar": 5,
        }
    )
    assert_same_features(parse_example(record), decode_example(record))


def test_parse_example_unpacked_lists():
    """proto2 writers may emit one tag per value instead of a packed run; both are valid."""
    int_list = b"".join(b"\x08" + bytes([v]) for v in (1, 2, 3))  # Int64List.value, varint each
    float_list = b"".join(b"\x0d" + struct.pack("<f", v) for v in (0.5, 2.0))  # fixed32 each

    def msg(field, payload):
        return bytes([field << 3 | 2, len(payload)]) + payload

    def entry(name, kind, payload):
        return msg(1, msg(1, name.encode()) + msg(2, msg(kind, payload)))

    record = msg(1, entry("i", 3, int_list) + entry("f", 2, float_list))
    parsed = parse_example(record)
    np.testing.assert_array_equal(parsed["i"], [1, 2, 3])
    np.testing.assert_array_equal(parsed["f"], [0.5, 2.0])


def test_parse_example_rejects_garbage():
    with pytest.raises(ValueError):
        parse_example(b"\x0a\x50abc")


def test_iter_tfrecords_roundtrip(tmp_path):
    records = [b"", b"x" * 10, bytes(range(256)) * 40]
    path = tmp_path / "f.tfrecord.gz"
    write_tfrecord_gz(path, records)
    assert list(iter_tfrecords(path)) == records
    plain = tmp_path / "f.tfrecord"
    plain.write_bytes(b"".join(tfrecord_frame(r) for r in records))
    assert list(iter_tfrecords(plain, compressed=False)) == records


def corrupt(tmp_path, records, offset_in_record, index):
    """A gzip file whose ``index``-th record has one byte flipped ``offset_in_record`` in."""
    frames = [bytearray(tfrecord_frame(r)) for r in records]
    frames[index][offset_in_record] ^= 0x40
    path = tmp_path / "bad"
    with gzip.open(path, "wb") as out:
        out.write(b"".join(frames))
    return path


@pytest.mark.parametrize("offset, reason", [(0, "length CRC"), (14, "data CRC"), (-1, "data CRC")])
def test_corrupt_record_names_file_and_index(tmp_path, offset, reason):
    path = corrupt(tmp_path, [b"a" * 10, b"b" * 10, b"c" * 10], offset, 1)
    reader = iter_tfrecords(path)
    assert next(reader) == b"a" * 10
    with pytest.raises(TFRecordError, match=f"{path}: record 1: {reason}") as info:
        next(reader)
    assert info.value.index == 1 and info.value.path == str(path)


def test_truncated_file_is_an_error(tmp_path):
    path = tmp_path / "cut"
    write_tfrecord_gz(path, [b"a" * 100, b"b" * 100])
    data = gzip.decompress(path.read_bytes())
    path.write_bytes(gzip.compress(data[:-30]))  # cut inside record 1 (a clean gzip stream)
    with pytest.raises(TFRecordError, match="record 1: truncated"):
        list(iter_tfrecords(path))
    path.write_bytes(gzip.compress(data)[:-20])  # cut inside the gzip stream itself
    with pytest.raises(TFRecordError, match=r"cut: record \d: unreadable stream"):
        list(iter_tfrecords(path))
