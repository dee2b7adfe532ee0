#!/bin/sh
# Creates the Polaris catalog that docker-compose.yml's iceflight and Trino share, then lets the
# root principal write to it. The compose service `polaris-setup` (image alpine/curl) runs it once
# Polaris is healthy; running it again is harmless (an existing catalog is kept).
#
# Follows apache/polaris getting-started/minio (obtain-token.sh, create-catalog.sh and the
# catalog_admin grant), without jq so that nothing is installed at run time.
set -eu

POLARIS_URL=${POLARIS_URL:-http://polaris:8181}
REALM=${POLARIS_REALM:-POLARIS}
CLIENT_ID=${CLIENT_ID:-root}
CLIENT_SECRET=${CLIENT_SECRET:?set CLIENT_SECRET (docker-compose.yml passes POLARIS_ROOT_SECRET)}
CATALOG=${CATALOG_NAME:-warehouse}
# Tables go under s3://warehouse/<namespace>/<table>; Polaris may only use the bucket warehouse.
BASE_LOCATION=${BASE_LOCATION:-s3://warehouse}
ALLOWED_LOCATION=${ALLOWED_LOCATION:-s3://warehouse/}
# Where clients outside the compose network reach the object store, and where Polaris itself does.
S3_ENDPOINT=${S3_ENDPOINT:-http://localhost:9000}
S3_ENDPOINT_INTERNAL=${S3_ENDPOINT_INTERNAL:-http://minio:9000}

echo "Requesting a token for ${CLIENT_ID} in realm ${REALM}..."
response=$(curl --fail-with-body -sS "${POLARIS_URL}/api/catalog/v1/oauth/tokens" \
  --user "${CLIENT_ID}:${CLIENT_SECRET}" \
  -H "Polaris-Realm: ${REALM}" \
  -d grant_type=client_credentials \
  -d scope=PRINCIPAL_ROLE:ALL)
token=$(printf '%s' "$response" | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
if [ -z "$token" ]; then
  echo "No access token in the response: $response" >&2
  exit 1
fi

# S3 storage on MinIO. stsUnavailable: MinIO is used with static keys (Polaris's own from
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, the clients' from their configuration), so Polaris
# neither calls STS nor vends credentials.
payload=$(cat <<EOF
{
  "catalog": {
    "name": "${CATALOG}",
    "type": "INTERNAL",
    "readOnly": false,
    "properties": {
      "default-base-location": "${BASE_LOCATION}"
    },
    "storageConfigInfo": {
      "storageType": "S3",
      "allowedLocations": ["${ALLOWED_LOCATION}"],
      "endpoint": "${S3_ENDPOINT}",
      "endpointInternal": "${S3_ENDPOINT_INTERNAL}",
      "pathStyleAccess": true,
      "stsUnavailable": true
    }
  }
}
EOF
)

echo "Creating catalog ${CATALOG} at ${BASE_LOCATION}..."
status=$(curl -sS -o /tmp/create-catalog.out -w '%{http_code}' \
  -X POST "${POLARIS_URL}/api/management/v1/catalogs" \
  -H "Authorization: Bearer ${token}" \
  -H "Polaris-Realm: ${REALM}" \
  -H 'Accept: application/json' \
  -H 'Content-Type: application/json' \
  -d "$payload")
case "$status" in
  200 | 201) echo "Catalog ${CATALOG} created." ;;
  409) echo "Catalog ${CATALOG} already exists; kept as is." ;;
  *)
    echo "Creating catalog ${CATALOG} failed with HTTP ${status}:" >&2
    cat /tmp/create-catalog.out >&2
    echo >&2
    exit 1
    ;;
esac

# A new catalog's catalog_admin role (held by root through service_admin) may manage access and
# metadata only; CATALOG_MANAGE_CONTENT adds creating namespaces and tables and writing data.
echo "Granting CATALOG_MANAGE_CONTENT to catalog_admin on ${CATALOG}..."
status=$(curl -sS -o /tmp/grant.out -w '%{http_code}' \
  -X PUT "${POLARIS_URL}/api/management/v1/catalogs/${CATALOG}/catalog-roles/catalog_admin/grants" \
  -H "Authorization: Bearer ${token}" \
  -H "Polaris-Realm: ${REALM}" \
  -H 'Content-Type: application/json' \
  -d '{"grant": {"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}}')
case "$status" in
  2??) echo "Granted." ;;
  409) echo "Already granted." ;;
  *)
    echo "Granting CATALOG_MANAGE_CONTENT failed with HTTP ${status}:" >&2
    cat /tmp/grant.out >&2
    echo >&2
    exit 1
    ;;
esac
echo "Polaris catalog ${CATALOG} is ready."
