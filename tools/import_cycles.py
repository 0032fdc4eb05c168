"""Fail on an import cycle between modules: ``python tools/import_cycles.py [PACKAGE ...]``.

import-linter's contracts hold the layers; this holds the modules inside them. Every import
counts, those under ``TYPE_CHECKING`` and inside functions too: a cycle in annotations is still
two modules that cannot be understood one before the other. Each cycle found is printed as one
line (its modules, and the import that closes it with its line number), and the exit status is 1;
none, 0. A package's ``__init__`` importing its own submodules is not a cycle (it is the package's
face, and Python imports a package before its submodules anyway).

The packages default to the project's own (``core/``, ``plugins/``); run with those folders on
``PYTHONPATH``, as ``tox -e lint`` does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grimp

PACKAGES = (
    "coordkit",
    "coordkit_memory",
    "coordkit_zookeeper",
    "coordkit_redis",
    "coordkit_assignors",
    "coordkit_elections",
    "coordkit_partitioners",
    "coordkit_offsets",
    "coordkit_placements",
)


def import_edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    """Module → the modules it imports, leaving out a package's ``__init__`` importing its own
    descendants."""
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        targets = set()
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.startswith(module + "."):
                continue  # a package's face
            targets.add(imported)
        edges[module] = targets
    return edges


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted; sorted among themselves."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
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
    return sorted(found)


def describe(graph: grimp.ImportGraph, component: Sequence[str]) -> str:
    """One line: the modules of a cycle and, for each import inside it, where it is."""
    members = set(component)
    imports = []
    for importer in component:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            if imported.startswith(importer + "."):
                continue
            lines = sorted(
                d["line_number"]
                for d in graph.get_import_details(importer=importer, imported=imported)
            )
            imports.append(f"{importer}:{lines[0] if lines else '?'} -> {imported}")
    return f"import cycle of {len(component)} modules: " + "; ".join(imports)


def main(argv: Sequence[str]) -> int:
    packages = tuple(argv) or PACKAGES
    import grimp  # import-linter's graph builder (the lint dependency group)

    graph = grimp.build_graph(*packages, include_external_packages=False)
    found = cycles(import_edges(graph))
    for component in found:
        print(describe(graph, component))
    if found:
        print(f"{len(found)} import cycle(s) in {', '.join(packages)}", file=sys.stderr)
        return 1
    print(f"no import cycle in {', '.join(packages)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
