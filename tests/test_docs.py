"""The front page's links lead somewhere, and the docs site's formulas need no network.

``mkdocs build --strict`` (``make docs``) checks the links between pages of ``docs/``; README.md is
not part of the site, so its links (into ``docs/`` with their anchors, to figures, to
CITATION.cff) are checked here, with the anchors computed as the site computes them.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$")


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (Python-Markdown's toc slugify), fences skipped."""
    anchors: set[str] = set()
    in_fence = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        match = None if in_fence else HEADING.match(line)
        if match:
            anchors.add(match.group(2) or slugify(re.sub(r"[`*_]", "", match.group(1)), "-"))
    return anchors


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
            assert anchor in _anchors(target), f"README.md links to {link}: {path} has no heading '#{anchor}'"


def test_anchor_computation_matches_the_site() -> None:
    """The anchors this test derives are the ones the site's pages carry (checked on one page)."""
    anchors = _anchors(REPO / "docs" / "critics.md")
    assert {"gi-td", "i-td", "tdrc", "td", "the-papers-updates"} <= anchors


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
