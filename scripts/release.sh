#!/usr/bin/env bash
# Builds the release binary a user downloads, with its debug info split off:
#   dist/iceflight         the binary: symbols (function names) kept, debug sections removed
#   dist/iceflight.debug   the debug sections (line tables), found by perf, gdb and
#                          addr2line through the binary's .gnu_debuglink when beside it or in
#                          /usr/lib/debug
# The build itself keeps line tables (`[profile.release] debug = "line-tables-only"`), so a
# profile of the built binary in target/ has file:line too. Sizes: docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p iceflight --locked
mkdir -p dist
cp "$target/release/iceflight" dist/iceflight.full
objcopy --only-keep-debug dist/iceflight.full dist/iceflight.debug
objcopy --strip-debug --add-gnu-debuglink=dist/iceflight.debug dist/iceflight.full dist/iceflight
rm dist/iceflight.full
ls -l dist/iceflight dist/iceflight.debug
