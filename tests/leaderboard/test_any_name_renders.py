"""Any name a board accepts renders (docs/leaderboard.md#any-name-renders): ``plot``, ``html`` and
``show`` in every format succeed on a board whose methods and envs are a 20 kB string, matplotlib
mathtext, a ``|``, a line break and a ``<script>`` tag; long names are shortened where people read
them (figures, tables, errors) and kept whole in the data (CSV, JSON, the figures' data)."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from offline_gitd.cli import main, short_names
from offline_gitd.leaderboard.schema import read_rows
from tests.support.runs import write_run

LONG = "g" * 20_000
MATHTEXT = "$\\foo{$"
SCRIPT = "<script>alert(1)</script>"
CRITICS = ("td", LONG, MATHTEXT, "a|b", "line\nbreak", SCRIPT)
ENVS = ("Pong", f"{SCRIPT}|{MATHTEXT}\nx", "E" * 20_000)  # the last two are no Atari game: --allow-new-env


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names")
    runs = []
    for index, critic in enumerate(CRITICS):
        for env_index, env in enumerate(ENVS):
            for seed in range(2):
                runs.append(
                    write_run(
                        root / f"{index}-{env_index}-{seed}",
                        env=env,
                        algorithm="cql",
                        critic=critic,
                        seed=seed,
                        steps=[0, 1000],
                        returns=[10.0 + index, 20.0 + index + 0.1 * seed],
                        run_id=f"{index}-{env_index}-{seed}",
                    )  # fmt: skip
                )
    path = root / "board.csv"
    assert main(["leaderboard", "submit", *map(str, runs), "--board", str(path), "--allow-new-env"]) == 0
    assert {row.critic for _, row in read_rows(path)} == set(CRITICS)
    return path


ANALYSIS = ["--baseline", "cql:td", "--reps", "20"]


def show(board: Path, capsys, fmt: str) -> str:
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), *ANALYSIS, "--format", fmt]) == 0
    return capsys.readouterr().out


def test_markdown_escapes_every_name(board: Path, capsys) -> None:
    out = show(board, capsys, "markdown")
    assert "<script" not in out and "cql:&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "cql:\\$\\\\foo{\\$" in out  # no formula, no markup
    assert "cql:a\\|b" in out and "cql:line break" in out
    tables = [[line for line in block.splitlines() if line.startswith("|")] for block in out.split("\n\n")]
    for table in (t for t in tables if t):
        assert len({line.replace("\\|", "").count("|") for line in table}) == 1  # no cell adds a column
    assert max(len(line) for line in out.splitlines()) < 600  # the 20 kB name is shortened
    assert "...(20004 chars)..." in out


def test_text_table_shortens_and_keeps_one_line_per_name(board: Path, capsys) -> None:
    out = show(board, capsys, "table")
    summary = out.split("\n\n")[0].splitlines()
    assert len(summary) == 1 + len(CRITICS)
    assert any("cql:line\\nbreak" in line for line in summary)
    assert max(len(line) for line in out.splitlines()) < 600 and "...(20004 chars)..." in out


def test_csv_and_json_keep_every_name_whole(board: Path, capsys) -> None:
    methods = {row["method"] for row in csv.DictReader(io.StringIO(show(board, capsys, "csv")))}
    assert methods == {f"cql:{critic}" for critic in CRITICS}
    report = json.loads(show(board, capsys, "json"))
    assert {item["method"] for item in report["methods"]} == methods
    assert {line["env"] for line in report["per_env"]} == set(ENVS)


def test_plot_draws_every_name_literally_and_keeps_them_whole_in_its_data(board: Path, tmp_path: Path) -> None:
    out = tmp_path / "figures"
    assert main(["leaderboard", "plot", "--board", str(board), *ANALYSIS, "--out", str(out)]) == 0
    assert all((out / f"{name}.png").stat().st_size > 0 for name in ("aggregate", "per_env", "intervals", "profile"))
    names: set[str] = set()

    def collect(value: object) -> None:
        if isinstance(value, dict):
            names.update(map(str, value))
            for item in value.values():
                collect(item)
        elif isinstance(value, list):
            for item in value:
                collect(item)
        elif isinstance(value, str):
            names.add(value)

    collect(json.loads((out / "figure_data.json").read_text()))
    assert {f"cql:{critic}" for critic in CRITICS} <= names and set(ENVS) <= names


def test_plain_shortens_and_escapes_mathtext() -> None:
    from offline_gitd.leaderboard.plot import NAME_LIMIT, plain

    assert plain(MATHTEXT) == "\\$\\foo{\\$"
    assert len(plain(LONG)) <= NAME_LIMIT and "\n" not in plain("a\nb")


def test_html_escapes_and_shortens(board: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert main(["leaderboard", "html", "--board", str(board), *ANALYSIS, "--out", str(out)]) == 0
    page = (out / "index.html").read_text()
    assert page.count("<script") == 1  # the page's own sorting script alone
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert f'title="cql:{LONG}"' in page  # the whole name in the tooltip, shortened in the cell
    shown = re.findall(r">([^<]*)<", page)  # the text between tags: what a reader sees
    assert max(len(text) for text in shown) < 1000 and any("...(20004 chars)..." in text for text in shown)


def test_an_error_listing_the_methods_shortens_them(board: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["leaderboard", "show", "--board", str(board), "--baseline", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not on the board; methods:" in err
    assert len(err) < 1000 and "...(20005 chars)..." in err  # the name and its comma
    assert short_names("short words stay") == "short words stay"
