"""The MinAtar offline board's README lists its datasets' manifest entries and packs: each row must
say what `datasets/minatar_dqn_replay.json` says (docs/datasets.md#packs)."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _row(entry: dict) -> str:
    pack = entry.get("pack")
    pack_cells = f"{pack['bytes'] / 1e6:.1f} MB | `{pack['sha256'][:16]}` |" if pack else "not made yet | |"
    return (
        f"| `{entry['id']}` | {entry['steps']:,} | {entry['episodes']:,} | {entry['bytes'] / 1e6:,.1f} MB | "
        f"`{entry['sha256'][:16]}` | {pack_cells}"
    )


def test_the_board_readme_lists_each_manifest_entry_and_its_pack_as_the_manifest_does() -> None:
    entries = json.loads((ROOT / "datasets/minatar_dqn_replay.json").read_text())["datasets"]
    readme = (ROOT / "leaderboards/minatar_offline/README.md").read_text()
    assert len(entries) == 5
    for entry in entries:
        assert _row(entry) in readme, _row(entry)
