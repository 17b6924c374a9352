"""CPU time per frame of the PNG decoders available for RLU frames (docs/benchmarks.md#ingest).

Run by hand: ``.venv/bin/python -m benchmarks.png_decoders``. Decoders that are not installed are
left out: ``pip install pyspng imagecodecs isal`` adds the alternatives, none of which the package
depends on. Frames are those of ``benchmarks/ingest.py`` (about the size of real Atari frames),
encoded twice: by OpenCV, as the tests and benchmarks write shards (it filters every row with
``Sub``), and with libpng's default adaptive filters, as TensorFlow's ``encode_png`` wrote RL
Unplugged (about half the rows ``Paeth``); the second needs ``imagecodecs``. Every decoder must
give the same bytes as the frames encoded, or the script stops. Decoders are timed in turns,
repeatedly, and each figure is its best round (CPU time, steadier than wall time on a shared
machine). "zlib inflate" is only the decompression of the image data, a floor for any decoder
that uses zlib; ``isal`` is a faster implementation of the same inflate.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import zlib
from collections.abc import Callable

import numpy as np

from benchmarks.ingest import blob_frames  # the frames benchmarks/ingest.py decodes
from offline_gitd.data.rlu import decode_png_frames

# The shard writer is a test helper (tests/rlu_shards.py), not part of the package.
from tests.rlu_shards import encode_png_frames

Decoder = Callable[[bytes], np.ndarray]


def decoders() -> dict[str, Decoder]:
    """Every installed decoder, the package's own first."""
    found: dict[str, Decoder] = {"cv2.imdecode (package)": lambda png: decode_png_frames([png])[0]}
    try:
        import pyspng

        found["pyspng"] = pyspng.load
    except ImportError:
        pass
    try:
        import imagecodecs

        found["imagecodecs.png_decode"] = imagecodecs.png_decode
        found["imagecodecs.spng_decode"] = imagecodecs.spng_decode
    except ImportError:
        pass
    from PIL import Image

    found["Pillow"] = lambda png: np.asarray(Image.open(io.BytesIO(png)))
    return found


def image_data(png: bytes) -> bytes:
    """The concatenated IDAT chunks of a PNG: what an inflate-only floor decompresses."""
    pos, chunks = 8, []
    while pos < len(png):
        length = int.from_bytes(png[pos : pos + 4], "big")
        if png[pos + 4 : pos + 8] == b"IDAT":
            chunks.append(png[pos + 8 : pos + 8 + length])
        pos += 12 + length
    return b"".join(chunks)


def inflaters() -> dict[str, Callable[[bytes], bytes]]:
    found = {"zlib inflate only": zlib.decompress}
    try:
        from isal import isal_zlib

        found["isal inflate only"] = isal_zlib.decompress
    except ImportError:
        pass
    return found


def encodings(frames: np.ndarray) -> dict[str, list[bytes]]:
    found = {"OpenCV-encoded (every row Sub), as the tests write shards": encode_png_frames(frames)}
    try:
        import imagecodecs

        found["libpng default filters, as TensorFlow wrote RLU"] = [imagecodecs.png_encode(f) for f in frames]
    except ImportError:
        print("imagecodecs is not installed: only OpenCV-encoded frames")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    frames = np.concatenate([blob_frames(rng, 500) for _ in range(-(-args.frames // 500))])[: args.frames]
    decode = decoders()
    for label, pngs in encodings(frames).items():
        for name, decoder in decode.items():
            for png, want in zip(pngs, frames, strict=True):
                if not np.array_equal(np.asarray(decoder(png)).reshape(want.shape), want):
                    raise SystemExit(f"{name} decoded a frame differently")
        data = [image_data(png) for png in pngs]
        timed: dict[str, tuple[Callable, list]] = {name: (decoder, pngs) for name, decoder in decode.items()}
        timed |= {name: (inflate, data) for name, inflate in inflaters().items()}
        times: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(args.rounds):
            for name, (function, inputs) in timed.items():
                started = time.process_time()
                for item in inputs:
                    function(item)
                times[name].append((time.process_time() - started) / len(inputs) * 1e6)
        mean_bytes = np.mean([len(png) for png in pngs])
        print(f"\n{label}: {len(pngs)} frames of {mean_bytes:.0f} bytes on average; every decoder gave the same bytes")
        print(f"  {'decoder':26s}{'us CPU/frame':>13s}{'median':>8s}{'package/this':>14s}")
        package = min(times["cv2.imdecode (package)"])
        for name, values in times.items():
            best = min(values)
            print(f"  {name:26s}{best:13.1f}{statistics.median(values):8.1f}{package / best:13.2f}x")


if __name__ == "__main__":
    main()
