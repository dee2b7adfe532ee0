#!/usr/bin/env bash
# Coverage-guided fuzzing of iceflight-input (docs/operations.md, "Fuzzing"): cargo-fuzz (libFuzzer) builds
# input/fuzz with coverage instrumentation and runs every target for SECONDS (default 20) from
# its committed corpus (input/fuzz/corpus/<target>). New inputs go to a scratch directory, so
# a run never changes the repository; a crash stops the script with libFuzzer's report and the
# input under input/fuzz/artifacts/. Prints each target's executions.
#
#   scripts/fuzz.sh [SECONDS]
#   scripts/fuzz.sh --build     builds the targets only (CI builds them while the tests run)
#
# ICEFLIGHT_FUZZ_DEV=1 builds and runs them unoptimized (cargo fuzz --dev): a build of 2 minutes
# instead of 5 on 2 cores, about 14 times fewer executions a second. CI's smoke run uses it
# (every corpus input is still replayed); sessions that fuzz for minutes leave it unset.
#
# Builds in its own directory ($ICEFLIGHT_FUZZ_TARGET_DIR, default $HOME/.cache/iceflight-fuzz):
# instrumented code cannot share the workspace's build.
set -euo pipefail
seconds=${1:-20}
build_only=false
if [ "$seconds" = "--build" ]; then
  build_only=true
  seconds=0
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${ICEFLIGHT_FUZZ_TARGET_DIR:-$HOME/.cache/iceflight-fuzz}
if ! cargo fuzz --version >/dev/null 2>&1; then
  # An unoptimized cargo-fuzz builds in half the time; it only drives cargo and libFuzzer. Built
  # in the fuzz build's directory: in the workspace's ($CARGO_TARGET_DIR) it would hold the
  # test build behind its lock.
  cargo install cargo-fuzz --version 0.13.2 --locked --debug --target-dir "$target_dir/cargo-fuzz"
fi
cd "$here/input/fuzz"
profile=()
[ "${ICEFLIGHT_FUZZ_DEV:-0}" = 1 ] && profile=(--dev)
# Safe Rust: no sanitizer (it would only slow the run); the stable toolchain then suffices.
fuzz=(cargo fuzz run "${profile[@]}" --sanitizer none --target-dir "$target_dir")
cargo fuzz build "${profile[@]}" --sanitizer none --target-dir "$target_dir"
if $build_only; then
  exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for target in $(cargo fuzz list); do
  mkdir -p "$scratch/$target"
  log="$scratch/$target.log"
  if ! "${fuzz[@]}" "$target" "$scratch/$target" "corpus/$target" -- \
      -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    cat "$log" >&2
    echo "scripts/fuzz.sh: target $target failed (input under input/fuzz/artifacts/$target)" >&2
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  echo "fuzz $target: $runs executions in ${seconds}s, $edges coverage points, no failure"
done
