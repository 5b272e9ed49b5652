"""The import cycles among Roost's modules, largest first, counting imports made only for
the type checker too (as the import-linter contracts do).

    .venv/bin/python tools/import_cycles.py              # the whole package
    .venv/bin/python tools/import_cycles.py roost.core   # one subpackage
    .venv/bin/python tools/import_cycles.py roost.core -v   # and the modules of each

A cycle is a set of modules each of which reaches every other through imports (a
strongly connected component of the import graph); docs/architecture.md says which
ones are left and why.
"""

from __future__ import annotations

import argparse
import sys

import grimp


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
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
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in edges:
        if v not in index:
            visit(v)
    return sorted(found, key=len, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("package", nargs="?", default="roost")
    parser.add_argument("-v", "--verbose", action="store_true", help="name each cycle's modules")
    args = parser.parse_args()
    graph = grimp.build_graph("roost", exclude_type_checking_imports=False)
    mods = {m for m in graph.modules if m == args.package or m.startswith(args.package + ".")}
    edges = {m: graph.find_modules_directly_imported_by(m) & mods for m in sorted(mods)}
    found = cycles(edges)
    sizes = ", ".join(str(len(c)) for c in found) or "none"
    print(f"{args.package}: {len(mods)} modules, {len(found)} cycles of {sizes} modules")
    if args.verbose:
        for c in found:
            print(f"{len(c)}: " + " ".join(c))


if __name__ == "__main__":
    main()
