#!/usr/bin/env bash
# Installs, starts and stops Trino for iceflight-bench, with an Iceberg catalog `iceberg` on a REST
# catalog (SeaweedFS or Polaris) and its S3 store.
#
#   bench/scripts/trino.sh install            # io.trino:trino-server:$TRINO_VERSION from Maven Central
#   bench/scripts/trino.sh start              # writes etc/, starts, waits for SERVER STARTED
#   bench/scripts/trino.sh stop
#
# Settings (environment): TRINO_VERSION (476: the newest trino-server on Maven Central on
# 2026-11-30), TRINO_HOME (~/.cache/trino), TRINO_PORT (28090), TRINO_HEAP (6G), REST_URI
# (http://127.0.0.1:8181), TRINO_QUERY_MEMORY (4GB: query.max-memory and its per-node cap, under the
# heap, raised from the 30 %-of-heap default for TPC-H SF 10's large joins), WAREHOUSE (warehouse), CREDENTIAL (admin:password), S3_ENDPOINT
# (http://127.0.0.1:8333), S3_ACCESS_KEY / S3_SECRET_KEY (admin / password), JAVA_HOME_TRINO (default Temurin 25, set as JAVA_HOME for Trino:
# Trino 476 needs a newer Java than 17). Verified here: 476 on Temurin 25.0.3 starts in ~20 s and
# reads tables iceflight's loader wrote over SeaweedFS's REST catalog.
set -euo pipefail
version=${TRINO_VERSION:-476}
home=${TRINO_HOME:-$HOME/.cache/trino}
dir="$home/trino-server-$version"
port=${TRINO_PORT:-28090}
export JAVA_HOME=${JAVA_HOME_TRINO:-/usr/lib/jvm/temurin-25-jdk-amd64}
export PATH="$JAVA_HOME/bin:$PATH"

case "${1:-}" in
install)
  mkdir -p "$home"
  if [ ! -d "$dir" ]; then
    url="https://repo.maven.apache.org/maven2/io/trino/trino-server/$version/trino-server-$version.tar.gz"
    curl -sSfL -o "$home/trino-server-$version.tar.gz" "$url"
    tar xzf "$home/trino-server-$version.tar.gz" -C "$home"
    rm "$home/trino-server-$version.tar.gz"
  fi
  echo "$dir"
  ;;
start)
  [ -d "$dir" ] || { echo "not installed: run $0 install" >&2; exit 1; }
  mkdir -p "$dir/etc/catalog" "$home/data"
  cat > "$dir/etc/node.properties" <<P
node.environment=bench
node.id=iceflight-bench
node.data-dir=$home/data
P
  cat > "$dir/etc/jvm.config" <<P
-server
-Xmx${TRINO_HEAP:-6G}
-XX:+UseG1GC
-XX:+ExplicitGCInvokesConcurrent
-XX:+ExitOnOutOfMemoryError
-Djdk.attach.allowAttachSelf=true
P
  cat > "$dir/etc/config.properties" <<P
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$port
discovery.uri=http://127.0.0.1:$port
query.max-memory=${TRINO_QUERY_MEMORY:-4GB}
query.max-memory-per-node=${TRINO_QUERY_MEMORY:-4GB}
P
  cat > "$dir/etc/catalog/iceberg.properties" <<P
connector.name=iceberg
iceberg.catalog.type=rest
iceberg.rest-catalog.uri=${REST_URI:-http://127.0.0.1:8181}
iceberg.rest-catalog.warehouse=${WAREHOUSE:-warehouse}
iceberg.rest-catalog.security=OAUTH2
iceberg.rest-catalog.oauth2.credential=${CREDENTIAL:-admin:password}
iceberg.rest-catalog.oauth2.scope=PRINCIPAL_ROLE:ALL
fs.native-s3.enabled=true
s3.endpoint=${S3_ENDPOINT:-http://127.0.0.1:8333}
s3.path-style-access=true
s3.region=us-east-1
s3.aws-access-key=${S3_ACCESS_KEY:-admin}
s3.aws-secret-key=${S3_SECRET_KEY:-password}
P
  "$dir/bin/launcher" start >/dev/null
  for _ in $(seq 1 120); do
    # Ready once a query runs (the coordinator registers itself as a worker a moment after
    # "SERVER STARTED"; until then queries fail with "No nodes available").
    if curl -sf "http://127.0.0.1:$port/v1/info" 2>/dev/null | grep -q '"starting":false' &&
      python3 - "$port" <<'PY' 2>/dev/null; then
import json, sys, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/v1/statement"
r = json.load(urllib.request.urlopen(urllib.request.Request(url, b"SELECT 1", {"X-Trino-User": "bench"})))
while "nextUri" in r and "error" not in r:
    r = json.load(urllib.request.urlopen(r["nextUri"]))
sys.exit(1 if "error" in r else 0)
PY
      echo "trino $version on http://127.0.0.1:$port"
      exit 0
    fi
    sleep 1
  done
  echo "trino did not start; see $home/data/var/log/server.log" >&2
  exit 1
  ;;
stop)
  [ -d "$dir" ] && "$dir/bin/launcher" stop >/dev/null || true
  ;;
*)
  echo "usage: $0 install|start|stop" >&2
  exit 2
  ;;
esac
