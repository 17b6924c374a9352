"""The flags every run command shares beside its config's, and what they choose.

Output choices (progress bars, TensorBoard, wandb, checkpoints kept) are how a run is watched,
not what it computes: they are flags, not config fields, so they never change a run's config hash.
``--resume`` and ``--overwrite`` say what to do with a run directory that already holds a run.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from offline_gitd.errors import UsageError
from offline_gitd.rundir.seals import resume_hint

TB_DIR = "tb"


@dataclass(frozen=True)
class Outputs:
    """What a run writes besides its CSVs and checkpoints."""

    tensorboard: bool = True
    wandb: bool = False
    keep_checkpoints: int | None = None  # None: keep every checkpoint


@dataclass(frozen=True)
class RunFlags:
    """What a run command's own flags (not its config) tell a pipeline: resume or overwrite the run
    in ``--out``, draw progress bars, the command line to record, where the scalars go. One bundle
    from ``train`` to the loop of either pipeline; the keywords of both ``train`` functions."""

    resume: bool = False
    progress: bool = True
    overwrite: bool = False
    command_line: Sequence[str] | None = None
    outputs: Outputs | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunFlags:
        """The flags of :func:`add_run_arguments` as parsed."""
        return cls(args.resume, args.progress, args.overwrite, getattr(args, "argv", None), outputs_from_args(args))

    def keywords(self) -> dict[str, Any]:
        """As keyword arguments (``train(cfg, **flags.keywords())``)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def add_output_arguments(parser: argparse.ArgumentParser, *, checkpoints: bool = True) -> None:
    """``--no-progress``, ``--no-tensorboard``, ``--wandb`` (and ``--keep-checkpoints N``)."""
    parser.add_argument(
        "--no-progress", dest="progress", action="store_false", help="no progress bars (summary lines stay)"
    )
    parser.add_argument(
        "--no-tensorboard", dest="tensorboard", action="store_false", help=f"no TensorBoard events in RUN_DIR/{TB_DIR}"
    )
    parser.add_argument(
        "--wandb", action="store_true", help="also log the scalars to Weights & Biases (extra: offline-gitd[wandb])"
    )
    if checkpoints:
        parser.add_argument(
            "--keep-checkpoints",
            type=int,
            default=None,
            metavar="N",
            help="keep only the last N checkpoints (default: all; pass it again on --resume)",
        )


def outputs_from_args(args: argparse.Namespace) -> Outputs:
    keep = getattr(args, "keep_checkpoints", None)
    if keep is not None and keep < 1:
        raise UsageError(f"--keep-checkpoints must be >= 1, got {keep}")
    return Outputs(tensorboard=args.tensorboard, wandb=args.wandb, keep_checkpoints=keep)


def add_run_arguments(parser: argparse.ArgumentParser, length_flag: str) -> None:
    """The flags every run command (``train``, ``online``) shares beside its config's: a config
    file, resume, overwrite, and where its scalars go (progress, TensorBoard, wandb, checkpoints kept)."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="read the run's fields from FILE (TOML, or a run's config.json to run it again); "
        "flags given here override the file",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"continue the run in --out (wherever it now is) from its last checkpoint; {length_flag} may grow, "
        "any other flag must match the run's",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    add_output_arguments(parser)


def start_run(train: Callable[..., Any], cfg: Any, args: argparse.Namespace, resume_command: str) -> Any:
    """Call a run command's ``train`` with the flags of :func:`add_run_arguments`; an interrupt
    names ``resume_command``, the line that continues the run."""
    with resume_hint(resume_command):
        return train(cfg, **RunFlags.from_args(args).keywords())
