"""The package's shape, checked by reading its source with ``ast`` (nothing is imported):

- no import cycle among harnessctl modules, counting imports inside functions too (a package
  whose ``__init__`` and submodules import each other, the protocols-in-``__init__`` pattern,
  is not a cycle worth naming);
- no command module (``harnessctl/cli/*_cmd.py``) imports another one;
- no function in ``harnessctl/cli/`` longer than ``MAX_CLI_FUNCTION_LINES``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "harnessctl"
MAX_CLI_FUNCTION_LINES = 60
# Cycles through function-level imports that predate this test, in code other work is
# rewriting. Each is matched exactly: a module joining one, or a new cycle, fails the test.
# Delete an entry once its cycle is gone.
KNOWN_CYCLES: set[frozenset[str]] = set()  # none: keep it that way


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _base_package(module: str, path: Path, level: int) -> str:
    """The package a relative import of ``level`` dots resolves against."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """Every harnessctl module ``module`` imports, at module level or inside a function.

    ``from a.b import c`` counts as importing ``a.b.c`` when that is a module, else ``a.b``.
    Parent packages imported implicitly on the way are not counted: a package ``__init__``
    that imports its submodules would otherwise form a cycle with each of them.
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _base_package(module, path, node.level)
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in known else target)
    return {m for m in found if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cyclic_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module: each holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan; the package is small enough for recursion
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def test_cycle_finder_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c", "e"}, "c": {"a"}, "d": {"a"}, "e": {"b"}}
    assert cyclic_components(graph) == [{"a", "b", "c", "e"}]
    assert cycle_in(graph, {"a", "b", "c", "e"}) == ["a", "b", "c", "a"]
    assert cyclic_components({"a": {"b"}, "b": set()}) == []
    assert within_one_package({"harnessctl.cli", "harnessctl.cli.render"})
    assert not within_one_package({"harnessctl.evolve.engine", "harnessctl.run.ray"})


def test_relative_imports_resolve() -> None:
    path = PACKAGE / "cli" / "eval_cmd.py"
    known = {"harnessctl.cli.options", "harnessctl.constants", "harnessctl.cli.render"}
    assert {"harnessctl.cli.options", "harnessctl.constants"} <= imports_of(
        "harnessctl.cli.eval_cmd", path, known
    )


def within_one_package(component: set[str]) -> bool:
    """A package ``__init__`` and its own submodules: the submodules import the protocols the
    ``__init__`` declares, the ``__init__`` imports built-ins from them."""
    packages = [
        m for m in component if (PACKAGE.parent / m.replace(".", "/") / "__init__.py").is_file()
    ]
    return any(all(m == p or m.startswith(p + ".") for m in component) for p in packages)


def test_no_import_cycle() -> None:
    graph = import_graph()
    found = [
        cycle_in(graph, c)
        for c in cyclic_components(graph)
        if not within_one_package(c) and frozenset(c) not in KNOWN_CYCLES
    ]
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_command_module_imports_another() -> None:
    def is_command(name: str) -> bool:
        return name.startswith("harnessctl.cli.") and name.endswith("_cmd")

    bad = sorted(
        f"{a} -> {b}"
        for a, targets in import_graph().items()
        if is_command(a)
        for b in targets
        if is_command(b)
    )
    assert not bad, "command modules importing one another:\n" + "\n".join(bad)


def test_no_long_cli_function() -> None:
    long = []
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLI_FUNCTION_LINES:
                    long.append(f"{module_name(path)}.{node.name}: {lines} lines")
    assert not long, f"CLI functions over {MAX_CLI_FUNCTION_LINES} lines:\n" + "\n".join(long)


def unit_of(module: str) -> str:
    """The top-level part of harnessctl a module belongs to (``harnessctl.run.session`` ->
    ``harnessctl.run``; a top-level module is its own unit)."""
    return ".".join(module.split(".")[:2])


def test_no_arrow_runs_back_up_between_packages() -> None:
    """Collapse every module into its top-level package (or top-level module): the graph of
    those units has no cycle, so the packages stand in layers and no import runs back up
    (``run`` imports nothing of evolve, profiles, pools or the CLI; ``workspace`` nothing of
    profiles). A package's own ``__init__`` importing its submodules is not counted."""
    graph: dict[str, set[str]] = {}
    for module, imported in import_graph().items():
        unit = unit_of(module)
        graph.setdefault(unit, set())
        graph[unit] |= {unit_of(m) for m in imported if unit_of(m) != unit}
    for unit in list(graph):
        for target in graph[unit]:
            graph.setdefault(target, set())
    components = cyclic_components(graph)
    assert not components, [cycle_in(graph, c) for c in components]
    # the run layer in particular: below everything that drives rollouts
    above = {"harnessctl.cli", "harnessctl.evolve", "harnessctl.profiles", "harnessctl.pool"}
    assert not graph["harnessctl.run"] & (above | {"harnessctl.regress", "harnessctl.report"})
