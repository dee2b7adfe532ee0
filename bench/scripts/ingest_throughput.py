#!/usr/bin/env python3
"""Bulk-ingest throughput: ADBC's `adbc_ingest` into iceflight beside pyiceberg's `append` of the
same Arrow data into the same embedded catalog, alternating rounds.

    iceflight --config local.toml serve --user demo:demo --listen 127.0.0.1:50051 &
    python bench/scripts/ingest_throughput.py --url grpc://127.0.0.1:50051 \
        --catalog-db ./iceflight-data/catalog.db --warehouse ./iceflight-data/warehouse \
        --table tpch.lineitem --rounds 3 > ingest.json

The source table is read once through ADBC into memory. Each round writes it as a new table in
namespace `ingest_bench` (dropped afterwards): once with `adbc_ingest(mode="create")` (batches of
32 Ki rows, about 5 MB of lineitem, under the Go driver's 16 MiB message limit), once with pyiceberg (`create_table`
then `append`). Reported per engine: seconds per round, rows/s and MB/s, where MB is the
Arrow data's in-memory size (`Table.nbytes`), and the written Parquet bytes (`$files`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

from pyiceberg.catalog.sql import SqlCatalog

from flight_client import connect

NAMESPACE = "ingest_bench"


def execute(conn, sql: str):
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", default="demo")
    parser.add_argument("--password", default="demo")
    parser.add_argument("--catalog-db", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", default="tpch.lineitem")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    conn = connect(args.url, args.user, args.password)
    data = execute(conn, f"SELECT * FROM local.{args.table}")
    data = data.combine_chunks()
    rows, nbytes = data.num_rows, data.nbytes
    execute(conn, f"CREATE SCHEMA IF NOT EXISTS local.{NAMESPACE}")
    catalog = SqlCatalog("local", uri=f"sqlite:///{os.path.abspath(args.catalog_db)}",
                         warehouse=f"file://{os.path.abspath(args.warehouse)}")

    def adbc(round_: int) -> tuple[float, int]:
        name = f"adbc_{round_}"
        reader = data.to_reader(max_chunksize=32 * 1024)
        started = time.perf_counter()
        with contextlib.closing(conn.cursor()) as cur:
            written = cur.adbc_ingest(name, reader, mode="create", catalog_name="local",
                                      db_schema_name=NAMESPACE)
        seconds = time.perf_counter() - started
        assert written == rows, (written, rows)
        size = execute(conn, f'SELECT sum(file_size_in_bytes) FROM local.{NAMESPACE}."{name}$files"')
        execute(conn, f"DROP TABLE local.{NAMESPACE}.{name}")
        return seconds, size.column(0)[0].as_py()

    def pyiceberg(round_: int) -> tuple[float, int]:
        name = f"{NAMESPACE}.py_{round_}"
        started = time.perf_counter()
        tbl = catalog.create_table(name, schema=data.schema)
        tbl.append(data)
        seconds = time.perf_counter() - started
        size = sum(task.file.file_size_in_bytes for task in tbl.scan().plan_files())
        catalog.drop_table(name)
        return seconds, size

    results: dict[str, list[tuple[float, int]]] = {"iceflight adbc_ingest": [], "pyiceberg append": []}
    for round_ in range(args.rounds):
        # Alternate which goes first, so neither always meets a warm page cache.
        order = [("iceflight adbc_ingest", adbc), ("pyiceberg append", pyiceberg)]
        if round_ % 2:
            order.reverse()
        for label, run in order:
            results[label].append(run(round_))
    conn.close()

    report = {"table": args.table, "rows": rows, "arrow_bytes": nbytes, "rounds": args.rounds, "engines": {}}
    for label, runs in results.items():
        seconds = [s for s, _ in runs]
        median = statistics.median(seconds)
        report["engines"][label] = {
            "seconds": seconds,
            "median_seconds": median,
            "rows_per_second": rows / median,
            "mb_per_second": nbytes / 1e6 / median,
            "parquet_bytes": runs[-1][1],
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
