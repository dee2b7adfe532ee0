#!/usr/bin/env python3
"""A warm DuckDB 1.5.5 connection for `iceflight-bench run`, driven over stdin/stdout.

Protocol, one JSON object per line:
  in:  {"data_dir": D, "namespace": NS}   first line: views over iceberg_scan('<metadata.json>')
                                          for every table of NS in the embedded catalog D
  out: {"ready": true, "version": "1.5.5"}
  in:  {"sql": "..."}
  out: {"ms": 12.3, "rows": [["1", "2.5", null], ...]}   or   {"error": "..."}

The extensions come from the offline wheels (duckdb-extension-iceberg / -avro), never a download.
Cells are strings (NULL as null) so the runner compares every engine the same way; timing covers
execution and fetching, inside this process.
"""

import glob
import importlib.util
import json
import os
import sqlite3
import sys
import tempfile
import time

import duckdb


def connect(ext_dir, data_dir, namespace):
    con = duckdb.connect(config={"extension_directory": ext_dir, "autoinstall_known_extensions": "false"})
    for pkg in ["duckdb_extension_avro", "duckdb_extension_iceberg"]:
        spec = importlib.util.find_spec(pkg)
        path = glob.glob(os.path.join(os.path.dirname(spec.origin), "**", "*.duckdb_extension"), recursive=True)[0]
        con.execute(f"INSTALL '{path}'")
    con.execute("LOAD avro")
    con.execute("LOAD iceberg")
    db = sqlite3.connect(os.path.join(data_dir, "catalog.db"))
    rows = db.execute(
        "SELECT table_name, metadata_location FROM iceberg_tables WHERE table_namespace = ?", (namespace,)
    ).fetchall()
    for name, loc in rows:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM iceberg_scan('{loc}')")
    return con


def cell(v):
    if v is None:
        return None
    return str(v)


def main():
    first = json.loads(sys.stdin.readline())
    with tempfile.TemporaryDirectory() as ext_dir:
        con = connect(ext_dir, first["data_dir"], first["namespace"])
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
