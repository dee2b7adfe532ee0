#!/usr/bin/env python3
"""Regenerate TPC-H reference answers with DuckDB.

Usage (from the repository root, with duckdb==1.5.5 and tpchgen-cli==4.0.0
installed — see tests/requirements.txt; no network needed):

    python bench/scripts/make_answers.py --scale 0.01 --out bench/answers/tpch/sf0.01
    python bench/scripts/make_answers.py --scale 0.01 --out OUT --parquet-dir /tmp/tpch-sf0.01

What it does:
  * generates the data with ``tpchgen-cli`` (the generator iceflight's loader
    uses, the ``tpchgen`` crate) as Parquet, and loads it into an in-memory
    DuckDB (DuckDB's own ``dbgen`` differs from it in the random text of
    comments and addresses, so answers must come from the same generator);
  * runs every ``bench/queries/tpch/qNN.sql`` (override with ``--queries``) and
    writes ``OUT/qNN.json``:
        {"query": "q01", "scale": 0.01, "engine": "duckdb 1.5.5",
         "columns": [...], "types": ["DECIMAL(38,2)", "DOUBLE", ...],
         "rows": [[cell, ...], ...]}
    Every cell is a string or null: DECIMAL in plain notation with its full
    scale ("37734107.00", as DuckDB casts it to VARCHAR), DOUBLE as Python
    repr(float), DATE as ISO "1995-03-15", integers in decimal. Rows keep the
    query's ORDER BY / LIMIT order;
  * writes ``OUT/tables.json``: per table the row count and, per column,
    aggregates any SQL engine can reproduce exactly: integer and decimal
    columns ``sum``; date columns ``min``/``max``; string columns
    ``sum_length`` (sum(length(col))) plus ``min``/``max``;
  * with ``--parquet-dir D`` also exports each table as ``D/<table>.parquet``.

The output is deterministic (single-threaded DuckDB, fixed key order), so
running it twice gives byte-identical files.
"""

import argparse
import datetime
import decimal
import glob
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import duckdb

TABLES = ["lineitem", "orders", "customer", "part", "partsupp",
          "supplier", "nation", "region"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def connect(ext_dir):
    """In-memory DuckDB with the tpch extension loaded from its PyPI wheel."""
    spec = importlib.util.find_spec("duckdb_extension_tpch")
    if spec is None:
        sys.exit("missing package: pip install duckdb-extension-tpch==" + duckdb.__version__)
    found = []
    for loc in spec.submodule_search_locations:
        found += glob.glob(os.path.join(loc, "**", "tpch.duckdb_extension"), recursive=True)
    if not found:
        sys.exit("tpch.duckdb_extension not found in duckdb_extension_tpch")
    con = duckdb.connect(config={"extension_directory": ext_dir,
                                 "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false",
                                 "threads": 1})
    con.execute(f"INSTALL '{sorted(found)[0]}'")
    con.execute("LOAD tpch")
    return con


def cell(v):
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # plain notation, keeps the scale: 0.00, 12.50
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    return str(v)


def dump(obj, path):
    """JSON with one row / one column per line: small diffs, easy to read."""
    def enc(x):
        return json.dumps(x, ensure_ascii=False)
    lines = ["{"]
    items = list(obj.items())
    for i, (k, v) in enumerate(items):
        sep = "," if i + 1 < len(items) else ""
        if isinstance(v, list) and v and isinstance(v[0], list):
            body = ",\n".join("    " + enc(r) for r in v)
            lines.append(f"  {enc(k)}: [\n{body}\n  ]{sep}")
        elif isinstance(v, dict) and v:
            sub = list(v.items())
            body = ",\n".join(f"    {enc(sk)}: {enc(sv)}" for sk, sv in sub)
            lines.append(f"  {enc(k)}: {{\n{body}\n  }}{sep}")
        else:
            lines.append(f"  {enc(k)}: {enc(v)}{sep}")
    lines.append("}")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def run_queries(con, qdir, out, scale, engine):
    files = sorted(glob.glob(os.path.join(qdir, "q[0-9][0-9].sql")))
    if not files:
        sys.exit(f"no qNN.sql files in {qdir}")
    for path in files:
        name = os.path.basename(path)[:-4]
        with open(path, encoding="utf-8") as f:
            sql = f.read()
        rel = con.sql(sql)
        doc = {"query": name, "scale": scale, "engine": engine,
               "columns": list(rel.columns),
               "types": [str(t) for t in rel.types],
               "rows": [[cell(v) for v in row] for row in rel.fetchall()]}
        dump(doc, os.path.join(out, name + ".json"))
        print(f"{name}: {len(doc['rows'])} rows", file=sys.stderr)


def table_stats(con):
    stats = {}
    for t in TABLES:
        cols = con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position", [t]).fetchall()
        entry = {"rows": con.execute(f"SELECT count(*) FROM {t}").fetchone()[0],
                 "columns": {}}
        for c, ty in cols:
            if ty == "DATE":
                aggs = {"min": f"min({c})", "max": f"max({c})"}
            elif ty.startswith("VARCHAR") or ty.startswith("CHAR"):
                aggs = {"sum_length": f"sum(length({c}))",
                        "min": f"min({c})", "max": f"max({c})"}
            elif ty.startswith("DECIMAL") or ty in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT",
                                                     "HUGEINT", "UTINYINT", "USMALLINT",
                                                     "UINTEGER", "UBIGINT"):
                aggs = {"sum": f"sum({c})"}
            else:
                sys.exit(f"unexpected type {ty} for {t}.{c}")
            sel = ", ".join(f"CAST({e} AS VARCHAR)" for e in aggs.values())
            vals = con.execute(f"SELECT {sel} FROM {t}").fetchone()
            entry["columns"][c] = dict({"type": ty}, **dict(zip(aggs, vals)))
        stats[t] = entry
    return stats


def dump_tables(stats, path):
    lines = ["{"]
    for i, (t, e) in enumerate(stats.items()):
        lines.append(f"  {json.dumps(t)}: {{\"rows\": {json.dumps(e['rows'])}, \"columns\": {{")
        cols = list(e["columns"].items())
        for j, (c, a) in enumerate(cols):
            lines.append(f"    {json.dumps(c)}: {json.dumps(a)}" + ("," if j + 1 < len(cols) else ""))
        lines.append("  }}" + ("," if i + 1 < len(stats) else ""))
    lines.append("}")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, required=True, help="TPC-H scale factor, e.g. 0.01")
    ap.add_argument("--out", required=True, help="output directory for qNN.json and tables.json")
    ap.add_argument("--queries", default=os.path.join(REPO, "bench", "queries", "tpch"),
                    help="directory with qNN.sql (default: bench/queries/tpch)")
    ap.add_argument("--parquet-dir", help="also export the tables as <dir>/<table>.parquet")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    engine = "duckdb " + duckdb.__version__
    with tempfile.TemporaryDirectory() as ext_dir:
        con = connect(ext_dir)
        gen_dir = os.path.join(ext_dir, "tpchgen")
        tpchgen = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
        subprocess.run([tpchgen, "parquet", "-s", repr(args.scale), "--output-dir", gen_dir],
                       check=True, stdout=subprocess.DEVNULL)
        for t in TABLES:
            p = os.path.join(gen_dir, t + ".parquet").replace("'", "''")
            con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{p}')")
        run_queries(con, args.queries, args.out, args.scale, engine)
        dump_tables(table_stats(con), os.path.join(args.out, "tables.json"))
        if args.parquet_dir:
            os.makedirs(args.parquet_dir, exist_ok=True)
            for t in TABLES:
                p = os.path.join(args.parquet_dir, t + ".parquet").replace("'", "''")
                con.execute(f"COPY {t} TO '{p}' (FORMAT parquet)")
        con.close()


if __name__ == "__main__":
    main()
