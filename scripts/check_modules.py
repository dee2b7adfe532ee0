#!/usr/bin/env python3
"""Module imports of the workspace (issue 33): no circle between the modules (files) of any
crate, and the scan's folders import only what their README.md allows ("May import:").

A module is a source file (`mod.rs` and `lib.rs` stand for their folder and crate). An import is a
path in code, comments skipped: `crate::a::b`, `super::x`, `self::x`, or a child module's name
in the file that declares it; it points at the deepest module the path names. cargo-modules
(the well-kept tool for module graphs) checks acyclicity per item, where a type and its own
method already form a circle, so it cannot answer this; the graph here is the one a reader
follows. Exits 1 naming each circle and each import a folder's README does not allow.
"""
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
CRATES = ["cache", "catalog", "datagen", "iceberg", "input", "optimizer", "options", "scan",
          "server", "bench"]
PATH = re.compile(r"\b(crate|super|self)((?:::[a-z_][a-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)::\{([^}]*)\}", re.S)
MAY_IMPORT = re.compile(r"^May import:\s*(.*)$", re.M)
TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\(crate\))?\s+)?mod\s+([a-z_]+)\s*\{")


def module_of(src: pathlib.Path, path: pathlib.Path) -> tuple:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def code(path: pathlib.Path) -> str:
    """The file without comments (line comments outside strings, block comments)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    out = []
    for line in text.splitlines():
        if line.lstrip().startswith("//"):
            continue
        if "//" in line and '"' not in line:
            line = line.split("//", 1)[0]
        out.append(line)
    return "\n".join(out)


def resolve(modules: set, base: tuple, parts: list) -> tuple | None:
    """The deepest module `base` + `parts` names."""
    best = None
    current = base
    if current in modules:
        best = current
    for p in parts:
        current = current + (p,)
        if current in modules:
            best = current
        else:
            break
    return best


def graph(src: pathlib.Path, is_bin_crate_root=False) -> dict:
    files = [p for p in src.rglob("*.rs") if "bin" not in p.relative_to(src).parts[:1]]
    texts = {}
    for p in files:
        m = module_of(src, p)
        text = code(p)
        # An inline test module (`#[cfg(test)] mod tests { … }`, last in the file) is a module
        # of its own: what a test imports is not what the file does.
        test = TEST_MODULE.search(text)
        if test:
            texts[m + (test.group(1),)] = (text[test.end():], False)
            text = text[: test.start()]
        texts[m] = (text, p.name in ("mod.rs", "lib.rs", "main.rs"))
    modules = set(texts)
    edges = {m: set() for m in modules}
    for m, (text, is_dir) in texts.items():
        here = m if is_dir else m[:-1]  # the module `self::`/children resolve against
        refs = []
        for kind, rest in PATH.findall(text):
            refs.append((kind, rest.strip(":").split("::")))
        for kind, inner in GROUP.findall(text):
            for item in inner.split(","):
                item = item.strip().split("::")
                if item and item[0] and item[0] != "self":
                    refs.append((kind, item))
        for kind, parts in refs:
            if kind == "crate":
                base = ()
            elif kind == "self":
                base = m
            else:  # super: the parent of this module
                base = m[:-1]
                while parts and parts[0] == "super":
                    parts, base = parts[1:], base[:-1]
            target = resolve(modules, base, parts)
            if target is not None and target != m and not is_ancestor(target, m):
                edges[m].add(target)
        # A child module's name used as a path in the file that declares it.
        if is_dir:
            children = {c[-1] for c in modules if len(c) == len(m) + 1 and c[:-1] == m}
            for child in children:
                if re.search(rf"(?<![:\w]){child}::", text):
                    edges[m].add(m + (child,))
    return edges


def is_ancestor(a: tuple, b: tuple) -> bool:
    """`a` declares `b` (a test module's `use super::*` is not an import of the parent)."""
    return len(a) < len(b) and b[: len(a)] == a


def circles(edges: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer_errors(edges: dict) -> list:
    """Imports between the scan's folders that a folder's README does not allow."""
    src = REPO / "scan" / "src"
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    errors = []
    allowed = {}
    for f in folders:
        readme = src / f / "README.md"
        m = MAY_IMPORT.search(readme.read_text()) if readme.exists() else None
        if not m:
            errors.append(f"scan/src/{f}/README.md: missing, or without a 'May import:' line")
            continue
        allowed[f] = set(re.findall(r"`([a-z_]+)/?`", m.group(1))) | {f}
    for m, targets in edges.items():
        for t in targets:
            if m and t and m[0] in allowed and t[0] in folders and t[0] not in allowed[m[0]]:
                errors.append(f"scan/src/{'/'.join(m)}.rs imports {'::'.join(t)}: "
                              f"{m[0]}/ may import {', '.join(sorted(allowed[m[0]] - {m[0]})) or 'nothing'}")
            if m and m[0] in allowed and t == ():
                errors.append(f"scan/src/{'/'.join(m)}.rs imports from the crate root "
                              "(re-exports are for other crates; name the folder)")
    return errors


def main() -> int:
    failed = False
    summary = []
    for crate in CRATES:
        src = REPO / crate / "src"
        edges = graph(src)
        found = circles(edges)
        for c in found:
            failed = True
            print(f"{crate}: import circle between " + ", ".join("::".join(m) or "lib" for m in c))
        if crate == "scan":
            for e in layer_errors(edges):
                failed = True
                print(e)
        summary.append(f"{crate} {len(edges)}")
    if failed:
        print("module imports: FAILED (scripts/check_modules.py)")
        return 1
    print("module imports: no circle; scan layers as declared (" + ", ".join(summary) + " modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
