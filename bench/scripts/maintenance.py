#!/usr/bin/env python3
"""Table maintenance on a running server: optimize's throughput on a lineitem of many small
files, query times before and after; and the SSB workload: the layout advice after SSB's 13
queries, then the same queries on the untouched lineorder and on a copy optimized as advised,
alternating, with the bytes each read.

    iceflight load tpch --scale 1 --namespace tpch --target-file-size 2MiB --data-dir D
    iceflight load ssb --scale 1 --namespace ssb --data-dir D
    ICEFLIGHT_DEFAULT_SCHEMA=ssb iceflight serve --data-dir D --user bench:bench \
        --listen 127.0.0.1:50072 &
    python bench/scripts/maintenance.py --url grpc://127.0.0.1:50072 > bench/results/maintenance.json

The advice and the bytes read come from `system.runtime.layout_advice` and
`system.runtime.table_access` of the same server process (the workload record is not kept
across restarts). Times are client wall times over ADBC (loopback Flight SQL), medians.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time


from flight_client import connect, run, timed

QUERIES = pathlib.Path(__file__).resolve().parent.parent / "queries"
LINEITEM_QUERIES = ["q01", "q06", "q14"]


def seconds(conn, sql: str) -> float:
    """`sql`'s wall time."""
    return timed(lambda: run(conn, sql))[0]


def bytes_read(conn, table: str) -> tuple[int, int]:
    """Bytes read and scans recorded so far for `table`."""
    row = run(conn, "SELECT coalesce(sum(bytes_read), 0), count(*) FROM system.runtime.table_access "
                    f"WHERE \"table\" = '{table}'")[0]
    return int(row[0]), int(row[1])


def files(conn, table: str) -> int:
    *schema, name = table.split(".")
    schema = ".".join(schema)
    return int(run(conn, f"SELECT count(*) FROM {schema}.\"{name}$files\" WHERE content = 0")[0][0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", default="bench")
    parser.add_argument("--password", default="bench")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tpch", default="local.tpch",
                        help="namespace of the TPC-H tables whose lineitem is optimized")
    parser.add_argument("--ssb", default="ssb_sf1",
                        help="namespace of SSB (the default schema: the queries name bare tables)")
    parser.add_argument("--sorted-table", default="local.ssb.lineorder_sorted",
                        help="where the optimized copy of lineorder is written")
    args = parser.parse_args()
    conn = connect(args.url, args.user, args.password)
    report: dict = {}

    # 1. optimize on lineitem of small files.
    lineitem = {q: (QUERIES / "tpch" / f"{q}.sql").read_text()
                .replace("lineitem", f"{args.tpch}.lineitem").replace("part\n", f"{args.tpch}.part\n")
                for q in LINEITEM_QUERIES}
    before = {q: statistics.median(seconds(conn, sql) for _ in range(args.rounds))
              for q, sql in lineitem.items()}
    files_before = files(conn, f"{args.tpch}.lineitem")
    start = time.perf_counter()
    metrics = dict(run(conn, f"ALTER TABLE {args.tpch}.lineitem EXECUTE "
                             "optimize(file_size_threshold => '128MB')"))
    elapsed = time.perf_counter() - start
    after = {q: statistics.median(seconds(conn, sql) for _ in range(args.rounds))
             for q, sql in lineitem.items()}
    report["optimize"] = {
        "files_before": files_before,
        "files_after": files(conn, f"{args.tpch}.lineitem"),
        "seconds": elapsed,
        "metrics": {k: int(v) for k, v in metrics.items()},
        "rows_per_second": int(metrics["rewritten_rows_count"]) / elapsed,
        "bytes_per_second": int(metrics["rewritten_bytes"]) / elapsed,
        "query_seconds_before": before,
        "query_seconds_after": after,
    }
    print(json.dumps(report["optimize"], indent=1), file=sys.stderr)

    # 2. The SSB workload.
    ssb = {p.stem: p.read_text() for p in sorted((QUERIES / "ssb").glob("*.sql"))}
    run(conn, f"CREATE SCHEMA IF NOT EXISTS {args.sorted_table.rsplit('.', 1)[0]}")
    run(conn, f"DROP TABLE IF EXISTS {args.sorted_table}")
    for sql in ssb.values():
        run(conn, sql)
    advice = run(conn, "SELECT sort_by, scans, scans_filtering, read_share_now, read_share_sorted, "
                       "statement FROM system.runtime.layout_advice "
                       f"WHERE \"table\" = '{args.ssb}.lineorder'")
    report["advice"] = [list(a) for a in advice]
    if advice:
        column = advice[0][0]
        sorted_table = args.sorted_table
        run(conn, f"CREATE TABLE {sorted_table} AS SELECT * FROM lineorder")
        run(conn, f"ALTER TABLE {sorted_table} SET TBLPROPERTIES "
                  "('write.target-file-size-bytes' = '16777216')")
        start = time.perf_counter()
        run(conn, f"ALTER TABLE {sorted_table} EXECUTE optimize(sort_by => '{column}')")
        report["optimize_sorted_seconds"] = time.perf_counter() - start
        # Recorded names: namespace.table.
        recorded = {"lineorder": f"{args.ssb}.lineorder",
                    sorted_table: ".".join(sorted_table.split(".")[-2:])}
        times = {t: {} for t in recorded}
        read = {t: bytes_read(conn, r) for t, r in recorded.items()}
        for _ in range(args.rounds):
            for name, sql in ssb.items():
                for table in times:
                    text = sql.replace("lineorder", table)
                    times[table].setdefault(name, []).append(seconds(conn, text))
        for table, name in recorded.items():
            b, n = bytes_read(conn, name)
            read[table] = {"bytes": b - read[table][0], "scans": n - read[table][1]}
        report["ssb"] = {
            "sort_by": column,
            "files_sorted": files(conn, sorted_table),
            "seconds": {t: {q: statistics.median(v) for q, v in qs.items()} for t, qs in times.items()},
            "total_seconds": {t: sum(statistics.median(v) for v in qs.values()) for t, qs in times.items()},
            "bytes_read": read,
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
