"""Packed Minari datasets: one archive per dataset, restored to the manifest's content digest
(docs/datasets.md#packs).

A pack is a POSIX tar of the dataset's folder (``data/metadata.json``, ``data/main_data.hdf5``)
compressed with xz (LZMA2). The choice was measured on a MinAtar dataset (docs/datasets.md#packs):
its frames are 0/1 bytes, mostly 0, and xz shrank the folder 130 times, zstd -19 122 times. Packing
the frames' bits instead of the HDF5 file would be ten times smaller again, but would be a format
of the package's own, restored by rebuilding the HDF5 file; the tar restores the very files, and
``tar -xJf PACK`` reads it anywhere, Python's standard library in the package (no dependency). The
archive is made reproducible (sorted members, zero times and owners), so one folder packs to one
SHA-256 wherever it is packed.

Restoring never trusts the archive: members must be plain files and folders under ``data/`` (no
links, no absolute or ``..`` paths), the dataset is unpacked into a hidden folder beside its final
place, its content digest (:func:`offline_gitd.data.manifest.content_digest`) is checked against
the manifest, and only then is the folder renamed to its final name. A dataset under its final
name is therefore always a whole, verified one.
"""

from __future__ import annotations

import hashlib
import io
import lzma
import os
import shutil
import tarfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from offline_gitd.durable import fsync_directory, replacing
from offline_gitd.errors import UsageError

PACK_FORMAT = "tar.xz"
# xz preset: 6 is xz's own default; 9 was 0.7% smaller on MinAtar data, 1 was 16% larger
# (measured, docs/datasets.md#packs).
XZ_PRESET = 6
_CHUNK = 4 << 20
RESTORE_DIR = ".offline_gitd-restoring"  # hidden: minari's listing skips it
METADATA = "data/metadata.json"


def pack_name(dataset_id: str) -> str:
    """The archive's file name: the id with ``/`` as ``__`` (a mirror is a flat folder)."""
    return dataset_id.replace("/", "__") + "." + PACK_FORMAT


@dataclass(frozen=True)
class PackInfo:
    """What a manifest records of a pack: its file name, format, size and SHA-256."""

    file: str
    format: str
    bytes: int
    sha256: str

    def entry(self) -> dict[str, Any]:
        return {"file": self.file, "format": self.format, "bytes": self.bytes, "sha256": self.sha256}


class _Hashing:
    """A write-only file that hashes and counts what passes through it."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def _files(dataset_dir: Path) -> list[Path]:
    """The dataset's files, in a fixed order (the archive's bytes must not depend on the disk's)."""
    files = sorted(p for p in dataset_dir.rglob("*") if p.is_file() and not p.is_symlink())
    if not (dataset_dir / "data" / "metadata.json").is_file():
        raise UsageError(f"{dataset_dir} is not a Minari dataset (no data/metadata.json)")
    return files


def portable_metadata(metadata: dict[str, Any]) -> dict[str, Any] | None:
    """``metadata`` with this package's ``Uint8Images`` wrapper taken out of its env specs and the
    observations' layout said in ``observation_layout`` instead; ``None`` when there is none.

    Datasets recorded before the env spec named the env alone carry the wrapper, so minari alone
    could not recover their env; their packs carry the portable metadata (docs/datasets.md#packs).
    The content (and its digest) is untouched, and the package re-applies the wrapper on loading."""
    import json

    from offline_gitd.envs.images import OBSERVATION_LAYOUT, UINT8_IMAGES_ENTRY_POINT

    changed = dict(metadata)
    for key in ("env_spec", "eval_env_spec"):
        text = metadata.get(key)
        if not isinstance(text, str):
            continue
        spec = json.loads(text)
        wrappers = spec.get("additional_wrappers") or []
        kept = [w for w in wrappers if not (isinstance(w, dict) and w.get("entry_point") == UINT8_IMAGES_ENTRY_POINT)]
        if len(kept) != len(wrappers):
            changed[key] = json.dumps(dict(spec, additional_wrappers=kept))
    if changed == metadata:
        return None
    changed.setdefault("observation_layout", OBSERVATION_LAYOUT)
    return changed


def pack_dataset(dataset_id: str, dataset_dir: Path, out_dir: Path, preset: int = XZ_PRESET) -> PackInfo:
    """Write ``out_dir/pack_name(dataset_id)`` from the dataset folder ``dataset_dir``; the file
    appears whole or not at all (a temporary file renamed into place)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / pack_name(dataset_id)
    files = _files(dataset_dir)
    with replacing(path) as raw:
        hashing = _Hashing(raw)
        with (
            lzma.open(hashing, "wb", format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=preset) as xz,
            tarfile.open(fileobj=xz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for file in files:
                info = tarfile.TarInfo(file.relative_to(dataset_dir).as_posix())
                info.mode = 0o644
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if info.name == METADATA:
                    raw = _packed_metadata(file)
                    info.size = len(raw)
                    tar.addfile(info, io.BytesIO(raw))
                    continue
                info.size = file.stat().st_size
                with file.open("rb") as handle:
                    tar.addfile(info, handle)
    return PackInfo(path.name, PACK_FORMAT, hashing.size, hashing.sha256.hexdigest())


def _packed_metadata(path: Path) -> bytes:
    """The metadata file as packed: as it is, or :func:`portable_metadata`'s when that differs."""
    import json

    raw = path.read_bytes()
    portable = portable_metadata(json.loads(raw))
    return raw if portable is None else json.dumps(portable).encode()


def _check_member(member: tarfile.TarInfo, archive: Path) -> None:
    """Refuse anything but plain files and folders under ``data/``."""
    parts = Path(member.name).parts
    bad = (
        not parts
        or parts[0] != "data"
        or member.name.startswith("/")
        or ".." in parts
        or not (member.isfile() or member.isdir())
    )
    if bad:
        raise UsageError(f"{archive.name}: member {member.name!r} is not a file under data/; refusing the pack")


def unpack(archive: Path, into: Path) -> None:
    """Extract the pack ``archive`` into the empty folder ``into`` (members checked first, one by
    one as they stream). A truncated or damaged archive is a one-line UsageError."""
    try:
        with tarfile.open(archive, mode="r:xz") as tar:
            for member in tar:
                _check_member(member, archive)
                target = into / member.name
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular file always has one
                with source, target.open("wb") as out:
                    shutil.copyfileobj(source, out, _CHUNK)
                    out.flush()
                    os.fsync(out.fileno())
    except (tarfile.TarError, lzma.LZMAError, EOFError) as err:
        raise UsageError(f"{archive.name} is not a whole {PACK_FORMAT} pack ({type(err).__name__}: {err})") from None


def restored_digest(dataset_dir: Path) -> tuple[str, int, int]:
    """The content digest, episodes and steps of the Minari dataset in ``dataset_dir`` (any
    folder: it is read through its ``data`` folder, not by id)."""
    from minari import MinariDataset

    from offline_gitd.data.manifest import FIELDS, content_digest

    dataset = MinariDataset(dataset_dir / "data")
    episodes = ({field: getattr(e, field) for field in FIELDS} for e in dataset.iterate_episodes())
    return content_digest(episodes), int(dataset.total_episodes), int(dataset.total_steps)


@contextmanager
def staging(datasets_dir: Path) -> Iterator[Path]:
    """A new hidden folder under ``datasets_dir`` (minari's listing skips it, and a rename from it
    to the final place stays on one filesystem), removed when the block ends, whatever happens."""
    base = datasets_dir / RESTORE_DIR
    base.mkdir(parents=True, exist_ok=True)
    folder = base / uuid.uuid4().hex
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        try:
            base.rmdir()  # only when no other restore is using it
        except OSError:
            pass


@dataclass(frozen=True)
class Restored:
    """A dataset restored from a pack: where it is and how long unpacking and checking took."""

    path: Path
    unpack_seconds: float
    verify_seconds: float


def restore_pack(archive: Path, dataset_id: str, datasets_dir: Path, expected: dict[str, Any]) -> Restored:
    """Restore ``archive`` as the Minari dataset ``datasets_dir/dataset_id``, after checking that
    its content is ``expected``'s (a manifest entry: ``sha256``, ``episodes``, ``steps``).

    The dataset must not exist yet. It is unpacked into a hidden staging folder and renamed into
    place only once its digest matches: on any failure nothing is left under its final name and
    the staging folder is gone.
    """
    final = datasets_dir / dataset_id
    if final.exists():
        raise UsageError(f"{final} already exists; delete it to restore it from {archive.name}")
    with staging(datasets_dir) as stage:
        start = time.perf_counter()
        unpack(archive, stage)
        unpacked = time.perf_counter()
        try:
            digest, episodes, steps = restored_digest(stage)
        except Exception as err:  # minari and h5py raise plain errors on a damaged file
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise UsageError(f"{archive.name} does not hold a readable Minari dataset ({reason})") from None
        verified = time.perf_counter()
        got = {"sha256": digest, "episodes": episodes, "steps": steps}
        wrong = [f"{key} {got[key]} != {expected.get(key)}" for key in got if got[key] != expected.get(key)]
        if wrong:
            raise UsageError(
                f"{archive.name} restores another dataset than the manifest's {dataset_id} ({'; '.join(wrong)}); "
                "refused, nothing restored"
            )
        _check_dataset_id(stage, dataset_id, archive)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(stage, final)  # atomic on one filesystem; fails if another restore got there first
        except OSError as err:
            raise UsageError(
                f"cannot move the restored dataset to {final} ({err.strerror or err}); nothing restored"
            ) from None
        fsync_directory(final.parent)
    return Restored(final, unpacked - start, verified - unpacked)


def _check_dataset_id(stage: Path, dataset_id: str, archive: Path) -> None:
    """The metadata must name the id it is restored under: minari refuses to list it otherwise."""
    import json

    named = json.loads((stage / "data" / "metadata.json").read_text()).get("dataset_id")
    if named != dataset_id:
        raise UsageError(f"{archive.name} holds dataset {named!r}, not {dataset_id!r}; refused, nothing restored")
