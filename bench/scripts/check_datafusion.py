#!/usr/bin/env python3
"""Check that the TPC-H query texts run in Apache DataFusion and match DuckDB.

Usage (after make_answers.py ... --parquet-dir D; needs `pip install datafusion`):

    python bench/scripts/check_datafusion.py --parquet-dir D --answers bench/answers/tpch/sf0.01

Registers D/<table>.parquet under the TPC-H table names, runs every
bench/queries/tpch/qNN.sql unchanged through datafusion-python, and compares
with answers/qNN.json: column names, then row by row in order (strings and
dates exactly, numbers within relative tolerance --rel, default 1e-9).
Exits non-zero on any mismatch. Verified with datafusion==53.0.0.
"""

import argparse
import datetime
import decimal
import glob
import json
import math
import os
import sys

import datafusion

TABLES = ["lineitem", "orders", "customer", "part", "partsupp",
          "supplier", "nation", "region"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def same(got, want, rel):
    if want is None or got is None:
        return got is None and want is None
    if isinstance(got, (int, float, decimal.Decimal)) and not isinstance(got, bool):
        g, w = decimal.Decimal(str(got)), decimal.Decimal(want)
        if g == w:
            return True
        return math.isclose(float(g), float(w), rel_tol=rel, abs_tol=0.0)
    if isinstance(got, (datetime.date, datetime.datetime)):
        return got.isoformat() == want
    return str(got) == want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parquet-dir", required=True)
    ap.add_argument("--answers", required=True)
    ap.add_argument("--queries", default=os.path.join(REPO, "bench", "queries", "tpch"))
    ap.add_argument("--rel", type=float, default=1e-9)
    ap.add_argument("-v", "--verbose", action="store_true", help="print DataFusion result types")
    args = ap.parse_args()

    ctx = datafusion.SessionContext()
    for t in TABLES:
        ctx.register_parquet(t, os.path.join(args.parquet_dir, t + ".parquet"))

    bad = n = 0
    for path in sorted(glob.glob(os.path.join(args.queries, "q[0-9][0-9].sql"))):
        name = os.path.basename(path)[:-4]
        n += 1
        with open(os.path.join(args.answers, name + ".json")) as f:
            want = json.load(f)
        try:
            table = ctx.sql(open(path).read()).to_arrow_table()
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"{name}: ERROR {str(e).splitlines()[0]}")
            bad += 1
            continue
        rows = [list(r.values()) for r in table.to_pylist()]
        problems = []
        if len(rows) != len(want["rows"]):
            problems.append(f"{len(rows)} rows, want {len(want['rows'])}")
        if table.column_names != want["columns"]:
            problems.append(f"columns {table.column_names}, want {want['columns']}")
        for i, (g, w) in enumerate(zip(rows, want["rows"])):
            for j, (gc, wc) in enumerate(zip(g, w)):
                if not same(gc, wc, args.rel):
                    problems.append(f"row {i} col {want['columns'][j]}: got {gc!r} want {wc!r}")
        status = "ok" if not problems else "MISMATCH"
        print(f"{name}: {status} ({len(rows)} rows)")
        if args.verbose:
            print("   ", [f"{f.name}:{f.type}" for f in table.schema])
        for p in problems[:5]:
            print("   ", p)
        bad += bool(problems)
    print(f"{n - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
