"""Fails when `cargo run -p iceflight` would build a shared dependency with other features than
`cargo test --workspace` does (README's demo after the tests would then recompile DataFusion).

Compares, package by package, the features cargo's resolver turns on for the server's normal and
build dependencies against those of the whole workspace with dev-dependencies. server/Cargo.toml
pins what the other members turn on. Exit status 1 and one line per differing package on drift.
"""

import re
import subprocess
import sys


def features(*selection: str) -> dict[str, set[str]]:
    """Package ("name vX.Y.Z") → the union of its resolved features in `cargo tree` output."""
    out = subprocess.run(
        ["cargo", "tree", "--locked", "--prefix", "none", "-f", "{p} [{f}]", *selection],
        check=True, capture_output=True, text=True,
    ).stdout
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        m = re.match(r"(\S+ v\S+).*? \[(.*)\]", line)
        if m:
            found.setdefault(m.group(1), set()).update(f for f in m.group(2).split(",") if f)
    return found


def main() -> int:
    tests = features("--workspace", "-e", "normal,build,dev")
    demo = features("-p", "iceflight", "-e", "normal,build")
    drift = [
        f"{pkg}: tests add {sorted(tests.get(pkg, set()) - wanted)}, "
        f"the demo adds {sorted(wanted - tests.get(pkg, set()))}"
        for pkg, wanted in sorted(demo.items())
        if tests.get(pkg, set()) != wanted
    ]
    for line in drift:
        print(f"scripts/same_features.py: {line}", file=sys.stderr)
    return 1 if drift else 0


if __name__ == "__main__":
    sys.exit(main())
