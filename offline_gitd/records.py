"""Registries of named records with plug-ins: what the critic and the algorithm registries share.

A critic (:mod:`offline_gitd.critic_registry`) and an offline algorithm
(:mod:`offline_gitd.algorithm_registry`) are both plain records found by name: the package's own,
then those installed packages declare under an entry-point group (docs/critic-plugins.md,
docs/adding-a-learner.md), then those registered in the process. How a plug-in is loaded and
checked, how two records of one name are refused, how a record's ``"module:attribute"`` is
imported and how a name is looked up are the same for both, so they are written once here as
:class:`Registry`; each registry is an instance with its own record type, entry-point group and
words (:data:`offline_gitd.critic_registry.CRITICS`, :data:`offline_gitd.algorithm_registry.ALGORITHMS`).

A record's own hyperparameters (an algorithm's, docs/adding-a-learner.md#hyperparameters-of-its-own)
are a dataclass of :func:`option` fields, refused out of range by :func:`check_range`: the same
pieces the run configs are made of (:mod:`offline_gitd.config`), here on the ground floor so that
a record and its parameters are plain data that the command line reads without importing JAX.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import EntryPoint
from typing import Any, Generic, TypeVar

from offline_gitd.errors import ConfigError

Record = TypeVar("Record")


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
    unset: str = "domain default",
) -> Any:
    """A dataclass field with the help text (and optional flag name, choices, and a parser of the
    flag's text when the field's type alone cannot read it) of its CLI option. ``choices`` may be
    a function returning them, called when a parser or a spec reads them: the critics, which
    installed plug-ins extend (:func:`offline_gitd.config.fields.field_choices`). ``unset`` is what ``--help`` says a ``None``
    default means (most fields: the domain's default)."""
    metadata = {"help": help, "flag": flag, "choices": choices, "parse": parse, "metavar": metavar, "unset": unset}
    return dataclasses.field(default=default, metadata=metadata)


def check_range(flag: str, value: float | None, low: float, high: float | None = None, why: str = "") -> None:
    """Refuse ``value`` outside ``[low, high]``, NaN and infinities included (``None`` values are
    "domain default": accepted)."""
    if value is None:
        return
    if not math.isfinite(value) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ConfigError(f"{flag} must be {bound}{f' ({why})' if why else ''}, got {value}")


def load_plugins(points: Iterable[EntryPoint], record_type: type[Record], kind: str) -> tuple[Record, ...]:
    """The records ``points`` name, each checked to be a ``record_type`` named as its entry point;
    a plug-in that fails to import or is not such a record is refused in one line (``kind``:
    "critic", "algorithm")."""
    found = []
    for point in points:
        where = f"{kind} plug-in {point.name!r} ({point.value})"
        try:
            record = point.load()
        except Exception as err:  # noqa: BLE001 - any failure of a third-party import is reported as one line
            raise ConfigError(f"{where} failed to load: {type(err).__name__}: {err}") from None
        if not isinstance(record, record_type):
            raise ConfigError(f"{where} is a {type(record).__name__}, not an offline_gitd {record_type.__name__}")
        name = getattr(record, "name")
        if name != point.name:
            raise ConfigError(f"{where} names its {kind} {name!r}: the entry point's name must match")
        found.append(record)
    return tuple(found)


def by_name(records: Iterable[Record], kind: str, source: Callable[[Any], str]) -> dict[str, Record]:
    """``records`` by name, in order; two of one name are refused in one line naming where each
    comes from (``source(record)``: its loss, its family builder)."""
    named: dict[str, Record] = {}
    for record in records:
        name = getattr(record, "name")
        if name in named:
            raise ConfigError(f"two {kind}s are named {name!r} ({source(named[name])} and {source(record)})")
        named[name] = record
    return named


@functools.cache
def import_target(target: str, where: str) -> Any:
    """The attribute ``target`` (``"module:attribute"``) names, imported on first use; one that
    cannot be imported is one line, ``where`` naming whose it is ("critic 'x': cannot import its
    loss")."""
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"{where} {target!r} ({err})") from None


class Registry(Generic[Record]):
    """Named records: ``builtin``, then the plug-ins installed under the entry-point group
    ``group`` (read once per process), then those registered in the process.

    ``points(group)`` lists the installed entry points (``importlib.metadata.entry_points``, looked
    up by the registry's module when called, so a test can stand in for it); ``source(record)``
    says where a record comes from when two share a name; ``unknown(name, names)`` is the end of
    the one line refusing an unknown name (a did-you-mean, or nothing).
    """

    def __init__(
        self,
        kind: str,
        record_type: type[Record],
        group: str,
        builtin: Sequence[Record],
        points: Callable[[str], Iterable[EntryPoint]],
        source: Callable[[Record], str],
        unknown_label: str | None = None,
        suggest: Callable[[str, Iterable[str]], str] = lambda name, names: "",
    ) -> None:
        self.kind, self.record_type, self.group = kind, record_type, group
        self.builtin = tuple(builtin)
        self._points, self._source = points, source
        self._unknown_label, self._suggest = unknown_label or kind, suggest
        self._in_process: dict[str, Record] = {}
        # read once per process; ``plugins.cache_clear()`` reads them again
        self.plugins: Callable[[], tuple[Record, ...]] = functools.cache(self._load_plugins)

    def _load_plugins(self) -> tuple[Record, ...]:
        return load_plugins(self._points(self.group), self.record_type, self.kind)

    def records(self) -> dict[str, Record]:
        """Every record by name: the package's own, then installed plug-ins, then those registered here."""
        return by_name((*self.builtin, *self.plugins(), *self._in_process.values()), self.kind, self._source)

    def names(self) -> tuple[str, ...]:
        return tuple(self.records())

    def get(self, name: str) -> Record:
        """The record ``name``; an unknown name is one line listing the known ones."""
        records = self.records()
        if name not in records:
            raise ConfigError(
                f"unknown {self._unknown_label} {name!r}; choose one of {', '.join(records)}"
                f"{self._suggest(name, records)}"
            )
        return records[name]

    def register(self, record: Record) -> None:
        """Add a record in this process (a notebook, a test); installed packages use the entry point."""
        name = getattr(record, "name")
        if name in self.records():
            article = "an" if self.kind[0] in "aeiou" else "a"
            raise ConfigError(f"{article} {self.kind} named {name!r} is already registered")
        self._in_process[name] = record

    def unregister(self, name: str) -> None:
        """Remove a record added by :meth:`register`."""
        self._in_process.pop(name, None)
