"""Typed config dataclasses as the single source of defaults, ``--help`` and ``config.json``.

CleanRL's habit (STYLE.md): a dataclass of hyperparameters from which the command line is
generated. Each field's ``metadata["help"]`` is its help text; ``None`` defaults mean "the
domain's default", filled in by the learner and written resolved to ``config.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

from offline_gitd.errors import ConfigError


def option(default: Any, help: str, *, flag: str | None = None, choices: tuple[Any, ...] | None = None) -> Any:
    """A dataclass field with the help text (and optional flag name, choices) of its CLI option."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "choices": choices})


def _base_type(annotation: Any) -> Any:
    """``int | None`` -> ``int``; plain types pass through."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0]
    return annotation


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """One ``--flag`` per field of ``cls`` (``snake_case`` -> ``--snake-case``)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        kind = _base_type(hints[field.name])
        flag = field.metadata.get("flag") or "--" + field.name.replace("_", "-")
        default = field.default
        shown = "domain default" if default is None else default
        # argparse %-formats help strings: a literal "%" (as in "10%") must be doubled.
        help_text = f"{field.metadata.get('help', '')} (default: {shown})".replace("%", "%%")
        if kind is bool:
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, default=default, help=help_text
            )
        else:
            parser.add_argument(
                flag, dest=field.name, type=kind, default=default, choices=field.metadata.get("choices"), help=help_text
            )


def from_namespace(cls: type, args: argparse.Namespace, **extra: Any) -> Any:
    """Build ``cls`` from parsed arguments; fields absent from ``args`` keep their defaults."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    values.update(extra)
    return cls(**values)


def parse_int_range(text: str, name: str) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7-8"`` -> [0, 3, 7, 8]; negatives refused."""
    values: list[int] = []
    try:
        for part in str(text).split(","):
            part = part.strip()
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                if high < low:
                    raise ValueError
                values.extend(range(low, high + 1))
            else:
                values.append(int(part))
    except ValueError:
        raise ConfigError(f"{name} must look like 0-4 or 0,2,5 (non-negative integers), got {text!r}") from None
    if not values or min(values) < 0 or len(set(values)) != len(values):
        raise ConfigError(f"{name} must list distinct non-negative integers, got {text!r}")
    return values


def parse_widths(text: str, name: str) -> tuple[int, ...]:
    """``"256,256"`` -> (256, 256): the hidden widths of an MLP, each at least 1."""
    try:
        sizes = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise ConfigError(f"{name} must be comma-separated widths like 256,256, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise ConfigError(f"{name} widths must be >= 1, got {text!r}")
    return sizes
