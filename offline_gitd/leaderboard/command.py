"""``offline_gitd leaderboard submit|show|plot|html|compare`` (docs/leaderboard.md).

Handlers import pandas, rliable and matplotlib lazily so ``offline_gitd --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from offline_gitd.leaderboard.normalise import DEFAULT_NORMALISATION, NORMALISATIONS
from offline_gitd.leaderboard.show import FORMATS
from offline_gitd.output_paths import require_dir_target, require_file_target

if TYPE_CHECKING:
    from offline_gitd.leaderboard.report import Analysis


DEFAULT_BASELINE = "cql:td"
# Bootstrap replications of the tables (show, html): enough that an aggregate's interval endpoint
# moves by well under its printed 0.01 between seeds; the per-env means' intervals are exact
# whatever this is (docs/leaderboard.md#monte-carlo-error). Figures draw their bands with fewer:
# a band's edge moving by a thousandth is not visible.
DEFAULT_REPS = 10_000
PLOT_REPS = 2000
# Bootstrap replications: rliable's own default is 50,000; each one resamples every run of every
# method, so 10**9 would take hours for no visible change in the intervals.
MAX_REPS = 100_000


def _reps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if not 1 <= value <= MAX_REPS:
        raise argparse.ArgumentTypeError(f"expected an integer in [1, {MAX_REPS}], got {value}")
    return value


def _seed(text: str) -> int:
    """numpy's generators take seeds in [0, 2**32)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {value}")
    return value


def _dpi(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 10 <= value <= 2400:
        raise argparse.ArgumentTypeError(f"expected a resolution in [10, 2400] dots per inch, got {value}")
    return value


def _method_list(text: str) -> list[str]:
    """``--methods`` names split on commas. A method key holds commas itself (``cql:gitd:K=5,beta=1``):
    a piece without ``:`` continues the previous name, since every name starts ``algorithm:critic``."""
    names: list[str] = []
    for piece in (piece.strip() for piece in text.split(",")):
        if not piece:
            continue
        if ":" not in piece and names:
            names[-1] += "," + piece
        else:
            names.append(piece)
    return names


def _add_analysis_options(parser: argparse.ArgumentParser, reps: int = DEFAULT_REPS) -> None:
    """Options shared by show, plot and html: what to normalise by and how to bootstrap."""
    parser.add_argument("--board", type=Path, required=True, help="the board CSV")
    parser.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        help="baseline method, algorithm:critic or a full method key (default %(default)s)",
    )
    parser.add_argument(
        "--normalise",
        choices=NORMALISATIONS,
        default=DEFAULT_NORMALISATION,
        help="auto: one normaliser for every env, the first reference kind that every env has (the "
        "dataset's DQN-replay score, then its own ref_min/ref_max_score, then D4RL's or Atari's human "
        "table), else the baseline; a named kind leaves out the envs that lack it, with a note; show "
        "also gives the aggregate under every other normaliser the board has and warns where two "
        "methods change order. baseline: relative to the baseline's mean final score b per env, x / b for "
        "b > 0 as in the paper and 1 + (x - b) / |b| for b < 0; minari: 100 (x - ref_min_score) / "
        "(ref_max_score - ref_min_score) from the datasets' metadata; dqn-replay: (x - random) / "
        "(DQN replay - random); human: Atari (x - random) / (human - random); d4rl: 100 (x - min) / "
        "(max - min) (default %(default)s)",
    )
    parser.add_argument(
        "--keep-flagged-envs",
        action="store_true",
        help="keep in the aggregate the envs whose baseline normaliser is within noise of zero or of "
        "random (default: flagged in one line each and left out)",
    )
    parser.add_argument("--reps", type=_reps, default=reps, help="bootstrap replications (default %(default)s)")
    parser.add_argument(
        "--env",
        dest="envs",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only envs matching PATTERN (shell-style, e.g. 'offline_gitd/*'); repeatable (default: all)",
    )
    parser.add_argument(
        "--method",
        dest="methods",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only methods matching PATTERN (a method key or algorithm:critic, shell-style, e.g. 'cql:*'); "
        "repeatable; the baseline is always kept (default: all)",
    )
    parser.add_argument(
        "--seed", type=_seed, default=0, help="seed of the bootstrap, for reproducible intervals (default 0)"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``leaderboard`` and its subcommands."""
    parser = subparsers.add_parser(
        "leaderboard",
        help="submit run results to a board; summarise, plot and publish it",
        description="Result boards: IQM of normalised final scores, normalised AUC and "
        "probability of improvement with 95% stratified bootstrap CIs (rliable). A run's final "
        "score is its return at its last logged step.",
    )
    commands = parser.add_subparsers(dest="leaderboard_command", metavar="SUBCOMMAND", required=True)

    submit = commands.add_parser(
        "submit",
        help="validate RUN_DIR/results.csv and append to a board",
        description="Validate each RUN_DIR/results.csv against the board's schema (and the known envs of its "
        "suite, unless --allow-new-env) and append its rows to --board, created if absent. Rows already on the "
        "board are left out (submitting a run again changes nothing); the references of the dataset each run "
        "trained on are kept beside the board (BOARD.references.csv).",
        epilog="examples:\n"
        "  offline_gitd leaderboard submit runs/ll-gitd runs/ll-td --board runs/board.csv --allow-new-env\n"
        "  offline_gitd leaderboard submit runs/minatar/runs/* --board leaderboards/minatar_offline/board.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    submit.add_argument(
        "--board", type=Path, required=True, help="board CSV (the file is created if absent; its directory must exist)"
    )
    submit.add_argument(
        "--allow-new-env", action="store_true", help="accept envs not in the registry of known envs of their suite"
    )
    submit.add_argument(
        "--allow-mixed",
        action="store_true",
        help="pool rows of another protocol (online vs offline), suite or major version than the board's "
        "(refused by default: a board compares like with like)",
    )
    submit.set_defaults(func=run_submit)

    show = commands.add_parser(
        "show",
        help="print the summary table",
        description="Print the board's summary per method (IQM of final scores normalised per env by --normalise, "
        "IQM AUC relative to the baseline's, probability of improvement over the baseline, with 95% "
        "stratified-bootstrap intervals that resample the baseline too), which reference each env was "
        "normalised by, and the per-env table of raw final returns beside the random and reference returns.",
        epilog="examples:\n"
        "  offline_gitd leaderboard show --board leaderboards/example_demo.csv --baseline cql:td\n"
        "  offline_gitd leaderboard show --board leaderboards/mujoco_offline/board.csv --baseline bc:none "
        "--normalise minari --format markdown",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_analysis_options(show)
    show.add_argument("--format", choices=FORMATS, default="table", help="output format (default %(default)s)")
    show.add_argument(
        "--per-env-auc",
        action="store_true",
        help="also the per-env AUC table: each run's mean raw return over its logged steps, mean over seeds with "
        "its 95%% CI, tested against the baseline with Holm and BH adjustments (learning speed, as online boards "
        "report it)",
    )
    show.set_defaults(func=run_show)

    plot = commands.add_parser(
        "plot",
        help="learning curves and AUC, per-env panels, median/IQM/mean/optimality gap, performance profiles",
        description="Draw the board's figures into --out: IQM learning curves with 95% bands and normalised AUC "
        "(aggregate), per-env panels, median/IQM/mean/optimality gap with CIs (intervals), performance "
        "profiles (profile), where the board's folder has behaviour/ curves each behaviour agent's learning "
        "curve beside Young & Tian's DQN (behaviour), and the numbers behind them (figure_data.json).",
        epilog="examples:\n"
        "  offline_gitd leaderboard plot --board runs/board.csv --baseline cql:td --out runs/figures\n"
        "  offline_gitd leaderboard plot --board leaderboards/mujoco_offline/board.csv --baseline bc:none "
        "--format pdf --out figures",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_analysis_options(plot, PLOT_REPS)
    plot.add_argument("--out", type=Path, required=True, help="directory for the figures")
    plot.add_argument("--format", choices=("png", "pdf", "svg"), default="png", help="file format (default png)")
    plot.add_argument("--dpi", type=_dpi, default=150, help="resolution of png figures, 10-2400 (default 150)")
    plot.add_argument(
        "--methods",
        dest="draw_methods",
        type=_method_list,
        default=None,
        metavar="M1,M2,...",
        help="methods to draw, in this order (full keys or algorithm:critic; --method filters the table "
        "as well); default all",
    )
    plot.add_argument(
        "--per-env",
        choices=("score", "return"),
        default="score",
        help="per-env panels in normalised scores or raw returns; in raw returns each panel also draws the "
        "env's uniform-random return (the board's references file), Young & Tian's DQN (MinAtar) and the "
        "behaviour agent's curve where there is one (default score)",
    )
    plot.add_argument(
        "--behaviour",
        type=Path,
        default=None,
        metavar="DIR",
        help="behaviour agents' curves (DATASET-ID.csv, as a sweep keeps them) to draw, e.g. another board's "
        "behaviour/ folder for an online board (default: the board's own behaviour/ folder, if any)",
    )
    plot.set_defaults(func=run_plot)

    page = commands.add_parser(
        "html",
        help="a self-contained static page (index.html)",
        description="Write one self-contained static page, --out/index.html: the summary table (sortable), the "
        "per-env table, the figures inlined as PNG and the board's provenance, to mail or serve from any "
        "static host.",
        epilog="example:\n  offline_gitd leaderboard html --board leaderboards/example_demo.csv --baseline cql:td --out site",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_analysis_options(page)
    page.add_argument("--out", type=Path, required=True, help="directory for index.html")
    page.set_defaults(func=run_html)

    side = commands.add_parser(
        "compare",
        help="two boards' samples side by side (e.g. the same configs on CPU and GPU), never pooled",
        description="Set two boards side by side per env and config both hold (same config hash): each board's "
        "mean final return with its 95%% bootstrap interval over its own seeds, and its own two-sided permutation "
        "test against its own baseline. The boards are not pooled: same-numbered seeds on two devices share their "
        "initialisation and batches, so they are not independent samples.",
        epilog="example:\n  offline_gitd leaderboard compare --board leaderboards/minatar_offline/board.csv "
        "--label CPU --board leaderboards/minatar_offline/gpu/board.csv --label H100 --format markdown",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    side.add_argument(
        "--board", dest="boards", type=Path, action="append", required=True, help="a board CSV; give it twice"
    )
    side.add_argument(
        "--label", dest="labels", action="append", default=[], help="a name per board, in order (default: the paths)"
    )
    side.add_argument(
        "--baseline",
        default=DEFAULT_BASELINE,
        help="each board's p values are against its own baseline (default %(default)s)",
    )
    side.add_argument("--reps", type=_reps, default=DEFAULT_REPS, help="bootstrap replications (default %(default)s)")
    side.add_argument("--seed", type=_seed, default=0, help="seed of the bootstrap and of the tests (default 0)")
    side.add_argument("--env", dest="envs", action="append", default=[], metavar="PATTERN", help="only these envs")
    side.add_argument(
        "--method", dest="methods", action="append", default=[], metavar="PATTERN", help="only these methods"
    )
    side.add_argument("--format", choices=("table", "markdown"), default="table", help="output format")
    side.add_argument(
        "--adjusted",
        action="store_true",
        help="add Holm's and Benjamini-Hochberg's adjustment of each board's p values (family: every test of "
        "that board's table; pick it with --method)",
    )
    side.add_argument(
        "--between",
        action="store_true",
        help="instead, test each config's two samples against each other: a permutation test of board A's "
        "runs against board B's, of the final return and of the AUC, beside the random and data references",
    )
    side.set_defaults(func=run_compare)

    contrast = commands.add_parser(
        "contrast",
        help="how a method's gain over its baseline changes between two settings (e.g. replay ratios)",
        description="Per env and over the envs (geometric mean), a method's gain over its baseline at each of two "
        "settings, the ratio of their mean values over seeds, and the contrast: the first setting's gain over the "
        "second's, above 1 where the method gains more in the first. 95%% percentile bootstrap intervals resample "
        "every cell's runs within each env (docs/leaderboard.md#gain-contrast).",
        epilog="example (the replay-ratio claim on the MinAtar online board):\n"
        "  offline_gitd leaderboard contrast --board leaderboards/minatar_online/board.csv \\\n"
        "      --gain 'dqn:gitd [loop=compiled]' 'dqn:td [loop=compiled]' \\\n"
        "      --gain 'dqn:gitd [loop=compiled utd=0.25]' 'dqn:td [loop=compiled utd=0.25]'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    contrast.add_argument("--board", type=Path, required=True, help="board CSV")
    contrast.add_argument(
        "--gain",
        dest="gains",
        nargs=2,
        action="append",
        required=True,
        metavar=("METHOD", "BASELINE"),
        help="a method and its baseline at one setting, as show's --method and --baseline name them; give it "
        "twice: the first setting, then the second",
    )
    contrast.add_argument("--env", dest="envs", action="append", default=[], metavar="PATTERN", help="only these envs")
    contrast.add_argument(
        "--value",
        choices=("auc", "final"),
        default="auc",
        help="what a gain compares: the AUC (a run's mean raw return over its logged steps) or the final return "
        "(default %(default)s)",
    )
    contrast.add_argument(
        "--reps", type=_reps, default=DEFAULT_REPS, help="bootstrap replications (default %(default)s)"
    )
    contrast.add_argument("--seed", type=_seed, default=0, help="seed of the bootstrap (default 0)")
    contrast.add_argument(
        "--format", choices=("table", "markdown", "json"), default="table", help="output format (default table)"
    )
    contrast.set_defaults(func=run_contrast)


def run_contrast(args: argparse.Namespace) -> int:
    from offline_gitd.leaderboard.contrast import board_contrast, render

    gains, lines = board_contrast(args.board, args.gains, args.envs, args.value, args.reps, args.seed)
    print(render(gains, lines, args.value, args.format))
    print(f"(from board {args.board})", file=sys.stderr)
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from offline_gitd.leaderboard.compare import compare

    print(
        compare(
            args.boards,
            args.labels,
            args.baseline,
            args.format,
            args.reps,
            args.seed,
            args.envs,
            args.methods,
            adjusted=args.adjusted,
            between=args.between,
        )
    )
    return 0


def run_submit(args: argparse.Namespace) -> int:
    from offline_gitd.leaderboard.submit import submit

    require_file_target(args.board, "--board")
    report = submit(args.run_dirs, args.board, args.allow_new_env, allow_mixed=args.allow_mixed)
    if not any(report.added.values()) and report.already:
        print(f"nothing to add: all {report.already} row(s) are already on {report.board}, which is unchanged")
        return 0
    for run_dir, count in report.added.items():
        print(f"added {count} row(s) from {run_dir}")
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"board: {report.board} ({report.total_rows} rows)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from offline_gitd.leaderboard.show import show

    print(
        show(
            args.board,
            args.baseline,
            args.normalise,
            args.format,
            args.reps,
            args.seed,
            args.envs,
            args.methods,
            args.keep_flagged_envs,
            args.per_env_auc,
        )
    )
    print(f"(from board {args.board})", file=sys.stderr)
    return 0


def _analyse(args: argparse.Namespace, **figure_options: object) -> Analysis:
    """Scores, summaries, baseline key and figures: the common part of plot and html."""
    require_dir_target(args.out, "--out")
    from offline_gitd.leaderboard.report import analyse

    return analyse(
        args.board,
        args.baseline,
        args.normalise,
        args.reps,
        args.seed,
        args.envs,
        args.methods,
        keep_flagged=args.keep_flagged_envs,
        **figure_options,
    )


def run_plot(args: argparse.Namespace) -> int:
    from offline_gitd.errors import UsageError
    from offline_gitd.leaderboard.behaviour import read_curves
    from offline_gitd.leaderboard.board_references import read_references
    from offline_gitd.leaderboard.plot import write_figures

    if args.behaviour is not None and not args.behaviour.is_dir():
        raise UsageError(f"--behaviour {args.behaviour}: not a directory")
    randoms = {
        env: ref.ref_min_score for (_, env), ref in read_references(args.board).items() if ref.ref_min_score is not None
    }
    options = {
        "methods": args.draw_methods,
        "per_env": args.per_env,
        "fmt": args.format,
        "dpi": args.dpi,
        "behaviour": read_curves(args.board, args.envs, args.behaviour),
        "randoms": randoms,
    }
    analysis = _analyse(args, **options)
    for path in write_figures(analysis.figures, args.out, analysis.figure_data):
        print(f"wrote {path}")
    return 0


def run_html(args: argparse.Namespace) -> int:
    from offline_gitd.leaderboard.html import board_provenance, render_page, write_page

    analysis = _analyse(args)
    provenance = board_provenance(args.board, len(analysis.scored), args.envs, args.methods)
    page = render_page(
        analysis.summaries,
        analysis.figures,
        analysis.baseline,
        args.normalise,
        provenance,
        loaded=analysis.loaded,
        per_env=analysis.per_env,
        across=analysis.across,
    )
    path = write_page(page, args.out)
    print(f"wrote {path}")
    return 0
