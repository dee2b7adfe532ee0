#!/usr/bin/env python3
"""Per-stage and per-task costs of queries on an iceflight coordinator, from EXPLAIN ANALYZE.

Usage: distributed_costs.py --url grpc://127.0.0.1:50051 --user U --password P \
           --queries bench/queries/tpch [--rounds 3] [--set key=value ...] > costs.json

For every query: the warm wall time (the best of --rounds runs after one warm-up, timed here,
result fetched), then one EXPLAIN ANALYZE whose text gives, per stage, its task count and the
times each task's plan was added, started and finished (relative to the query's start), and per
network boundary the bytes moved; plus the plan bytes the coordinator sent and the dynamic
filters the workers' scans could not use (produced in another stage). Needs
adbc-driver-flightsql (tests/flight/requirements.txt).
"""

import argparse
import json
import pathlib
import re
import sys
import time

import adbc_driver_flightsql.dbapi as flight_sql

STAGE = re.compile(r"Stage (\d+) ── tasks=(\d+), partitions=(\d+)(.*)")
TIMES = re.compile(r"(plan_added_at|plan_executed_at|plan_finished_at)=\{([^}]*)\}")
BYTES = re.compile(r"bytes_transferred=([\d.]+) ?([KMG]?B)")
UNLINKED = re.compile(r"dynamic_filters_unlinked=(\d+)")
PLAN_BYTES = re.compile(r"plan_bytes_sent=\{[^}]*?([\d.]+) ?([KMG]?B)\}")
UNIT = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9}


def millis(text):
    """'0:11.11ms, 1:7.12ms' or '0:1.2s' as a list of milliseconds."""
    out = []
    for item in text.split(","):
        value = item.split(":", 1)[1].strip()
        number = re.match(r"[\d.]+", value).group(0)
        unit = value[len(number):]
        out.append(float(number) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1000.0}[unit])
    return out


def parse(plan):
    """Stages, network bytes and plan bytes of one EXPLAIN ANALYZE text."""
    stages = []
    for line in plan.splitlines():
        m = STAGE.search(line)
        if not m:
            continue
        times = {k: millis(v) for k, v in TIMES.findall(m.group(4))}
        stage = {"stage": int(m.group(1)), "tasks": int(m.group(2)), "partitions": int(m.group(3))}
        if "plan_executed_at" in times and "plan_finished_at" in times:
            runs = [f - s for s, f in zip(times["plan_executed_at"], times["plan_finished_at"])]
            stage["task_ms"] = runs
            stage["start_ms"] = min(times["plan_added_at"]) if "plan_added_at" in times else None
        stages.append(stage)
    moved = sum(float(n) * UNIT[u] for n, u in BYTES.findall(plan))
    sent = sum(float(n) * UNIT[u] for n, u in PLAN_BYTES.findall(plan))
    unlinked = sum(int(n) for n in UNLINKED.findall(plan))
    return {
        "stages": stages,
        "network_bytes": moved,
        "plan_bytes": sent,
        "dynamic_filters_unlinked": unlinked,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--user", default="demo")
    ap.add_argument("--password", default="demo")
    ap.add_argument("--queries", required=True, help="directory of NAME.sql files")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], help="key=value session setting")
    args = ap.parse_args()
    conn = flight_sql.connect(
        args.url, db_kwargs={"username": args.user, "password": args.password}, autocommit=True
    )
    cur = conn.cursor()
    for kv in args.set:
        key, value = kv.split("=", 1)
        cur.execute(f"SET {key} = {value}")
    report = {}
    for path in sorted(pathlib.Path(args.queries).glob("*.sql")):
        sql = path.read_text()
        cur.execute(sql)
        cur.fetchall()
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            cur.execute(sql)
            cur.fetchall()
            times.append((time.perf_counter() - start) * 1000)
        cur.execute("EXPLAIN ANALYZE " + sql)
        plan = "\n".join(str(row[1]) for row in cur.fetchall())
        entry = parse(plan)
        entry["wall_ms"] = min(times)
        report[path.stem] = entry
        print(f"{path.stem}: {entry['wall_ms']:.1f} ms, {len(entry['stages'])} stages", file=sys.stderr)
    json.dump(report, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
