"""Typed config dataclasses as the single source of defaults, ``--help`` and ``config.json``.

CleanRL's habit: a dataclass of hyperparameters from which the command line is
generated. Each field's ``metadata["help"]`` is its help text; ``None`` defaults mean "the
domain's default", filled in by the learner and written resolved to ``config.json``. A config may
carry other dataclasses' fields beside its own (:class:`FieldGroup`: an offline algorithm's own
hyperparameters, docs/adding-a-learner.md#hyperparameters-of-its-own): flat, they are flags and
keys like its own, shown in ``--help`` under their group's heading.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import types
import typing
from fractions import Fraction
from typing import Any, NamedTuple

from offline_gitd.choices import did_you_mean
from offline_gitd.errors import ConfigError
from offline_gitd.records import check_range

# Upper bounds shared by the learners' configs. Each exists because a larger value is never a
# meaningful experiment here but would spend minutes and gigabytes before failing.
# All seeds of a run are one vmapped program (params, optimiser state and replay per seed):
# the paper runs 5 or 10; larger studies split seeds over runs (a sweep's seeds_per_run).
MAX_SEEDS = 100
# Network widths and batch sizes: 2**16 is 256x the paper's largest (FC 256, batch 256).
MAX_WIDTH = 65_536
MAX_BATCH = 65_536
# Online Q-heads: twice the paper's largest K (its K ablation: 5 and 50). Every head is a
# Q-function (a whole network with independent heads) in memory and in each update.
MAX_K = 100
# n-step returns: the replay assembles all n rewards of each sampled return, so n is a cost per
# sample; the paper uses 1 and 3.
MAX_N_STEP = 1_000


def parse_ratio(text: str) -> float:
    """``"1/4"`` -> 0.25, ``"0.25"`` -> 0.25, ``"4"`` -> 4.0: a finite number or a fraction a/b,
    the notation the paper (and ``--help``) uses for update-to-data ratios. Only a text with a
    slash goes through ``Fraction``: it would compute ``10**99999999`` for ``"1e99999999"``."""
    stripped = text.strip()
    problem = argparse.ArgumentTypeError(f"expected a number or a fraction like 1/4, got {text!r}")
    try:
        value = float(Fraction(stripped)) if "/" in stripped else float(stripped)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise problem from None
    if not math.isfinite(value):
        raise problem
    return value


def field_choices(field: dataclasses.Field) -> tuple[Any, ...] | None:
    """The values a field accepts (``None``: any of its type), computed now if given as a function."""
    choices = field.metadata.get("choices")
    return choices() if callable(choices) else choices


def coerce_value(where: str, key: str, field: dataclasses.Field, kind: Any, value: Any) -> Any:
    """A value read from a file (TOML, JSON) as the config field's type ``kind``, refused in one
    line naming ``where`` (the file) and ``key`` when it is not one; a string is read by the flag's
    own parser where the field has one (``utd = "1/4"``)."""
    wrong = f"{where}: {key}: expected {getattr(kind, '__name__', kind)}, got {value!r}"
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(wrong)
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(wrong)
    elif kind is float:
        parse = field.metadata.get("parse")
        if isinstance(value, str) and parse is not None:  # the flag's own parser: --utd 1/4 is utd = "1/4"
            try:
                value = parse(value)
            except argparse.ArgumentTypeError as err:
                raise ConfigError(f"{where}: {key}: {err}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(wrong)
        try:
            value = float(value)
        except OverflowError:  # an integer past float range (lr = 1 followed by 400 zeros)
            raise ConfigError(f"{wrong} (too large for a float)") from None
    elif kind is str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # seeds = 3, mlp_hidden = 50
        if not isinstance(value, str):
            raise ConfigError(wrong)
    choices = field_choices(field)
    if choices and value not in choices:
        hint = did_you_mean(str(value), map(str, choices))
        raise ConfigError(f"{where}: {key}: {value!r} is not one of {', '.join(map(str, choices))}{hint}")
    return value


def base_type(annotation: Any) -> Any:
    """``int | None`` -> ``int``; plain types pass through."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0]
    return annotation


class FieldGroup(NamedTuple):
    """A dataclass whose fields a config carries flat beside its own: flags under the heading
    ``title`` (``description`` below it) in ``--help``, keys at the top level of a config file,
    ``config.json`` and a sweep spec. A config class lists its groups with a ``field_groups()``
    classmethod (``OfflineConfig``'s: each algorithm's own parameters)."""

    title: str
    description: str
    fields: type


def field_groups(cls: type) -> tuple[FieldGroup, ...]:
    """The groups config class ``cls`` carries (none unless it has ``field_groups()``)."""
    groups = getattr(cls, "field_groups", None)
    return tuple(groups()) if groups is not None else ()


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """A dataclass's field types, evaluated once: a sweep's every grid entry and a config file's
    every key check against them, and evaluating annotations is the bulk of that work."""
    return typing.get_type_hints(cls)


def own_fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    """The fields of dataclass ``cls`` that are flags, by name, each with its type less ``None``
    (``int | None`` -> ``int``); a field marked ``nested`` (where a config keeps a group's values)
    is not one."""
    hints = type_hints(cls)
    return {
        field.name: (field, base_type(hints[field.name]))
        for field in dataclasses.fields(cls)
        if not field.metadata.get("nested")
    }


def config_fields(cls: type) -> dict[str, tuple[dataclasses.Field, Any]]:
    """Every flag and key of config class ``cls``: its own fields, then its groups' (:func:`own_fields`)."""
    table = own_fields(cls)
    for group in field_groups(cls):
        table.update(own_fields(group.fields))
    return table


def add_dataclass_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    skip: tuple[str, ...] = (),
    *,
    only_given: bool = False,
    hidden: tuple[str, ...] = (),
) -> None:
    """One ``--flag`` per field of ``cls`` (``snake_case`` -> ``--snake-case``), then one per field
    of each of its groups (:class:`FieldGroup`), under the group's heading.

    ``only_given`` leaves a flag the user did not type out of the namespace (argparse's
    ``SUPPRESS``) instead of filling its default, so that a handler can tell "not given" from
    "given the default value": what ``--resume`` needs to refuse only real differences, and
    ``--config`` to let typed flags override a file. ``cls(**given_fields(cls, args))`` fills the
    absent fields from the dataclass defaults. ``hidden`` fields are parsed (so the handler can
    refuse them with its own message) but left out of ``--help``.
    """
    targets: list[tuple[Any, type]] = [(parser, cls)]
    targets += [(parser.add_argument_group(g.title, g.description), g.fields) for g in field_groups(cls)]
    for target, owner in targets:
        for name, (field, kind) in own_fields(owner).items():
            if name not in skip:
                _add_argument(target, field, kind, only_given, name in hidden)


def flag_of(field: dataclasses.Field) -> str:
    """A field's command-line flag: its own (``--K``), or its name's (``bc_alpha`` -> ``--bc-alpha``)."""
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _add_argument(target: Any, field: dataclasses.Field, kind: Any, only_given: bool, hidden: bool) -> None:
    """``field``'s flag on ``target`` (a parser or one of its argument groups)."""
    flag = flag_of(field)
    # argparse %-formats help strings: a literal "%" (as in "10%") must be doubled.
    help_text = f"{field.metadata.get('help', '')}{_default_note(field)}".replace("%", "%%")
    if hidden:
        help_text = argparse.SUPPRESS
    parsed_default = argparse.SUPPRESS if only_given else field.default
    if kind is bool:
        target.add_argument(
            flag, dest=field.name, action=argparse.BooleanOptionalAction, default=parsed_default, help=help_text
        )
    else:
        target.add_argument(
            flag,
            dest=field.name,
            type=field.metadata.get("parse") or kind,
            default=parsed_default,
            choices=field_choices(field),
            metavar=field.metadata.get("metavar"),
            help=help_text,
        )


def _default_note(field: dataclasses.Field) -> str:
    """What ``--help`` appends to a field's help to name its default: `` (default: 5)``; for a
    ``None`` default, what unset means (the field's ``unset``, most often the domain's default).
    Nothing where there is no default to show: an empty-string default is a value the user must
    give (``--out``, ``--dataset``), and a help text that already says what its default is
    ("data root (default $OFFLINE_GITD_DATA or the user cache dir)") is not told twice."""
    help_text = field.metadata.get("help", "")
    if field.default == "" or "(default" in help_text:
        return ""
    shown = field.metadata.get("unset", "domain default") if field.default is None else field.default
    return f" (default: {shown})"


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
    """The fields of ``cls`` (its groups' included) that the command line set (with ``only_given`` parsing)."""
    return {name: getattr(args, name) for name in config_fields(cls) if hasattr(args, name)}


def parse_int_range(text: str, name: str, max_count: int | None = None) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,3,7-8"`` -> [0, 3, 7, 8]; negatives refused. With
    ``max_count``, a longer list is refused before it is built (``0-999999999`` must not hang)."""
    spans: list[tuple[int, int]] = []
    try:
        for part in str(text).split(","):
            low, dash, high = part.strip().partition("-")
            spans.append((int(low), int(high) if dash else int(low)))
    except ValueError:
        raise ConfigError(f"{name} must look like 0-4 or 0,2,5 (non-negative integers), got {text!r}") from None
    if any(high < low for low, high in spans):
        raise ConfigError(f"{name} must look like 0-4 or 0,2,5 (non-negative integers), got {text!r}")
    if max_count is not None and sum(high - low + 1 for low, high in spans) > max_count:
        raise ConfigError(f"{name} lists more than {max_count} values, got {text!r}")
    values = [value for low, high in spans for value in range(low, high + 1)]
    if not values or min(values) < 0 or len(set(values)) != len(values):
        raise ConfigError(f"{name} must list distinct non-negative integers, got {text!r}")
    return values


def check_common_ranges(cfg: Any) -> None:
    """Bounds shared by the offline and online configs (fields ``None`` until resolved pass)."""
    check_range("--horizon", cfg.horizon, 1, why="an episode needs at least one step")
    check_range("--K", cfg.K, 1, MAX_K, why="twice the paper's largest, 50")
    check_range("--batch-size", cfg.batch_size, 1, MAX_BATCH)
    check_range("--n-step", cfg.n_step, 1, MAX_N_STEP)
    check_range("--head-hidden", cfg.head_hidden, 1, MAX_WIDTH)


def parse_seeds(text: str) -> list[int]:
    """``--seeds``: distinct non-negative integers below 2**31 (they travel to the device as int32;
    ``PRNGKey`` maps 2**32 and 0 to the same key), at most MAX_SEEDS of them (one vmapped program
    holds them all)."""
    seeds = parse_int_range(text, "--seeds", MAX_SEEDS)
    if max(seeds) >= 2**31:
        raise ConfigError(f"--seeds must be below 2**31, got {max(seeds)}")
    return seeds


def parse_widths(text: str, name: str) -> tuple[int, ...]:
    """``"256,256"`` -> (256, 256): the hidden widths of an MLP, each in [1, MAX_WIDTH]."""
    try:
        sizes = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        raise ConfigError(f"{name} must be comma-separated widths like 256,256, got {text!r}") from None
    if not sizes or min(sizes) < 1 or max(sizes) > MAX_WIDTH:
        raise ConfigError(f"{name} widths must be in [1, {MAX_WIDTH}], got {text!r}")
    return sizes
