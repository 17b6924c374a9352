"""The front page's links lead somewhere, and the docs site's formulas need no network.

``mkdocs build --strict`` (``make docs``) checks the links between pages of ``docs/``; README.md is
not part of the site, so its links (into ``docs/`` with their anchors, to figures, to
CITATION.cff) are checked here, with the anchors computed as the site computes them
(tests/test_docs_anchors.py, which checks every pointer into docs/ from anywhere in the repository).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tests.test_docs_anchors import page_anchors

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text()) if not re.match(r"[a-z]+:", target)]


def test_readme_links_point_at_existing_files_and_anchors() -> None:
    links = _relative_links(REPO / "README.md")
    assert any(link.startswith("docs/") for link in links), "the front page links into docs/"
    for link in links:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.is_file(), f"README.md links to {path}, which does not exist"
        if anchor:
            assert anchor in page_anchors(target), f"README.md links to {link}: {path} has no heading '#{anchor}'"


def test_readme_stays_a_front_page() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


def _mathml_hook():
    spec = importlib.util.spec_from_file_location("mathml_hook", REPO / "docs" / "hooks" / "mathml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_formulas_become_mathml_at_build_time() -> None:
    """arithmatex's generic output is replaced by MathML, so no script has to be fetched to draw it."""
    page = (
        '<p>With <span class="arithmatex">\\(g = \\gamma^{n} (1 - d)\\)</span>:</p>\n'
        '<div class="arithmatex">\\[\n\\delta_k = y_k - Q_k(s, a) &lt; 1\n\\]</div>'
    )
    html = _mathml_hook().to_mathml(page)
    assert "arithmatex" not in html and "\\(" not in html and "\\[" not in html
    assert html.count("<math") == 2
    assert 'display="block"' in html and 'display="inline"' in html
    assert "&#x003B3;" in html  # gamma as a MathML character, not TeX source
    assert "<mo>&#x0003C;</mo>" in html  # the page's escaped "<" reached the converter as "<"


# Plain file paths cited in code, tests and docs ("offline_gitd/networks/dense.py",
# "learners/family.py:3", "tests/test_docs.py") must name files that exist, as the anchors into
# docs/ must (tests/test_docs_anchors.py). A path counts when its first folder is one of the
# repository's or of the package's (then only a module: ``online/loop.py``, not a dataset's
# ``data/metadata.json``); it resolves from the repository's root, from the package or from the
# citing file's folder. Commands in fenced blocks show example
# outputs (a board a command writes) and are left out, as is CHANGELOG.md, whose history names
# files since split or removed.
FILE_PATH = re.compile(
    r"(?<![\w./:-])((?:[\w-]+/)+[\w.-]+\.(?:py|md|toml|csv|json|yml|yaml|txt|cff|html|png))(?![\w/])"
)
# A bare file name in backticks (``run.py``) must be some file of the repository's, unless it is
# one of another project's that the code cites for where it follows it.
BARE_NAME = re.compile(r"`{1,2}([\w-]+\.py)`{1,2}")
OTHER_PROJECTS_FILES = {
    "environment.py",  # MinAtar 1.0.15 (offline_gitd/envs/jax_minatar_breakout.py follows it)
    "gym.py",  # MinAtar 1.0.15, likewise
    "atari_data.py",  # DQN Zoo's human and random Atari scores (docs/leaderboard.md)
}
NOT_CHECKED = {"CHANGELOG.md", "tests/test_docs.py"}  # history; this check's own examples


def cited_paths(root: Path = REPO) -> list[tuple[str, str]]:
    """(where, path) for every plain file path cited under ``root`` that names no file."""
    from tests.test_docs_anchors import _lines_outside_fences, source_files

    files = source_files(root)
    names = {path.name for path in files}
    package_folders = {path.parent.name for path in (root / "offline_gitd").glob("*/__init__.py")}
    repository_folders = {"offline_gitd", "tests", "docs", "benchmarks", "leaderboards", "sweeps", "datasets"}
    first_folders = repository_folders | package_folders
    missing = []
    for path in files:
        name = path.relative_to(root).as_posix()
        if name in NOT_CHECKED:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        lines = _lines_outside_fences(text) if path.suffix == ".md" else enumerate(text.splitlines(), 1)
        for number, line in lines:
            for match in FILE_PATH.finditer(line):
                cited = match[1]
                first = cited.split("/")[0]
                if first not in first_folders:
                    continue
                if first in package_folders - repository_folders and not cited.endswith(".py"):
                    continue  # data/metadata.json: a path inside a dataset or a run, not the package's
                if not any((base / cited).exists() for base in (root, root / "offline_gitd", path.parent)):
                    missing.append((f"{name}:{number}", cited))
            for match in BARE_NAME.finditer(line):
                if match[1] not in names and match[1] not in OTHER_PROJECTS_FILES:
                    missing.append((f"{name}:{number}", match[1]))
    return missing


def test_every_file_path_cited_names_a_file() -> None:
    stale = cited_paths()
    assert not stale, "file paths cited that name no file:\n" + "\n".join(f"{where}: {p}" for where, p in stale)


def test_the_path_check_finds_a_moved_file(tmp_path: Path) -> None:
    """The check can fail: a path to a moved module, a package-relative one and a bare name that
    are gone are each named with the line citing them, and paths that exist pass."""
    (tmp_path / "offline_gitd" / "learners").mkdir(parents=True)
    (tmp_path / "offline_gitd" / "learners" / "__init__.py").write_text("")
    (tmp_path / "offline_gitd" / "learners" / "family.py").write_text(
        '"""The loop (``run.py``) drives it; see offline_gitd/learners/family.py and learners/family.py."""\n'
    )
    (tmp_path / "docs").mkdir()
    page = "page.md"  # named apart, so the repository's own docs pointer check does not read it
    (tmp_path / "docs" / page).write_text(
        "Tested in tests/test_gone.py and `learners/old.py`.\n\n```bash\nx --out docs/made_by_a_command.csv\n```\n"
    )
    found = sorted(cited_paths(tmp_path))
    assert found == [
        (f"docs/{page}:1", "learners/old.py"),
        (f"docs/{page}:1", "tests/test_gone.py"),
        ("offline_gitd/learners/family.py:1", "run.py"),
    ]
