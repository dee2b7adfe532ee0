#!/usr/bin/env bash
# The secrets of the docker compose stack (docker-compose.yml), made once: random passwords for
# MinIO's root user, Polaris's root client and iceflight's demo user, written as `KEY=value`
# lines to FILE (default .env next to docker-compose.yml, which `docker compose` reads; kept out
# of git). An existing file is kept as it is, so the stack's volumes keep working.
#
#   scripts/stack-secrets.sh [FILE]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
file=${1:-$here/.env}
if [ -s "$file" ]; then
  echo "stack-secrets: $file exists; kept"
  exit 0
fi
secret() { head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
umask 077
cat >"$file" <<SECRETS
MINIO_ROOT_USER=iceflight-minio
MINIO_ROOT_PASSWORD=$(secret)
POLARIS_ROOT_SECRET=$(secret)
ICEFLIGHT_DEMO_PASSWORD=$(secret)
SECRETS
echo "stack-secrets: wrote $file (readable by you only)"
