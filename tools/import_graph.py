"""The import graph of ``addon/dragoman``: import circles and folder sizes (issue 30's house rules).

``python tools/import_graph.py`` prints every circle (strongly connected set of modules, counting every import
statement: top-level, inside functions and under ``TYPE_CHECKING``) and the largest folders; exit 1 when there is
a circle or a folder holds more than ``MAX_MODULES`` modules. ``tests/test_layout.py`` runs the same checks.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "addon"
MAX_MODULES = 15


def modules(root: Path = ROOT) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for p in sorted((root / "dragoman").rglob("*.py")):
        parts = p.relative_to(root).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the Dragoman modules it imports (``from pkg import name`` counts ``pkg.name`` when that is one)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dragoman":
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges[mod].add(full if full in mods else node.module)
            elif isinstance(node, ast.Import):
                edges[mod].update(a.name for a in node.names if a.name in mods)
        edges[mod].discard(mod)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, todo = work[-1]
            if todo:
                w = todo.pop()
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, sorted(edges[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def folder_sizes(mods: dict[str, Path]) -> Counter[str]:
    """folder -> how many modules it holds (``__init__`` not counted)."""
    return Counter(str(p.parent.relative_to(ROOT)) for p in mods.values() if p.name != "__init__.py")


def main() -> int:
    mods = modules()
    found = circles(graph(mods))
    for comp in found:
        print("circle:", " <-> ".join(comp))
    sizes = folder_sizes(mods)
    big = {d: n for d, n in sizes.items() if n > MAX_MODULES}
    for d, n in sizes.most_common(5):
        print(f"{n:3d} modules  {d}")
    for d, n in big.items():
        print(f"too big: {d} holds {n} modules (> {MAX_MODULES})")
    print(f"{len(mods)} modules, {len(found)} circles")
    return 1 if found or big else 0


if __name__ == "__main__":
    sys.exit(main())
