#!/usr/bin/env bash
# The whole test suite: Python fixtures venv, then every Rust test of the workspace.
# Uses one shared build directory ($CARGO_TARGET_DIR, default $HOME/.cache/iceflight-target).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/iceflight-target}
ICEFLIGHT_PYTHON=$(scripts/setup-python.sh)
export ICEFLIGHT_PYTHON
cargo test --workspace --locked "$@"
