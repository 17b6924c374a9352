"""Build-time formulas: TeX written between ``$...$`` or ``$$...$$`` becomes MathML in the page.

pymdownx.arithmatex (generic mode) wraps each formula in ``<span class="arithmatex">\\(...\\)</span>``
or ``<div class="arithmatex">\\[...\\]</div>`` and leaves rendering to a script such as MathJax,
which a browser would fetch from the network. This hook renders them itself with latex2mathml, so
the site is complete offline: browsers draw MathML natively.
"""

from __future__ import annotations

import html
import re
from typing import Any

from latex2mathml.converter import convert

_INLINE = re.compile(r'<span class="arithmatex">\\\((.*?)\\\)</span>', re.DOTALL)
_BLOCK = re.compile(r'<div class="arithmatex">\\\[(.*?)\\\]</div>', re.DOTALL)


def to_mathml(page_html: str) -> str:
    """Every arithmatex formula of ``page_html`` replaced by its MathML (block formulas displayed)."""
    page_html = _BLOCK.sub(lambda m: convert(html.unescape(m.group(1)).strip(), display="block"), page_html)
    return _INLINE.sub(lambda m: convert(html.unescape(m.group(1)).strip()), page_html)


def on_page_content(page_html: str, **kwargs: Any) -> str:
    """MkDocs hook: runs on each page's HTML body after Markdown conversion."""
    return to_mathml(page_html)
