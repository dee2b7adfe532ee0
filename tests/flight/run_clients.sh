#!/usr/bin/env bash
# Real Flight SQL clients against a running `iceflight serve`:
#   1. ADBC (adbc-driver-flightsql, Go)       tests/flight/test_adbc.py, test_adbc_writes.py (pytest;
#      the second also pandas through sqlalchemy-adbc), test_pandas.py (pandas through
#      iceflight's own dialect, clients/sqlalchemy/, and through ADBC)
#   2. flightsql-dbapi + its SQLAlchemy dialect tests/flight/flightsql_dbapi/    (pytest)
#   3. Arrow Flight SQL JDBC driver             tests/flight/jdbc/run.sh           (java)
#   security, jdbc-security (not run by default): test_security.py and jdbc/SecurityTest.java
#      against the server of server/tests/security.rs (users, rules and files of its own)
#
#   ICEFLIGHT_URI=grpc://127.0.0.1:PORT ICEFLIGHT_USER=alice ICEFLIGHT_PASSWORD=secret \
#     tests/flight/run_clients.sh [adbc|dbapi|jdbc ...]
#   tests/flight/run_clients.sh --prepare    the venvs and the JDBC driver only
#
# The server must hold TPC-H (answers in bench/answers/tpch/$ICEFLIGHT_TPCH_SCALE, default sf0.01)
# in catalog `local`, schema `tpch`. Venvs live under ${ICEFLIGHT_VENV_DIR:-$HOME/.cache}
# (iceflight-adbc-venv, iceflight-dbapi-venv) and are reinstalled only when a requirements file
# changes. Extra pytest arguments: $ICEFLIGHT_PYTEST_ARGS (e.g. "-x -k tpch").
# Exits non-zero if any suite fails; a JDBC driver that Maven cannot supply (exit 77) is a skip.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

export ICEFLIGHT_URI
export ICEFLIGHT_USER=${ICEFLIGHT_USER:-alice}
export ICEFLIGHT_PASSWORD=${ICEFLIGHT_PASSWORD:-secret}
export ICEFLIGHT_REPO=${ICEFLIGHT_REPO:-$repo}
export ICEFLIGHT_TPCH_SCALE=${ICEFLIGHT_TPCH_SCALE:-sf0.01}
export PYTHONDONTWRITEBYTECODE=1

venv_dir=${ICEFLIGHT_VENV_DIR:-$HOME/.cache}
python=${ICEFLIGHT_BASE_PYTHON:-python3}

# make_venv NAME REQUIREMENTS -> prints the venv's python; installs only when requirements changed.
make_venv() {
  local venv=$venv_dir/$1 req=$2
  if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >&2 || return 1
  fi
  if ! cmp -s "$req" "$venv/.iceflight-requirements" 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2 || return 1
    cp "$req" "$venv/.iceflight-requirements"
  fi
  echo "$venv/bin/python"
}

# `run_clients.sh --prepare`: only make the venvs and fetch the JDBC driver (CI does it while it
# builds), no server needed.
if [ "${1:-}" = "--prepare" ]; then
  make_venv iceflight-adbc-venv "$here/requirements.txt" >/dev/null || exit 1
  make_venv iceflight-dbapi-venv "$here/flightsql_dbapi/requirements.txt" >/dev/null || exit 1
  exec bash "$here/jdbc/run.sh" --fetch
fi

if [ -z "${ICEFLIGHT_URI:-}" ]; then
  echo "run_clients.sh: ICEFLIGHT_URI is not set (start iceflight serve, export ICEFLIGHT_URI=grpc://127.0.0.1:PORT)" >&2
  echo "clients: 0 passed, 1 failed"
  exit 2
fi

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(adbc dbapi jdbc)

passed=0 failed=0 skipped=0
summary=()
record() { # record NAME EXIT_CODE
  case $2 in
    0) passed=$((passed + 1)); summary+=("  $1: passed") ;;
    77) skipped=$((skipped + 1)); summary+=("  $1: skipped (driver not available)") ;;
    *) failed=$((failed + 1)); summary+=("  $1: FAILED (exit $2)") ;;
  esac
}

# shellcheck disable=SC2086  # ICEFLIGHT_PYTEST_ARGS is split on purpose
for suite in "${suites[@]}"; do
  echo "=== $suite"
  case $suite in
    adbc)
      if py=$(make_venv iceflight-adbc-venv "$here/requirements.txt"); then
        (cd "$here" && "$py" -m pytest -p no:cacheprovider -q -rfE --tb=short ${ICEFLIGHT_PYTEST_ARGS:-} test_adbc.py test_adbc_writes.py test_pandas.py)
        record adbc $?
      else
        echo "run_clients.sh: could not install $here/requirements.txt" >&2
        record adbc 3
      fi
      ;;
    dbapi)
      if py=$(make_venv iceflight-dbapi-venv "$here/flightsql_dbapi/requirements.txt"); then
        (cd "$here/flightsql_dbapi" && "$py" -m pytest -p no:cacheprovider -q -rfE --tb=short ${ICEFLIGHT_PYTEST_ARGS:-} test_dbapi.py)
        record flightsql-dbapi $?
      else
        echo "run_clients.sh: could not install $here/flightsql_dbapi/requirements.txt" >&2
        record flightsql-dbapi 3
      fi
      ;;
    jdbc)
      bash "$here/jdbc/run.sh"
      record jdbc $?
      ;;
    security)
      # The server of server/tests/security.rs (ICEFLIGHT_SECURITY_DIR, ICEFLIGHT_JWT_DIR).
      if py=$(make_venv iceflight-adbc-venv "$here/requirements.txt"); then
        (cd "$here" && "$py" -m pytest -p no:cacheprovider -q -rfE --tb=short ${ICEFLIGHT_PYTEST_ARGS:-} test_security.py)
        record security $?
      else
        echo "run_clients.sh: could not install $here/requirements.txt" >&2
        record security 3
      fi
      ;;
    jdbc-security)
      bash "$here/jdbc/run.sh" SecurityTest.java
      record jdbc-security $?
      ;;
    *)
      echo "run_clients.sh: unknown suite '$suite' (adbc, dbapi, jdbc, security, jdbc-security)" >&2
      record "$suite" 2
      ;;
  esac
done

echo "=== summary"
printf '%s\n' "${summary[@]}"
echo "clients: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
