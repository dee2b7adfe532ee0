#!/usr/bin/env python3
"""Diagnostic: DuckDB 1.5.5's TPC-H q01 and q06 on the lake's tpch_sf1 with its external file cache
(in-memory copy of remote bytes) on and off, alternating, median of 3 warm runs each.

Needs the lake (bench/scripts/lake.sh start) loaded with `iceflight-bench load --suite tpch
--scale 1`; run from the repository root with the test venv's python. Endpoints and keys are the
lake's defaults (config/bench-lake.toml).
"""
import json, sys, tempfile, time, urllib.request
sys.path.insert(0, "bench/scripts")
import duckdb_worker
# metadata locations from the REST catalog (SeaweedFS) for tpch_sf1
tok = json.load(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8181/v1/oauth/tokens",
    b"grant_type=client_credentials&client_id=admin&client_secret=password&scope=PRINCIPAL_ROLE:ALL",
    {"Content-Type": "application/x-www-form-urlencoded"})))["access_token"]
def loc(t):
    r = urllib.request.Request(f"http://127.0.0.1:8181/v1/warehouse/namespaces/tpch_sf1/tables/{t}", headers={"Authorization": "Bearer " + tok})
    try:
        return json.load(urllib.request.urlopen(r))["metadata-location"]
    except Exception:
        r = urllib.request.Request(f"http://127.0.0.1:8181/v1/namespaces/tpch_sf1/tables/{t}", headers={"Authorization": "Bearer " + tok})
        return json.load(urllib.request.urlopen(r))["metadata-location"]
tables = {t: loc(t) for t in ["lineitem", "orders"]}
s3 = {"endpoint": "http://127.0.0.1:8333", "key_id": "admin", "secret": "password", "region": "us-east-1"}
with tempfile.TemporaryDirectory() as d:
    con = duckdb_worker.connect(d, tables, s3)
    q = open("bench/queries/tpch/q01.sql").read()
    q6 = open("bench/queries/tpch/q06.sql").read()
    for cache in ["true", "false", "true", "false"]:
        con.execute(f"SET enable_external_file_cache = {cache}")
        for name, sql in [("q01", q), ("q06", q6)]:
            con.execute(sql).fetchall()
            ts = []
            for _ in range(3):
                t = time.perf_counter(); con.execute(sql).fetchall(); ts.append((time.perf_counter() - t) * 1000)
            print(f"external_file_cache={cache} {name} median {sorted(ts)[1]:.0f} ms")
