"""Every module of the package sits on a floor of the import contract (pyproject.toml,
docs/architecture.md): a module the floors leave out is one lint-imports never checks."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import offline_gitd

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(offline_gitd.__file__).resolve().parent
FLOORS_CONTRACT = "Floors: nothing below imports from above"


def floors(pyproject: Path = ROOT / "pyproject.toml") -> list[list[str]]:
    """The floors' rooms, top to bottom, from the layers contract of ``[tool.importlinter]``."""
    config = tomllib.loads(pyproject.read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [contract] = [c for c in contracts if c["name"] == FLOORS_CONTRACT]
    assert contract["type"] == "layers"
    return [[room.strip() for room in re.split(r"[|:]", floor)] for floor in contract["layers"]]


def package_modules(package: Path = PACKAGE) -> list[str]:
    """Every module of the package by dotted name, found on disk (nothing imported): packages by
    their own name, the root package's ``__init__`` left out (it is the house, on no floor)."""
    modules = []
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) > 1:
            modules.append(".".join(parts))
    return modules


def uncovered(modules: list[str], rooms: list[str]) -> list[str]:
    """The modules no room holds: neither a room itself nor inside one."""
    return [m for m in modules if not any(m == room or m.startswith(room + ".") for room in rooms)]


def test_every_module_sits_on_a_floor() -> None:
    rooms = [room for floor in floors() for room in floor]
    missing = uncovered(package_modules(), rooms)
    assert not missing, f"on no floor of the import contract in pyproject.toml: {', '.join(missing)}"


def test_every_room_is_a_module() -> None:
    """A room naming no module (a file since moved or removed) is refused as well."""
    modules = set(package_modules())
    stale = [room for floor in floors() for room in floor if room not in modules]
    assert not stale, f"rooms of the import contract that are no module: {', '.join(stale)}"


def test_a_module_left_out_is_named(tmp_path: Path) -> None:
    """The check names the module a floor leaves out."""
    package = tmp_path / "house"
    (package / "floor").mkdir(parents=True)
    for name in ("__init__.py", "covered.py", "left_out.py", "floor/__init__.py", "floor/room.py"):
        (package / name).write_text("")
    assert uncovered(package_modules(package), ["house.covered", "house.floor"]) == ["house.left_out"]


def table_floors(page: Path = ROOT / "docs" / "architecture.md") -> list[list[str]]:
    """The rooms of each row of the page's floor table, top to bottom, as dotted module names."""
    text = page.read_text()
    table = text[text.index("| Floor | Packages |") :].split("\n\n")[0].splitlines()[2:]
    rows = []
    for row in table:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip("|"))]  # "\|": a pipe in a cell
        names = re.findall(r"`([\w/.]+)`", cells[1] if cells[1] else "")
        rows.append(["offline_gitd." + name.removesuffix(".py").rstrip("/") for name in names])
    return rows


def test_the_architecture_page_draws_the_contract() -> None:
    """docs/architecture.md's floor table has the contract's floors, in order, with their rooms."""
    drawn = [sorted(rooms) for rooms in table_floors()]
    assert drawn == [sorted(rooms) for rooms in floors()]
