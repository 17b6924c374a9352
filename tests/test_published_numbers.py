"""Every published table and quoted figure regenerates from its committed board
(docs/reproducing.md#published-numbers).

Three kinds of published number, each with the command that makes it:

- generated blocks in the pages (:mod:`tests.published`): compared byte for byte;
- whole files a board README names with ``> FILE`` (the boards' ``iqm.md``): compared byte for byte;
- figures quoted in prose or in hand-laid tables: each must be on the line of its command's output
  that holds its method (and env), formatted as the output formats it.

Each command runs once, in this process (``tests.published.run`` caches its output).
"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.leaderboard.publish_online import RATIOS as ONLINE_RATIOS
from tests.published import PAGES, ROOT, all_blocks, run

BLOCKS = list(all_blocks())

MINATAR_SHOW = (
    "offline_gitd leaderboard show --board leaderboards/minatar_offline/board.csv --baseline cql:td "
    "--normalise dqn-replay --format markdown"
)
PILOT_BASELINE = (
    "offline_gitd leaderboard show --board leaderboards/minatar_pilot/board.csv --baseline cql:td "
    "--normalise baseline --keep-flagged-envs"
)
# (file, the command its board README gives for it)
FILES = (
    ("leaderboards/minatar_offline/iqm.md", MINATAR_SHOW),
    (
        "leaderboards/minatar_pilot/iqm.md",
        "offline_gitd leaderboard show --board leaderboards/minatar_pilot/board.csv --baseline cql:td --format markdown",
    ),
    (
        "leaderboards/mujoco_offline/iqm.md",
        "offline_gitd leaderboard show --board leaderboards/mujoco_offline/board.csv --baseline bc:none "
        "--format markdown",
    ),
)
DEMO_SHOW = "offline_gitd leaderboard show --board leaderboards/example_demo.csv --baseline cql:td"
GPU_COMPARE = (
    "offline_gitd leaderboard compare --board leaderboards/minatar_offline/board.csv --label CPU "
    "--board leaderboards/minatar_offline/gpu/board.csv --label H100 --format markdown --reps 20000 --seed 0"
)
GPU_BETWEEN = f"{GPU_COMPARE} --between"
GPU_CLAIMS = f"{GPU_COMPARE} --method cql:gitd --method cql:td --adjusted"
# (page, quoted figure, command, what the output line holding it must also hold)
FIGURES = (
    ("docs/getting-started.md", "-115.8", DEMO_SHOW, ("lunarlander", "cql:tdrc")),
    ("docs/getting-started.md", "0.008", DEMO_SHOW, ("lunarlander", "cql:tdrc")),
    ("docs/getting-started.md", "-11.9", DEMO_SHOW, ("lunarlander", "cql:td ")),
    ("docs/getting-started.md", "0.048", DEMO_SHOW, ("acrobot", "cql:tdrc")),
    ("docs/getting-started.md", "0.05 [0.00, 0.15]", DEMO_SHOW, ("cql:tdrc",)),
    ("docs/getting-started.md", "2.5e-04", DEMO_SHOW, ("cql:tdrc  2     10 (10)",)),
    ("docs/getting-started.md", "0.849", DEMO_SHOW, ("cql:gitd  2     10 (10)",)),
    ("docs/getting-started.md", "0.993", DEMO_SHOW, ("cql:itd   2     10 (10)",)),
    ("docs/getting-started.md", "-106.5 [-124.6, -88.5]", DEMO_SHOW, ("acrobot", "cql:gitd")),
    ("docs/getting-started.md", "-227.4 [-374.6, -110.8]", DEMO_SHOW, ("acrobot", "cql:td ")),
    ("docs/getting-started.md", "0.143", DEMO_SHOW, ("acrobot", "cql:gitd")),
    ("docs/getting-started.md", "-58.8", DEMO_SHOW, ("lunarlander", "cql:gitd")),
    ("docs/getting-started.md", "0.079", DEMO_SHOW, ("lunarlander", "cql:gitd")),
    ("README.md", "1.32 [1.25, 1.40]", MINATAR_SHOW, ("| cql:gitd |",)),
    ("README.md", "1.09 [1.02, 1.16]", MINATAR_SHOW, ("| cql:tdrc |",)),
    ("README.md", "1.10 [1.04, 1.18]", MINATAR_SHOW, ("| cql:itd |",)),
    ("docs/reproducing.md", "1.32 [1.25, 1.40]", MINATAR_SHOW, ("| cql:gitd |",)),
    ("docs/reproducing.md", "0.82 [0.73, 0.90]", MINATAR_SHOW, ("| cql:gitd |",)),
    ("docs/reproducing.md", "1.09 [1.02, 1.16]", MINATAR_SHOW, ("| cql:tdrc |",)),
    ("docs/reproducing.md", "1.10 [1.04, 1.18]", MINATAR_SHOW, ("| cql:itd |",)),
    ("docs/reproducing.md", "1.40 [1.33, 1.47]", MINATAR_SHOW, ("| bc:none |",)),
    ("README.md", "5.0e-05", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("README.md", "4.0e-04", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("docs/reproducing.md", "5.0e-05", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("docs/reproducing.md", "4.0e-04", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "5.0e-05", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "4.0e-04", MINATAR_SHOW, ("| cql:gitd | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "0.175", MINATAR_SHOW, ("| cql:itd | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "0.119", MINATAR_SHOW, ("| cql:tdrc | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "0.032", MINATAR_SHOW, ("| cql:tdrc | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "0.288", MINATAR_SHOW, ("| bc:none | 5 |",)),
    ("leaderboards/minatar_offline/README.md", "0.018", MINATAR_SHOW, ("| bc:none | 5 |",)),
    ("docs/leaderboard.md", "1.16 [0.96, 1.47]", PILOT_BASELINE, ("cql:gitd ",)),
    (
        "docs/leaderboard.md",
        "warning: bc:none and cql:gitd change order with the normaliser (IQM AUC: bc:none ahead under dqn-replay "
        "(1.401 against 1.321); cql:gitd ahead under baseline (1.392 against 1.241), minari (1.247 against 1.206))",
        MINATAR_SHOW,
        ("warning: bc:none and cql:gitd",),
    ),
    ("leaderboards/minatar_pilot/README.md", "1.16 [0.96, 1.47]", PILOT_BASELINE, ("cql:gitd ",)),
    (
        "leaderboards/minatar_offline/README.md",
        "0 of 34 tests below 0.05 uncorrected; smallest p 0.091",
        GPU_BETWEEN,
        ("smallest p",),
    ),
    ("leaderboards/minatar_offline/README.md", "| 0.091 |", GPU_BETWEEN, ("| Seaquest-v1 | cql:tdrc |",)),
)
# The replay-ratio claim of the MinAtar online board (leaderboards/minatar_online/README.md, and
# docs/reproducing.md's bullet): Gi-DQN against DQN at one update per env step, and the contrast of
# the two ratios' gains, on Breakout, on Asterix and over the two.
ONLINE_README = "leaderboards/minatar_online/README.md"
RATIO_1 = ONLINE_RATIOS["leaderboards/minatar_online/ratio-1.md"]
RATIO_CONTRAST = ONLINE_RATIOS["leaderboards/minatar_online/ratio-contrast.md"]
PAIR_GITD_FINAL = ("| dqn:gitd [loop=compiled] |", "last 10,000 steps")
PAIR_GITD_AUC = ("| dqn:gitd [loop=compiled] |", "5 x 100")
FIGURES += (
    (ONLINE_README, "9.499 [8.28, 10.7]", RATIO_1, ("| Breakout-v1 |", *PAIR_GITD_FINAL)),
    (ONLINE_README, "0.452", RATIO_1, ("| Breakout-v1 |", *PAIR_GITD_FINAL)),
    (ONLINE_README, "8.816", RATIO_1, ("| Breakout-v1 | dqn:td [loop=compiled] |",)),
    (ONLINE_README, "6.819 [6.37, 7.38]", RATIO_1, ("| Breakout-v1 |", *PAIR_GITD_AUC)),
    (ONLINE_README, "0.103", RATIO_1, ("| Breakout-v1 |", *PAIR_GITD_AUC)),
    (ONLINE_README, "6.309", RATIO_1, ("| Breakout-v1 | dqn:td [loop=compiled] |", "5 x 100")),
    (ONLINE_README, "5.752 [4.264, 7.266]", RATIO_1, ("| Asterix-v1 |", *PAIR_GITD_FINAL)),
    (ONLINE_README, "0.317", RATIO_1, ("| Asterix-v1 |", *PAIR_GITD_FINAL)),
    (ONLINE_README, "6.938", RATIO_1, ("| Asterix-v1 | dqn:td [loop=compiled] |",)),
    (ONLINE_README, "4.813 [4.307, 5.382]", RATIO_1, ("| Asterix-v1 |", *PAIR_GITD_AUC)),
    (ONLINE_README, "0.341", RATIO_1, ("| Asterix-v1 |", *PAIR_GITD_AUC)),
    (ONLINE_README, "4.464", RATIO_1, ("| Asterix-v1 | dqn:td [loop=compiled] |", "5 x 100")),
    (ONLINE_README, "0.859", RATIO_1, ("| dqn:gitd [loop=compiled] | 2 | 10 (10) |",)),
    (ONLINE_README, "0.071", RATIO_1, ("| dqn:gitd [loop=compiled] | 2 | 10 (10) |",)),
    (ONLINE_README, "0.141", RATIO_1, ("| dqn:gitd [loop=compiled] | 2 | 10 (10) |",)),
)
for page in (ONLINE_README, "docs/reproducing.md"):
    FIGURES += (
        (page, "1.081 [1.005, 1.175]", RATIO_CONTRAST, ("| Breakout-v1 |",)),
        (page, "1.110 [1.055,", RATIO_CONTRAST, ("| Breakout-v1 |",)),
        (page, "0.973 [0.888, 1.076]", RATIO_CONTRAST, ("| Breakout-v1 |",)),
        (page, "1.078 [0.954, 1.220]", RATIO_CONTRAST, ("| Asterix-v1 |",)),
        (page, "1.188 [1.051, 1.312]", RATIO_CONTRAST, ("| Asterix-v1 |",)),
        (page, "0.907 [0.769, 1.078]", RATIO_CONTRAST, ("| Asterix-v1 |",)),
        (page, "0.940 [0.853, 1.036]", RATIO_CONTRAST, ("| all |",)),
    )
FIGURES += (
    ("docs/reproducing.md", "1.080 [1.003, 1.162]", RATIO_CONTRAST, ("| all |",)),
    ("docs/reproducing.md", "1.149 [1.075, 1.217]", RATIO_CONTRAST, ("| all |",)),
)
# The MinAtar results table of the README and of docs/reproducing.md: rows are methods, columns
# games; each cell is the per-game line's mean final return [95% CI] of `show`.
MINATAR_ROWS = {
    "CQL td": "cql:td",
    "CQL tdrc": "cql:tdrc",
    "CQL itd (K = 5)": "cql:itd",
    "CQL gitd (K = 5)": "cql:gitd",
    "CQL gitd (K = 5, beta = 1)": "cql:gitd",
    "behaviour cloning": "bc:none",
}
MINATAR_GAMES = ("Asterix-v1", "Breakout-v1", "Freeway-v1", "Seaquest-v1", "SpaceInvaders-v1")


def flat(text: str) -> str:
    """A command as a page shows it, one line: continuations joined, spaces collapsed."""
    return " ".join(text.replace("\\\n", " ").split())


def test_a_block_added_empty_stays_a_block_of_its_own() -> None:
    """A block written with nothing between its markers yet (to be filled by its first rewrite) does
    not swallow the next block: each keeps its own command and body."""
    from tests.published import BLOCK

    page = (
        "<!-- generated: offline_gitd first -->\n\n<!-- end generated -->\n\ntext\n\n"
        "<!-- generated: offline_gitd second -->\n\n| a |\n|---|\n\n<!-- end generated -->\n"
    )
    assert [(match["command"], match["body"]) for match in BLOCK.finditer(page)] == [
        ("offline_gitd first", ""),
        ("offline_gitd second", "| a |\n|---|"),
    ]


def test_the_pages_have_generated_blocks() -> None:
    # the check is not vacuous: the pages the issue named carry blocks, and every block names a command
    pages = {block.page for block in BLOCKS}
    assert {"docs/reproducing.md", "docs/getting-started.md", "leaderboards/minatar_offline/README.md"} <= pages
    assert set(pages) <= set(PAGES)


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_a_generated_block_is_its_commands_output(block) -> None:
    assert block.shown == run(block.command), (
        f"{block.name} differs from `{block.command}`: run `python -m tests.published` to rewrite it"
    )


@pytest.mark.parametrize("path,command", FILES, ids=[path for path, _ in FILES])
def test_a_committed_output_file_is_its_commands_output(path: str, command: str) -> None:
    readme = (ROOT / path).parent / "README.md"
    assert f"{command} > {path}" in flat(readme.read_text()), f"{readme} does not name the command of {path}"
    assert (ROOT / path).read_text() == run(command) + "\n"


@pytest.mark.parametrize("page,quote,command,holds", FIGURES, ids=[f"{p}:{q}" for p, q, _, _ in FIGURES])
def test_a_quoted_figure_is_on_its_commands_line(page: str, quote: str, command: str, holds: tuple[str, ...]) -> None:
    text = (ROOT / page).read_text()
    assert quote in flat(text), f"{page} no longer quotes {quote}: update FIGURES"
    assert flat(command.removeprefix("offline_gitd ")) in flat(text), f"{page} does not name `{command}`"
    lines = [line for line in run(command).splitlines() if all(part in line for part in holds)]
    assert lines, f"no line of `{command}` holds {holds}"
    assert quote in lines[0], f"{page} quotes {quote}; `{command}` gives: {lines[0]}"


def two_decimals(cell: str) -> str:
    """'mean [low, high]' as the results tables print it, two decimals (`show` prints 4 significant
    digits: 14 where the table has 14.00)."""
    mean, low, high = (float(x) for x in re.findall(r"-?[0-9.]+", cell))
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]"


def per_game_cells(output: str) -> dict[tuple[str, str], str]:
    """(game, method) -> 'mean [low, high]' from the per-env markdown table of `show`, followed by
    ' (p P; Holm H, BH B)' where the method is tested against the baseline."""
    cells = {}
    for line in output.splitlines():
        parts = [part.strip() for part in line.strip("|").split("|")]
        if len(parts) > 6 and parts[0] in MINATAR_GAMES and "[" in parts[2]:
            tests = f" (p {parts[4].split()[0]}; Holm {parts[5]}, BH {parts[6]})" if parts[4] != "-" else ""
            cells[(parts[0], parts[1])] = two_decimals(parts[2]) + tests
    return cells


@pytest.mark.parametrize("page", ["README.md", "docs/reproducing.md", "leaderboards/minatar_offline/README.md"])
def test_the_minatar_results_table_is_the_boards(page: str) -> None:
    cells = per_game_cells(run(MINATAR_SHOW))
    rows = 0
    for line in (ROOT / page).read_text().splitlines():
        parts = [part.strip() for part in line.strip("|").split("|")]
        if len(parts) == 1 + len(MINATAR_GAMES) and parts[0] in MINATAR_ROWS:
            method = MINATAR_ROWS[parts[0]]
            for game, shown in zip(MINATAR_GAMES, parts[1:], strict=True):
                expected = cells[(game, method)] if "(p " in shown else cells[(game, method)].split(" (p ")[0]
                assert shown == expected, f"{page}: {parts[0]} on {game} reads {shown}"
            rows += 1
    assert rows == 5  # every method's row was found and checked
    assert re.search(r"leaderboard show --board leaderboards/minatar_offline/board\.csv", (ROOT / page).read_text())


def test_the_gym_boards_raw_tables_are_the_boards() -> None:
    """leaderboards/gym_offline/README.md's raw-returns tables: `python -m benchmarks.gym_offline --raw`'s
    output. Its references (random, the data) need the datasets, which are not committed; the page
    states them in its references table, so they are read from there, the boards' means and
    intervals recomputed from the committed boards, and both tables compared byte for byte."""
    gym = importlib.import_module("benchmarks.gym_offline")
    page = (ROOT / "leaderboards/gym_offline/README.md").read_text()
    number = r"(-?[0-9.]+)"
    refs = {}
    for env in gym.DATASETS:
        row = re.search(
            rf"^\| {env} \| {number} \((\d+)\) \| {number} \| {number} \((\d+)\) \| {number} \((\d+) episodes, "
            rf"([0-9,]+) steps\) \| {number} \| (\d+) of \d+ \|$",
            page,
            re.M,
        )
        assert row, f"no references row for {env}"
        random, random_episodes, ref_min, data_all, episodes, data_kept, kept, steps, data_last, goals = row.groups()
        refs[env] = gym.References(
            random=float(random),
            random_episodes=int(random_episodes),
            ref_min_score=float(ref_min),
            data_all=float(data_all),
            data_kept=float(data_kept),
            data_last=float(data_last),
            episodes=int(episodes),
            kept_episodes=int(kept),
            kept_steps=int(steps.replace(",", "")),
            goal_episodes=int(goals),
        )
    assert gym.references_table(refs) in page
    tables = gym.raw_tables(ROOT / "leaderboards" / "gym_offline", refs)
    assert tables.count("| CQL (td) | 10 |") == 8  # every board and env
    assert tables.rstrip() in page


GPU_GAMES = {"Asterix": "Asterix-v1", "Breakout": "Breakout-v1", "Seaquest": "Seaquest-v1"}
GPU_GAMES["Space Invaders"] = "SpaceInvaders-v1"
GPU_CLAIM = re.compile(
    r"^  - (?P<game>[A-Za-z ]+): (?P<gitd>[\d.]+) against (?P<td>[\d.]+) \(p (?P<p>[\d.]+); "
    r"(?:Holm (?P<holm>[\d.]+), BH (?P<bh>[\d.]+)|not significant, corrected or not)\)\.$"
)


def test_the_minatar_gpu_claims_are_compares() -> None:
    # each claim of Gi-CQL against CQL td on the H100 board: the means, the permutation test and its
    # Holm and BH adjustments over the board's 4 tests, as `compare --adjusted` prints them
    page = (ROOT / "leaderboards/minatar_offline/README.md").read_text()
    assert flat(GPU_CLAIMS.removeprefix("offline_gitd ")) in flat(page)
    claims = [match for line in page.splitlines() if (match := GPU_CLAIM.match(line))]
    assert sorted(claim["game"] for claim in claims) == sorted(GPU_GAMES)
    rows = {tuple(cells[:2]): cells for cells in (line.split(" | ") for line in run(GPU_CLAIMS).splitlines())}
    assert "(5 on CPU, 4 on H100)" in run(GPU_CLAIMS)  # the adjustments' family on the H100 board: 4 tests
    for claim in claims:
        env = GPU_GAMES[claim["game"]]
        gitd, td = rows[(f"| {env}", "cql:gitd")][7:11], rows[(f"| {env}", "cql:td")][7:11]
        assert gitd[0].split(" [")[0] == claim["gitd"] and td[0].split(" [")[0] == claim["td"]
        assert gitd[1] == claim["p"], claim.group(0)
        if claim["holm"] is None:  # "not significant, corrected or not"
            assert min(float(p) for p in gitd[1:]) >= 0.05, claim.group(0)
        else:
            assert (gitd[2], gitd[3]) == (claim["holm"], claim["bh"]), claim.group(0)


def test_the_minatar_boards_aggregate_rows_are_shows() -> None:
    """The aggregate table quoted in the MinAtar board's README: each row a line of `show`'s."""
    output = run(MINATAR_SHOW).splitlines()
    page = (ROOT / "leaderboards/minatar_offline/README.md").read_text().splitlines()
    rows = [line for line in page if re.match(r"^\| (cql|bc):\S+ \| ", line)]
    assert len(rows) == 5
    for line in rows:
        assert line in output, f"not a line of `{MINATAR_SHOW}`: {line}"


def test_auto_is_documented_in_the_codes_order_of_references() -> None:
    """`--normalise auto` takes the first reference kind every env has, in REFERENCE_ORDER; its help
    and docs/leaderboard.md name the kinds in that order."""
    import argparse

    from offline_gitd.cli import build_parser
    from offline_gitd.leaderboard.normalise import REFERENCE_ORDER

    assert REFERENCE_ORDER == ("dqn-replay", "minari", "d4rl", "human")
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    board = next(a for a in subparsers.choices["leaderboard"]._actions if isinstance(a, argparse._SubParsersAction))
    show = board.choices["show"]
    help_text = flat(next(a.help for a in show._actions if "--normalise" in a.option_strings))
    phrases = ("DQN-replay score", "ref_min/ref_max_score", "D4RL's", "human table")  # REFERENCE_ORDER's kinds
    positions = [help_text.index(phrase) for phrase in phrases]
    assert positions == sorted(positions), help_text
    docs = flat((ROOT / "docs/leaderboard.md").read_text())
    assert "the first of " + ", ".join(f"`{kind}`" for kind in REFERENCE_ORDER) in docs
