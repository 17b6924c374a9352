"""``offline_gitd fetch`` and ``offline_gitd datasets`` (docs/datasets.md).

Both commands live here because both are views of the same registry and data directory: ``fetch``
fills the directory, ``datasets`` reports on it. Heavy imports (minari, tqdm) stay inside handlers.
"""

from __future__ import annotations

import argparse
import os
import textwrap
from pathlib import Path
from typing import Any

from offline_gitd.data.paths import ENV_VAR, data_dir_flag, data_root, rlu_cache_dir, rlu_raw_dir
from offline_gitd.data.registry import (
    MinariId,
    RluAtariId,
    RluRegistry,
    format_checkpoints,
    load_rlu_registry,
    parse_dataset_id,
)

# A run has at most 50 shards (one per checkpoint); more threads than that only open sockets.
MAX_JOBS = 64
# A socket timeout below a millisecond can never be met by a real server.
MIN_TIMEOUT = 0.001
_DATA_DIR_HELP = "data root (default: $OFFLINE_GITD_DATA, else ~/.cache/offline_gitd)"


def _data_root(data_dir: str | None) -> Path:
    """The data root that ``datasets`` reads; a file in its place is refused, absent is empty."""
    from offline_gitd.output_paths import require_dir_if_present

    require_dir_if_present(data_dir, "--data-dir")
    return data_root(data_dir)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``fetch`` and ``datasets`` commands."""
    fetch = subparsers.add_parser(
        "fetch",
        help="download RL Unplugged Atari shards or a Minari dataset",
        description="Download datasets into the data directory, verified and resumable.",
    )
    sources = fetch.add_subparsers(dest="source", metavar="SOURCE", required=True)

    rlu = sources.add_parser(
        "rlu-atari",
        help="RL Unplugged Atari shards (GZIP TFRecord) from the public bucket or a mirror",
        description=(
            "Download one run's shards with Range resume, size/crc32c/md5 checks against the "
            "server and a sha256 lock file (run_N.lock.json) beside them."
        ),
        epilog=(
            "examples:\n"
            "  offline_gitd fetch rlu-atari --game Pong --run 1 --checkpoints 0-4\n"
            "  offline_gitd fetch rlu-atari --game Breakout --run 2 --layout transitions --jobs 8"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rlu.add_argument("--game", required=True, help="Atari game, e.g. Pong (see: datasets list)")
    rlu.add_argument("--run", required=True, type=int, help="run 1-5")
    rlu.add_argument(
        "--checkpoints",
        help="episodes layout only: checkpoints (= shards) to fetch, e.g. 0-4,7 (default: all)",
    )
    rlu.add_argument(
        "--layout",
        default=None,
        help="episodes (atari_episodes_ordered, default) or transitions (atari)",
    )
    rlu.add_argument("--data-dir", help=_DATA_DIR_HELP)
    rlu.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="a source of the bucket's files; repeat it to give mirrors, tried in order when one is down or lacks "
        "a shard, every byte checked against the lock file and the first source's hashes (default: the public "
        "HTTPS bucket, then the registry's mirrors)",
    )
    rlu.add_argument("--jobs", type=int, default=4, help="parallel downloads (default 4)")
    rlu.add_argument("--retries", type=int, default=5, help="attempts without progress per shard (default 5)")
    rlu.add_argument(
        "--retry-delay",
        type=float,
        default=1.0,
        help="first back-off in seconds, doubled per retry up to 60 (default 1)",
    )
    rlu.add_argument("--timeout", type=float, default=60.0, help="socket timeout, s (default 60)")
    rlu.add_argument(
        "--min-rate",
        type=float,
        default=1024.0,
        help="real progress: attempts slower than this many bytes/s (over a minute within one, or since the last "
        "good one across reconnects) count against --retries, their bytes kept (default 1024); with the "
        "defaults a stalled source gives up within about 15 minutes (docs/bounds.md)",
    )
    rlu.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="give up on a shard after this many s, all sources together (default: none; --min-rate bounds stalls)",
    )
    rlu.set_defaults(func=_fetch_rlu_atari)

    minari_parser = sources.add_parser(
        "minari",
        help="a Minari dataset through minari.download_dataset",
        description="Download a Minari dataset (e.g. mujoco/halfcheetah/medium-v0).",
        epilog=(
            "examples:\n"
            "  offline_gitd fetch minari mujoco/halfcheetah/medium-v0\n"
            "  offline_gitd fetch minari D4RL/pen/human-v2 --data-dir /data/offline_gitd"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    minari_parser.add_argument("dataset_id", metavar="ID", help="Minari id, namespace/name-vN")
    minari_parser.add_argument(
        "--data-dir",
        help="store under DATA_DIR/minari (default: $OFFLINE_GITD_DATA/minari if set, else "
        "$MINARI_DATASETS_PATH, else ~/.minari/datasets)",
    )
    minari_parser.add_argument(
        "--mirror",
        action="append",
        metavar="URL",
        help="a folder of packs (http://, https:// or file://) holding the manifest entry's pack file; repeat it "
        "to give mirrors, tried in order (default: the manifest's mirrors). For the package's own datasets only",
    )
    minari_parser.add_argument(
        "--manifest",
        action="append",
        type=Path,
        metavar="FILE",
        help="a dataset manifest listing ID with its pack (repeatable; default: the repository's datasets/*.json). "
        "An ID no manifest lists comes from Minari's own remote",
    )
    minari_parser.add_argument("--retries", type=int, default=5, help="attempts without progress (default 5)")
    minari_parser.add_argument("--timeout", type=float, default=60.0, help="socket timeout, s (default 60)")
    minari_parser.set_defaults(func=_fetch_minari)

    datasets = subparsers.add_parser(
        "datasets",
        help="list known and local datasets, or describe one",
        description="What can be fetched, and what is already in the data directory.",
    )
    actions = datasets.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="the registry and local datasets with sizes",
        description="What the registry can fetch (RL Unplugged games, runs and layouts), the RLU shards already "
        "in the data root, and the local Minari datasets with their episodes, steps and size.",
        epilog="example:\n  offline_gitd datasets list --data-dir /data/offline_gitd",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    listing.add_argument("--data-dir", help=_DATA_DIR_HELP)
    listing.set_defaults(func=_datasets_list)
    info = actions.add_parser(
        "info",
        help="URLs, shards and local status of one dataset id",
        description="One dataset id in detail. RL Unplugged: each layout's shard URLs, how many shards are "
        "local, and per checkpoint whether its shard is fetched, in the lock file, partial or decoded. Minari: "
        "where the dataset is and its metadata, or the command that fetches it.",
        epilog=(
            "examples:\n"
            "  offline_gitd datasets info rlu-atari:Pong/1:0-4\n"
            "  offline_gitd datasets info minari:mujoco/hopper/medium-v0"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    info.add_argument("dataset_id", metavar="ID", help="rlu-atari:Game/run[:checkpoints] or minari:ID")
    info.add_argument("--data-dir", help=_DATA_DIR_HELP)
    info.set_defaults(func=_datasets_info)
    manifest = actions.add_parser(
        "manifest",
        help="write or check the manifest of recorded Minari datasets",
        description="A dataset manifest is what the repository keeps instead of the data: per dataset its "
        "episodes, steps, size, a SHA-256 digest of its content (every episode's fields in order) and the "
        "references a board normalises by (the behaviour's return per checkpoint, the random and the "
        "behaviour's final return). Without --check, the entries of the given datasets are written into "
        "FILE (others kept); with --check, the local datasets are compared with FILE's entries, and any "
        "difference exits 1.",
        epilog=(
            "examples:\n"
            "  offline_gitd datasets manifest minari:offline_gitd/minatar-breakout/dqn-replay-1m-v0 "
            "--out datasets/minatar_dqn_replay.json\n"
            "  offline_gitd datasets manifest --check --out datasets/minatar_dqn_replay.json   (every local one it lists)"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    manifest.add_argument("dataset_ids", metavar="ID", nargs="*", help="minari:ID of a local dataset")
    manifest.add_argument("--out", type=Path, required=True, metavar="FILE", help="the manifest (JSON)")
    manifest.add_argument(
        "--check", action="store_true", help="compare with FILE instead of writing it (default: every dataset it lists)"
    )
    manifest.add_argument("--data-dir", help=_DATA_DIR_HELP)
    manifest.set_defaults(func=_datasets_manifest)
    pack = actions.add_parser(
        "pack",
        help="write one archive per recorded Minari dataset, for mirrors to serve",
        description="Pack local Minari datasets, one tar.xz archive each (the dataset folder, reproducibly), "
        "into DIR, and record each archive's file, size and SHA-256 in the manifest beside the dataset's "
        "content digest. A dataset whose content differs from its manifest entry is refused: the pack must "
        "restore what the manifest promises. `fetch minari ID --mirror URL` restores it (docs/datasets.md#packs).",
        epilog=(
            "examples:\n"
            "  offline_gitd datasets pack minari:offline_gitd/minatar-breakout/dqn-replay-1m-v0 --out packs/\n"
            "  offline_gitd datasets pack minari:tests/x-v0 --out packs/ --manifest my_manifest.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pack.add_argument("dataset_ids", metavar="ID", nargs="+", help="minari:ID of a local dataset")
    pack.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder the archives are written to")
    pack.add_argument(
        "--manifest",
        type=Path,
        metavar="FILE",
        help="the manifest to record the packs in (default: the repository's manifest that lists the dataset)",
    )
    pack.add_argument("--data-dir", help=_DATA_DIR_HELP)
    pack.set_defaults(func=_datasets_pack)


# --------------------------------------------------------------------------- fetch


def _fetch_rlu_atari(args: argparse.Namespace) -> int:
    from offline_gitd.data.http_download import RetryPolicy
    from offline_gitd.data.rlu_fetch import fetch_rlu_atari, summary_lines
    from offline_gitd.errors import UsageError
    from offline_gitd.output_paths import require_dir_target
    from offline_gitd.records import check_range

    check_range("--jobs", args.jobs, 1, MAX_JOBS, why="parallel downloads")
    check_range("--retries", args.retries, 1)
    check_range("--retry-delay", args.retry_delay, 0)
    check_range("--timeout", args.timeout, MIN_TIMEOUT, why="seconds")
    require_dir_target(data_root(args.data_dir), "--data-dir")
    if args.min_rate < 0 or (args.deadline is not None and args.deadline <= 0):
        raise UsageError("--min-rate must be >= 0 and --deadline > 0")
    summary = fetch_rlu_atari(
        load_rlu_registry(),
        data_root(args.data_dir),
        game=args.game,
        run=args.run,
        checkpoints=args.checkpoints,
        layout=args.layout,
        base_url=args.base_url,
        jobs=args.jobs,
        policy=RetryPolicy(
            attempts=args.retries,
            base_delay=args.retry_delay,
            max_delay=max(60.0, args.retry_delay),
            timeout=args.timeout,
            min_rate=args.min_rate,
            deadline=args.deadline,
        ),
    )
    print("\n".join(summary_lines(summary)))
    if summary.failed:
        first = summary.failed[0]
        raise UsageError(
            f"{len(summary.failed)} of {len(summary.outcomes)} shard(s) failed, first {first.name}: {first.message}"
        )
    return 0


def _fetch_minari(args: argparse.Namespace) -> int:
    from offline_gitd.data.minari_fetch import fetch_minari
    from offline_gitd.data.pack_fetch import find_entry, repository_manifests
    from offline_gitd.data.paths import minari_datasets_dir
    from offline_gitd.errors import UsageError
    from offline_gitd.output_paths import require_dir_target

    dataset = parse_dataset_id(f"minari:{args.dataset_id.removeprefix('minari:')}")
    if args.data_dir:
        require_dir_target(args.data_dir, "--data-dir")
    assert isinstance(dataset, MinariId)
    for manifest in args.manifest or ():
        if not manifest.is_file():
            raise UsageError(f"--manifest {manifest}: no such file")
    found = find_entry(dataset.dataset_id, args.manifest or repository_manifests())
    datasets_dir = minari_datasets_dir(args.data_dir, os.environ)
    if found is not None:
        return _fetch_minari_pack(args, dataset.dataset_id, found, datasets_dir)
    if args.mirror:
        raise UsageError(
            f"no manifest lists {dataset.dataset_id} (looked in "
            f"{', '.join(map(str, args.manifest or repository_manifests())) or 'none'}); --mirror fetches the "
            "package's own datasets by their manifest entry"
        )
    path, downloaded = fetch_minari(dataset.dataset_id, datasets_dir)
    print(f"minari dataset {dataset.dataset_id} {'downloaded to' if downloaded else 'already in'} {path}")
    print(
        f"train on it with: offline_gitd train --dataset minari:{dataset.dataset_id}{data_dir_flag(args.data_dir)} "
        "--out RUN_DIR"
    )
    if args.data_dir or os.environ.get(ENV_VAR):
        print(f"load it with plain minari: MINARI_DATASETS_PATH={datasets_dir}")
    return 0


def _fetch_minari_pack(args: argparse.Namespace, dataset_id: str, found: Any, datasets_dir: Path) -> int:
    """A dataset a manifest lists: from its pack on the mirrors, checked twice (archive, content)."""
    from offline_gitd.data.http_download import RetryPolicy
    from offline_gitd.data.inventory import format_bytes
    from offline_gitd.data.pack_fetch import fetch_pack, manifest_summary
    from offline_gitd.records import check_range

    check_range("--retries", args.retries, 1)
    check_range("--timeout", args.timeout, MIN_TIMEOUT, why="seconds")
    local = datasets_dir / dataset_id
    if (local / "data").exists():
        print(f"minari dataset {dataset_id} already in {local}")
        print(f"check it against its manifest: offline_gitd datasets manifest --check --out {found.manifest}")
        return 0
    root = data_root(args.data_dir)
    result = fetch_pack(
        dataset_id,
        found,
        args.mirror or found.mirrors,
        root,
        datasets_dir,
        RetryPolicy(attempts=args.retries, timeout=args.timeout),
    )
    if result.note:
        print(f"note     {result.note}")
    size = format_bytes(result.archive.stat().st_size)
    how = f"downloaded in {result.download_seconds:.1f} s" if result.downloaded else "already here, verified"
    print(f"pack {result.archive} ({size}, {how}; sha256 matches the manifest)")
    print(
        f"restored in {result.restored.unpack_seconds:.1f} s, content digest checked in "
        f"{result.restored.verify_seconds:.1f} s: {manifest_summary(found)}"
    )
    print(f"minari dataset {dataset_id} restored to {result.restored.path}")
    print(
        f"train on it with: offline_gitd train --dataset minari:{dataset_id}{data_dir_flag(args.data_dir)} --out RUN_DIR"
    )
    if args.data_dir or os.environ.get(ENV_VAR):
        print(f"load it with plain minari: MINARI_DATASETS_PATH={datasets_dir}")
    return 0


# --------------------------------------------------------------------------- datasets


def _rlu_summary_lines(registry: RluRegistry) -> list[str]:
    counts = []
    for layout in registry.layouts.values():
        per_game = {g: registry.games[g][layout.name] for g in registry.games}
        values = list(per_game.values())
        usual = max(set(values), key=values.count)
        exceptions = "".join(
            f", {n} for {', '.join(g for g, m in per_game.items() if m == n)}" for n in sorted(set(values) - {usual})
        )
        counts.append(f"{layout.alias} ({layout.name}) {usual}{exceptions}")
    runs = ", ".join(map(str, registry.runs))
    games = textwrap.fill(", ".join(registry.games), width=96, initial_indent="    ", subsequent_indent="    ")
    return [
        "RL Unplugged Atari  rlu-atari:{Game}/{run}[:{checkpoints}]  e.g. rlu-atari:Pong/1:0-4,7",
        f"  base {registry.base_url}",
        f"  runs {runs}; shards per run: {'; '.join(counts)}",
        f"  {len(registry.games)} games:",
        games,
    ]


def _local_rlu_lines(registry: RluRegistry, root: Path) -> list[str]:
    from offline_gitd.data.inventory import format_bytes, scan_local_shards

    lines = []
    for layout in registry.layouts:
        for game in registry.games:
            shards = scan_local_shards(rlu_raw_dir(root, layout, game))
            for run in sorted({s.run for s in shards}):
                whole = [s for s in shards if s.run == run and not s.partial]
                parts = [s for s in shards if s.run == run and s.partial]
                partial = f", {len(parts)} partial ({format_bytes(sum(s.size for s in parts))})" if parts else ""
                lines.append(
                    f"  rlu-atari:{game}/{run}  {layout}  "
                    f"{len(whole)}/{registry.num_shards(game, layout)} shards, "
                    f"{format_bytes(sum(s.size for s in whole))}{partial}"
                )
    return lines or ["  (none)"]


def _local_minari(datasets_dir: Path) -> dict[str, dict[str, Any]]:
    """``minari.list_local_datasets()`` for ``datasets_dir`` ({} when the folder is absent).

    minari creates its root folder as a side effect of listing, hence the existence check.
    """
    if not datasets_dir.is_dir():
        return {}
    os.environ["MINARI_DATASETS_PATH"] = str(datasets_dir)
    import minari

    return dict(minari.list_local_datasets())


def _datasets_list(args: argparse.Namespace) -> int:
    from offline_gitd.data.inventory import directory_size, format_bytes
    from offline_gitd.data.paths import minari_datasets_dir

    registry = load_rlu_registry()
    root = _data_root(args.data_dir)
    lines = _rlu_summary_lines(registry)
    lines.append(f"Local RLU shards under {root / 'rlu_atari' / 'raw'}:")
    lines += _local_rlu_lines(registry, root)
    datasets_dir = minari_datasets_dir(args.data_dir, os.environ)
    lines.append(f"Local Minari datasets under {datasets_dir}:  minari:{{id}}")
    local = _local_minari(datasets_dir)
    for dataset_id, metadata in local.items():
        episodes = metadata.get("total_episodes", "?")
        steps = metadata.get("total_steps", "?")
        size = format_bytes(directory_size(datasets_dir / dataset_id))
        lines.append(f"  minari:{dataset_id}  {episodes} episodes, {steps} steps, {size}")
    if not local:
        lines.append("  (none)")
    print("\n".join(lines))
    return 0


def _rlu_info_lines(registry: RluRegistry, root: Path, dataset: RluAtariId) -> list[str]:
    from offline_gitd.data.inventory import format_bytes, scan_local_shards
    from offline_gitd.data.lock_book import lock_path, read_lock

    game, run = dataset.game, dataset.run
    lines = [f"{dataset}"]
    if registry.mirrors:
        lines.append(f"  sources  {registry.base_url}, then mirrors {', '.join(registry.mirrors)}")
    for layout in registry.layouts.values():
        n = registry.num_shards(game, layout.name)
        directory = rlu_raw_dir(root, layout.name, game)
        present = [s for s in scan_local_shards(directory) if s.run == run and not s.partial]
        template = registry.shard_url(game, run, 0, layout.name).replace("00000-of", "{i:05d}-of")
        lines += [
            f"  layout {layout.name} ({layout.alias}): {n} shards; {layout.description}",
            f"    url      {template}",
            f"    metadata {registry.metadata_url(game, run, 0, layout.name)}  (GCS JSON API)",
            f"    local    {len(present)}/{n} shards, {format_bytes(sum(s.size for s in present))} in {directory}",
        ]
    layout = registry.default_layout
    directory = rlu_raw_dir(root, layout, game)
    n = registry.num_shards(game, layout)
    locked = read_lock(lock_path(directory, run))
    local = {(s.shard, s.partial): s for s in scan_local_shards(directory) if s.run == run}
    checkpoints = dataset.checkpoints if dataset.checkpoints is not None else range(n)
    lines.append(f"  checkpoint -> shard ({layout}, shard i holds checkpoint i):")
    for checkpoint in checkpoints:
        name = registry.object_name(game, run, checkpoint, layout).rsplit("/", 1)[-1]
        if (checkpoint, False) in local:
            status = format_bytes(local[checkpoint, False].size)
            entry = locked.get(name)
            status += ", not in lock" if entry is None else ", in lock"
            if entry is not None and entry.source:
                status += f", from {entry.source}"
        elif (checkpoint, True) in local:
            status = f"partial {format_bytes(local[checkpoint, True].size)}"
        else:
            status = "missing"
        if rlu_cache_dir(root, game, run, checkpoint).exists():
            status += ", decoded"
        lines.append(f"    {checkpoint:>3} -> {name}  {status}")
    spec = f" --checkpoints {format_checkpoints(dataset.checkpoints)}" if dataset.checkpoints else ""
    lines.append(
        f"  fetch: offline_gitd fetch rlu-atari --game {game} --run {run}{spec}"
        f"{'' if root == data_root(None) else data_dir_flag(root)}"
    )
    return lines


# Every character str.splitlines breaks at (and a terminal may), as its Python escape.
_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"})


def _one_line(text: str) -> str:
    """``text`` with its line breaks escaped, as ``leaderboard show`` shows names: one line per
    metadata key, so a dataset's metadata cannot add lines that read as the command's own."""
    return text.translate(_LINE_BREAKS)


def _minari_info_lines(dataset: MinariId, datasets_dir: Path, data_dir: str | None = None) -> list[str]:
    from offline_gitd.data.inventory import directory_size, format_bytes

    metadata = _local_minari(datasets_dir).get(dataset.dataset_id)
    lines = [f"{dataset}"]
    if metadata is None:
        return lines + [
            f"  not in {datasets_dir}",
            f"  fetch: offline_gitd fetch minari {dataset.dataset_id}{data_dir_flag(data_dir)}",
        ]
    path = datasets_dir / dataset.dataset_id
    lines.append(f"  local {path}  {format_bytes(directory_size(path))}")
    for key, value in sorted(metadata.items()):
        text = _one_line(str(value))
        lines.append(f"  {_one_line(key)}: {text if len(text) <= 100 else text[:97] + '...'}")
    return lines


def _datasets_info(args: argparse.Namespace) -> int:
    from offline_gitd.data.paths import minari_datasets_dir

    registry = load_rlu_registry()
    dataset = parse_dataset_id(args.dataset_id, registry)
    if isinstance(dataset, RluAtariId):
        lines = _rlu_info_lines(registry, _data_root(args.data_dir), dataset)
    else:
        lines = _minari_info_lines(
            dataset,
            minari_datasets_dir(_data_root(args.data_dir) if args.data_dir else None, os.environ),
            args.data_dir,
        )
    print("\n".join(lines))
    return 0


def _datasets_manifest(args: argparse.Namespace) -> int:
    """Write the manifest entries of local Minari datasets, or check them against a manifest."""
    from offline_gitd.data.manifest import describe, differences, read_manifest, write_manifest
    from offline_gitd.data.paths import minari_datasets_dir, use_minari_root
    from offline_gitd.errors import UsageError

    published = {entry["id"]: entry for entry in read_manifest(args.out)} if args.out.exists() else {}
    if args.check and not args.out.exists():
        raise UsageError(f"--check {args.out}: no such manifest")
    ids = [parse_dataset_id(text) for text in args.dataset_ids]
    if any(not isinstance(dataset, MinariId) for dataset in ids):
        raise UsageError("a manifest lists Minari datasets (minari:ID); RL Unplugged shards carry their own checksums")
    wanted = [dataset.dataset_id for dataset in ids] or (sorted(published) if args.check else [])
    if not wanted:
        raise UsageError("name the datasets to write (minari:ID ...)")
    use_minari_root(args.data_dir)
    datasets_dir = minari_datasets_dir(_data_root(args.data_dir) if args.data_dir else None, os.environ)
    import minari

    local = set(minari.list_local_datasets()) if datasets_dir.is_dir() else set()
    missing = [dataset_id for dataset_id in wanted if dataset_id not in local]
    if missing:
        raise UsageError(f"minari:{missing[0]} is not in {datasets_dir}; record or fetch it first")
    entries = []
    for dataset_id in wanted:
        print(f"reading minari:{dataset_id} ...", flush=True)
        entries.append(describe(dataset_id, datasets_dir / dataset_id, minari.load_dataset(dataset_id)))
    if not args.check:
        write_manifest(args.out, entries)
        for entry in entries:
            print(
                f"minari:{entry['id']}: {entry['episodes']} episodes, {entry['steps']} steps, sha256 {entry['sha256'][:16]}"
            )
        print(f"wrote {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} into {args.out}")
        return 0
    failed = 0
    for entry in entries:
        if entry["id"] not in published:
            print(f"minari:{entry['id']}: not in {args.out}")
            failed += 1
            continue
        found = differences(entry, published[entry["id"]])
        failed += bool(found)
        print(f"minari:{entry['id']}: " + ("; ".join(found) if found else "matches the manifest"))
    return 1 if failed else 0


def _datasets_pack(args: argparse.Namespace) -> int:
    """Pack local Minari datasets and record each pack in its manifest entry."""
    import time

    from offline_gitd.data.inventory import directory_size, format_bytes
    from offline_gitd.data.manifest import describe, differences, read_manifest, write_manifest
    from offline_gitd.data.minari_pack import pack_dataset
    from offline_gitd.data.pack_fetch import find_entry, repository_manifests
    from offline_gitd.data.paths import minari_datasets_dir, use_minari_root
    from offline_gitd.errors import UsageError
    from offline_gitd.output_paths import require_dir_target

    ids = [parse_dataset_id(text) for text in args.dataset_ids]
    if any(not isinstance(dataset, MinariId) for dataset in ids):
        raise UsageError("datasets pack packs Minari datasets (minari:ID); RL Unplugged shards are fetched as they are")
    require_dir_target(args.out, "--out")
    if args.manifest is not None and args.manifest.exists():
        read_manifest(args.manifest)  # a malformed manifest is refused before any work
    use_minari_root(args.data_dir)
    datasets_dir = minari_datasets_dir(_data_root(args.data_dir) if args.data_dir else None, os.environ)
    plan = []
    for dataset in ids:
        assert isinstance(dataset, MinariId)
        if not (datasets_dir / dataset.dataset_id / "data").is_dir():
            raise UsageError(f"minari:{dataset.dataset_id} is not in {datasets_dir}; record or fetch it first")
        if args.manifest is not None:
            manifest = args.manifest
        else:
            found = find_entry(dataset.dataset_id, repository_manifests())
            if found is None:
                raise UsageError(
                    f"no repository manifest lists minari:{dataset.dataset_id}; name one with --manifest FILE"
                )
            manifest = found.manifest
        plan.append((dataset.dataset_id, manifest))
    import minari

    for dataset_id, manifest in plan:
        published = {e["id"]: e for e in read_manifest(manifest)} if manifest.exists() else {}
        path = datasets_dir / dataset_id
        print(f"reading minari:{dataset_id} ...", flush=True)
        entry = describe(dataset_id, path, minari.load_dataset(dataset_id))
        if dataset_id in published:
            found_differences = differences(entry, published[dataset_id])
            if found_differences:
                raise UsageError(
                    f"minari:{dataset_id} differs from its entry in {manifest} ({found_differences[0]}); "
                    "a pack must restore what the manifest promises: refused"
                )
            entry = dict(published[dataset_id])
        start = time.perf_counter()
        info = pack_dataset(dataset_id, path, args.out)
        seconds = time.perf_counter() - start
        write_manifest(manifest, [dict(entry, pack=info.entry())])
        size = directory_size(path)
        print(
            f"minari:{dataset_id}: {format_bytes(size)} -> {args.out / info.file} {format_bytes(info.bytes)} "
            f"({size / info.bytes:.1f}x smaller) in {seconds:.1f} s; sha256 {info.sha256[:16]}"
        )
        print(f"recorded in {manifest}; serve {info.file} from a mirror (docs/datasets.md#packs)")
    return 0
