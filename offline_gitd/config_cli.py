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


def add_dataclass_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    skip: tuple[str, ...] = (),
    *,
    only_given: bool = False,
    hidden: tuple[str, ...] = (),
) -> None:
    """One ``--flag`` per field of ``cls`` (``snake_case`` -> ``--snake-case``).

    ``only_given`` leaves a flag the user did not type out of the namespace (argparse's
    ``SUPPRESS``) instead of filling its default, so that a handler can tell "not given" from
    "given the default value": what ``--resume`` needs to refuse only real differences.
    :func:`from_namespace` fills the absent fields from the dataclass defaults. ``hidden`` fields
    are parsed (so the handler can refuse them with its own message) but left out of ``--help``.
    """
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
        if field.name in hidden:
            help_text = argparse.SUPPRESS
        parsed_default = argparse.SUPPRESS if only_given else default
        if kind is bool:
            parser.add_argument(
                flag, dest=field.name, action=argparse.BooleanOptionalAction, default=parsed_default, help=help_text
            )
        else:
            parser.add_argument(
                flag,
                dest=field.name,
                type=kind,
                default=parsed_default,
                choices=field.metadata.get("choices"),
                help=help_text,
            )


def from_namespace(cls: type, args: argparse.Namespace, **extra: Any) -> Any:
    """Build ``cls`` from parsed arguments; fields absent from ``args`` keep their defaults."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    values.update(extra)
    return cls(**values)


def describe_overrides(resolved: dict[str, Any], reference: dict[str, Any], ignored: tuple[str, ...]) -> str:
    """The fields of a resolved config that differ from the domain's defaults (``reference``, the
    same config with nothing set), as ``name=value`` separated by spaces (``T=10 lr=0.01``), or
    ``defaults``: what tells one method from another on a board beyond its named columns."""
    parts = []
    for name in sorted(resolved):
        value = resolved[name]
        if name in ignored or value == reference.get(name):
            continue
        text = repr(value).removesuffix(".0") if isinstance(value, float) else str(value)
        parts.append(f"{name}={text}")
    return " ".join(parts) or "defaults"


def given_fields(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields of ``cls`` that the command line set (with ``only_given`` parsing)."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}


def resume_changes(
    saved: dict[str, Any], given: dict[str, Any], extendable: str, free: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The changes a resume may make to a saved config: ``extendable`` (the run's length) may grow,
    ``free`` fields (where things are, not what is learned) may be given anew; any other flag
    whose value differs from the saved run's is refused, naming the field (DESIGN §9)."""
    changes: dict[str, Any] = {}
    for name, value in given.items():
        flag = "--" + name.replace("_", "-")
        if name in free:
            if value is not None:
                changes[name] = value
        elif name == extendable:
            if value is None or value == saved.get(name):
                continue
            if saved.get(name) is not None and value < saved[name]:
                raise ConfigError(
                    f"{flag} {value} is shorter than the run's {saved[name]}: resume can only extend a run"
                )
            changes[name] = value
        elif value is not None and value != saved.get(name):
            raise ConfigError(
                f"{flag} {value} differs from the run's {name} = {saved.get(name)}: resume may only extend "
                f"--{extendable.replace('_', '-')} (start a new run with another --out, or use --overwrite)"
            )
    return changes


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
