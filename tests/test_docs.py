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
