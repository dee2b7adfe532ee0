#!/usr/bin/env python3
"""Times TPC-H queries through `iceflight sql` with a setting on and off, side by side.

Each round runs every query once per variant; the variant order alternates between rounds
(on/off, then off/on) so drift on this noisy machine hits both. Wall time per process (includes
~startup, the same for both variants). Prints a markdown table of per-query medians and the
on/off ratio.

usage: pruning_onoff.py BINARY DATA_DIR SCHEMA [--rounds N] [--queries 1,6,17]
                        [--setting iceflight.scan.dynamic_filter_pruning] [--values true,false]
"""
import argparse
import statistics
import subprocess
import time
from pathlib import Path

QUERIES = Path(__file__).resolve().parents[1] / "queries" / "tpch"


def run(binary, data_dir, schema, sql, setting, value):
    start = time.perf_counter()
    subprocess.run(
        [binary, "--data-dir", data_dir, "sql", "--schema", schema, "--set", f"{setting}={value}"],
        input=sql.encode(), stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("data_dir")
    p.add_argument("schema")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--queries", default=",".join(str(i) for i in range(1, 23)))
    p.add_argument("--setting", default="iceflight.scan.dynamic_filter_pruning")
    p.add_argument("--values", default="true,false", help="the two values compared")
    a = p.parse_args()
    first, second = a.values.split(",")
    queries = [int(q) for q in a.queries.split(",")]
    times = {(q, v): [] for q in queries for v in (first, second)}
    for q in queries:  # warm-up
        run(a.binary, a.data_dir, a.schema, (QUERIES / f"q{q:02}.sql").read_text(), a.setting, first)
    for r in range(a.rounds):
        order = (first, second) if r % 2 == 0 else (second, first)
        for q in queries:
            sql = (QUERIES / f"q{q:02}.sql").read_text()
            for v in order:
                times[(q, v)].append(run(a.binary, a.data_dir, a.schema, sql, a.setting, v))
    print(f"| query | {a.setting}={first} ms | {second} ms | ratio |")
    print("|---|---|---|---|")
    tot_on = tot_off = 0
    for q in queries:
        on = statistics.median(times[(q, first)])
        off = statistics.median(times[(q, second)])
        tot_on += on
        tot_off += off
        print(f"| q{q:02} | {on:.0f} | {off:.0f} | {on / off:.2f} |")
    print(f"| total | {tot_on:.0f} | {tot_off:.0f} | {tot_on / tot_off:.2f} |")


if __name__ == "__main__":
    main()
