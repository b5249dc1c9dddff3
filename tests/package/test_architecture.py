"""The package's shape: no import cycle, no upward import, library modules free of the CLI.

The graph is read from the source (``ast``), with imports inside functions counted too:
a lazy import still makes two modules depend on each other, it only hides it from
Python's import machinery. Layers are listed lowest first; a module may import from its
own layer or a lower one, never from a higher one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "memlib"

# Lowest first. A module's layer is that of the longest prefix listed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("memlib.errors", "memlib._safejson", "memlib._tokens", "memlib._visible", "memlib._progress"),
    ("memlib.records", "memlib._vectors"),
    ("memlib.normalize",),
    ("memlib.candidates", "memlib.score", "memlib.result", "memlib.rank", "memlib.render"),
    ("memlib._capabilities",),
    ("memlib._retrieval", "memlib.rankers", "memlib._periods"),
    ("memlib.stores",),
    ("memlib._paths",),
    ("memlib.explain",),
    ("memlib.engine",),
    (
        "memlib._runtime",
        "memlib.sample",
        "memlib._bulk",
        "memlib._importers",
        "memlib.stores.jsonl._doctor",
    ),
    ("memlib.agent", "memlib.eval", "memlib.notebook"),
    ("memlib.cli",),
    ("memlib", "memlib.__main__"),
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def import_graph() -> dict[str, set[str]]:
    """``module → memlib modules it imports`` (module level and inside functions)."""
    modules = {
        _module_name(path): path
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                origin = _resolve(name, is_package, node)
                # ``from . import x`` may name a submodule: count it when it is one.
                targets = [origin] + [f"{origin}.{alias.name}" for alias in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if not target.startswith("memlib") or target == name:
                    continue
                graph[name].add(target)
                # Importing memlib.x.y runs memlib.x's __init__ first: a dependency too
                # (the root package excepted: every module would depend on it).
                parent = target.rpartition(".")[0]
                while parent and parent != "memlib":
                    graph[name].add(parent)
                    parent = parent.rpartition(".")[0]
    # A package's __init__ importing its own submodules is how packages are built: the
    # parents a submodule runs first are not edges of their children.
    for name, edges in graph.items():
        edges.difference_update({t for t in edges if name.startswith(t + ".")})
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> int:
    best, layer = -1, -1
    for number, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), number
    return layer


def test_every_module_has_a_layer() -> None:
    assert [m for m in import_graph() if layer_of(m) < 0] == []


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_upward_import() -> None:
    upward = sorted(
        f"{module} → {target}"
        for module, targets in import_graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    )
    assert upward == []


@pytest.mark.parametrize(
    "module",
    ["memlib._bulk", "memlib.stores.jsonl._doctor", "memlib.agent", "memlib.eval", "memlib.stores"],
)
def test_library_modules_do_not_parse_command_lines(module: str) -> None:
    graph_modules = [m for m in import_graph() if m == module or m.startswith(module + ".")]
    for name in graph_modules:
        path = PACKAGE.parent / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = PACKAGE.parent / name.replace(".", "/") / "__init__.py"
        assert "argparse" not in path.read_text(encoding="utf-8"), name


def test_the_checker_finds_a_cycle_and_an_upward_import() -> None:
    graph = {"memlib.engine": {"memlib.stores"}, "memlib.stores": {"memlib.engine"}}
    assert cycles(graph) == [["memlib.engine", "memlib.stores"]]
    assert layer_of("memlib.stores") < layer_of("memlib.engine")
