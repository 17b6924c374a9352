"""``leaderboard show`` (every format), ``plot`` and ``html`` on boards whose method and env names
are generated (docs/leaderboard.md#any-name-renders): each succeeds, every name is escaped for its
format and shortened where people read it, and the data formats keep it whole. Each example costs
seconds (four ``show`` formats ~2.5 s, a figure and a page ~10 s, on a loaded 2-core machine), so
the default run tries the explicit examples and a few generated names (new ones each run), and
``-m slow`` many more."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from offline_gitd.cli import main
from offline_gitd.leaderboard.schema import ResultRow
from offline_gitd.leaderboard.show import show
from offline_gitd.leaderboard.submit import encode_rows

# Characters that mean something to CSV, Markdown, HTML, matplotlib's mathtext or a terminal,
# and any other (NUL aside: a CSV file cannot hold it, so no board does).
AWKWARD = st.sampled_from(list("$\\{}<>&|\"',\n\r\t `*_[]#=+@-/é"))
ANY = st.characters(codec="utf-8", exclude_characters="\x00")
SHORT = st.text(AWKWARD | ANY, min_size=1, max_size=24).map(lambda s: s.strip() or "x")
# now and then a name far longer than any figure or table can hold
NAMES = SHORT | SHORT.map(lambda s: (s + "y") * (5000 // (len(s) + 1)))
CREATED = "2026-01-01T00:00:00+00:00"
SLOW = dict(deadline=None, suppress_health_check=(HealthCheck.too_slow, HealthCheck.function_scoped_fixture))


def write_board(critic: str, env: str) -> Path:
    """cql:td (the baseline) and cql:<critic> on Pong and on ``env``, three seeds each."""
    rows = []
    for method, gain in (("td", 1.0), (critic, 1.5)):
        for place in ("Pong", env):
            for seed in range(3):
                for step, value in ((0, 5.0), (1000, 10.0 * gain + 0.1 * seed)):
                    record = dict(
                        suite="atari", env=place, algorithm="cql", critic=method, K=1, beta=0.0, seed=seed,
                        step=step, run_id=f"{method}-{place}-{seed}", config_hash="h", package_version="0.2.0",
                        created_at=CREATED, method_config="defaults",
                    )  # fmt: skip
                    record["return"] = value
                    rows.append(ResultRow.from_mapping(record))
    folder = Path(tempfile.mkdtemp(prefix="names-"))
    board = folder / "board.csv"
    board.write_bytes(encode_rows(rows, header=True))
    return board


def unescaped_pipes(line: str) -> int:
    return line.replace("\\\\", "").replace("\\|", "").count("|")


def check_show(critic: str, env: str) -> None:
    assume(critic != "td" and env != "Pong")
    board = write_board(critic, env)
    try:
        methods = {"cql:td", f"cql:{critic}"}
        text = show(board, "cql:td", "auto", "table", 20, 0, keep_flagged=True)
        summary = text.split("\n\n")[0].splitlines()
        assert len(summary) == 3 and max(len(line) for line in text.splitlines()) < 1000
        markdown = show(board, "cql:td", "auto", "markdown", 20, 0, keep_flagged=True)
        assert "<" not in markdown.replace("P(> ", "")
        assert max(len(line) for line in markdown.splitlines()) < 1000
        for block in markdown.split("\n\n"):
            table = [line for line in block.splitlines() if line.startswith("|")]
            assert len({unescaped_pipes(line) for line in table}) <= 1, block
        assert "$" not in markdown.replace("\\$", "")
        rows = list(csv.DictReader(io.StringIO(show(board, "cql:td", "auto", "csv", 20, 0, keep_flagged=True))))
        assert {row["method"] for row in rows} == methods
        report = json.loads(show(board, "cql:td", "auto", "json", 20, 0, keep_flagged=True))
        assert {item["method"] for item in report["methods"]} == methods
        assert {line["env"] for line in report["per_env"]} == {"Pong", env}
    finally:
        shutil.rmtree(board.parent)


@settings(max_examples=5, **SLOW)
@given(critic=NAMES, env=NAMES)
@example(critic="g" * 20_000, env="$\\foo{$")
@example(critic="<script>alert(1)</script>", env="a|b\nc")
def test_show_renders_any_name_in_every_format(critic: str, env: str) -> None:
    check_show(critic, env)


@pytest.mark.slow
@settings(max_examples=60, **SLOW)
@given(critic=NAMES, env=NAMES)
def test_show_renders_many_more_generated_names(critic: str, env: str) -> None:
    check_show(critic, env)


def check_plot_and_html(critic: str, env: str) -> None:
    assume(critic != "td" and env != "Pong")
    board = write_board(critic, env)
    try:
        common = ["--board", str(board), "--baseline", "cql:td", "--reps", "20", "--keep-flagged-envs"]
        assert main(["leaderboard", "plot", *common, "--out", str(board.parent / "figures")]) == 0
        assert (board.parent / "figures" / "per_env.png").stat().st_size > 0
        assert main(["leaderboard", "html", *common, "--out", str(board.parent / "site")]) == 0
        page = (board.parent / "site" / "index.html").read_text(encoding="utf-8")
        assert page.count("<script") == 1  # the page's own
        assert max(len(text) for text in re.findall(r">([^<]*)<", page)) < 2000
    finally:
        shutil.rmtree(board.parent)


@settings(max_examples=1, **SLOW)
@given(critic=NAMES, env=NAMES)
@example(critic="$\\foo{$", env="x" * 20_000)
def test_plot_and_html_render_any_name(critic: str, env: str) -> None:
    check_plot_and_html(critic, env)


@pytest.mark.slow
@settings(max_examples=10, **SLOW)
@given(critic=NAMES, env=NAMES)
def test_plot_and_html_render_more_generated_names(critic: str, env: str) -> None:
    check_plot_and_html(critic, env)
