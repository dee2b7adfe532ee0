#!/usr/bin/env python3
"""TPC-DS for `iceflight-bench`: data from DuckDB's dsdgen, its 99 query texts, pyiceberg as a writer.

Usage
-----
    python bench/scripts/tpcds.py data --scale S --out DIR
        runs DuckDB 1.5.5's ``dsdgen(sf=S)`` (the ``tpcds`` extension from the
        duckdb-extension-tpcds wheel, never a download) and writes each of the 24 tables to
        ``DIR/<table>.parquet`` (DuckDB's Parquet writer; the tables' column types as dsdgen
        declares them). Prints the tables and their rows as JSON.
    python bench/scripts/tpcds.py queries --out DIR
        writes DuckDB's ``tpcds_queries()`` texts to ``DIR/qNN.sql`` (the suite's
        bench/queries/tpcds, committed; rerun only to check them against a new DuckDB).
    python bench/scripts/tpcds.py pyiceberg --parquet DIR --catalog-db DB --warehouse W --namespace NS [--catalog-name local]
        creates namespace NS in the sqlite catalog DB (iceflight's embedded catalog, pyiceberg's
        SqlCatalog: the same ``iceberg_tables`` layout; its rows carry the catalog's name) and appends every ``DIR/*.parquet`` as a
        table of that name with pyiceberg 0.12 and pyarrow's Parquet defaults: the layout another
        writer chooses (one data file per table and append, dictionary fallback after 1 MiB, row
        groups of pyarrow's size). All or nothing: on an error the tables made so far are dropped.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import sys
import tempfile

import duckdb


def connect(ext_dir: str) -> duckdb.DuckDBPyConnection:
    """In-memory DuckDB with the tpcds extension loaded from its PyPI wheel."""
    spec = importlib.util.find_spec("duckdb_extension_tpcds")
    if spec is None:
        sys.exit("missing package: pip install duckdb-extension-tpcds==" + duckdb.__version__)
    found = []
    for loc in spec.submodule_search_locations:
        found += glob.glob(os.path.join(loc, "**", "tpcds.duckdb_extension"), recursive=True)
    if not found:
        sys.exit("tpcds.duckdb_extension not found in duckdb_extension_tpcds")
    con = duckdb.connect(config={"extension_directory": ext_dir,
                                 "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    con.execute(f"INSTALL '{sorted(found)[0]}'")
    con.execute("LOAD tpcds")
    return con


def data(scale: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as ext_dir:
        con = connect(ext_dir)
        con.execute(f"CALL dsdgen(sf={float(scale)})")
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables ORDER BY table_name").fetchall()]
        counts = {}
        for t in tables:
            tmp = os.path.join(out, f".{t}.parquet.part")
            con.execute(f"COPY {t} TO '{tmp}' (FORMAT parquet)")
            os.replace(tmp, os.path.join(out, f"{t}.parquet"))
            counts[t] = con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
    print(json.dumps(counts))


def queries(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as ext_dir:
        con = connect(ext_dir)
        for nr, text in con.execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY 1").fetchall():
            with open(os.path.join(out, f"q{nr:02d}.sql"), "w") as f:
                f.write(text.strip() + "\n")


def pyiceberg_load(parquet: str, catalog_name: str, catalog_db: str, warehouse: str, namespace: str) -> None:
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(catalog_name, uri=f"sqlite:///{os.path.abspath(catalog_db)}",
                         warehouse=f"file://{os.path.abspath(warehouse)}")
    catalog.create_namespace(namespace)
    made = []
    counts = {}
    try:
        for path in sorted(glob.glob(os.path.join(parquet, "*.parquet"))):
            name = os.path.basename(path)[: -len(".parquet")]
            rows = pq.read_table(path)
            table = catalog.create_table(f"{namespace}.{name}", schema=rows.schema)
            made.append(f"{namespace}.{name}")
            table.append(rows)
            counts[name] = rows.num_rows
    except BaseException:
        for t in made:
            catalog.purge_table(t)
        catalog.drop_namespace(namespace)
        raise
    print(json.dumps(counts))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("data")
    d.add_argument("--scale", required=True)
    d.add_argument("--out", required=True)
    q = sub.add_parser("queries")
    q.add_argument("--out", required=True)
    p = sub.add_parser("pyiceberg")
    p.add_argument("--parquet", required=True)
    p.add_argument("--catalog-db", required=True)
    p.add_argument("--warehouse", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--catalog-name", default="local")
    args = parser.parse_args()
    if args.command == "data":
        data(args.scale, args.out)
    elif args.command == "queries":
        queries(args.out)
    else:
        pyiceberg_load(args.parquet, args.catalog_name, args.catalog_db, args.warehouse, args.namespace)


if __name__ == "__main__":
    main()
