"""The scheduler core's import graph: no cycles, and nothing from above it.

Each module of ``phalanx.scheduler`` may import only modules below it, so that any
of them can be read, tested and compiled without the ones that use it. Imports
made for the type checker alone (under ``TYPE_CHECKING``) count: compiled with
mypyc, an annotation is a real reference, and a cycle hidden from the interpreter
is still a cycle in the design. The core is pure (no database, HTTP or processes),
so of Phalanx it may use only the job and queue specs and the error types.
"""

from __future__ import annotations

import grimp
import pytest

CORE = "phalanx.scheduler"
ALLOWED_OUTSIDE = ("phalanx.spec", "phalanx.errors")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("phalanx", cache_dir=None, exclude_type_checking_imports=False)


def in_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


def core_imports(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Each core module -> the core modules it imports directly."""
    modules = sorted(m for m in graph.modules if in_core(m))
    return {m: {i for i in graph.find_modules_directly_imported_by(m) if in_core(i)}
            for m in modules}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
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
            if len(component) > 1 or v in edges.get(v, ()):
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def describe(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    lines = [f"{d['importer']}:{d['line_number']} {d['line_contents']}"
             for d in graph.get_import_details(importer=importer, imported=imported)]
    return "; ".join(lines) or f"{importer} -> {imported}"


def test_no_import_cycles_in_the_core(graph: grimp.ImportGraph) -> None:
    edges = core_imports(graph)
    assert len(edges) > 10, "the core's modules were not found"
    problems = []
    for component in cycles(edges):
        members = set(component)
        links = [describe(graph, a, b) for a in component for b in sorted(edges[a] & members)]
        problems.append(f"cycle among {', '.join(component)}:\n    " + "\n    ".join(links))
    assert not problems, "\n".join(problems)


def test_the_core_imports_nothing_from_above(graph: grimp.ImportGraph) -> None:
    upward = []
    for module in sorted(m for m in graph.modules if in_core(m)):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if in_core(imported) or not imported.startswith("phalanx"):
                continue
            if any(imported == p or imported.startswith(p + ".") for p in ALLOWED_OUTSIDE):
                continue
            upward.append(describe(graph, module, imported))
    assert not upward, "the scheduler core imports from above it:\n" + "\n".join(upward)


def test_the_cycle_check_sees_cycles() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
