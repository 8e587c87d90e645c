"""The import graph of ``aiokproto`` has no cycle outside ``TYPE_CHECKING`` blocks.

Built from source with ``ast`` (nothing is imported, so the test is quick and
sees every module, optional extras included). Every ``import`` statement counts,
module-level and deferred (inside functions) alike, except those under
``if TYPE_CHECKING:`` (any spelling: ``typing.``, ``_typing.``). Lazy imports by
name string (``importlib.import_module``) are not statements and do not count.
Issue 32, item 3; docs/DESIGN.md names this test.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = "aiokproto"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE


def _modules() -> dict[str, Path]:
    """Dotted name to source file, ``pkg/__init__.py`` named ``pkg``."""
    found: dict[str, Path] = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, skipping the body (not the else) of TYPE_CHECKING ifs."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        else:
            if node.level:
                anchor = name.split(".")
                # A package's own __init__ is level 1's anchor; a module's is its parent.
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop] if drop else anchor
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases = [base]
            names = [alias.name for alias in node.names]
        for base in bases:
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                continue
            # `import a.b.c` runs each package __init__ on the way, but the importing
            # module's own ancestors have already started before it ran: those
            # edges are no dependency, only the names it takes from them are.
            parts = base.split(".")
            for i in range(1, len(parts)):
                prefix = ".".join(parts[:i])
                if prefix in modules and not name.startswith(prefix + "."):
                    targets.add(prefix)
            subs = [f"{base}.{item}" for item in names if f"{base}.{item}" in modules]
            targets.update(subs)
            takes_names = len(subs) < len(names) or not names
            if base in modules and (takes_names or not name.startswith(base + ".")):
                targets.add(base)
    targets.discard(name)
    return targets


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    members = set(component)
    inner = sorted(f"{a} -> {b}" for a in component for b in sorted(graph[a]) if b in members)
    return f"cycle of {len(component)}: " + ", ".join(inner)


def test_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_type_checking_imports_are_skipped() -> None:
    tree = ast.parse(
        "import typing\n"
        "if typing.TYPE_CHECKING:\n    import aiokproto.x\n"
        "else:\n    import aiokproto.y\n"
        "def f():\n    from aiokproto import z\n"
    )
    found = {ast.unparse(node) for node in _imports(tree)}
    assert found == {"import typing", "import aiokproto.y", "from aiokproto import z"}


def test_graph_resolves_submodules_and_relative_imports() -> None:
    graph = import_graph()
    # `from .producer import Producer` inside aiokproto/producer/__init__.py.
    assert "aiokproto.producer.producer" in graph["aiokproto.producer"]
    assert len(graph) > 100


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    if found:
        pytest.fail(
            "import cycles outside TYPE_CHECKING blocks:\n"
            + "\n".join(_describe(c, graph) for c in found)
        )


def test_no_cycles_between_subpackages() -> None:
    # One level up: aiokproto.metrics and aiokproto.cluster (and every other pair of
    # top-level modules or packages) do not import each other, even through modules
    # that form no cycle themselves.
    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    graph: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        graph.setdefault(top(module), set()).update(
            top(t) for t in targets if top(t) != top(module)
        )
    found = cycles(graph)
    if found:
        pytest.fail(
            "import cycles between aiokproto's subpackages:\n"
            + "\n".join(_describe(c, graph) for c in found)
        )


def test_relative_imports_resolve(tmp_path: Path) -> None:
    modules = {
        "aiokproto.a": tmp_path / "a" / "__init__.py",
        "aiokproto.a.b": tmp_path / "a" / "b.py",
        "aiokproto.a.c": tmp_path / "a" / "c.py",
        "aiokproto.d": tmp_path / "d.py",
    }
    (tmp_path / "a").mkdir()
    modules["aiokproto.a"].write_text("from . import b\nfrom .c import NAME\n")
    modules["aiokproto.a.b"].write_text("from .c import NAME\nfrom .. import d\nfrom . import X\n")
    assert _edges("aiokproto.a", modules["aiokproto.a"], modules) == {
        "aiokproto.a.b",
        "aiokproto.a.c",
    }
    # `from . import X` takes a name from its own package: an edge back to it
    assert _edges("aiokproto.a.b", modules["aiokproto.a.b"], modules) == {
        "aiokproto.a.c",
        "aiokproto.d",
        "aiokproto.a",
    }
