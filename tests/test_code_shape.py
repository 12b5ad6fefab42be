"""The package's shape: no import circle between its modules, no function longer than a screen.

Imports are read with `ast` from every module, function-local ones included (as in
tests/test_layers.py), so a lazy import cannot hide a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import PRISM, module_name, prism_imports

MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PRISM.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """{module: the prism modules it imports}; `from a.b import c` is module a.b.c where that is one, else a.b."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported, _ in prism_imports(path):
            while imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_check_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[int, str, int]]:
    """(line, name, length) of every function in `path` longer than `limit` lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append((node.lineno, node.name, lines))
    return found


def test_no_function_is_longer_than_80_lines():
    """A longer one does several things: name each as a function of its own."""
    long = [
        f"{path.relative_to(PRISM.parent)}:{line} {name}: {lines} lines"
        for path in sorted(PRISM.rglob("*.py"))
        for line, name, lines in long_functions(path)
    ]
    assert long == []


def test_the_length_check_sees_a_long_function(tmp_path):
    source = tmp_path / "x.py"
    source.write_text("def f():\n" + "    x = 1\n" * 80 + "\n\ndef g():\n    return 1\n")
    assert long_functions(source) == [(1, "f", 81)]
