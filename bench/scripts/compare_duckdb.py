#!/usr/bin/env python3
"""Time TPC-H queries through `iceflight sql` beside DuckDB's `iceberg_scan` on the same files.

Usage:
    python bench/scripts/compare_duckdb.py --iceflight target/release/iceflight \
        --data-dir ./iceflight-data --namespace tpch --queries q01,q06 --rounds 5

For each round (engine order alternates every round) it runs every query:
  * iceflight: a fresh `iceflight sql --schema NS --format csv` process (wall time, so it includes
    process start and catalog open — what a user of the CLI sees);
  * DuckDB 1.5.5: the same query text in one warm in-process connection whose tables are views over
    `iceberg_scan('<metadata.json>')`, the metadata locations read from the embedded catalog's sqlite
    file (the same data files iceflight reads).
Prints per query and engine the median [min, max] in ms and the iceflight/DuckDB ratio, and checks
the answers agree (numbers to 1e-6 relative).
"""

import argparse
import csv
import glob
import importlib.util
import io
import os
import sqlite3
import statistics
import subprocess
import tempfile
import time

import duckdb  # noqa: F401 - the worker's dependency, checked early

import duckdb_worker

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = ["lineitem", "orders", "customer", "part", "partsupp", "supplier", "nation", "region"]


def duckdb_connection(ext_dir, data_dir, namespace):
    """The worker's connection over the embedded catalog's current metadata.json files."""
    db = sqlite3.connect(os.path.join(data_dir, "catalog.db"))
    tables = dict(
        db.execute(
            "SELECT table_name, metadata_location FROM iceberg_tables WHERE table_namespace = ?", (namespace,)
        ).fetchall()
    )
    return duckdb_worker.connect(ext_dir, tables, None)


def normalise(rows):
    out = []
    for r in rows:
        cells = []
        for c in r:
            try:
                cells.append(round(float(c), 6))
            except (TypeError, ValueError):
                cells.append(None if c in (None, "") else str(c))
        out.append(cells)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iceflight", default=os.path.join(REPO, "target", "release", "iceflight"))
    ap.add_argument("--data-dir", default="./iceflight-data")
    ap.add_argument("--namespace", default="tpch")
    ap.add_argument("--queries", default="q01,q06")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    data_dir = os.path.abspath(args.data_dir)
    queries = {q: open(os.path.join(REPO, "bench", "queries", "tpch", q + ".sql")).read() for q in args.queries.split(",")}
    times = {(q, e): [] for q in queries for e in ("iceflight", "duckdb")}
    answers = {}
    with tempfile.TemporaryDirectory() as ext_dir:
        con = duckdb_connection(ext_dir, data_dir, args.namespace)
        for rnd in range(args.rounds + 1):  # round 0 warms up and is not counted
            engines = ["iceflight", "duckdb"] if rnd % 2 == 0 else ["duckdb", "iceflight"]
            for q, sql in queries.items():
                for e in engines:
                    start = time.perf_counter()
                    if e == "iceflight":
                        out = subprocess.run(
                            [args.iceflight, "--data-dir", data_dir, "sql", "--schema", args.namespace, "--format", "csv", sql],
                            check=True, capture_output=True, text=True).stdout
                        rows = list(csv.reader(io.StringIO(out)))[1:]
                    else:
                        rows = con.execute(sql).fetchall()
                    ms = (time.perf_counter() - start) * 1000
                    answers[(q, e)] = normalise(rows)
                    if rnd > 0:
                        times[(q, e)].append(ms)
    print(f"{args.rounds} alternating rounds, ms: median [min, max]")
    for q in queries:
        if answers[(q, "iceflight")] != answers[(q, "duckdb")]:
            print(f"  {q}: ANSWERS DIFFER\n    iceflight {answers[(q, 'iceflight')]}\n    duckdb    {answers[(q, 'duckdb')]}")
        med = {}
        for e in ("iceflight", "duckdb"):
            t = sorted(times[(q, e)])
            med[e] = statistics.median(t)
            print(f"  {q} {e:<10} {med[e]:8.1f} [{t[0]:.1f}, {t[-1]:.1f}]")
        print(f"  {q} iceflight/duckdb = {med['iceflight'] / med['duckdb']:.2f}")


if __name__ == "__main__":
    main()
