#!/usr/bin/env python3
"""code_shape.py: two rules of the code that review used to check by eye, checked from the sources.

    tests/code_shape.py graph [--dot] [--known-circle FILE,FILE...] [SRC_DIR]
                                                       (default: src/pool of this checkout)
    tests/code_shape.py lengths [--max N] [--warn-only DIR[,DIR...]] [DIR...]
                                                       (default: src tools shim spank, at most 60 lines)

graph: the file-level call graph of the pool (src/pool): file A calls file B when a function defined
in A calls a function defined in B. A header's own functions (static helpers, inline ones) count as
its .c file's (split_merge.h's as split_merge.c's), a header without a .c file is a node of its own,
and so is arena.h, the interface of all the arena's files, whose inline accessors must call nothing.
Prints each file's callees with one function pair naming the edge, then every strongly connected
component of more than one file (a call circle: Tarjan's algorithm), and exits 1 when there is one:
calls among the pool's files run one way (docs/DESIGN.md, "Layers"); --known-circle accepts exactly
one circle of exactly those files (while a known one is being taken apart: any change fails). --dot
prints the graph as Graphviz instead.

lengths: every function over N lines (default 60), counted as a reader sees it: from the line of its
name to its closing brace, both included. Lists the offenders; exits 1 when there is one, except in
the directories named by --warn-only, whose offenders are listed as warnings only.

Both read the sources, not the objects: a call is an identifier followed by `(` inside a function's
body, comments, strings and preprocessor lines taken out. A call through a function pointer or hidden
in a macro's body is not seen; the pool calls its callees by name. Exit status 2 on bad usage.
"""

import os
import re
import sys

KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "_Alignof", "alignof", "_Static_assert",
            "defined", "__attribute__", "__typeof__", "typeof", "_Generic", "do", "else", "case"}


def strip(text):
    """The C text with comments, string and character literals and preprocessor lines blanked (line
    breaks kept, so that line numbers stay)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        ch = text[i]
        if at_line_start and ch in " \t":
            out.append(ch)
            i += 1
            continue
        if at_line_start and ch == "#":          # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        at_line_start = False
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            out.append(ch + re.sub(r"[^\n]", " ", text[i + 1:j]) + ch)
            i = j + 1
        else:
            if ch == "\n":
                at_line_start = True
            out.append(ch)
            i += 1
    return "".join(out)


IDENT_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def functions(path):
    """[(name, first line, last line, body text, is_static)] of the functions defined in the file."""
    raw = open(path, encoding="utf-8").read()
    text = strip(raw)
    found = []
    depth, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "{":
            if depth == 0:
                head = text[max(0, i - 4000):i].rstrip()     # (a head is never that long)
                # a definition's head ends with its parameter list, then maybe attributes
                head_core = re.sub(r"(\s*__attribute__\s*\(\(.*?\)\))+$", "", head, flags=re.S)
                if head_core.endswith(")"):
                    k, level = len(head_core) - 1, 0
                    while k >= 0:
                        if head_core[k] == ")":
                            level += 1
                        elif head_core[k] == "(":
                            level -= 1
                            if level == 0:
                                break
                        k -= 1
                    m = re.search(r"([A-Za-z_]\w*)\s*$", head_core[:k])
                    stmt = head_core[max(head_core.rfind(";"), head_core.rfind("}")) + 1:k]
                    if m and "=" not in stmt and m.group(1) not in KEYWORDS:
                        end = match_brace(text, i)
                        first = text.count("\n", 0, max(0, i - 4000) + m.start()) + 1
                        last = first + text.count("\n", max(0, i - 4000) + m.start(), end)
                        found.append((m.group(1), first, last, text[i:end + 1],
                                      re.search(r"\bstatic\b", stmt) is not None, raw))
                        i = end + 1
                        continue
            depth += 1
        elif ch == "}":
            depth -= 1
        i += 1
    return found


def match_brace(text, i):
    level = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            level += 1
        elif text[j] == "}":
            level -= 1
            if level == 0:
                return j
    return len(text) - 1


# ---- graph ----------------------------------------------------------------------------------------

# Headers that are the interface of several files, not one file's own: their functions are a node of
# their own, and may call no function of another file (checked: accessors of the structures only).
INTERFACE_HEADERS = {"arena.h"}


def node_of(path, names):
    base = os.path.basename(path)
    if base.endswith(".h") and base[:-2] + ".c" in names and base not in INTERFACE_HEADERS:
        return base[:-2] + ".c"
    return base


def call_graph(src):
    names = set(os.listdir(src))
    files = sorted(f for f in names if f.endswith((".c", ".h")))
    defined = {}                       # name -> {node}
    bodies = []                        # (node, function, body)
    for f in files:
        node = node_of(f, names)
        for name, _, _, body, _, _ in functions(os.path.join(src, f)):
            defined.setdefault(name, set()).add(node)
            bodies.append((node, name, body))
    edges = {}                         # (caller node, callee node) -> (caller function, callee function)
    for node, fn, body in bodies:
        for m in IDENT_CALL.finditer(body):
            callee = m.group(1)
            where = defined.get(callee)
            if not where or node in where or callee in KEYWORDS:
                continue
            for target in sorted(where):
                edges.setdefault((node, target), (fn, callee))
    nodes = sorted({node_of(f, names) for f in files})
    return nodes, edges


def sccs(nodes, edges):
    """Tarjan's strongly connected components, each sorted, larger than one file."""
    succ = {v: sorted(b for (a, b) in edges if a == v) for v in nodes}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
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

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out)


def cmd_graph(args):
    dot = "--dot" in args
    rest = [a for a in args if a != "--dot"]
    known = None
    if "--known-circle" in rest:
        at = rest.index("--known-circle")
        if at + 1 >= len(rest):
            return usage()
        known = sorted(rest[at + 1].split(","))
        del rest[at:at + 2]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        return usage()
    src = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "pool")
    nodes, edges = call_graph(src)
    if dot:
        print("digraph pool {")
        for (a, b) in sorted(edges):
            print('  "%s" -> "%s";' % (a, b))
        print("}")
        return 0
    for v in nodes:
        outs = [(b, edges[(a, b)]) for (a, b) in sorted(edges) if a == v]
        if outs:
            print("%s -> %s" % (v, ", ".join("%s (%s -> %s)" % (b, f, g) for b, (f, g) in outs)))
    comps = sccs(nodes, edges)
    calling = sorted("%s (%s -> %s)" % (b, f, g) for (a, b), (f, g) in edges.items() if a in INTERFACE_HEADERS)
    if calling:
        print("code_shape.py graph: the interface header arena.h calls other files: %s" % ", ".join(calling))
        return 1
    for c in comps:
        print("call circle (%d files): %s" % (len(c), " ".join(c)))
    if known is not None and comps == [known]:
        print("code_shape.py graph: the one call circle is the known one (--known-circle), to be taken apart")
        return 0
    if comps:
        print("code_shape.py graph: %d call circle(s) among %s's files" % (len(comps), os.path.normpath(src)))
        return 1
    print("code_shape.py graph: no call circle among %d files of %s" % (len(nodes), os.path.normpath(src)))
    return 0


# ---- lengths --------------------------------------------------------------------------------------

def long_functions(paths, limit):
    out = []
    for top in paths:
        for dirpath, _, fnames in sorted(os.walk(top)):
            for f in sorted(fnames):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                for name, first, last, _, _, _ in functions(path):
                    n = last - first + 1
                    if n > limit:
                        out.append((path, first, name, n))
    return out


def cmd_lengths(args):
    limit, warn_only, dirs = 60, [], []
    it = iter(args)
    for a in it:
        if a == "--max":
            try:
                limit = int(next(it))
            except (StopIteration, ValueError):
                return usage()
        elif a == "--warn-only":
            try:
                warn_only = [d.rstrip("/") for d in next(it).split(",") if d]
            except StopIteration:
                return usage()
        elif a.startswith("-"):
            return usage()
        else:
            dirs.append(a.rstrip("/"))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not dirs:
        dirs = [os.path.join(root, d) for d in ("src", "tools", "shim", "spank")]
        warn_only = [os.path.join(root, d) for d in warn_only]
    for d in dirs:
        if not os.path.isdir(d):
            print("code_shape.py lengths: no directory %s" % d, file=sys.stderr)
            return 2
    failing = 0
    for path, line, name, n in long_functions(dirs, limit):
        soft = any(os.path.normpath(path).startswith(os.path.normpath(w) + os.sep) for w in warn_only)
        rel = os.path.relpath(path, root)
        print("%s:%d: %s: function %s is %d lines (at most %d)" % (rel, line, "warning" if soft else "error",
                                                                      name, n, limit))
        failing += not soft
    if failing:
        print("code_shape.py lengths: %d function(s) over %d lines" % (failing, limit))
        return 1
    print("code_shape.py lengths: no function over %d lines%s" % (
        limit, " (outside the warn-only directories)" if warn_only else ""))
    return 0


def usage():
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


def main(argv):
    if not argv or argv[0] not in ("graph", "lengths"):
        return usage()
    return cmd_graph(argv[1:]) if argv[0] == "graph" else cmd_lengths(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
