#!/usr/bin/env bash
# The whole test suite: Python fixtures venv, then every Rust test of the workspace.
# Uses one shared build directory ($CARGO_TARGET_DIR, default $HOME/.cache/iceflight-target).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/iceflight-target}
ICEFLIGHT_PYTHON=$(scripts/setup-python.sh)
export ICEFLIGHT_PYTHON
# The demo's and the tests' feature sets, compared before anything is built (the rebuild check
# below only sees a drift when the demo's artifacts are stale).
"$ICEFLIGHT_PYTHON" scripts/same_features.py
# Module imports: no circle in any crate, the scan's folders import only what their READMEs allow.
"$ICEFLIGHT_PYTHON" scripts/check_modules.py
# The byte cache builds and tests without DataFusion (cache/Cargo.toml).
if cargo tree -p iceflight-cache -e normal,dev,build --locked --prefix none | grep -q '^datafusion'; then
  echo "scripts/test.sh: iceflight-cache depends on DataFusion:" >&2
  cargo tree -p iceflight-cache -e normal,dev,build --locked -i datafusion >&2 || true
  exit 1
fi
cargo test --workspace --locked "$@"
# README's demo command (`cargo run -p iceflight`) must reuse what the tests built: one feature
# set for both (server/Cargo.toml pins the features other members turn on). A dependency compiled
# here means they drifted apart.
rebuilt=$(cargo build -p iceflight --locked 2>&1 | grep -E '^ *Compiling ' | grep -v -E 'Compiling iceflight(-[a-z]+)? v' || true)
if [ -n "$rebuilt" ]; then
  echo "scripts/test.sh: cargo run -p iceflight rebuilds dependencies the tests built with other features:" >&2
  echo "$rebuilt" >&2
  exit 1
fi
