"""The front pages say what the package is now: their lists and counts are checked against the code.

docs/index.md, the README, CITATION.cff's abstract, getting-started's command table and
leaderboards/README.md are read first and edited last; each once described the package of two
releases before (no BC, TD3+BC or IQL, no SLURM, a board's old row count, a leaderboard folder
missing). Here every list they hold is compared with the registry or parser it names and every
count with the file it counts, so adding an algorithm, a critic, a backend, a command or a board
fails a test until the front pages say so.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import pytest
import yaml

from offline_gitd.algorithm_registry import BUILTIN as BUILTIN_ALGORITHMS
from offline_gitd.cli import build_parser
from offline_gitd.critic_registry import BUILTIN
from offline_gitd.version import __version__

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

# How the front pages write each offline algorithm (--algo); a new one needs its name here and on
# every front page.
ALGORITHM_NAMES = {"cql": "CQL", "bc": "behaviour cloning", "td3bc": "TD3+BC", "iql": "IQL"}
ONLINE_NAMES = ("DQN", "SAC")
BACKEND_NAMES = {"ray": "Ray", "processes": "child processes", "slurm": "SLURM"}
# The package's own algorithms, as their records list them (installed plug-ins are not the package's).
OFFLINE_ALGOS = tuple(spec.name for spec in BUILTIN_ALGORITHMS)


def _flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as one space (a name may wrap)."""
    return " ".join(text.split())


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def _front_pages() -> dict[str, str]:
    return {
        "docs/index.md": (DOCS / "index.md").read_text(),
        "README.md": (REPO / "README.md").read_text(),
        "CITATION.cff abstract": yaml.safe_load((REPO / "CITATION.cff").read_text())["abstract"],
    }


def _critic_names() -> list[str]:
    """The built-in critics as the pages write them: the part of each summary before the colon."""
    return [spec.summary.split(":")[0] for spec in BUILTIN]


@pytest.mark.parametrize("page", list(_front_pages()))
def test_front_pages_name_every_algorithm_critic_and_sweep_backend(page: str) -> None:
    text = _flat(_front_pages()[page])
    missing_names = sorted(set(OFFLINE_ALGOS) - set(ALGORITHM_NAMES))
    assert not missing_names, f"a new --algo {missing_names}: add how the front pages name it to ALGORITHM_NAMES"
    backends = _option(_subparsers(build_parser())["sweep"], "--backend").choices
    assert set(backends) <= set(BACKEND_NAMES), f"a new sweep backend among {backends}: name it in BACKEND_NAMES"
    names = [
        *(ALGORITHM_NAMES[algo] for algo in OFFLINE_ALGOS),
        *ONLINE_NAMES,
        *_critic_names(),
        *(BACKEND_NAMES[backend] for backend in backends),
    ]
    absent = [name for name in names if not re.search(rf"(?<![\w+-]){re.escape(name)}(?![\w+])", text, re.I)]
    assert not absent, f"{page} does not mention {absent}"


def test_the_critic_names_are_read_from_the_registry() -> None:
    assert _critic_names() == ["TD", "TDRC", "i-TD", "Gi-TD"]


def test_the_home_page_lists_every_page_of_the_site() -> None:
    """Every page of mkdocs.yml's navigation (the API reference through its own index) is linked
    from the home page's table, and the table links nothing the navigation lacks."""

    def pages(entries: list) -> list[str]:
        found = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += pages(value) if isinstance(value, list) else [value]
        return found

    nav = {page for page in pages(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])}
    nav = {page for page in nav if not page.startswith("api/")} | {"api/index.md"}
    listed = set(re.findall(r"^\| \[[^\]]+\]\(([^)#]+)\)", (DOCS / "index.md").read_text(), re.M))
    assert nav - {"index.md"} == listed


def _command_table() -> list[str]:
    """The first cell of each row of getting-started's command table."""
    text = (DOCS / "getting-started.md").read_text()
    table = text.partition("## The command line")[2].partition("\n\n")[2].partition("\n\n")[0]
    return [row.split(" | ")[0] for row in table.splitlines() if row.startswith("| `offline_gitd ")]


def test_the_command_table_covers_every_command_and_names_only_real_ones() -> None:
    commands = _subparsers(build_parser())
    rows = _command_table()
    named = {re.match(r"\| `offline_gitd ([\w-]+)", row).group(1) for row in rows}
    assert named == set(commands), f"missing {set(commands) - named}, unknown {named - set(commands)}"
    train_row = next(row for row in rows if row.startswith("| `offline_gitd train "))
    algos = re.search(r"--algo ([\w\\|]+)", train_row).group(1).split("\\|")
    assert algos == list(OFFLINE_ALGOS)
    sweep_rows = " ".join(row for row in rows if row.startswith("| `offline_gitd sweep "))
    for backend in _option(commands["sweep"], "--backend").choices:
        assert backend == "ray" or f"--backend {backend}" in sweep_rows


def _rows(board: Path) -> int:
    with board.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def _leaderboard_table() -> dict[str, str]:
    """leaderboards/README.md's table: the first cell's first name (a file or a folder/) -> the row."""
    rows = {}
    for row in (REPO / "leaderboards" / "README.md").read_text().splitlines():
        match = re.match(r"\| `([^`]+)`", row)
        if match and not row.startswith("| File "):
            rows[match.group(1)] = row
    return rows


def test_every_file_and_folder_of_leaderboards_is_listed() -> None:
    entries = {
        path.name + "/" * path.is_dir() for path in (REPO / "leaderboards").iterdir() if path.name != "README.md"
    }
    assert entries == set(_leaderboard_table())


@pytest.mark.parametrize("entry", sorted(_leaderboard_table()))
def test_the_row_counts_quoted_for_each_board_are_its_rows(entry: str) -> None:
    """ "625 rows" for a folder is its board.csv; "1,600 rows each" is every CSV in the folder."""
    row = _leaderboard_table()[entry]
    quoted = re.search(r"([\d,]+) rows( each)?\.", row)
    path = REPO / "leaderboards" / entry
    # a sweep's timings.csv and a board's references sit beside boards without being boards
    boards = (
        sorted(
            board for board in path.glob("*.csv") if board.name != "timings.csv" and ".references." not in board.name
        )
        if path.is_dir()
        else [path]
    )
    if not any(board.suffix == ".csv" for board in boards):
        assert quoted is None  # figures/: no board, no count
        return
    assert quoted, f"leaderboards/README.md does not say how many rows {entry} holds"
    count = int(quoted.group(1).replace(",", ""))
    if not quoted.group(2) and path.is_dir():
        boards = [path / "board.csv"]
    assert [_rows(board) for board in boards] == [count] * len(boards), entry


def _demo_times() -> tuple[str, str]:
    """The full and quick demo's times in getting-started's table (the last cell, less its notes)."""
    text = (DOCS / "getting-started.md").read_text()
    full = re.search(r"^\| `offline_gitd demo` \|.*\| ([^|(]+?) \|$", text, re.M).group(1)
    quick = re.search(r"^\| `offline_gitd demo --quick` \|.*\| (?:about )?([^|(]+?) (?:\(|\|)", text, re.M).group(1)
    return full, quick


def test_demo_help_and_the_readme_quote_the_documented_times() -> None:
    full, quick = _demo_times()
    assert re.fullmatch(r"\d+ min \d+ s", full) and re.fullmatch(r"\d+ s", quick), (full, quick)
    description = _flat(_subparsers(build_parser())["demo"].description)
    assert full in description and f"--quick runs the same pipeline small, in about {quick}" in description
    assert (
        f"in one compiled program), and ends on what `leaderboard show` prints for its board: {full} on 2 CPU cores"
        in _flat((REPO / "README.md").read_text())
    )


def test_the_system_packages_make_test_installs_are_named_where_the_test_command_is() -> None:
    makefile = (REPO / "Makefile").read_text()
    packages = [
        name
        for line in re.findall(r"apt-get install -y --no-install-recommends ([^)\n]+)", makefile)
        for name in line.split()
    ]
    assert {"chromium", "slurm-wlm", "munge"} <= set(packages)
    for page in (REPO / "README.md", DOCS / "getting-started.md"):
        text = page.read_text()
        for name in packages:
            if name != "chromium-driver":  # installed beside chromium, named with it in the docs
                assert f"`{name}`" in text, f"{page.name} does not name {name}, which make test installs"


def test_citation_names_the_packages_version() -> None:
    assert str(yaml.safe_load((REPO / "CITATION.cff").read_text())["version"]) == __version__
