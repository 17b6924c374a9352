"""The shard writer and CRC-32C that the fetcher's tests and the reader rely on.

Checked against independent facts (published CRC-32C check value, hand-encoded protobuf wire
bytes, TFRecord framing parsed by hand), not against the code under test.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest

from offline_gitd.data.crc32c import crc32c, mask, masked_crc32c
from tests.rlu_shards import (
    decode_example,
    encode_example,
    make_synthetic_episode,
    write_rlu_episodes_shard,
)


def test_crc32c_check_value_and_chaining() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C (Castagnoli) check value
    assert crc32c(b"56789", crc32c(bytearray(b"1234"))) == 0xE3069283
    assert masked_crc32c(b"") == 0xA282EAD8  # mask(0) is the bare delta
    crc = 0xE3069283
    assert mask(crc) == ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) % 2**32


def test_example_wire_format_matches_hand_encoding() -> None:
    # Example{features{feature{key:"a" value{int64_list{value:[1,2]}}}}}, tag by tag.
    expected = bytes.fromhex("0a0d0a0b0a016112061a040a020102")
    assert encode_example({"a": np.array([1, 2])}) == expected


def read_records(path: Path) -> list[bytes]:
    """Parse TFRecord framing by hand, checking both masked CRCs."""
    with gzip.open(path) as f:
        raw = f.read()
    records, offset = [], 0
    while offset < len(raw):
        (length,) = struct.unpack_from("<Q", raw, offset)
        (length_crc,) = struct.unpack_from("<I", raw, offset + 8)
        assert length_crc == masked_crc32c(raw[offset : offset + 8])
        data = raw[offset + 12 : offset + 12 + length]
        (data_crc,) = struct.unpack_from("<I", raw, offset + 12 + length)
        assert data_crc == masked_crc32c(data)
        records.append(data)
        offset += 16 + length
    return records


def test_episodes_shard_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    episodes = [make_synthetic_episode(rng, 30, 4, i, terminal=i == 0) for i in range(2)]
    path = tmp_path / "run_1-00004-of-00050"
    write_rlu_episodes_shard(path, episodes)
    records = read_records(path)
    assert len(records) == 2
    for episode, record in zip(episodes, records, strict=True):
        decoded = decode_example(record)
        assert decoded["checkpoint_idx"].tolist() == [4]
        assert decoded["episode_idx"].tolist() == [episode["episode_idx"]]
        assert decoded["episode_return"][0] == pytest.approx(episode["episode_return"])
        for name in ("actions", "unclipped_rewards", "clipped_rewards", "discounts"):
            np.testing.assert_array_equal(decoded[name], episode[name])
        frames = [cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_UNCHANGED)
                  for png in decoded["observations"]]  # fmt: skip
        np.testing.assert_array_equal(np.stack(frames), episode["observations"])
    assert decode_example(records[0])["discounts"][-1] == 0.0  # terminal
    assert decode_example(records[1])["discounts"][-1] == 1.0  # truncated


def test_synthetic_episode_shape_and_distinct_frames() -> None:
    episode = make_synthetic_episode(np.random.default_rng(0), 300, 2, 5, terminal=True)
    assert episode["observations"].shape == (300, 84, 84)
    assert episode["observations"].dtype == np.uint8
    assert len({frame.tobytes() for frame in episode["observations"]}) == 300
    assert episode["actions"].dtype == np.int64 and episode["discounts"].dtype == np.float32
    np.testing.assert_array_equal(episode["clipped_rewards"], np.clip(episode["unclipped_rewards"], -1, 1))
    assert episode["clipped_episode_return"] == pytest.approx(episode["clipped_rewards"].sum())
