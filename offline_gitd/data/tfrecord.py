"""Stream GZIP-compressed TFRecord files and parse ``tf.train.Example`` records, without TensorFlow.

RL Unplugged shards are GZIP TFRecord files of ``tf.train.Example`` protos (REFERENCE.md, "RL
Unplugged Atari"). A shard is a gigabyte or more, so records are read one at a time from the gzip
stream (memory bounded by the largest record, one episode) and every length and payload CRC is
checked: a bad download or a truncated file must fail loudly, naming the file and the record,
rather than feed garbage frames to a learner.

``parse_example`` is a minimal decoder of the protobuf wire format of ``Example`` (three nested
message kinds, nine features for RLU): it returns numpy arrays for numeric lists straight from the
packed bytes, which is faster than building protobuf message objects and needs no generated code.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Iterator

import numpy as np

from offline_gitd.data.crc32c import masked_crc32c

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")

# Protobuf wire types used by tf.train.Example.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

Feature = list[bytes] | np.ndarray


class TFRecordError(ValueError):
    """A TFRecord file that is corrupt, truncated or not an ``Example`` where one was expected."""

    def __init__(self, path: str | os.PathLike[str], index: int, reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: record {index}: {reason}")
        self.path = os.fspath(path)
        self.index = index
        self.reason = reason

    def __reduce__(self) -> tuple[type[TFRecordError], tuple[str, int, str]]:
        """Rebuild from the constructor's arguments: a decoding worker process sends it back whole."""
        return type(self), (self.path, self.index, self.reason)


def iter_tfrecords(path: str | os.PathLike[str], *, compressed: bool = True) -> Iterator[bytes]:
    """Yield the payload of each record of a TFRecord file, in order, checking both CRCs.

    ``compressed`` selects GZIP framing (RLU's shards); the stream is decompressed as it is read.
    Raises :class:`TFRecordError` naming the file and the 0-based record index on a CRC mismatch,
    a record cut short, or a broken gzip stream.
    """
    index = 0
    # Opened outside the try: a missing file is a plain FileNotFoundError, not a record error.
    with gzip.open(path, "rb") if compressed else open(path, "rb") as stream:
        try:
            while True:
                header = stream.read(_HEADER.size)
                if not header:
                    return
                if len(header) < _HEADER.size:
                    raise TFRecordError(path, index, "truncated record header")
                length, length_crc = _HEADER.unpack(header)
                if masked_crc32c(header[:8]) != length_crc:
                    raise TFRecordError(path, index, "length CRC mismatch (corrupt file)")
                data = stream.read(length)
                footer = stream.read(_FOOTER.size)
                if len(data) < length or len(footer) < _FOOTER.size:
                    raise TFRecordError(path, index, f"truncated record (expected {length} payload bytes)")
                if masked_crc32c(data) != _FOOTER.unpack(footer)[0]:
                    raise TFRecordError(path, index, "data CRC mismatch (corrupt file)")
                yield data
                index += 1
        except (EOFError, OSError, zlib.error) as error:
            # gzip reports a cut-off or damaged stream with these; say where it happened.
            raise TFRecordError(path, index, f"unreadable stream: {error}") from error


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode one base-128 varint at ``pos``; returns (value, position after it)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Yield ``(field_number, wire_type, a, b)`` of a message in ``buf[start:end]``.

    For length-delimited fields ``(a, b)`` is the payload's span; for scalars ``a`` is the value
    (varint) or its offset (fixed 32/64-bit) and ``b`` is unused.
    """
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("length-delimited field runs past the end of its message")
            yield number, wire, pos, pos + size
            pos += size
        elif wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value, pos
        elif wire == _I32:
            yield number, wire, pos, pos + 4
            pos += 4
        elif wire == _I64:
            yield number, wire, pos, pos + 8
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    if pos != end:
        raise ValueError("field runs past the end of its message")


def _packed_varints(data: bytes) -> np.ndarray:
    """Decode a packed run of varints into int64, vectorised (two's complement for negatives)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size == 0:
        return np.zeros(0, dtype=np.int64)
    if raw.max() < 0x80:  # every value < 128: the common case for actions
        return raw.astype(np.int64)
    ends = raw < 0x80
    if not ends[-1]:
        raise ValueError("packed varints end mid-value")
    group_starts = np.flatnonzero(np.concatenate(([True], ends[:-1])))
    position = np.arange(raw.size) - np.repeat(group_starts, np.diff(np.append(group_starts, raw.size)))
    parts = (raw & 0x7F).astype(np.uint64) << (7 * position).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, group_starts).view(np.int64)


def _parse_list(buf: bytes, start: int, end: int, kind: int) -> Feature:
    """Decode the ``value`` field of a BytesList (1), FloatList (2) or Int64List (3)."""
    if kind == 1:
        values: list[bytes] = []
        pos = start
        while pos < end:
            if buf[pos] != 0x0A:  # field 1, wire type LEN
                raise ValueError("BytesList holds a field other than value")
            size, pos = _varint(buf, pos + 1)
            values.append(buf[pos : pos + size])
            pos += size
        return values
    chunks = []
    for number, wire, a, b in _fields(buf, start, end):
        if number != 1:
            continue
        if kind == 2:
            # packed (LEN) or one fixed32 per value (I32): both are little-endian float32 bytes.
            chunks.append(np.frombuffer(buf[a:b], dtype="<f4"))
        elif wire == _LEN:
            chunks.append(_packed_varints(buf[a:b]))
        else:
            chunks.append(np.array([a], dtype=np.uint64).view(np.int64))
    dtype = np.float32 if kind == 2 else np.int64
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


def parse_example(record: bytes) -> dict[str, Feature]:
    """Decode a serialized ``tf.train.Example`` into ``{name: values}``.

    Bytes lists come back as ``list[bytes]``, float lists as float32 arrays, int64 lists as int64
    arrays (scalars are 1-element arrays, as in the proto). Raises ``ValueError`` on bytes that are
    not a well-formed ``Example``.
    """
    features: dict[str, Feature] = {}
    try:
        for number, wire, fstart, fend in _fields(record, 0, len(record)):
            if number != 1 or wire != _LEN:  # Example.features
                continue
            for enumber, ewire, estart, eend in _fields(record, fstart, fend):
                if enumber != 1 or ewire != _LEN:  # Features.feature (map entry)
                    continue
                name = ""
                value: Feature = np.zeros(0, dtype=np.float32)  # a Feature with no kind set
                for knumber, _, kstart, kend in _fields(record, estart, eend):
                    if knumber == 1:
                        name = record[kstart:kend].decode("utf-8")
                    elif knumber == 2:
                        for kind, _, lstart, lend in _fields(record, kstart, kend):
                            if kind in (1, 2, 3):
                                value = _parse_list(record, lstart, lend, kind)
                features[name] = value
    except (IndexError, UnicodeDecodeError) as error:
        raise ValueError(f"malformed tf.train.Example: {error}") from error
    return features
