"""Registries of named records with plug-ins: what the critic and the algorithm registries share.

A critic (:mod:`offline_gitd.critic_registry`) and an offline algorithm
(:mod:`offline_gitd.algorithm_registry`) are both plain records found by name: the package's own,
then those installed packages declare under an entry-point group (docs/critic-plugins.md,
docs/adding-a-learner.md), then those registered in the process. How a plug-in is loaded and
checked, and how two records of one name are refused, is the same for both, so it is written once
here; each registry keeps its own record type, entry-point group and messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint
from typing import Any, TypeVar

from offline_gitd.errors import ConfigError

Record = TypeVar("Record")


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
