#!/usr/bin/env python3
"""Module imports of the workspace (issue 33): no circle between the modules of any crate, at
the level of files and at the level of folders, and the scan's folders import only what their
README.md allows ("May import:").

A module is a source file (`mod.rs` and `lib.rs` stand for their folder and crate; an inline
`#[cfg(test)] mod tests { … }` is a module of its own, so what a test imports is not what its
file does). An import is a path in code: every path of a `use` tree (braces expanded) and every
`crate::…`, `super::…` or `self::…` path elsewhere, comments and string literals skipped; in a
folder's `mod.rs` or a crate's `lib.rs`, a path may also start with a child module's name. It
points at the deepest module it names; a name a module re-exports (`pub use a::b::X;`) is
followed to the module that defines it, so `crate::IcebergScanExec` is an import of
`exec::scan_exec`. A child's `use super::…` and a parent's use of a child are edges like any
other: a parent and a child that import each other are a circle.

Folder level: among the children of one folder (files and sub-folders), an edge from anything
inside child A to anything inside child B is an edge A → B; a circle there is reported too.

cargo-modules (the well-kept tool for module graphs) checks acyclicity per item, where a type
and its own method already form a circle, so it cannot answer this. Exits 1 naming each circle
and each import a folder's README does not allow.
"""
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
MAY_IMPORT = re.compile(r"^May import:\s*(.*)$", re.M)
TEST_MODULE = re.compile(
    r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\(crate\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*\{"
)
USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);")
PATH = re.compile(r"(?<![\w:])(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def crates() -> list:
    """Every workspace member with a `src/lib.rs` or `src/main.rs` (from the root Cargo.toml)."""
    text = (REPO / "Cargo.toml").read_text()
    members = re.search(r"members\s*=\s*\[(.*?)\]", text, re.S).group(1)
    return [m for m in re.findall(r'"([^"]+)"', members) if (REPO / m / "src").is_dir()]


def strip(text: str) -> str:
    """`text` without comments and string literals (their content could name a module)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r'r(#*)".*?"\1', '""', text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text, flags=re.S)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def expand(tree: str) -> list:
    """The paths of a `use` tree: `a::{b, c::{d, e}}` → a::b, a::c::d, a::c::e (`self` → a)."""
    tree = re.sub(r"\s+", " ", tree).strip()
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree)
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix = tree[:start].removesuffix("::")
                parts, nested, cur = [], 0, ""
                for c in tree[start + 1 : i]:
                    if c == "," and nested == 0:
                        parts.append(cur)
                        cur = ""
                        continue
                    nested += c == "{"
                    nested -= c == "}"
                    cur += c
                parts.append(cur)
                out = []
                for part in filter(None, parts):
                    for sub in expand(part):
                        if sub == "self" or sub.startswith("self "):
                            out.append(prefix)
                        else:
                            out.append(f"{prefix}::{sub}" if prefix else sub)
                return out
    return [tree]


def clean(path: str) -> str:
    """A path without its `as` alias and glob."""
    return path.split(" as ")[0].strip().removesuffix("::*")


class Crate:
    def __init__(self, src: pathlib.Path):
        self.src = src
        self.text = {}  # module → stripped code
        self.is_dir = {}  # module → whether it is a folder's (or the crate's) module
        self.tests = set()  # inline test modules
        files = sorted(src.rglob("*.rs"))
        has_lib = (src / "lib.rs").exists()
        for p in files:
            rel = p.relative_to(src)
            if rel.parts[0] == "bin" or (has_lib and rel == pathlib.Path("main.rs")):
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            m = tuple(parts)
            text = strip(p.read_text())
            test = TEST_MODULE.search(text)
            if test:
                self.text[m + (test.group(1),)] = text[test.end() :]
                self.is_dir[m + (test.group(1),)] = False
                self.tests.add(m + (test.group(1),))
                text = text[: test.start()]
            self.text[m] = text
            self.is_dir[m] = p.name in ("mod.rs", "lib.rs", "main.rs")
        self.modules = set(self.text)
        self.reexports = {m: self.pub_uses(m) for m in self.modules if self.is_dir[m]}

    def children(self, m: tuple) -> set:
        return {c[-1] for c in self.modules if len(c) == len(m) + 1 and c[:-1] == m}

    def pub_uses(self, m: tuple) -> dict:
        """Names `m` re-exports: name → the path it stands for (unresolved, relative to `m`)."""
        out = {}
        for vis, tree in USE.findall(self.text[m]):
            if not vis:
                continue
            for path in expand(tree):
                alias = path.split(" as ")[1].strip() if " as " in path else None
                path = clean(path)
                name = alias or path.split("::")[-1]
                if name and name not in ("*", "_"):
                    out[name] = path
        return out

    def resolve(self, m: tuple, path: str, depth=0):
        """The module `path` (as written in module `m`) names, or None (another crate, std)."""
        parts = [p for p in clean(path).split("::") if p]
        if not parts or depth > 8:
            return None
        here = m if self.is_dir.get(m) else m[:-1]
        if m in self.tests:
            here = m  # `super::` from a test module is its file
        if parts[0] == "crate":
            base, parts = (), parts[1:]
        elif parts[0] == "self":
            base, parts = (m if self.is_dir.get(m) or m in self.tests else m), parts[1:]
        elif parts[0] == "super":
            base = m[:-1]
            parts = parts[1:]
            while parts and parts[0] == "super":
                base, parts = base[:-1], parts[1:]
        elif self.is_dir.get(m) and parts[0] in self.children(m):
            base = m
        else:
            return None
        current = base
        for i, p in enumerate(parts):
            if current + (p,) in self.modules:
                current = current + (p,)
                continue
            # A name `current` re-exports: follow it to where it is defined.
            target = self.reexports.get(current, {}).get(p)
            if target is not None:
                # Followed to where it is defined; None: another crate's (`pub use dep::x`).
                return self.resolve(current, target, depth + 1)
            break
        return current

    def edges(self) -> dict:
        edges = {m: set() for m in self.modules}
        for m, text in self.text.items():
            paths = []
            for _, tree in USE.findall(text):
                paths.extend(clean(p) for p in expand(tree))
            rest = USE.sub(" ", text)
            paths.extend(k + v for k, v in PATH.findall(rest))
            if self.is_dir[m]:
                for child in self.children(m):
                    paths.extend(
                        child + x for x in re.findall(rf"(?<![\w:]){child}((?:::\w+)+)", rest)
                    )
            for path in paths:
                target = self.resolve(m, path)
                if target is None or target == m:
                    continue
                if m in self.tests and target == m[: len(target)]:
                    continue  # a test module and the file (or folder) it tests
                edges[m].add(target)
        return edges


def circles(edges: dict) -> list:
    """Strongly connected components of more than one node (Tarjan)."""
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


def folder_circles(crate: Crate, edges: dict) -> list:
    """Circles among the children of one folder, edges lifted from everything inside them."""
    out = []
    for parent in sorted(m for m in crate.modules if crate.is_dir[m]):
        n = len(parent)
        lifted = {}
        for a, targets in edges.items():
            if len(a) <= n or a[:n] != parent:
                continue
            for b in targets:
                if len(b) <= n or b[:n] != parent or a[n] == b[n]:
                    continue
                lifted.setdefault(a[: n + 1], set()).add(b[: n + 1])
        for c in circles(lifted):
            if any(crate.is_dir.get(x) for x in c):  # file-only circles are reported already
                out.append(c)
    return out


def layer_errors(edges: dict) -> list:
    """Imports between the scan's folders that a folder's README does not allow."""
    src = REPO / "scan" / "src"
    folders = sorted(p.name for p in src.iterdir() if p.is_dir())
    errors, allowed = [], {}
    for f in folders:
        readme = src / f / "README.md"
        m = MAY_IMPORT.search(readme.read_text()) if readme.exists() else None
        if not m:
            errors.append(f"scan/src/{f}/README.md: missing, or without a 'May import:' line")
            continue
        allowed[f] = set(re.findall(r"`([a-z_]+)/`", m.group(1))) | {f}
        unknown = allowed[f] - set(folders)
        if unknown:
            errors.append(f"scan/src/{f}/README.md allows unknown folders {sorted(unknown)}")
    for m, targets in edges.items():
        for t in targets:
            if m and m[0] in allowed and t and t[0] in folders and t[0] not in allowed[m[0]]:
                errors.append(
                    f"scan/src/{'/'.join(m)}: imports {'::'.join(t)}; {m[0]}/ may import "
                    f"{', '.join(sorted(allowed[m[0]] - {m[0]})) or 'no other folder'}"
                )
    return errors


def name(m: tuple) -> str:
    return "::".join(m) or "(crate root)"


def main() -> int:
    failed = False
    summary = []
    for member in crates():
        crate = Crate(REPO / member / "src")
        edges = crate.edges()
        for c in circles(edges):
            failed = True
            print(f"{member}: import circle between modules " + ", ".join(map(name, c)))
        for c in folder_circles(crate, edges):
            failed = True
            print(f"{member}: import circle between folders " + ", ".join(map(name, c)))
        if member == "scan":
            for e in layer_errors(edges):
                failed = True
                print(e)
        summary.append(f"{member} {len(edges)}")
    if failed:
        print("module imports: FAILED (scripts/check_modules.py)")
        return 1
    print("module imports: no circle; scan layers as declared (" + ", ".join(summary) + " modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
