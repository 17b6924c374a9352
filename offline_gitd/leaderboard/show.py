"""``leaderboard show``: the board's summary table in text, CSV, JSON or Markdown, then how each
env was normalised, the flagged envs and the per-env table (docs/leaderboard.md#statistics)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from offline_gitd.errors import UsageError
from offline_gitd.leaderboard.board_references import read_references
from offline_gitd.leaderboard.normalise import (
    DEFAULT_NORMALISATION,
    EnvNormaliser,
    auto_kind,
    choose_normalisers,
    coverage,
    filter_rows,
    method_keys,
    normalise,
    resolve_baseline,
    to_frame,
    unstable_normalisers,
)
from offline_gitd.leaderboard.schema import SchemaError, read_rows, row_kind_of, shorten

if TYPE_CHECKING:
    import pandas as pd

    from offline_gitd.leaderboard.across_envs import AcrossLine
    from offline_gitd.leaderboard.per_env import EnvLine, ReferenceLine
    from offline_gitd.leaderboard.sensitivity import Aggregate
    from offline_gitd.leaderboard.stats import Interval, MethodSummary

FORMATS: tuple[str, ...] = ("table", "csv", "json", "markdown")
HEADER: tuple[str, ...] = (
    "method",
    "iqm",
    "iqm_low",
    "iqm_high",
    "auc",
    "auc_low",
    "auc_high",
    "p_improve",
    "p_improve_low",
    "p_improve_high",
    "envs",
    "seeds",
    "runs",
)


@dataclasses.dataclass(frozen=True)
class Loaded:
    """A board read for analysis.

    ``everything``: every chosen row, raw (the per-env table's input); ``scored``: the rows the aggregate uses (the
    flagged envs left out unless kept); ``normalisers``: what each env was normalised by;
    ``flagged``: env -> why its normaliser is within noise (docs/leaderboard.md#flagged-envs).
    """

    everything: pd.DataFrame
    scored: pd.DataFrame
    baseline: str
    how: str
    normalisers: dict[str, EnvNormaliser]
    flagged: dict[str, str]
    kept_flagged: bool
    lacking: tuple[str, ...] = ()  # envs without the chosen reference: not in the aggregate
    aggregates: tuple[Aggregate, ...] = ()  # the aggregate under every normaliser the board has
    pooled: tuple[str, ...] = ()  # what the analysis pooled, by kind of row (schema.row_kind)
    left_out: tuple[str, ...] = ()  # envs left out: the baseline, or a chosen method, never ran there

    def notes(self) -> list[str]:
        """What was pooled and left out, one line per env saying how it was normalised, one per env
        left out for lacking the chosen reference, and one per flagged env."""
        # one kind (the rule, docs/leaderboard.md#one-board-one-kind-of-row) goes without saying;
        # JSON always says it
        lines = [f"pooled: {', '.join(self.pooled)}"] if len(self.pooled) > 1 else []
        lines += [f"left out: {reason}" for reason in self.left_out]
        lines += [f"normalised: {item.describe()}" for item in self.normalisers.values()]
        kind = next(iter(self.normalisers.values())).kind if self.normalisers else self.how
        lines += [
            f"left out: {env} has no {kind} reference; not in the aggregate (one normaliser for every env)"
            for env in self.lacking
        ]
        action = (
            "kept in the aggregate (--keep-flagged-envs)"
            if self.kept_flagged
            else ("left out of the aggregate (--keep-flagged-envs keeps it)")
        )
        lines += [f"flagged: {reason}; {action}" for reason in self.flagged.values()]
        return lines

    def order_flips(self) -> list[str]:
        """One line per pair of methods whose order changes with the normaliser."""
        from offline_gitd.leaderboard.sensitivity import order_flips

        return order_flips(self.aggregates)


def load(
    board: Path,
    baseline: str,
    how: str = DEFAULT_NORMALISATION,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
    keep_flagged: bool = False,
) -> Loaded:
    """Read, filter and normalise a board: the envs and methods matching ``envs`` / ``methods``
    (patterns; empty: all), and the baseline. Method keys are made on the chosen envs, so they
    are as short as those rows allow. References recorded beside the board
    (:mod:`~offline_gitd.leaderboard.board_references`) are used where ``how`` asks for them."""
    rows = [row for _, row in read_rows(board)]
    if not rows:
        raise SchemaError(f"{board}: the board has no rows yet")
    frame = filter_rows(to_frame(rows), envs, (), None).reset_index(drop=True)
    frame["method"] = method_keys(frame)
    warn_pooling(frame)
    key = resolve_baseline(frame, baseline)
    frame = filter_rows(frame, (), methods, key).reset_index(drop=True)
    frame, left_out = _envs_of_the_baseline(frame, key)
    common, uneven = _envs_every_method_ran(frame)
    left_out += uneven
    pooled = _pooled(frame)
    references = read_references(board)
    kind = auto_kind(frame, references) if how == "auto" else how
    covered = coverage(common, references).get(kind, [])
    if not covered:
        raise UsageError(f"no {how} reference score for any env: {', '.join(sorted(set(common['env'])))}")
    lacking = tuple(env for env in sorted(set(common["env"])) if env not in covered)
    aggregated = common[common["env"].isin(covered)].reset_index(drop=True)
    normalisers = choose_normalisers(aggregated, kind, references)
    flagged = unstable_normalisers(aggregated, normalisers, key)
    from offline_gitd.leaderboard.sensitivity import aggregates

    found = tuple(aggregates(common, key, references, keep_flagged))
    if flagged and not keep_flagged:
        kept = aggregated[~aggregated["env"].isin(flagged)].reset_index(drop=True)
        if kept.empty:
            raise UsageError(
                "every env is flagged (its normaliser is within noise): "
                + "; ".join(flagged.values())
                + ". Pass --keep-flagged-envs, or --normalise with a reference"
            )
        scored = normalise(kept, how, key, normalisers={e: n for e, n in normalisers.items() if e not in flagged})
    else:
        scored = normalise(aggregated, how, key, normalisers=normalisers)
    return Loaded(frame, scored, key, how, normalisers, flagged, keep_flagged, lacking, found, pooled, left_out)


def warn_pooling(frame: pd.DataFrame) -> None:
    """A line on stderr for each config the board pools over two recordings or whose seeds come
    from two runs (:mod:`~offline_gitd.leaderboard.identity`), whatever the output format."""
    from offline_gitd.leaderboard.identity import pooling_warnings

    for line in pooling_warnings(frame):
        print(f"offline_gitd: warning: {safe_note('text', line)}", file=sys.stderr, flush=True)


def _envs_of_the_baseline(frame: pd.DataFrame, baseline: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The rows of the envs the baseline ran in, and a line per env left out: every comparison is
    with the baseline, so an env it never ran in (an online run's env on an offline board pooled
    with ``submit --allow-mixed``) has nothing to be compared against (docs/leaderboard.md#one-board-one-kind-of-row)."""
    ran = set(frame.loc[frame["method"] == baseline, "env"])
    missing = sorted(set(frame["env"]) - ran)
    if not missing:
        return frame, ()
    reasons = []
    for env in missing:
        methods = sorted(set(frame.loc[frame["env"] == env, "method"]))
        reasons.append(
            f"env {shorten(env)} ({len(methods)} method(s): {', '.join(shorten(m) for m in methods[:3])}"
            f"{', ...' if len(methods) > 3 else ''}): the baseline {shorten(baseline)} has no runs there"
        )
    return frame[frame["env"].isin(ran)].reset_index(drop=True), tuple(reasons)


def _envs_every_method_ran(frame: pd.DataFrame) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The rows of the envs every chosen method ran in, and a line per env left out of the
    aggregate. An aggregate compares methods over one set of envs (IQM over runs x envs, and the
    AUC relative to the baseline's over the same envs); a method missing from an env (a grid
    still running, say) would otherwise be set against the baseline's aggregate over other games.
    The per-env tables keep every env (docs/leaderboard.md#one-set-of-envs-per-aggregate)."""
    methods = sorted(set(frame["method"]))
    ran = {method: set(frame.loc[frame["method"] == method, "env"]) for method in methods}
    common = set.intersection(*ran.values())
    uneven = sorted(set(frame["env"]) - common)
    if not common:
        raise UsageError(
            "no env has runs of every chosen method ("
            + "; ".join(f"{shorten(m)}: {', '.join(shorten(e) for e in sorted(ran[m]))}" for m in methods)
            + "); choose methods with --method or envs with --env"
        )
    reasons = tuple(
        f"env {shorten(env)} from the aggregate (per-env tables keep it): "
        f"{', '.join(shorten(m) for m in methods if env not in ran[m])} has no runs there"
        for env in uneven
    )
    return frame[frame["env"].isin(common)].reset_index(drop=True), reasons


def _pooled(frame: pd.DataFrame) -> tuple[str, ...]:
    """What the rows are, by kind (protocol, suite, major version: one board holds one kind
    unless submitted with ``--allow-mixed``), e.g. ``200 offline minari rows of version 0.2.x``."""
    from collections import Counter

    counts = Counter(
        row_kind_of(algorithm, suite, version)
        for algorithm, suite, version in zip(frame["algorithm"], frame["suite"], frame["package_version"])
    )
    return tuple(
        f"{count} {protocol} {shorten(suite)} row(s) of version {shorten(major)}.x"
        for (protocol, suite, major), count in sorted(counts.items())
    )


def load_scored(
    board: Path,
    baseline: str,
    how: str = DEFAULT_NORMALISATION,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
    keep_flagged: bool = False,
) -> tuple[pd.DataFrame, str]:
    """The rows the aggregate uses, normalised, and the resolved baseline method key (:func:`load`)."""
    loaded = load(board, baseline, how, envs, methods, keep_flagged)
    return loaded.scored, loaded.baseline


def records(summaries: Sequence[MethodSummary]) -> list[dict[str, object]]:
    """Flat records in :data:`HEADER` order; a missing probability of improvement is ``None``."""
    from offline_gitd.leaderboard.stats import Interval  # numpy: not at --help time

    out = []
    for item in summaries:
        improvement = item.improvement or Interval(float("nan"), float("nan"), float("nan"))
        values = [
            item.method,
            item.iqm.value,
            item.iqm.low,
            item.iqm.high,
            item.auc.value,
            item.auc.low,
            item.auc.high,
            improvement.value,
            improvement.low,
            improvement.high,
            item.n_envs,
            item.n_seeds,
            item.n_runs,
        ]
        out.append(
            {
                name: (None if isinstance(value, float) and value != value else value)
                for name, value in zip(HEADER, values)
            }
        )
    return out


# What the per-env AUC is (docs/leaderboard.md#per-env-table).
AUC_MEANING = "the mean raw return over a run's logged steps (its learning curve's area divided by its length)"

# A spreadsheet runs a cell that starts with one of these as a formula (OWASP "CSV injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula gets a leading ``'`` (shown as text,
    the formula is not evaluated); numbers stay numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


# Longest name a table prints whole (docs/leaderboard.md#any-name-renders); CSV and JSON, the data,
# keep every name whole.
NAME_LIMIT = 80
NOTE_LIMIT = 600


def markdown_safe(text: str) -> str:
    """One table cell: ``|`` escaped and line breaks as spaces, so a name cannot add columns or
    rows, ``$`` escaped, so a name cannot start a formula where Markdown renders them, and ``&``, ``<``
    and ``>`` as HTML entities, so a name cannot add markup (Markdown passes HTML through: a
    ``<script>`` tag would run in a rendered page)."""
    cell = " ".join(text.replace("\\", "\\\\").replace("|", "\\|").replace("$", "\\$").splitlines())
    return text_safe(cell).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def text_safe(text: str) -> str:
    """One line of the text table: control characters shown escaped rather than obeyed."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


# Decimals of the summary's estimates and intervals: at the default replications an endpoint's
# Monte-Carlo standard error is about a tenth of the last digit (docs/leaderboard.md#monte-carlo-error);
# scores in percent (D4RL, Minari) are 100 times larger and get two fewer.
SUMMARY_DIGITS = 2


def short_words(text: str, limit: int = NAME_LIMIT) -> str:
    """``text`` with every run of more than ``limit`` non-blank characters (a long name inside a
    sentence) cut in its middle, its length said (:func:`~offline_gitd.leaderboard.schema.shorten`)."""
    return re.sub(rf"\S{{{limit + 1},}}", lambda match: shorten(match.group(0), limit), text)


def safe_for(fmt: str, text: str, limit: int = NAME_LIMIT) -> str:
    """A cell (a name, a number) as the table of ``fmt`` (text or markdown) prints it: on one line,
    at most about ``limit`` characters (a longer one cut in its middle, its length said), escaped."""
    if fmt == "markdown":
        return markdown_safe(shorten(" ".join(text.splitlines()), limit))
    return shorten(text_safe(text), limit)


def safe_note(fmt: str, note: str) -> str:
    """A note (a sentence naming envs and methods) as ``fmt`` prints it: each long name in it
    shortened, and the whole line at most about :data:`NOTE_LIMIT` characters."""
    return safe_for(fmt, short_words(note), NOTE_LIMIT)


def summary_digits(loaded: Loaded | None) -> dict[str, int]:
    """Decimals per summary column: two, and none for IQM final in percent."""
    percent = loaded is not None and any(item.scale != 1 for item in loaded.normalisers.values())
    return {"iqm": 0 if percent else SUMMARY_DIGITS, "auc": SUMMARY_DIGITS, "p_improve": SUMMARY_DIGITS}


def _cell(value: object, digits: int = SUMMARY_DIGITS) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _with_ci(record: dict[str, object], name: str, digits: int = SUMMARY_DIGITS) -> str:
    if record[name] is None:
        return "n/a"
    cells = (_cell(record[key], digits) for key in (name, name + "_low", name + "_high"))
    return "{} [{}, {}]".format(*cells)


def text_table(titles: Sequence[str], lines: Sequence[Sequence[str]], fmt: str) -> str:
    """Rows of cells as an aligned text table or a Markdown table (names made safe for each)."""
    if fmt == "markdown":
        out = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
        out += ["| " + " | ".join(safe_for(fmt, text) for text in line) + " |" for line in lines]
        return "\n".join(out)
    safe = [tuple(safe_for(fmt, text) for text in line) for line in lines]
    widths = [max(len(text) for text in column) for column in zip(titles, *safe)]
    return "\n".join(
        "  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() for line in [titles, *safe]
    )


def _interval_text(interval: Interval | None, digits: int = 3) -> str:
    if interval is None:
        return "n/a"
    return f"{interval.value:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _number(value: float) -> str:
    """A return with 4 significant digits, as the per-env table prints them."""
    return f"{value:.4g}"


def _p_text(p: float | None) -> str:
    return "-" if p is None else f"{p:.3f}"


def family_note(per_env: Sequence[EnvLine], baseline: str) -> str:
    """What the adjusted p values are adjusted over (docs/leaderboard.md#per-env-table)."""
    from offline_gitd.leaderboard.per_env import family_size

    return (
        f"Holm and Benjamini-Hochberg (BH) adjust over the {family_size(per_env)} tests of this table "
        f"(every method against {baseline} in every env shown); a difference survives a correction "
        "where its adjusted p is below the level"
    )


def per_env_records(lines: Sequence[EnvLine], references: Sequence[ReferenceLine]) -> list[dict[str, object]]:
    """The per-env table as flat records (JSON): one per method and env, then the references."""
    out: list[dict[str, object]] = []
    for line in lines:
        improvement = line.improvement
        out.append(
            {
                "env": line.env,
                "row": line.method,
                "seeds": line.seeds,
                "episodes_per_seed": line.episodes,
                "final_window_steps": line.window,
                "mean_final_return": line.mean.value,
                "mean_final_return_low": line.mean.low,
                "mean_final_return_high": line.mean.high,
                "p_improve": None if improvement is None else improvement.value,
                "p_improve_low": None if improvement is None else improvement.low,
                "p_improve_high": None if improvement is None else improvement.high,
                "p_value": line.p_value,
                "p_holm": line.p_holm,
                "p_bh": line.p_bh,
                "test": line.test,
                "flagged": line.flagged,
            }
        )
    for ref in references:
        out.append({"env": ref.env, "row": ref.kind, "mean_final_return": ref.value, "source": ref.source})
    return out


# What the across-envs table tests (docs/leaderboard.md#across-envs-test).
ACROSS_TEST = (
    "each method against the baseline over the envs of the aggregate both ran, one two-sided stratified "
    "permutation test per value (runs relabelled within each env; statistic: the sum over envs of the "
    "difference of means over the env's pooled standard deviation)"
)


def across_family_note(lines: Sequence[AcrossLine], baseline: str) -> str:
    """What the across-envs table's adjusted p values are adjusted over."""
    tests = sum((line.final.holm is not None) + (line.auc.holm is not None) for line in lines)
    return (
        f"Holm and Benjamini-Hochberg (BH) adjust over the {tests} tests of this table (final return and AUC "
        f"of every method against {baseline}); a difference survives a correction where its adjusted p is "
        "below the level"
    )


def p_fine(p: float | None) -> str:
    """A p value to three decimals, or to two significant digits below 0.001 (a Monte-Carlo p
    reaches 1 / 20,001)."""
    if p is None or p != p:
        return "-"
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def across_records(lines: Sequence[AcrossLine]) -> list[dict[str, object]]:
    """The across-envs table as flat records (JSON)."""
    out: list[dict[str, object]] = []
    for line in lines:
        record: dict[str, object] = {
            "method": line.method,
            "envs": line.envs,
            "runs": line.runs,
            "baseline_runs": line.baseline_runs,
        }
        for value, test in (("final", line.final), ("auc", line.auc)):
            record |= {
                f"p_{value}": None if test.p != test.p else test.p,
                f"p_{value}_test": test.kind,
                f"p_{value}_holm": test.holm,
                f"p_{value}_bh": test.bh,
            }
        out.append(record)
    return out


def render_across(lines: Sequence[AcrossLine], fmt: str) -> str:
    """The across-envs table (text or Markdown): per method its envs and runs, then the final
    return's and the AUC's test, each raw and adjusted."""
    titles = ("method", "envs", "runs (baseline's)", "p final", "Holm", "BH", "p AUC", "Holm", "BH")
    rows = []
    for line in lines:
        cells = [line.method, str(line.envs), f"{line.runs} ({line.baseline_runs})"]
        for test in (line.final, line.auc):
            cells += [f"{p_fine(test.p)} ({test.kind})", p_fine(test.holm), p_fine(test.bh)]
        rows.append(tuple(cells))
    return text_table(titles, rows, fmt)


def render_per_env(
    lines: Sequence[EnvLine], references: Sequence[ReferenceLine], baseline: str, fmt: str, value: str = "final"
) -> str:
    """The per-env table (text or Markdown): per env its methods, then its random and reference
    returns; a flagged env is marked with ``*``. ``value="auc"``: the AUC table
    (:func:`~offline_gitd.leaderboard.per_env.run_values`), its last column the logged steps."""
    from offline_gitd.leaderboard.per_env import basis_text

    auc = value == "auc"
    titles = (
        "env",
        "method",
        "mean AUC [95% CI]" if auc else "mean final return [95% CI]",
        f"P(> {safe_for(fmt, baseline)}) [95% CI]",
        "p (permutation)",
        "p Holm",
        "p BH",
        "seeds x logged steps" if auc else "seeds x episodes",
    )
    refs: dict[str, list[ReferenceLine]] = {}
    for ref in references:
        refs.setdefault(ref.env, []).append(ref)
    rows: list[tuple[str, ...]] = []
    envs = sorted({line.env for line in lines})
    for env in envs:
        for line in (line for line in lines if line.env == env):
            episodes = basis_text(line)
            mean = f"{_number(line.mean.value)} [{_number(line.mean.low)}, {_number(line.mean.high)}]"
            test = "-" if line.p_value is None else f"{line.p_value:.3f} ({line.test})"
            improvement = "-" if line.method == baseline else _interval_text(line.improvement, 2)
            rows.append(
                (
                    env + (" *" if line.flagged else ""),
                    line.method,
                    mean,
                    improvement,
                    test,
                    _p_text(line.p_holm),
                    _p_text(line.p_bh),
                    f"{line.seeds} x {episodes}",
                )
            )
        for ref in refs.get(env, []):
            rows.append((env, ref.kind, _number(ref.value), "", "", "", "", ""))
    return text_table(titles, rows, fmt)


def _safe(text: str, fmt: str) -> str:
    return markdown_safe(text) if fmt == "markdown" else text_safe(text)


def aggregate_records(found: Sequence[Aggregate]) -> list[dict[str, object]]:
    """The aggregate under each normaliser as JSON records."""
    return [
        {
            "normaliser": item.kind,
            "envs": list(item.envs),
            "left_out": dict(item.left_out),
            "methods": {method: {"iqm": iqm, "auc": auc} for method, (iqm, auc) in item.points.items()},
        }
        for item in found
    ]


def render_aggregates(found: Sequence[Aggregate], fmt: str) -> str:
    """One row per method, two columns (IQM final, IQM AUC rel. baseline) per normaliser."""
    methods = sorted({method for item in found for method in item.points})
    titles = ["method"]
    for item in found:
        where = f"{item.kind}, {len(item.envs)} env{'s' if len(item.envs) != 1 else ''}"
        titles += [f"IQM final ({where})", f"IQM AUC ({item.kind})"]
    rows = []
    for method in methods:
        cells = [method]
        for item in found:
            point = item.points.get(method)
            cells += ["-", "-"] if point is None else [f"{point[0]:.3f}", f"{point[1]:.3f}"]
        rows.append(tuple(cells))
    return text_table(titles, rows, fmt)


def render(
    summaries: Sequence[MethodSummary],
    fmt: str,
    baseline: str,
    how: str,
    loaded: Loaded | None = None,
    per_env: Sequence[EnvLine] = (),
    per_env_auc: Sequence[EnvLine] = (),
    across: Sequence[AcrossLine] = (),
) -> str:
    """The summary as text in ``fmt``; table and markdown pair each estimate with its CI and, given
    the ``loaded`` board and its ``per_env`` lines, follow it with the test of each method over
    the aggregate's envs where ``across`` has lines, the normalisation of each env, the flagged
    envs and the per-env table, and the per-env AUC table where ``per_env_auc`` has lines
    (``show --per-env-auc``). CSV is the summary alone (one table)."""
    from offline_gitd.leaderboard.per_env import reference_lines

    rows = records(summaries)
    references = reference_lines(loaded.normalisers) if loaded is not None else []
    if fmt == "json":
        report: dict[str, object] = {"baseline": baseline, "normalisation": how, "ci": 0.95, "methods": rows}
        if loaded is not None:
            report["envs"] = {
                env: {
                    "normaliser": item.kind,
                    "scale": item.scale,
                    "low": None if item.reference is None else item.reference.low,
                    "high": None if item.reference is None else item.reference.high,
                    "source": None if item.reference is None else item.reference.source,
                    "flagged": loaded.flagged.get(env),
                    "in_aggregate": env not in loaded.flagged or loaded.kept_flagged,
                }
                for env, item in loaded.normalisers.items()
            }
            report["pooled"] = list(loaded.pooled)
            report["left_out"] = list(loaded.left_out)
            report["per_env"] = per_env_records(per_env, references)
            report["per_env_test"] = "two-sided unpaired permutation test of equal mean final returns"
            report["per_env_adjustment"] = family_note(per_env, baseline)
            if per_env_auc:
                report["per_env_auc"] = per_env_records(per_env_auc, [])
                report["per_env_auc_value"] = AUC_MEANING
                report["per_env_auc_adjustment"] = family_note(per_env_auc, baseline)
            report["no_reference"] = list(loaded.lacking)  # envs without the chosen reference: not aggregated
            report["normalisers"] = aggregate_records(loaded.aggregates)
            report["order_flips"] = loaded.order_flips()
        if across:
            report["across_envs"] = across_records(across)
            report["across_envs_test"] = ACROSS_TEST
        return json.dumps(report, indent=2)
    if fmt == "csv":
        # Each record written with "\r\n" and its end turned back into "\n": the csv module quotes
        # a cell only for its line terminator's characters, so with "\n" alone a carriage return
        # in a name went out unquoted and split its row (as leaderboard.submit.encode_rows).
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        lines = []
        for record in [list(HEADER), *([csv_safe(row[name]) for name in HEADER] for row in rows)]:
            buffer.seek(0)
            buffer.truncate()
            writer.writerow(record)
            lines.append(buffer.getvalue().removesuffix("\r\n"))
        return "\n".join(lines)
    titles = (
        "method",
        f"IQM final ({how})",
        "IQM AUC rel. baseline",
        f"P(> {safe_for(fmt, baseline)})",
        "envs",
        "seeds",
    )
    digits = summary_digits(loaded)
    lines = [
        (
            str(r["method"]),
            _with_ci(r, "iqm", digits["iqm"]),
            _with_ci(r, "auc", digits["auc"]),
            _with_ci(r, "p_improve", digits["p_improve"]),
            str(r["envs"]),
            str(r["seeds"]),
        )
        for r in rows
    ]
    out = text_table(titles, lines, fmt)
    if loaded is None:
        return out
    bullet = "- " if fmt == "markdown" else "  "
    notes = "\n".join(bullet + safe_note(fmt, note) for note in loaded.notes())
    worst = max((s.undefined for s in summaries), default=0.0)
    if worst > 0:
        notes += (
            f"\n{bullet}up to {worst:.1%} of bootstrap replications drew a baseline whose mean final return "
            "is exactly 0 in an env it normalises; those replications were left out of the intervals"
        )
    heading = "**{}**" if fmt == "markdown" else "{}"
    flips = "".join(f"\n{bullet}warning: {_safe(line, fmt)}" for line in loaded.order_flips())
    return "\n\n".join(
        [out]
        + (
            [
                heading.format(f"Across envs: {ACROSS_TEST}. {across_family_note(across, baseline)}")
                + "\n"
                + render_across(across, fmt)
            ]
            if across
            else []
        )
        + [
            heading.format("Normalisation per env") + "\n" + notes,
            heading.format(
                "The aggregate under each normaliser (point estimates over the envs each can score; "
                "docs/leaderboard.md#one-normaliser-per-aggregate)"
            )
            + "\n"
            + render_aggregates(loaded.aggregates, fmt)
            + ("\n" if fmt == "markdown" and flips else "")
            + flips,
            heading.format(
                "Per env: raw final returns, mean over seeds [95% bootstrap CI]; against the baseline, "
                "P(improvement) and a two-sided unpaired permutation test of equal means"
                + (" (* flagged: not in the aggregate)" if loaded.flagged and not loaded.kept_flagged else "")
                + ". "
                + family_note(per_env, baseline)
            )
            + "\n"
            + render_per_env(per_env, references, baseline, fmt),
        ]
        + (
            [
                heading.format(
                    f"Per env: AUC, {AUC_MEANING}, mean over seeds [95% bootstrap CI]; against the baseline, "
                    "P(improvement) and a two-sided unpaired permutation test of equal means. "
                    + family_note(per_env_auc, baseline)
                )
                + "\n"
                + render_per_env(per_env_auc, [], baseline, fmt, "auc")
            ]
            if per_env_auc
            else []
        )
    )


def show(
    board: Path,
    baseline: str,
    how: str,
    fmt: str,
    reps: int,
    seed: int,
    envs: Sequence[str] = (),
    methods: Sequence[str] = (),
    keep_flagged: bool = False,
    auc_per_env: bool = False,
) -> str:
    """Read, normalise and summarise a board (its chosen envs and methods); the rendered text.
    ``auc_per_env``: the per-env AUC table too (an online board's second question: how fast)."""
    loaded = load(board, baseline, how, envs, methods, keep_flagged)
    from offline_gitd.leaderboard.across_envs import across_env_lines
    from offline_gitd.leaderboard.per_env import per_env_lines
    from offline_gitd.leaderboard.stats import summarise

    summaries = summarise(loaded.scored, loaded.baseline, reps, seed)
    per_env = per_env_lines(loaded.everything, loaded.baseline, reps, seed, loaded.flagged)
    per_env_auc = (
        per_env_lines(loaded.everything, loaded.baseline, reps, seed, loaded.flagged, value="auc")
        if auc_per_env
        else []
    )
    across = across_env_lines(loaded.scored, loaded.baseline, seed)
    return render(summaries, fmt, loaded.baseline, how, loaded, per_env, per_env_auc, across)
