"""No import circle among the modules of ``offline_gitd/online/`` (docs/architecture.md#floors).

The floors contract (pyproject.toml) only orders packages against each other; inside one package
two modules may still import each other, directly or round a longer ring, and then neither can be
read, tested or moved without the other. The graph is drawn from the source (every ``import``
and ``from ... import``, those inside functions included: a deferred import is still a
dependency), so nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import offline_gitd

PACKAGE = Path(offline_gitd.__file__).resolve().parent


def module_name(path: Path) -> str:
    """The dotted name of the module at ``path``, from the outermost package holding it."""
    top = path.parent
    while (top.parent / "__init__.py").exists():
        top = top.parent
    parts = path.relative_to(top.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """Every dotted name ``module``'s source imports, relative imports resolved; ``from a import b``
    counts as ``a.b`` (a submodule) and ``a`` (the package's own ``__init__``)."""
    names: set[str] = set()
    here = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here[: len(here) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (itself and its parent packages left out:
    a package's ``__init__`` re-exporting is no circle of the modules)."""
    paths = {module_name(path): path for path in sorted(package.rglob("*.py"))}
    graph = {}
    for module, path in paths.items():
        names = imported(ast.parse(path.read_text()), module, path.name == "__init__.py")
        graph[module] = {
            name for name in names if name in paths and name != module and not module.startswith(name + ".")
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as ``[a, b, ..., a]``, or ``None`` (depth-first, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_online_has_no_import_circle() -> None:
    cycle = find_cycle(import_graph(PACKAGE / "online"))
    assert cycle is None, "an import circle in offline_gitd/online/: " + " -> ".join(cycle or [])


def test_a_circle_is_found_and_named(tmp_path: Path) -> None:
    """The check sees a ring of three modules, one of its imports deferred into a function and one
    relative, and names it; the package's ``__init__`` importing its modules is no circle."""
    package = tmp_path / "house"
    package.mkdir()
    (package / "__init__.py").write_text("from house.a import x\n")
    (package / "a.py").write_text("from house.b import y\nx = 1\n")
    (package / "b.py").write_text("def y():\n    from house import c\n")
    (package / "c.py").write_text("from .a import x\n")
    assert find_cycle(import_graph(package)) == ["house.a", "house.b", "house.c", "house.a"]
    (package / "c.py").write_text("x = 2\n")
    assert find_cycle(import_graph(package)) is None
