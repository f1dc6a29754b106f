#!/usr/bin/env python3
"""Checks the layers of src/ from the symbols each object defines and uses.

Reads `nm` of every server object (build/<layer>/<file>.o, mirroring
src/<layer>/<file>.c) and builds the file-level use graph: A -> B when A's
object has an undefined symbol (U) that B's object defines (T, D, B, R...).
It fails when
  - a lib/ object uses a symbol of any project file outside lib/,
  - a core/ object uses a symbol of transport/, http/, erl/ or upgrade/,
  - two or more files form a circle (a cycle of any length in the graph).
  scripts/check-layers.py [BUILD_DIR]      (default build)
Prints the circles it finds, one a line, and a closing summary line.
"""
import os
import subprocess
import sys

FORBIDDEN = {
    "lib": {"core", "http", "transport", "erl", "auth", "obs", "upgrade", ""},   # only lib/ and the system
    "core": {"transport", "http", "erl", "upgrade"},
}


def objects(build):
    objs = []
    for root, _dirs, files in os.walk(build):
        rel = os.path.relpath(root, build)
        top = rel.split(os.sep)[0]
        if top in ("tests", "client", "fuzz", "bin"):
            continue
        for f in files:
            # only objects of today's sources: a build dir may hold stale ones
            src = os.path.normpath(os.path.join("src", rel, f[:-2] + ".c"))
            if f.endswith(".o") and os.path.exists(src):
                objs.append(os.path.join(root, f))
    return sorted(objs)


def symbols(obj):
    out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True,
                         text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            used.add(name)
        elif kind in "TDBRGSCV":          # global definitions only (lowercase = static)
            defined.add(name)
    return defined, used


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    objs = objects(build)
    if not objs:
        print(f"check-layers: no objects under {build}/ (run make all first)")
        return 1
    owner, uses = {}, {}
    for o in objs:
        name = os.path.relpath(o, build)[:-2]      # core/stream
        d, u = symbols(o)
        uses[name] = u
        for s in d:
            owner[s] = name
    graph = {n: set() for n in uses}
    for n, u in uses.items():
        for s in u:
            m = owner.get(s)
            if m and m != n:
                graph[n].add(m)
    bad = 0
    for n in sorted(graph):
        layer = n.split("/")[0] if "/" in n else ""
        if layer not in FORBIDDEN:
            continue
        for m in sorted(graph[n]):
            other = m.split("/")[0] if "/" in m else ""
            if other in FORBIDDEN[layer]:
                syms = sorted(s for s in uses[n] if owner.get(s) == m)
                print(f"check-layers: {n} uses {m}: {', '.join(syms)}")
                bad += 1
    circles = cycles(graph)
    for c in circles:
        print("check-layers: circle: " + " <-> ".join(c))
    edges = sum(len(v) for v in graph.values())
    status = "passed" if bad == 0 and not circles else "FAILED"
    print(f"check-layers: {status}: {len(graph)} files, {edges} uses, "
          f"{bad} layer violations, {len(circles)} circles")
    return 0 if status == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
