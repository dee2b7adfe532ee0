#!/usr/bin/env python3
"""Rows per second of three ways a Python client writes N rows into an iceflight table, side by
side in alternating rounds on one server:

  executemany  ADBC DB-API `cursor.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)`: one
               DoPut(CommandPreparedStatementUpdate) carrying every row (server/src/flight/binding.rs)
  to_sql       pandas `DataFrame.to_sql(..., if_exists="append")` through SQLAlchemy's ADBC dialect
               (sqlalchemy-adbc), which inserts with executemany
  ingest       ADBC `cursor.adbc_ingest(..., mode="append")`: bulk ingest (CommandStatementIngest)

Each method appends to a table of its own (created empty first); the rows stored are counted
after each round. Uses the venv of tests/flight (requirements.txt there).

    python bench/scripts/parameter_rows.py grpc://127.0.0.1:50051 demo iceflight [--rows 100000] [--rounds 3]
"""

import argparse
import contextlib
import statistics
import time

import adbc_driver_flightsql.dbapi as flight_sql
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("uri")
    ap.add_argument("user")
    ap.add_argument("password")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--schema", default="bench_params")
    args = ap.parse_args()

    conn = flight_sql.connect(args.uri, db_kwargs={"username": args.user, "password": args.password},
                              autocommit=True)
    host = args.uri.removeprefix("grpc://")
    engine = sa.create_engine(f"adbc+flightsql://{host}?tls=false&username={args.user}&password={args.password}")
    rows = [(i, f"name {i}", i / 8) for i in range(args.rows)]
    frame = pd.DataFrame(rows, columns=["id", "name", "score"])
    table = pa.Table.from_pandas(frame, preserve_index=False)

    def run(sql: str) -> list:
        with contextlib.closing(conn.cursor()) as cur:
            cur.execute(sql)
            return cur.fetchall()

    run(f"CREATE SCHEMA IF NOT EXISTS {args.schema}")
    methods = {}
    for name in ("executemany", "to_sql", "ingest"):
        run(f"DROP TABLE IF EXISTS {args.schema}.{name}")
        run(f"CREATE TABLE {args.schema}.{name} (id BIGINT, name VARCHAR, score DOUBLE)")

    def executemany() -> None:
        with contextlib.closing(conn.cursor()) as cur:
            cur.executemany(f"INSERT INTO {args.schema}.executemany VALUES (?, ?, ?)", rows)

    def to_sql() -> None:
        frame.to_sql("to_sql", engine, schema=args.schema, if_exists="append", index=False)

    def ingest() -> None:
        with contextlib.closing(conn.cursor()) as cur:
            cur.adbc_ingest("ingest", table.to_reader(max_chunksize=65536), mode="append",
                            db_schema_name=args.schema)

    methods = {"executemany": executemany, "to_sql": to_sql, "ingest": ingest}
    times = {name: [] for name in methods}
    for round_ in range(args.rounds):
        order = list(methods) if round_ % 2 == 0 else list(reversed(methods))
        for name in order:
            started = time.perf_counter()
            methods[name]()
            times[name].append(time.perf_counter() - started)
    for name in methods:
        stored = run(f"SELECT count(*) FROM {args.schema}.{name}")[0][0]
        assert stored == args.rows * args.rounds, (name, stored)
        median = statistics.median(times[name])
        print(f"{name:12s} {args.rows} rows: median {median:.2f} s ({args.rows / median:,.0f} rows/s), "
              f"rounds {', '.join(f'{t:.2f}' for t in times[name])}")
    engine.dispose()
    conn.close()


if __name__ == "__main__":
    main()
