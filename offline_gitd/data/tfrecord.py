"""Stream GZIP-compressed TFRecord files and parse ``tf.train.Example`` records, without TensorFlow.

RL Unplugged shards are GZIP TFRecord files of ``tf.train.Example`` protos (docs/datasets.md#rl-unplugged-atari). A shard is a gigabyte or more, so records are read one at a time from the gzip
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
import typing
import zlib
from collections.abc import Iterator

import numpy as np

from offline_gitd.data.crc32c import masked_crc32c

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")

# Protobuf wire types used by tf.train.Example.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
# A varint holds at most 64 bits in 10 bytes; protobuf keeps the low 64 bits of a 10-byte one.
_MAX_VARINT_BYTES = 10
_U64 = (1 << 64) - 1
# A record's payload is read in pieces of at most this size: its length comes from the file, and
# a corrupt (or hostile) length with a valid CRC must not allocate terabytes before the read
# finds the file ends long before.
_READ_CHUNK = 1 << 26

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
                data = _read_up_to(stream, length)
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


def _read_up_to(stream: typing.BinaryIO, length: int) -> bytes:
    """``length`` bytes of ``stream``, or fewer where it ends first; memory grows with the bytes
    actually read, never with ``length`` itself."""
    if length <= _READ_CHUNK:
        return stream.read(length)
    pieces = []
    while length > 0:
        piece = stream.read(min(length, _READ_CHUNK))
        if not piece:
            break
        pieces.append(piece)
        length -= len(piece)
    return b"".join(pieces)


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode one base-128 varint at ``pos``; returns (value, position after it)."""
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    start = pos
    pos += 1
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return result & _U64, pos
        if pos - start >= _MAX_VARINT_BYTES:
            raise ValueError(f"varint longer than {_MAX_VARINT_BYTES} bytes")
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
        if number == 0 or number >= 1 << 29:
            raise ValueError(f"invalid protobuf field number {number}")
        if wire == _LEN:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise ValueError("length-delimited field runs past the end of its message")
            yield number, wire, pos, pos + size
            pos += size
        elif wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value, pos
        elif wire in (_I32, _I64):
            size = 4 if wire == _I32 else 8
            if pos + size > end:
                raise ValueError("fixed-size field runs past the end of its message")
            yield number, wire, pos, pos + size
            pos += size
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
    if np.diff(np.append(group_starts, raw.size)).max() > _MAX_VARINT_BYTES:
        raise ValueError(f"packed varint longer than {_MAX_VARINT_BYTES} bytes")
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
            if pos + size > end:
                raise ValueError("BytesList value runs past the end of its list")
            values.append(buf[pos : pos + size])
            pos += size
        return values
    chunks = []
    for number, wire, a, b in _fields(buf, start, end):
        if number != 1:
            continue
        if kind == 2:
            # packed (LEN) or one fixed32 per value (I32): both are little-endian float32 bytes.
            if wire not in (_LEN, _I32) or (b - a) % 4:
                raise ValueError("FloatList value is not float32s")
            chunks.append(np.frombuffer(buf[a:b], dtype="<f4"))
        elif wire == _LEN:
            chunks.append(_packed_varints(buf[a:b]))
        elif wire == _VARINT:
            chunks.append(np.array([a], dtype=np.uint64).view(np.int64))
        else:
            raise ValueError("Int64List value is not a varint")
    dtype = np.float32 if kind == 2 else np.int64
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


def _concatenate(first: Feature, second: Feature) -> Feature:
    """Two lists of one kind as one (bytes lists as a list, numbers as one array)."""
    if isinstance(first, list):
        return first + second  # type: ignore[operator]
    return np.concatenate([first, second])


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
                value_kind = 0
                for knumber, kwire, kstart, kend in _fields(record, estart, eend):
                    # Protobuf sets aside a map entry with an unknown field (the feature is not
                    # in the Example it decodes); refused here rather than silently dropped.
                    if knumber not in (1, 2) or kwire != _LEN:
                        raise ValueError("a feature entry holds a field other than its name and value")
                    if knumber == 1:
                        name = record[kstart:kend].decode("utf-8")
                    elif knumber == 2:
                        for kind, lwire, lstart, lend in _fields(record, kstart, kend):
                            if kind not in (1, 2, 3):
                                continue
                            if lwire != _LEN:
                                raise ValueError("a feature's list is not length-delimited")
                            # Protobuf merges a kind given twice (its values concatenate) and
                            # lets a different kind replace it; so does this decoder.
                            parsed = _parse_list(record, lstart, lend, kind)
                            value = _concatenate(value, parsed) if kind == value_kind else parsed
                            value_kind = kind
                features[name] = value
    except (IndexError, UnicodeDecodeError) as error:
        raise ValueError(f"malformed tf.train.Example: {error}") from error
    return features
