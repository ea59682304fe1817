"""No circular import anywhere in edgelab: the import graph of every module, walked whole.

grimp (import-linter's graph builder) reads every import statement under ``edgelab/``, those
inside functions included: a lazy import that dodges a cycle at load time is still a cycle in the
design. Imports under ``if TYPE_CHECKING:`` are left out, since they never run. The layers
contract in ``pyproject.toml`` orders the packages; this test also catches cycles inside one
package, between two modules of the same layer.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGE = "edgelab"


def _components(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _cycle_through(graph: grimp.ImportGraph, component: list[str]) -> list[str]:
    """One concrete cycle in ``component``: its first module, round the shortest way back to it."""
    start = component[0]
    best: tuple[str, ...] | None = None
    for first in sorted(graph.find_modules_directly_imported_by(start)):
        if first not in component:
            continue
        back = graph.find_shortest_chain(importer=first, imported=start)
        if back is not None and (best is None or len(back) < len(best)):
            best = back
    assert best is not None  # a component of two or more modules always has a way back
    return [start, *best]


def _describe(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    steps = []
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        lines = sorted(
            d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)
        )
        steps.append(f"{importer} (l.{','.join(map(str, lines)) or '?'})")
    return " -> ".join([*steps, cycle[-1]])


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None, exclude_type_checking_imports=True)


def test_the_graph_is_the_whole_package(graph):
    """The walk sees every layer and the modules that were once in cycles (a guard against an empty pass)."""
    for module in (
        "edgelab.cli",
        "edgelab.store.models",
        "edgelab.store.tables",
        "edgelab.probe.facts",
        "edgelab.inventory.probe",
        "edgelab.protocols.ws",
        "edgelab.sim.winsim.values",
    ):
        assert module in graph.modules, module
    assert len(graph.modules) > 200


def test_no_module_imports_itself_round_a_cycle(graph):
    """Every circular import is named with its path and the line of each import."""
    cycles = [_describe(graph, _cycle_through(graph, c)) for c in _components(graph)]
    assert not cycles, "circular imports:\n  " + "\n  ".join(cycles)


def test_the_walk_finds_a_cycle_when_there_is_one():
    """The detector itself, on a graph with one cycle of three and one innocent import."""
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c", "p.d"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b", line_number=3, line_contents="import p.b")
    g.add_import(importer="p.b", imported="p.c", line_number=4, line_contents="import p.c")
    g.add_import(importer="p.c", imported="p.a", line_number=5, line_contents="import p.a")
    g.add_import(importer="p.d", imported="p.a", line_number=6, line_contents="import p.a")
    comps = _components(g)
    assert comps == [["p.a", "p.b", "p.c"]]
    assert _describe(g, _cycle_through(g, comps[0])) == "p.a (l.3) -> p.b (l.4) -> p.c (l.5) -> p.a"
