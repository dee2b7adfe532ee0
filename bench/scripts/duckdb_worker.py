#!/usr/bin/env python3
"""A warm DuckDB 1.5.5 connection for `iceflight-bench run`, driven over stdin/stdout.

Protocol, one JSON object per line:
  in:  {"tables": {"lineitem": "s3://…/00001-….metadata.json", …},
        "s3": {"endpoint": "http://127.0.0.1:8333", "key_id": K, "secret": S, "region": R} | null}
                                          first line: one view per table over
                                          iceberg_scan('<metadata.json>'), S3 through httpfs
  out: {"ready": true, "version": "1.5.5"}
  in:  {"sql": "..."}
  out: {"ms": 12.3, "rows": [["1", "2.5", null], ...]}   or   {"error": "..."}

The extensions come from the offline wheels (duckdb-extension-iceberg / -avro / -httpfs), never a
download.
Cells are strings (NULL as null) so the runner compares every engine the same way; timing covers
execution and fetching, inside this process.
"""

import glob
import importlib.util
import json
import os
import sys
import tempfile
import time

import duckdb


def connect(ext_dir, tables, s3):
    con = duckdb.connect(config={"extension_directory": ext_dir, "autoinstall_known_extensions": "false"})
    for pkg in ["duckdb_extension_avro", "duckdb_extension_iceberg", "duckdb_extension_httpfs"]:
        spec = importlib.util.find_spec(pkg)
        path = glob.glob(os.path.join(os.path.dirname(spec.origin), "**", "*.duckdb_extension"), recursive=True)[0]
        con.execute(f"INSTALL '{path}'")
    for ext in ["avro", "iceberg", "httpfs"]:
        con.execute(f"LOAD {ext}")
    if s3:
        endpoint = s3["endpoint"]
        use_ssl = endpoint.startswith("https://")
        host = endpoint.split("://", 1)[-1].rstrip("/")
        con.execute(
            f"CREATE SECRET lake (TYPE s3, KEY_ID {quote(s3['key_id'])}, SECRET {quote(s3['secret'])}, "
            f"ENDPOINT {quote(host)}, REGION {quote(s3['region'])}, URL_STYLE 'path', USE_SSL {str(use_ssl).lower()})"
        )
    for name, loc in sorted(tables.items()):
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM iceberg_scan({quote(loc)})")
    return con


def quote(v):
    return "'" + str(v).replace("'", "''") + "'"


def cell(v):
    if v is None:
        return None
    return str(v)


def main():
    first = json.loads(sys.stdin.readline())
    with tempfile.TemporaryDirectory() as ext_dir:
        con = connect(ext_dir, first["tables"], first.get("s3"))
        print(json.dumps({"ready": True, "version": duckdb.__version__}), flush=True)
        for line in sys.stdin:
            req = json.loads(line)
            try:
                start = time.perf_counter()
                rows = con.execute(req["sql"]).fetchall()
                ms = (time.perf_counter() - start) * 1000
                print(json.dumps({"ms": ms, "rows": [[cell(c) for c in r] for r in rows]}), flush=True)
            except Exception as e:  # noqa: BLE001 - reported to the runner as this query's error
                print(json.dumps({"error": str(e)}), flush=True)


if __name__ == "__main__":
    main()
