"""DataFusion release against release on the same Parquet files: TPC-H's 22 queries through the
`datafusion` Python wheels of two versions, each in its own venv and process, rounds
alternating (the first round is cold and not counted); prints the median ms per query and the
ratio. Used to ask whether moving iceflight to DataFusion 55 pays
(`bench/reports/issue32-progress-20261205.md`).

    python3 -m venv /tmp/df54 && /tmp/df54/bin/pip install datafusion==54.1.0
    python3 -m venv /tmp/df55 && /tmp/df55/bin/pip install datafusion==55.0.0
    python3 bench/scripts/datafusion_versions.py --warehouse ~/.cache/iceflight-bench/data/warehouse/tpch \
        --python /tmp/df54/bin/python --python /tmp/df55/bin/python --rounds 3
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def worker(warehouse: str, partitions: int) -> None:
    """Registers every table directory's Parquet files, then times each query path read from stdin."""
    from datafusion import SessionConfig, SessionContext  # the venv's version

    import datafusion

    ctx = SessionContext(SessionConfig().with_target_partitions(partitions))
    for table in sorted(os.listdir(warehouse)):
        ctx.register_parquet(table, os.path.join(warehouse, table, "data") + "/")
    print("ready", datafusion.__version__, flush=True)
    for line in sys.stdin:
        sql = open(line.strip()).read()
        start = time.perf_counter()
        rows = sum(b.num_rows for b in ctx.sql(sql).collect())
        print(f"{(time.perf_counter() - start) * 1000:.1f} {rows}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--python", action="append", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        worker(args.warehouse, args.partitions)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    queries = [os.path.join(here, "..", "queries", "tpch", f"q{i:02d}.sql") for i in range(1, 23)]
    engines = []
    for python in args.python:
        p = subprocess.Popen(
            [python, __file__, "--worker", "--warehouse", args.warehouse, "--python", python,
             "--partitions", str(args.partitions)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        name = p.stdout.readline().split()[1]
        engines.append((name, p))
    times = {(q, n): [] for q in queries for n, _ in engines}
    for r in range(args.rounds + 1):
        order = engines if r % 2 == 0 else list(reversed(engines))
        for q in queries:
            for name, p in order:
                p.stdin.write(q + "\n")
                p.stdin.flush()
                ms, rows = p.stdout.readline().split()
                if r > 0:
                    times[(q, name)].append(float(ms))
    names = [n for n, _ in engines]
    print("query " + " ".join(names) + f" {names[-1]}/{names[0]}")
    totals = dict.fromkeys(names, 0.0)
    for q in queries:
        med = {n: statistics.median(times[(q, n)]) for n in names}
        for n in names:
            totals[n] += med[n]
        print(os.path.basename(q)[:-4], " ".join(f"{med[n]:.1f}" for n in names),
              f"{med[names[-1]] / med[names[0]]:.2f}")
    print("total", " ".join(f"{totals[n]:.1f}" for n in names),
          f"{totals[names[-1]] / totals[names[0]]:.2f}")


if __name__ == "__main__":
    main()
