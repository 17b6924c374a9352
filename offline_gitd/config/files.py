"""Runs as files: ``--config FILE`` reads a run's fields from TOML or from a run's ``config.json``.

A TOML file holds fields at its top level, named as the config dataclass names them (``critic =
"gitd"``, ``mlp_hidden = "64,64"``, ``utd = "1/4"``); a JSON file is a run's ``config.json``, whose
``"config"`` key holds the resolved fields, so ``train --config runs/a/config.json --out runs/b``
runs run a again (docs/python-api.md#runs-as-files). Flags typed on the command line override
the file. Values are checked as a sweep spec's are (the field's type and choices), and unknown keys
are refused in one line naming them.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from offline_gitd.choices import close_names
from offline_gitd.config.fields import coerce_value, config_fields
from offline_gitd.errors import ConfigError


def read_table(path: str | Path) -> dict[str, Any]:
    """The file's fields: a TOML table, or a ``config.json``'s ``"config"`` (a JSON object of
    fields without one is taken whole)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"--config {path}: is a directory (pass RUN_DIR/config.json or a .toml file)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--config {path}: not a text file") from None
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise ConfigError(f"--config {path}: not valid JSON ({err})") from None
        if isinstance(raw, dict) and isinstance(raw.get("config"), dict):
            raw = raw["config"]
    else:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"--config {path}: not valid TOML ({err})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"--config {path}: expected a table of fields, got {type(raw).__name__}")
    return raw


def refuse_unknown(where: str, table: Mapping[str, Any], known: Iterable[str]) -> None:
    """One line, starting with ``where``, naming every key of ``table`` that is not in ``known``,
    each with the known keys closest to it (``lrr`` -> ``lr``), so a typo needs no look at --help."""
    known = list(known)
    unknown = sorted(set(table) - set(known))
    if unknown:
        closest = {key: close_names(key, known, limit=1) for key in unknown}
        if len(unknown) == 1:
            hints = [repr(close[0]) for close in closest.values() if close]
        else:
            hints = [f"{close[0]!r} for {key!r}" for key, close in closest.items() if close]
        hint = f"; did you mean {', '.join(hints)}?" if hints else ""
        raise ConfigError(f"{where}: unknown key{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}{hint}")


def read_fields(path: str | Path, cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """The fields of config dataclass ``cls`` that the file sets, typed as ``cls`` types them.

    ``skip`` names fields a file may carry but that are not the file's to set (a run's ``algo``,
    which the subcommand names): they are returned as read, for the caller to compare."""
    return typed_fields(read_table(path), cls, f"--config {path}", skip)


def typed_fields(table: Mapping[str, Any], cls: type, where: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """``table``'s values as the fields of ``cls`` (its groups' included: an algorithm's own
    parameters) type them; unknown keys and wrong types are refused in one line starting with ``where``."""
    fields = config_fields(cls)
    refuse_unknown(where, table, fields)
    values = {}
    for name, value in table.items():
        field, kind = fields[name]
        if value is None or name in skip:
            if value is None and field.default is not None and name not in skip:
                raise ConfigError(f"{where}: {name}: null is not a value of this field")
            values[name] = value
            continue
        values[name] = coerce_value(where, name, field, kind, value)
    return values


def config_from(source: Any, cls: type) -> Any:
    """A ``cls`` from itself, a mapping of its fields, or a file (TOML, or a run's config.json)."""
    if isinstance(source, cls):
        return source
    if isinstance(source, Mapping):
        return cls(**typed_fields(source, cls, "config"))
    if isinstance(source, (str, Path)):
        return cls(**read_fields(source, cls))
    raise ConfigError(f"a config is a {cls.__name__}, a dict of its fields or a file path, not {type(source).__name__}")
