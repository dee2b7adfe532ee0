#!/usr/bin/env bash
# Creates (or updates) the Python venv the tests use and prints its python path.
# Location: $ICEFLIGHT_VENV, default $HOME/.cache/iceflight-venv.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${ICEFLIGHT_VENV:-$HOME/.cache/iceflight-venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
stamp="$venv/.iceflight-requirements"
if ! cmp -s "$here/tests/requirements.txt" "$stamp" 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/tests/requirements.txt" >&2
  cp "$here/tests/requirements.txt" "$stamp"
fi
echo "$venv/bin/python"
