#!/usr/bin/env python3
"""Fails when the object files of one component's static library call each
other in a circle.

Usage: check-cycles.py [--nm NM] LIB.a...

For each archive, `nm` lists what every object file defines and what it
needs. An object that needs a global symbol another object of the same
archive defines depends on it; a strongly connected set of two or more
objects is a cycle: those files cannot be understood, tested or changed one
at a time. The check reads the compiled code, so it sees calls through
headers and macros alike, and no declaration can hide one.

Prints each cycle with the symbols that tie it and exits 1; exits 0 and
prints a one-line summary per archive when there is none.
"""
import argparse
import collections
import os
import subprocess
import sys


def read_archive(nm, path):
    """Returns ({symbol: defining object}, {object: set of needed symbols})."""
    out = subprocess.run([nm, "-o", path], check=True, capture_output=True,
                         text=True).stdout
    defs, needs = {}, collections.defaultdict(set)
    for line in out.splitlines():
        # "lib.a:obj.o:0000000000000000 T name" or "lib.a:obj.o:  U name"
        head, _, rest = line.rpartition(":")
        obj = head.split(":")[-1]
        parts = rest.split()
        if len(parts) < 2:
            continue
        kind, sym = parts[-2], parts[-1]
        needs.setdefault(obj, set())
        if kind == "U":
            needs[obj].add(sym)
        elif kind.isupper() or kind in ("v", "w"):
            defs.setdefault(sym, obj)
    return defs, needs


def edges_of(defs, needs):
    edges = collections.defaultdict(dict)  # a -> b -> [symbols]
    for obj, syms in needs.items():
        for sym in syms:
            dst = defs.get(sym)
            if dst and dst != obj:
                edges[obj].setdefault(dst, []).append(sym)
    return edges


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nm", default="nm")
    ap.add_argument("libs", nargs="+")
    args = ap.parse_args()
    bad = 0
    for lib in args.libs:
        defs, needs = read_archive(args.nm, lib)
        edges = edges_of(defs, needs)
        cycles = sccs(sorted(needs), edges)
        name = os.path.basename(lib)
        if not cycles:
            print(f"{name}: {len(needs)} objects, no cycle")
            continue
        bad += 1
        for comp in cycles:
            print(f"{name}: cycle between {', '.join(comp)}")
            for a in comp:
                for b, syms in sorted(edges.get(a, {}).items()):
                    if b in comp:
                        shown = ", ".join(sorted(syms)[:6])
                        more = len(syms) - 6
                        extra = f" and {more} more" if more > 0 else ""
                        print(f"  {a} -> {b}: {shown}{extra}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
