#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the layers of src/ and include/ from the symbols each object
defines and uses and from the files each source and header includes.

A file is layer/name: src/core/stream.c and include/core/stream.h are
core/stream; a header with no source (include/core/stream-t.h, a type) is
a file of its own. The use graph has A -> B when
  - A's object (build/<layer>/<file>.o) has an undefined symbol (U) that
    B's object defines (T, D, B, R...), or
  - A's source or header has #include "B.h" (a project header), unless A
    is a part of B by its name (erl/erl_setup_queue, erl/erl_setup_int of
    erl/erl_setup: B's name, "_", more): a module's parts share its header.
It fails when a file uses a file of a layer its layer may not use (ALLOWED
below: each layer uses only those under it), or when two or more files
form a circle (a cycle of any length in the graph). The load client
(tools/httpclient, objects in build/client/) has no layers, and no circle
either.
  scripts/check-layers.py [BUILD_DIR]      (default build)
Prints each upward use with its symbols or includes, the circles, one a
line, and a closing summary line.
"""
import os
import re
import subprocess
import sys

# The layers each layer may use (besides itself), lowest first. "" is the
# top level: main.c, options.c, server.c, which wire the layers together.
# upgrade/ uses every layer and none uses it.
BELOW = ["lib", "obs", "auth", "core", "http", "transport", "erl", "upgrade", ""]
ALLOWED = {
    "lib": set(),
    "obs": {"lib"},
    "auth": {"lib"},
    "core": {"lib", "obs"},
    "http": {"lib", "obs", "auth", "core"},
    "transport": {"lib", "obs", "auth", "core", "http"},
    "erl": {"lib", "obs", "core"},
    "upgrade": {"lib", "obs", "auth", "core", "http", "transport", "erl"},
    "": set(BELOW),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)\.h"', re.M)


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


def includes(tops, prefix=""):
    """{file: {file it includes}} over the folders tops, a file named by its
    path under its folder (core/stream), after prefix; an include of a
    header of these folders is named so too."""
    out = {}
    for top in tops:
        for root, _dirs, files in os.walk(top):
            for f in files:
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, f)
                name = os.path.relpath(path, top)[:-2]      # core/stream
                with open(path, encoding="utf-8") as fh:
                    found = set(INCLUDE.findall(fh.read()))
                found = {m for m in found if m != name and not name.startswith(m + "_")}
                found = {prefix + m if any(os.path.exists(os.path.join(t, m + ".h"))
                                          for t in tops) else m for m in found}
                out.setdefault(prefix + name, set()).update(found)
    return out


def use_graph(objs, build, incs, prefix=""):
    """{file: {files it uses}} from the objects' symbols and the includes;
    also {file: symbols it uses}, {symbol: file defining it}."""
    owner, uses = {}, {}
    for o in objs:
        name = prefix + os.path.relpath(o, build)[:-2]
        d, u = symbols(o)
        uses[name] = u
        for s in d:
            owner[s] = name
    graph = {n: set() for n in set(uses) | set(incs)}
    for n, u in uses.items():
        for s in u:
            m = owner.get(s)
            if m and m != n:
                graph[n].add(m)
    for n, found in incs.items():
        for m in found:
            graph[n].add(m)
            graph.setdefault(m, set())
    return graph, uses, owner


def layer_of(name):
    return name.split("/")[0] if "/" in name else ""


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
    graph, uses, owner = use_graph(objs, build, includes(("src", "include")))
    bad = 0
    for n in sorted(graph):
        layer = layer_of(n)
        for m in sorted(graph[n]):
            other = layer_of(m)
            if other != layer and other not in ALLOWED[layer]:
                syms = sorted(s for s in uses.get(n, ()) if owner.get(s) == m)
                how = ", ".join(syms) if syms else "#include \"" + m + ".h\""
                print(f"check-layers: {layer or 'top level'} {n} uses {m}: {how}")
                bad += 1
    circles = cycles(graph)
    client = sorted(os.path.join(build, "client", f) for f in os.listdir(os.path.join(build, "client"))
                    if f.endswith(".o") and os.path.exists(os.path.join("tools/httpclient", f[:-2] + ".c"))) \
        if os.path.isdir(os.path.join(build, "client")) else []
    cgraph, _u, _o = use_graph(client, os.path.join(build, "client"),
                               includes(("tools/httpclient",), "httpclient/"), "httpclient/")
    circles += cycles(cgraph)
    for c in circles:
        print("check-layers: circle: " + " <-> ".join(c))
    edges = sum(len(v) for v in graph.values()) + sum(len(v) for v in cgraph.values())
    status = "passed" if bad == 0 and not circles else "FAILED"
    print(f"check-layers: {status}: {len(set(graph) | set(cgraph))} files, {edges} uses, "
          f"{bad} layer violations, {len(circles)} circles")
    return 0 if status == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
