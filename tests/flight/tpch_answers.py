"""Comparing a Flight SQL result (a pyarrow Table) with a DuckDB reference answer.

The answers live in bench/answers/tpch/<scale>/qNN.json:
    {"columns": [...], "types": [DuckDB type names], "rows": [[cell as string or null, ...], ...]}

Rules (by column position, in row order):
  * result column DECIMAL, answer DECIMAL or integer  -> exact (trailing zeros do not matter);
  * result column DECIMAL(p, s), answer DOUBLE/FLOAT  -> |got - want| <= 10^-s (or within relative
                                                         1e-9, the double's own precision, when the
                                                         scale is so large that 10^-s is smaller);
  * result column floating point                      -> relative 1e-9;
  * result column integer                             -> exact;
  * dates                                             -> ISO text; strings exactly; null only equals null.

Shared by test_adbc.py; it has no third-party import but pyarrow.
"""

import datetime
import decimal
import json
import math
import os

import pyarrow as pa

FLOAT_ANSWER_TYPES = ("DOUBLE", "FLOAT", "REAL")
REL_TOL = 1e-9


def load_answer(repo, scale, name):
    with open(os.path.join(repo, "bench", "answers", "tpch", scale, name + ".json")) as f:
        return json.load(f)


def load_query(repo, name):
    with open(os.path.join(repo, "bench", "queries", "tpch", name + ".sql")) as f:
        return f.read()


def cell_matches(got, want, arrow_type, want_type):
    """True when one result cell equals the answer's cell under the rules above."""
    if got is None or want is None:
        return got is None and want is None
    if pa.types.is_decimal(arrow_type):
        g = decimal.Decimal(got)
        w = decimal.Decimal(want)
        if want_type.upper() in FLOAT_ANSWER_TYPES:
            tol = max(decimal.Decimal(1).scaleb(-arrow_type.scale), abs(w) * decimal.Decimal(REL_TOL))
            return abs(g - w) <= tol
        return g == w  # Decimal equality ignores trailing zeros: 305.00 == 305
    if pa.types.is_floating(arrow_type):
        return math.isclose(float(got), float(want), rel_tol=REL_TOL, abs_tol=0.0)
    if pa.types.is_integer(arrow_type):
        return decimal.Decimal(want) == decimal.Decimal(int(got))
    if pa.types.is_boolean(arrow_type):
        return str(got).lower() == str(want).lower()
    if isinstance(got, (datetime.date, datetime.datetime)):
        return got.isoformat() == want
    return str(got) == want


def compare(table, answer, max_problems=10):
    """List of human-readable mismatches between `table` and `answer` (empty when equal)."""
    problems = []
    want_cols = answer["columns"]
    want_types = answer["types"]
    want_rows = answer["rows"]
    if table.num_columns != len(want_cols):
        return [
            f"{table.num_columns} columns {table.column_names}, want {len(want_cols)} {want_cols}"
        ]
    if table.num_rows != len(want_rows):
        problems.append(f"{table.num_rows} rows, want {len(want_rows)}")
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    types = [table.schema.field(i).type for i in range(table.num_columns)]
    for r, want_row in enumerate(want_rows[: table.num_rows]):
        for c, want in enumerate(want_row):
            got = columns[c][r]
            if not cell_matches(got, want, types[c], want_types[c]):
                problems.append(
                    f"row {r} column {c} ({want_cols[c]}): got {got!r} as {types[c]}, "
                    f"want {want!r} as {want_types[c]}"
                )
                if len(problems) >= max_problems:
                    problems.append("...")
                    return problems
    return problems


def _self_check():
    """Sanity checks of the rules (run: python tpch_answers.py)."""
    d = pa.decimal128(38, 2)
    assert cell_matches(decimal.Decimal("305.00"), "305.00", d, "DECIMAL(38,2)")
    assert cell_matches(decimal.Decimal("305.0"), "305.00", pa.decimal128(38, 1), "DECIMAL(38,2)")
    assert not cell_matches(decimal.Decimal("305.01"), "305.00", d, "DECIMAL(38,2)")
    d6 = pa.decimal128(19, 6)
    assert cell_matches(decimal.Decimal("25.575155"), "25.575154611454693", d6, "DOUBLE")
    assert not cell_matches(decimal.Decimal("25.575157"), "25.575154611454693", d6, "DOUBLE")
    d20 = pa.decimal128(38, 20)
    assert cell_matches(decimal.Decimal("15.48654581228407123456"), "15.48654581228407", d20, "DOUBLE")
    assert cell_matches(15.486545812284071, "15.48654581228407", pa.float64(), "DOUBLE")
    assert not cell_matches(15.486545, "15.48654581228407", pa.float64(), "DOUBLE")
    assert cell_matches(1193053.2253, "1193053.2253", pa.float64(), "DECIMAL(38,4)")
    assert cell_matches(9, "9", pa.int32(), "BIGINT")
    assert not cell_matches(9, "10", pa.int64(), "BIGINT")
    assert cell_matches(None, None, pa.float64(), "DOUBLE")
    assert not cell_matches(0.0, None, pa.float64(), "DOUBLE")
    assert cell_matches(datetime.date(1995, 3, 11), "1995-03-11", pa.date32(), "DATE")
    assert cell_matches("ab ", "ab ", pa.string(), "VARCHAR")
    assert not cell_matches("ab", "ab ", pa.string(), "VARCHAR")
    t = pa.table({"a": pa.array(["x"]), "b": pa.array([decimal.Decimal("1.50")], pa.decimal128(10, 2))})
    assert compare(t, {"columns": ["a", "b"], "types": ["VARCHAR", "DECIMAL(38,4)"],
                       "rows": [["x", "1.5000"]]}) == []
    assert compare(t, {"columns": ["a", "b"], "types": ["VARCHAR", "DECIMAL(38,4)"],
                       "rows": [["x", "1.5000"], ["y", "2"]]}) == ["1 rows, want 2"]
    print("tpch_answers self-check ok")


if __name__ == "__main__":
    _self_check()
