"""Every pointer into the docs resolves: ``docs/<page>.md#<anchor>`` cited anywhere in the repository.

Code, tests, sweeps, benchmarks and the leaderboards' READMEs send readers to a section of the docs
site by its anchor; a renamed heading leaves those pointers dangling without any build noticing
(``mkdocs build --strict`` checks only the links between the site's own pages). This test finds
every such pointer in the repository's text files and checks that the page exists and that the
anchor is an id the site gives that page. The ids are computed as the site computes them: each page
is rendered by Python-Markdown with the extensions mkdocs.yml configures (and the ones MkDocs always
adds), so the toc extension's slugs, its ``_1`` suffixes for repeated headings and ``{#id}``
attributes come out exactly as on the site. API pages (``::: module``) are built by mkdocstrings,
whose ids are the dotted paths of the objects they document.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

# docs/<page>.md with an optional #anchor, anywhere in a line (prose, comments, strings). Not
# preceded by a path character, so "site/docs/x.md" is not taken for the docs page; "../docs/"
# (a leaderboard README's relative link) is.
CITATION = re.compile(r"(?<![\w./-])(?:\.\./)*docs/(?P<page>[\w./-]+?\.md)(?:#(?P<anchor>[\w.-]+))?")
# docs/<page>.md, "Heading": a section named by its title rather than by its anchor.
NAMED_SECTION = re.compile(r'(?<![\w./-])docs/(?P<page>[\w./-]+?\.md), "(?P<title>[^"]+)"')
# A Markdown link: what a page of docs/ (or a README) writes as [text](page.md#anchor).
MARKDOWN_LINK = re.compile(r"\]\((?P<target>[^)\s]+?\.md)(?:#(?P<anchor>[^)\s]+))?\)")
# Directories whose files are not the repository's own text (built, installed or cached).
NOT_SOURCE = {".git", ".venv", ".venv-tfds", "site", "build", "dist", "node_modules", "__pycache__"}


@dataclass(frozen=True)
class Pointer:
    """One citation of a docs page: where it stands and what it names."""

    where: str  # "path:line"
    page: Path
    anchor: str | None


def markdown_settings(config: Path = REPO / "mkdocs.yml") -> tuple[list[str], dict[str, dict]]:
    """The Markdown extensions (and their settings) the site renders pages with: MkDocs' built-in
    ``toc``, ``tables`` and ``fenced_code``, then mkdocs.yml's ``markdown_extensions``, so that a
    ``toc`` ``slugify`` or ``separator`` set there is the one used here too."""
    extensions = ["toc", "tables", "fenced_code"]
    settings: dict[str, dict] = {}
    for entry in yaml.safe_load(config.read_text())["markdown_extensions"]:
        name, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        if name not in extensions:
            extensions.append(name)
        settings[name] = {**settings.get(name, {}), **(options or {})}
    return extensions, settings


class _Ids(HTMLParser):
    """The ids of an HTML fragment: what a URL's ``#fragment`` can land on."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []  # in the order they stand

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value and (name == "id" or (tag == "a" and name == "name")):
                self.ids.append(value)


@functools.cache
def page_anchors(page: Path) -> frozenset[str]:
    """The ids the site gives ``page``: its rendered headings' (and any ``{#id}``'s), plus, on an API
    page, the dotted path of each object a ``::: path`` line documents."""
    text = page.read_text(encoding="utf-8")
    objects = re.findall(r"^:::\s*([\w.]+)", text, flags=re.MULTILINE)
    return frozenset([*anchors_of_text(text), *objects])


def resolves(page: Path, anchor: str | None) -> str | None:
    """Why a pointer to ``page#anchor`` is stale, or ``None`` when it lands on something."""
    if not page.is_file():
        return f"{page.relative_to(REPO) if page.is_relative_to(REPO) else page} does not exist"
    if anchor is None:
        return None
    anchors = page_anchors(page)
    # An API page's ids under a documented object (its members) are made by mkdocstrings.
    if anchor in anchors or any(anchor.startswith(name + ".") for name in anchors if "." in name):
        return None
    return f"{page.name} has no heading with the anchor #{anchor}"


def source_files(root: Path = REPO) -> list[Path]:
    """The repository's files: git's tracked and not-ignored ones, or, outside a checkout, every
    file not under a build, venv or cache directory."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        ).stdout.split("\0")
        files = [root / name for name in listed if name]
    except (OSError, subprocess.CalledProcessError):
        files = [path for path in root.rglob("*") if not NOT_SOURCE & set(path.relative_to(root).parts)]
    return [path for path in files if path.is_file()]


def _lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """A Markdown file's numbered lines outside fenced code blocks (a fence shows text, not links)."""
    kept, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            kept.append((number, line))
    return kept


def pointers(root: Path = REPO, docs: Path | None = None) -> list[Pointer]:
    """Every citation of a page of ``docs`` in the text files under ``root``."""
    docs = (docs or root / "docs").resolve()
    found: list[Pointer] = []
    for path in source_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # images, archives: no citations
        name = path.relative_to(root).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            for match in CITATION.finditer(line):
                anchor = match["anchor"].rstrip(".") if match["anchor"] else None
                found.append(Pointer(f"{name}:{number}", docs / match["page"], anchor))
            for match in NAMED_SECTION.finditer(line):
                found.append(Pointer(f"{name}:{number}", docs / match["page"], _slug(match["title"])))
        if path.suffix == ".md":
            for number, line in _lines_outside_fences(text):
                for match in MARKDOWN_LINK.finditer(line):
                    if re.match(r"[a-z][a-z0-9+.-]*:", match["target"]):
                        continue  # a URL, not a file of this repository
                    target = (path.parent / match["target"]).resolve()
                    if target.is_relative_to(docs.resolve()):
                        found.append(Pointer(f"{name}:{number}", target, match["anchor"]))
    return list(dict.fromkeys(found))  # a link that is also a docs/ path is one pointer


def _slug(title: str) -> str:
    """The anchor the site gives a heading titled ``title``."""
    return anchors_of_text(f"# {title}\n")[0]


def anchors_of_text(text: str) -> list[str]:
    """The ids of a Markdown text rendered as the site renders it, in the order they stand."""
    extensions, settings = markdown_settings()
    parser = _Ids()
    parser.feed(markdown.Markdown(extensions=extensions, extension_configs=settings).convert(text))
    return parser.ids


def stale(found: list[Pointer]) -> list[str]:
    """``where: why`` for every pointer that lands nowhere."""
    problems = []
    for pointer in found:
        why = resolves(pointer.page, pointer.anchor)
        if why:
            problems.append(f"{pointer.where}: {why}")
    return problems


def test_every_docs_pointer_in_the_repository_resolves() -> None:
    found = pointers()
    cited_anchors = [pointer for pointer in found if pointer.anchor]
    assert len(cited_anchors) > 50, "the scan finds the repository's citations (it found too few to be working)"
    problems = stale(found)
    assert not problems, "stale pointers into docs/:\n" + "\n".join(problems)


def test_the_scan_finds_a_stale_anchor_a_missing_page_and_a_renamed_section(tmp_path: Path) -> None:
    """The check can fail: a repository whose code cites a heading that is gone, a page that is
    gone and a section by an old title is refused at each of them, and a good pointer passes."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n\n## Head layouts\n\nText.\n\n## Notes `x` *y*\n")
    page, missing = "page.md", "gone.md"
    (tmp_path / "code.py").write_text(
        f"# docs/{page}#head-layouts is fine\n"
        f"# docs/{page}#notes-x-y is fine too\n"
        f"# docs/{page}#heads was renamed\n"
        f"# docs/{missing}#anything\n"
        f'# (docs/{page}, "Old title")\n'
    )
    (tmp_path / "README.md").write_text(f"[a](docs/{page}#head-layouts) [b](docs/{page}#nowhere)\n")
    problems = stale(pointers(tmp_path))
    assert [problem.split(":")[:2] for problem in problems] == [
        ["README.md", "1"],
        ["code.py", "3"],
        ["code.py", "4"],
        ["code.py", "5"],
    ]
    assert "page.md has no heading with the anchor #heads" in problems[1]
    assert "gone.md does not exist" in problems[2]


@pytest.mark.parametrize(
    ("markdown_text", "ids"),
    [
        ("# Bounds, safety and determinism\n", ["bounds-safety-and-determinism"]),
        ("# The `td_abs` rule\n", ["the-td_abs-rule"]),
        ("# What was run here, and what was not\n", ["what-was-run-here-and-what-was-not"]),
        ("# Gi-TD\n\n# Gi-TD\n", ["gi-td", "gi-td_1"]),
        ("# Walkthrough: Gi-CQL on an RL Unplugged game\n", ["walkthrough-gi-cql-on-an-rl-unplugged-game"]),
        ("# Head layouts {#layouts}\n", ["layouts"]),
    ],
)
def test_anchors_are_the_sites_slugs(markdown_text: str, ids: list[str]) -> None:
    """The toc extension's slugs as the site makes them: punctuation dropped, code kept as its
    text, a repeated heading suffixed ``_1``, an explicit ``{#id}`` taken as written."""
    assert anchors_of_text(markdown_text) == ids


def test_anchor_computation_matches_the_site() -> None:
    """Anchors of the real pages, as the built site carries them."""
    assert {"gi-td", "i-td", "tdrc", "td", "the-papers-updates", "heads-and-h-estimators"} <= page_anchors(
        DOCS / "critics.md"
    )
    assert "offline_gitd.critics" in page_anchors(DOCS / "api" / "critics.md")
