#!/usr/bin/env python3
"""Row-level changes on one 10 M-row table: UPDATE and DELETE touching 0.1 %, 1 % and 10 % of
the rows, copy-on-write and merge-on-read, beside DuckDB's own times on the same statements;
then what the delete files left behind cost later reads.

    iceflight load tpch --scale 0.01 --data-dir D          # any catalog to start from
    iceflight serve --data-dir D --user bench:bench --listen 127.0.0.1:50071 &
    python bench/scripts/row_changes.py --url grpc://127.0.0.1:50071 --rows 10000000 \\
        --duckdb-dir /tmp/rc-duck > bench/results/row_changes.json

Tables: `local.rc.base` (id 1..rows, k = id % 1000, v double, s string), copied for each
statement into a table of the mode (`write.update.mode` / `write.delete.mode`), sorted by id,
with 2 MiB data files (about 14 for 10 M rows). Two layouts of the rows changed: *spread* (`id % N = 7`: every data file holds
some) and *clustered* (`id <= rows / N`: the first file or two). DuckDB runs the same
statements on a copy of the same rows in its own database file (its storage, not Iceberg).
Modes: copy-on-write (v2), merge-on-read on v2 (Parquet position delete files) and on v3
(deletion vectors). Per round and per (layout, fraction, statement), the four run one after
another; the report takes the median over rounds. Read cost: `SELECT count(*), sum(v) FROM t`
on each iceflight table after the same statement, alternating, five times each. Files written come from the snapshot summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import adbc_driver_manager
import duckdb

from flight_client import connect, run, timed

FRACTIONS = [(1000, "0.1%"), (100, "1%"), (10, "10%")]
# Label ─► (write mode, format version): v2 merge-on-read writes Parquet position delete
# files, v3 deletion vectors.
MODES = [
    ("copy-on-write", ("copy-on-write", 2)),
    ("merge-on-read", ("merge-on-read", 2)),
    ("merge-on-read v3", ("merge-on-read", 3)),
]
STATEMENTS = {
    "UPDATE": "UPDATE {t} SET v = v + 1 WHERE {where}",
    "DELETE": "DELETE FROM {t} WHERE {where}",
}
FILE_SIZE = 2 * 1024 * 1024
# The namespace, its catalog quoted: sqlparser reads `INSERT INTO local…` as Hive's
# `INSERT … LOCAL DIRECTORY`.
RC = '"local".rc'


def run_update(conn, sql: str) -> int:
    """A statement that changes rows; the rows changed (ADBC's `execute_update` count)."""
    stmt = adbc_driver_manager.AdbcStatement(conn.adbc_connection)
    try:
        stmt.set_sql_query(sql)
        return stmt.execute_update()
    finally:
        stmt.close()


def where(layout: str, n: int, rows: int) -> str:
    return f"id % {n} = 7" if layout == "spread" else f"id <= {rows // n}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--user", default="bench")
    parser.add_argument("--password", default="bench")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--duckdb-dir", required=True)
    args = parser.parse_args()

    conn = connect(args.url, args.user, args.password)
    run(conn, "CREATE SCHEMA IF NOT EXISTS local.rc")
    run(conn, f"DROP TABLE IF EXISTS {RC}.base")
    base_seconds, _ = timed(lambda: run(conn, (
        f"CREATE TABLE {RC}.base AS SELECT value AS id, value % 1000 AS k, "
        "CAST(value AS DOUBLE) * 0.5 AS v, concat('row ', CAST(value % 997 AS VARCHAR)) AS s "
        f"FROM generate_series(1, {args.rows})")))
    os.makedirs(args.duckdb_dir, exist_ok=True)
    duck = duckdb.connect(os.path.join(args.duckdb_dir, "rc.duckdb"))
    duck.execute("DROP TABLE IF EXISTS base")
    duck.execute("CREATE TABLE base AS SELECT range AS id, range % 1000 AS k, range::DOUBLE * 0.5 AS v, "
                 f"'row ' || (range % 997)::VARCHAR AS s FROM range(1, {args.rows + 1})")

    results = []
    for layout in ("spread", "clustered"):
        for n, label in FRACTIONS:
            for statement, template in STATEMENTS.items():
                cond = where(layout, n, args.rows)
                samples = {mode: [] for mode, _ in MODES} | {"duckdb": []}
                written = {}
                reads = {mode: [] for mode, _ in MODES}
                changed = None
                for round_ in range(args.rounds):
                    tables = {}
                    for mode, (write_mode, version) in MODES:
                        t = f"{RC}.t_{mode.replace('-', '_').replace(' ', '_')}"
                        run(conn, f"DROP TABLE IF EXISTS {t}")
                        run(conn, f"CREATE TABLE {t} (id BIGINT, k BIGINT, v DOUBLE, s VARCHAR) WITH "
                                  f"(sorted_by = ARRAY['id'], format_version = {version}, "
                                  f"'write.update.mode' = '{write_mode}', "
                                  f"'write.delete.mode' = '{write_mode}')")
                        run(conn, f"ALTER TABLE {t} SET TBLPROPERTIES "
                                  f"('write.target-file-size-bytes' = '{FILE_SIZE}')")
                        run(conn, f"INSERT INTO {t} SELECT * FROM {RC}.base")
                        seconds, changed = timed(
                            lambda: run_update(conn, template.format(t=t, where=cond)))
                        samples[mode].append(seconds)
                        name = t.split(".")[-1]
                        summary = run(conn, (
                            "SELECT summary['added-data-files'], summary['added-delete-files'], "
                            "summary['added-files-size'], summary['deleted-data-files'] "
                            f"FROM {RC}.\"{name}$snapshots\" ORDER BY committed_at DESC LIMIT 1"))[0]
                        files = run(conn, f"SELECT count(*) FROM {RC}.\"{name}$files\" "
                                          "WHERE content = 0")[0][0]
                        written[mode] = {
                            "added_data_files": summary[0], "added_delete_files": summary[1],
                            "added_bytes": summary[2], "removed_data_files": summary[3],
                            "data_files_after": files,
                        }
                        tables[mode] = t
                    duck.execute("DROP TABLE IF EXISTS t")
                    duck.execute("CREATE TABLE t AS SELECT * FROM base")
                    seconds, _ = timed(lambda: duck.execute(template.format(t="t", where=cond)).fetchall())
                    samples["duckdb"].append(seconds)
                    if round_ == args.rounds - 1:
                        for _ in range(args.reads):
                            for mode, t in tables.items():
                                s, _ = timed(lambda: run(conn, f"SELECT count(*), sum(v) FROM {t}"))
                                reads[mode].append(s)
                entry = {
                    "layout": layout, "fraction": label, "statement": statement, "where": cond,
                    "rows_changed": changed,
                    "seconds": {k: statistics.median(v) for k, v in samples.items()},
                    "samples": samples,
                    "written": written,
                    "read_seconds": {k: statistics.median(v) for k, v in reads.items()},
                }
                results.append(entry)
                print(json.dumps(entry), file=sys.stderr, flush=True)
    json.dump({"rows": args.rows, "rounds": args.rounds, "base_seconds": base_seconds,
               "data_file_target_bytes": FILE_SIZE, "results": results}, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
