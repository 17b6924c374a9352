"""``leaderboard html``: one self-contained static page for a board.

Everything is inside ``index.html`` (figures as base64 PNG, a few lines of vanilla JavaScript to
sort the table by a clicked column), so the page can be mailed, attached to a CI run or served
from any static host without losing a piece. The provenance block (board file name, sha256, row count,
package version, generation time) ties the numbers to the exact board they came from.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from offline_gitd.leaderboard.schema import shorten
from offline_gitd.leaderboard.show import (
    ACROSS_TEST,
    NAME_LIMIT,
    NOTE_LIMIT,
    across_family_note,
    family_note,
    p_fine,
    records,
    short_words,
    summary_digits,
)
from offline_gitd.leaderboard.stats import MethodSummary
from offline_gitd.version import __version__

if TYPE_CHECKING:
    from offline_gitd.leaderboard.across_envs import AcrossLine
    from offline_gitd.leaderboard.per_env import EnvLine
    from offline_gitd.leaderboard.show import Loaded

COLUMNS: tuple[tuple[str, str], ...] = (
    ("method", "Method"),
    ("iqm", "IQM final"),
    ("auc", "IQM AUC rel. baseline"),
    ("p_improve", "P(improvement)"),
    ("envs", "Envs"),
    ("seeds", "Seeds"),
    ("runs", "Runs"),
)

SORT_SCRIPT = """
document.querySelectorAll("#leaderboard th").forEach(function (header, index) {
  header.addEventListener("click", function () {
    var body = document.querySelector("#leaderboard tbody");
    var descending = header.getAttribute("aria-sort") !== "descending";
    document.querySelectorAll("#leaderboard th").forEach(function (other) {
      other.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[index].dataset.value, y = b.cells[index].dataset.value;
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { padding: 0.35rem 0.8rem; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { cursor: pointer; user-select: none; background: #f4f4f4; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
.ci { color: #777; font-size: 0.85em; }
tr.reference td { color: #555; font-style: italic; }
#per-env th, #normalisers th { cursor: default; }
img { max-width: 100%; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dt { font-weight: 600; } dd { margin: 0; font-family: monospace; }
"""


def board_provenance(board: Path, rows: int, envs: Sequence[str] = (), methods: Sequence[str] = ()) -> dict[str, str]:
    """What identifies the board a page was made from: its file name and sha256, never its
    local path (a published page must not reveal the author's directories), the filters, and the
    commits, data digests and devices its rows record (docs/leaderboard.md#what-made-a-row)."""
    from offline_gitd.leaderboard.identity import made_by_summary
    from offline_gitd.leaderboard.schema import read_rows

    chosen = {"envs": ", ".join(envs), "methods": ", ".join(methods)}
    return {
        "board": board.name,
        **{key: value for key, value in chosen.items() if value},
        "sha256": hashlib.sha256(board.read_bytes()).hexdigest(),
        "rows": str(rows),
        **made_by_summary([row for _, row in read_rows(board)]),
        "package version": f"offline_gitd {__version__}",
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _cell(record: Mapping[str, object], key: str, digits: Mapping[str, int]) -> str:
    value = record[key]
    if value is None:
        return '<td data-value="">n/a</td>'
    if isinstance(value, float):
        d = digits.get(key, 2)  # as leaderboard show prints them (show.summary_digits)
        interval = f' <span class="ci">[{record[key + "_low"]:.{d}f}, {record[key + "_high"]:.{d}f}]</span>'
        return f'<td data-value="{float(value)!r}">{value:.{d}f}{interval}</td>'
    return f'<td data-value="{html.escape(str(value))}">{name_html(str(value))}</td>'


def name_html(text: str) -> str:
    """A name as HTML: escaped, and a long one shortened (the page stays readable) with the whole
    name in its tooltip (docs/leaderboard.md#any-name-renders)."""
    short = shorten(text, NAME_LIMIT)
    if short == text:
        return html.escape(text)
    return f'<span title="{html.escape(text)}">{html.escape(short)}</span>'


def _per_env_table(per_env: Sequence[EnvLine], loaded: Loaded, baseline: str) -> str:
    """The per-env table of ``leaderboard show``: raw final returns with CIs per method, the
    comparison with the baseline, and each env's random and reference returns."""
    from offline_gitd.leaderboard.per_env import basis_text, reference_lines

    refs: dict[str, list[tuple[str, float, str]]] = {}
    for ref in reference_lines(loaded.normalisers):
        refs.setdefault(ref.env, []).append((ref.kind, ref.value, ref.source))
    rows = []
    for env in sorted({line.env for line in per_env}):
        mark = " *" if env in loaded.flagged else ""
        for line in (line for line in per_env if line.env == env):
            episodes = html.escape(basis_text(line))
            ci = f' <span class="ci">[{line.mean.low:.4g}, {line.mean.high:.4g}]</span>'
            if line.method == baseline or line.improvement is None:
                improvement = "&ndash;"
            else:
                i = line.improvement
                improvement = f'{i.value:.2f} <span class="ci">[{i.low:.2f}, {i.high:.2f}]</span>'
            test = "&ndash;" if line.p_value is None else f"{line.p_value:.3f} ({html.escape(str(line.test))})"
            adjusted = "".join(
                "<td>&ndash;</td>" if p is None else f"<td>{p:.3f}</td>" for p in (line.p_holm, line.p_bh)
            )
            rows.append(
                f"<tr><td>{name_html(env)}{mark}</td><td>{name_html(line.method)}</td>"
                f"<td>{line.mean.value:.4g}{ci}</td><td>{improvement}</td><td>{test}</td>{adjusted}"
                f"<td>{line.seeds} &times; {episodes}</td></tr>"
            )
        for kind, value, source in refs.get(env, []):
            rows.append(
                f'<tr class="reference"><td>{name_html(env)}</td><td>{html.escape(kind)}</td>'
                f'<td>{value:.4g}</td><td colspan="5" class="ci">{html.escape(source)}</td></tr>'
            )
    head = "".join(
        f"<th>{html.escape(title)}</th>"
        for title in (
            "Env",
            "Method",
            "Mean final return [95% CI]",
            f"P(> {shorten(baseline, NAME_LIMIT)})",
            "p (permutation)",
            "p Holm",
            "p BH",
            "Seeds × episodes",
        )
    )
    return f"""<table id="per-env">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>"""


def _across_section(lines: Sequence[AcrossLine], baseline: str) -> str:
    """The across-envs test (docs/leaderboard.md#across-envs-test), as ``leaderboard show`` gives it."""
    if not lines:
        return ""
    head = "".join(
        f"<th>{title}</th>"
        for title in ("Method", "Envs", "Runs (baseline's)", "p final", "Holm", "BH", "p AUC", "Holm", "BH")
    )
    rows = []
    for line in lines:
        cells = [name_html(line.method), str(line.envs), f"{line.runs} ({line.baseline_runs})"]
        for test in (line.final, line.auc):
            cells += [f"{p_fine(test.p)} ({html.escape(test.kind)})", p_fine(test.holm), p_fine(test.bh)]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    note = html.escape(shorten(short_words(across_family_note(lines, baseline)), NOTE_LIMIT))
    return f"""<h2>Across envs</h2>
<p>{html.escape(ACROSS_TEST[0].upper() + ACROSS_TEST[1:])}. {note}.</p>
<table id="across-envs">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>"""


def _aggregates_section(loaded: Loaded) -> str:
    """The aggregate under each normaliser (point estimates) and a warning per pair of methods
    whose order changes with it, as ``leaderboard show`` gives them."""
    found = loaded.aggregates
    methods = sorted({method for item in found for method in item.points})
    head = "<th>Method</th>" + "".join(
        f"<th>IQM final ({html.escape(item.kind)}, {len(item.envs)} envs)</th><th>IQM AUC ({html.escape(item.kind)})</th>"
        for item in found
    )
    rows = []
    for method in methods:
        cells = "".join(
            "<td>&ndash;</td><td>&ndash;</td>"
            if (point := item.points.get(method)) is None
            else f"<td>{point[0]:.3f}</td><td>{point[1]:.3f}</td>"
            for item in found
        )
        rows.append(f"<tr><td>{name_html(method)}</td>{cells}</tr>")
    flips = "".join(
        f"<li>warning: {html.escape(shorten(short_words(line), NOTE_LIMIT))}</li>" for line in loaded.order_flips()
    )
    return f"""<h2>The aggregate under each normaliser</h2>
<p>Point estimates over the envs each normaliser can score. The pooled IQM keeps different games
for different methods under different scales, so two methods can change order.</p>
<table id="normalisers">
<thead><tr>{head}</tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
<ul id="order-flips">{flips}</ul>"""


def render_page(
    summaries: Sequence[MethodSummary],
    figures: Mapping[str, bytes],
    baseline: str,
    how: str,
    provenance: Mapping[str, str],
    *,
    loaded: Loaded | None = None,
    per_env: Sequence[EnvLine] = (),
    across: Sequence[AcrossLine] = (),
) -> str:
    """The whole page as one string; the ``across`` test follows the leaderboard where it has lines,
    and with the ``loaded`` board, the normalisation of each env, the flagged envs and the per-env
    table (as in ``leaderboard show``)."""
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in COLUMNS)
    digits = summary_digits(loaded)
    body = "\n".join(
        "<tr>" + "".join(_cell(record, key, digits) for key, _ in COLUMNS) + "</tr>" for record in records(summaries)
    )
    images = "\n".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(content).decode("ascii")}"></figure>'
        for name, content in figures.items()
    )
    facts = "\n".join(f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>" for key, value in provenance.items())
    details = ""
    if loaded is not None:
        notes = "\n".join(f"<li>{html.escape(shorten(short_words(note), NOTE_LIMIT))}</li>" for note in loaded.notes())
        details = f"""<h2>Normalisation per env</h2>
<ul id="normalisation">
{notes}
</ul>
{_aggregates_section(loaded)}
<h2>Per env</h2>
<p>Raw final returns: the mean over seeds with its 95% bootstrap interval (seeds resampled). Against
the baseline: the probability of improvement P(X &gt; Y) with its interval (both methods' seeds
resampled) and the p-value of a two-sided unpaired permutation test of equal means (exact: every
split of the pooled seeds; monte-carlo: 20,000 random splits). Each figure rests on seeds &times;
evaluation episodes per seed (online rows: the training episodes of each run's last logged window). A flagged env (*) is not in the aggregate.</p>
{_per_env_table(per_env, loaded, baseline)}
<p id="adjustment">{html.escape(shorten(short_words(family_note(per_env, baseline)), NOTE_LIMIT))}.</p>"""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>offline_gitd leaderboard</title>
<link rel="icon" href="data:,">
<style>{STYLE}</style>
</head>
<body>
<h1>offline_gitd leaderboard</h1>
<p>Scores are {html.escape(how)}-normalised; baseline <code>{name_html(baseline)}</code>.
IQM over all runs &times; envs with 95% stratified bootstrap intervals in brackets (where an env is
normalised by the baseline, the baseline's runs are resampled too); a run's final
score is its return at its last logged step; AUC is the sum of a run's normalised scores over its
logged steps, IQM'd, relative to the baseline's (the ratio when the baseline's is positive,
1 + difference / |baseline| when it is negative, so that 1 is always the baseline and higher is
always better). Click a column header to sort.</p>
<table id="leaderboard">
<thead><tr>{head}</tr></thead>
<tbody>
{body}
</tbody>
</table>
{_across_section(across, baseline)}
{details}
{images}
<h2>Provenance</h2>
<dl>
{facts}
</dl>
<script>{SORT_SCRIPT}</script>
</body>
</html>
"""


def write_page(page: str, out_dir: Path) -> Path:
    """Write ``index.html`` into ``out_dir`` (created if needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
