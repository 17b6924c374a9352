"""CRC-32C (Castagnoli), shared by the shard reader, the fetcher and the tests' TFRecord writer.

TFRecord framing checks every length and payload with a *masked* CRC-32C, and Google Cloud
Storage reports a whole object's CRC-32C in ``x-goog-hash``. Both run over gigabytes, so this wraps
the ``google-crc32c`` wheel (a hardware-accelerated C extension; it carries its own pure-Python
fallback for platforms without a wheel) rather than a Python loop, which manages about 1 MB/s.
"""

from __future__ import annotations

import google_crc32c

_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data``, continuing from ``value`` (the CRC of the bytes before it).

    Chaining lets the fetcher hash a download chunk by chunk, and resume hashing a ``.part`` file.
    """
    # The C extension takes read-only bytes only; bytes(...) of a bytes object is free.
    return google_crc32c.extend(value, data if isinstance(data, bytes) else bytes(data))


def mask(crc: int) -> int:
    """TFRecord's CRC mask: rotate right by 15 bits and add a constant.

    TensorFlow masks stored CRCs because the CRC of data that itself contains CRCs is weak.
    """
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The masked CRC-32C that TFRecord stores after the length and after the payload."""
    return mask(crc32c(data))
