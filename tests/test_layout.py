"""The house layout: every module imports on its own, module-level imports form no cycle, and
data flows one way through the layers (shared/DESIGN.md, "Package layout").

Layers, bottom to top: ``workloads`` and ``arch_models``; ``dataflow``; ``simulator``;
``explorer`` and ``validation``; ``cli``. The shared leaves (``dtypes``, ``units``, ``errors``,
``io``) sit under all of them. The checks:

- **isolation**: each module under ``infersim/`` is imported with no ``infersim`` module loaded
  before it (one child process; ``infersim.*`` is dropped from ``sys.modules`` between imports,
  third-party packages stay cached), so a module that only works after another was imported
  fails here;
- **cycles**: the static import graph of the module-level imports (``import infersim.x``,
  ``from infersim.x import y``, relative imports, ``if TYPE_CHECKING:`` blocks included) has no
  cycle. Imports inside functions are left out of this check: a lazy import may point back up
  (a report reading validation records, say) without a cycle at import time;
- **layers**: on every import, module-level or inside a function, no module reaches a layer
  above its own, and only ``infersim.cli`` imports typer, rich or ``infersim.cli`` (the
  ``__main__`` entry points may import ``infersim.cli``, nothing else).

Edges go to the module named, not to the packages Python initializes on the way (``import
infersim.a.b`` runs ``infersim/__init__.py`` too, but that is not a dependency of the importer).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "infersim"

LAYERS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("infersim.workloads", "infersim.arch_models"),
     ("infersim.dataflow", "infersim.simulator", "infersim.explorer", "infersim.validation",
      "infersim.cli")),
    (("infersim.dataflow",),
     ("infersim.simulator", "infersim.explorer", "infersim.validation", "infersim.cli")),
    (("infersim.simulator",), ("infersim.explorer", "infersim.cli")),
)
"""(importer packages, packages they must not import), bottom layer first."""

LEAVES = ("infersim.dtypes", "infersim.units", "infersim.errors", "infersim.io")
"""Shared modules under every layer: they import each other only."""

NO_FACADE = ("infersim.workloads", "infersim.arch_models", "infersim.dataflow",
             "infersim.simulator", *LEAVES)
"""Packages that must not import ``infersim`` itself: the public-API package imports the
simulator (``from infersim import dtypes`` is fine: that is the leaf module)."""

CLI_ONLY = ("typer", "rich")
"""Third-party packages only ``infersim.cli`` imports."""

OPTIONAL = frozenset({"torch", "triton", "ray", "kaleido", "scalesim"})
"""Extras a module may need; without them its isolated import is skipped, not failed."""


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` on ``line``; ``lazy``: inside a function body."""

    source: str
    target: str
    line: int
    lazy: bool


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module under ``infersim/`` by dotted name."""
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str) -> str:
    """The module ``name`` denotes (its longest prefix that is a module), or ``name`` itself for
    a third-party import."""
    if not (name == "infersim" or name.startswith("infersim.")):
        return name
    while name not in modules() and "." in name:
        name = name.rpartition(".")[0]
    return name


def _is_type_checking(test: ast.expr) -> bool:
    return "TYPE_CHECKING" in ast.unparse(test)


def _edges_of(module: str, path: Path) -> list[Edge]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    edges: list[Edge] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.split(".")
                    parent = parent[: len(parent) - (child.level - 1)]
                    base = ".".join([*parent, base] if base else parent)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base
                    for alias in child.names
                ]
            for target in targets:
                resolved = _resolve(target)
                if resolved != module:
                    edges.append(Edge(module, resolved, child.lineno, lazy))
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, lazy or inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), lazy=False)
    return edges


@cache
def edges() -> tuple[Edge, ...]:
    """Every import edge of the package, module-level and lazy (each once)."""
    return tuple(dict.fromkeys(e for m, p in modules().items() for e in _edges_of(m, p)))


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path that returns to its start) per strongly connected component with more
    than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_cycle_path(graph, set(c), c[0]) for c in components]


def _cycle_path(graph: dict[str, set[str]], component: set[str], start: str) -> list[str]:
    """A shortest path from ``start`` back to itself inside ``component`` (breadth first)."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, set()) & component):
                if w == start:
                    path = [v]
                    while (before := previous[path[-1]]) is not None:
                        path.append(before)
                    return [*reversed(path), start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    raise AssertionError(f"{start} is in no cycle")


def test_the_walk_sees_the_package() -> None:
    """The graph is built from the real tree (a guard against a check that passes vacuously)."""
    assert {"infersim", "infersim.cli", "infersim.simulator.inference"} <= set(modules())
    found = {(e.source, e.target, e.lazy) for e in edges()}
    engines = "infersim.simulator.engines"
    assert (f"{engines}.analytic", f"{engines}.roofline", False) in found
    assert ("infersim.cli.common", "typer", False) in found
    assert any(lazy for _, _, lazy in found)


def test_cycle_finder_reports_the_path() -> None:
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": {"a"}, "e": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {}
    for e in edges():
        if not e.lazy and e.target in modules():
            graph.setdefault(e.source, set()).add(e.target)
    cycles = _cycles(graph)
    assert not cycles, "module-level import cycles:\n" + "\n".join(
        "  " + " -> ".join(c) for c in cycles
    )


def _breaks(e: Edge) -> list[str]:
    """What ``e`` breaks of the layer rules (empty: nothing)."""
    how = "lazily imports" if e.lazy else "imports"
    found = [
        f"{e.source} {how} {e.target}, a layer above"
        for importers, banned in LAYERS
        if any(_within(e.source, p) for p in importers)
        and any(_within(e.target, b) for b in banned)
    ]
    if e.target == "infersim" and any(_within(e.source, p) for p in NO_FACADE):
        found.append(f"{e.source} {how} the public-API package infersim")
    if e.source in LEAVES and e.target.startswith("infersim.") and e.target not in LEAVES:
        found.append(f"shared leaf {e.source} {how} {e.target}")
    if not _within(e.source, "infersim.cli"):
        if e.target.split(".")[0] in CLI_ONLY:
            found.append(f"{e.source} {how} {e.target}: only infersim.cli may")
        if _within(e.target, "infersim.cli") and not e.source.endswith(".__main__"):
            found.append(f"{e.source} {how} {e.target}: only infersim.cli and the __main__ "
                         "entry points may")
    return found


def _rule_breaks() -> list[str]:
    return [
        f"{modules()[e.source].relative_to(ROOT.parent)}:{e.line}: {b}"
        for e in edges()
        for b in _breaks(e)
    ]


def test_rules_catch_upward_imports() -> None:
    assert _breaks(Edge("infersim.dataflow.x", "infersim.simulator.engines.events", 1, True))
    assert _breaks(Edge("infersim.workloads.ops", "infersim", 1, False))
    assert _breaks(Edge("infersim.explorer.sweep", "rich.progress", 1, False))
    assert _breaks(Edge("infersim.simulator.serving", "infersim.cli.common", 1, False))
    assert not _breaks(Edge("infersim.__main__", "infersim.cli", 1, False))
    assert not _breaks(Edge("infersim.cli.dataflow", "infersim.simulator.engines", 1, False))
    assert not _breaks(Edge("infersim.explorer.report", "infersim.validation.records", 1, True))


def test_layers_import_only_downward() -> None:
    breaks = _rule_breaks()
    assert not breaks, "layer rule broken:\n" + "\n".join("  " + b for b in breaks)


_CHILD = textwrap.dedent(
    """
    import importlib, json, sys, traceback
    names = json.loads(sys.argv[1])
    optional = set(json.loads(sys.argv[2]))
    for name in names:
        for loaded in [m for m in sys.modules if m == "infersim" or m.startswith("infersim.")]:
            del sys.modules[loaded]
        before = set(sys.modules)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            status = "skipped" if top in optional else "failed"
            result = {"status": status, "detail": traceback.format_exc()}
        except BaseException:
            result = {"status": "failed", "detail": traceback.format_exc()}
        else:
            new = sorted({m.split(".")[0] for m in set(sys.modules) - before})
            result = {"status": "ok", "new": new}
        print(json.dumps({"module": name, **result}), flush=True)
    """
)


@pytest.fixture(scope="module")
def isolated_imports() -> dict[str, dict[str, object]]:
    """Each importable module imported alone in a child process: module → its outcome."""
    names = sorted((m for m in modules() if not m.endswith(".__main__")),  # they run on import
                   key=lambda m: (_within(m, "infersim.cli"), m))  # the CLI (typer) last
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(names), json.dumps(sorted(OPTIONAL))],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT.parent,
    )
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row.pop("module")] = row
    missing = [n for n in names if n not in results]
    assert not missing, f"the child stopped before {missing[:3]}:\n{done.stderr[-3000:]}"
    return results


def test_each_module_imports_in_isolation(isolated_imports: dict[str, dict[str, object]]) -> None:
    failed = {m: r["detail"] for m, r in isolated_imports.items() if r["status"] == "failed"}
    assert not failed, "modules that do not import on their own:\n" + "\n".join(
        f"--- {m}\n{detail}" for m, detail in failed.items()
    )


def test_only_the_cli_loads_typer_or_rich(isolated_imports: dict[str, dict[str, object]]) -> None:
    """At run time too: importing a module outside ``infersim.cli`` loads neither, even through
    a third-party package. (A module loaded before is cached, so the first offender shows.)"""
    loads = {
        m: sorted(set(r.get("new", [])) & set(CLI_ONLY))  # type: ignore[arg-type]
        for m, r in isolated_imports.items()
        if not _within(m, "infersim.cli")
    }
    assert not {m: found for m, found in loads.items() if found}


def test_entry_points_run() -> None:
    """``python -m infersim`` and ``python -m infersim.validation`` (not imported above: they run
    their app on import)."""
    for entry in ("infersim", "infersim.validation"):
        done = subprocess.run([sys.executable, "-m", entry, "--help"], capture_output=True,
                              text=True, timeout=120, check=False, cwd=ROOT.parent)
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout
