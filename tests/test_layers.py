"""The import contracts between packages (.importlinter) hold."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    # import-linter (the test extra) installs it next to this interpreter.
    beside = Path(sys.executable).parent / "lint-imports"
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    return found


def test_every_import_contract_is_kept() -> None:
    # --no-cache: nothing written into the checkout; cwd: where .importlinter is found.
    done = subprocess.run([_lint_imports(), "--no-cache"], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout, done.stdout


def test_the_architecture_page_describes_every_package() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    described = set(re.findall(r"^\| `(\w+)` \|", page, flags=re.M))
    source = REPO / "src" / "phalanx"
    packages = {p.parent.name for p in source.glob("*/__init__.py")}
    modules = {p.stem for p in source.glob("*.py") if p.stem != "__init__"}
    assert packages | modules == described, (packages | modules) ^ described


def test_the_architecture_diagram_draws_every_layered_package() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    diagram = page.split("```")[1]
    drawn = set(re.findall(r"\b([a-z]+)\b", diagram))
    contract = (REPO / ".importlinter").read_text().split("[importlinter:contract:layers]")[1]
    layers = contract.split("layers =")[1].split("\n[")[0]
    layered = set(re.findall(r"phalanx\.(\w+)", layers))
    assert layered <= drawn, layered - drawn


def test_every_module_the_architecture_page_names_exists() -> None:
    page = (REPO / "docs" / "architecture.md").read_text()
    source = REPO / "src" / "phalanx"
    named = set(re.findall(r"`((?:\w+/)+\w+\.py)`", page))
    assert named, "the page names no module"
    missing = sorted(p for p in named if not (source / p).exists() and not (REPO / p).exists())
    assert not missing, missing
    # Who builds a plane, said where it is: `make_plane` lives in compute/factory.py.
    for said in re.findall(r"`([\w/]+\.py)`'s `make_plane`", page):
        assert "def make_plane" in (source / said).read_text(), said


def _cycle(graph: Any, modules: set[str]) -> list[str] | None:
    """An import cycle among ``modules`` (as the path ``[a, b, a]``), or None."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in modules}
    done: set[str] = set()
    for start in sorted(modules):
        path: list[str] = []
        stack: list[tuple[str, int]] = [(start, 0)]
        while stack:
            module, i = stack.pop()
            if module in done:
                continue
            if i == 0:
                if module in path:
                    return [*path[path.index(module):], module]
                path.append(module)
            if i < len(edges[module]):
                stack.append((module, i + 1))
                stack.append((edges[module][i], 0))
            else:
                path.pop()
                done.add(module)
    return None


@pytest.mark.parametrize("package", ["phalanx.control", "phalanx.sdk"])
def test_no_import_cycle_between_the_modules_of(package: str) -> None:
    """Within these packages, no module imports (at any level, type-checking imports
    included) one that imports it back: a rule calls back into the state through returned
    decisions, not through an import."""
    graph = grimp.build_graph("phalanx")
    # The package's __init__ only re-exports its modules (lazily): it is not one of the files.
    modules = graph.find_children(package) | {
        m for child in graph.find_children(package)
        for m in graph.find_descendants(child)}
    assert len(modules) > 3
    assert _cycle(graph, modules) is None, _cycle(graph, modules)
