"""pandas and SQLAlchemy on iceflight, as a data engineer uses them on the first day: a frame of
every dtype pandas has, written with `DataFrame.to_sql` and read back with `read_sql`, through
iceflight's SQLAlchemy dialect (`clients/sqlalchemy/`, URL `iceflight://USER:PASSWORD@HOST:PORT`)
and through an ADBC connection itself (bulk ingest); the inspector per schema; the DB-API
`rowcount` of writes.

Every value must come back equal, exactly (a float64 stored as a float32 reads 1/3 as
0.3333333432674408), and the table's stored types must be those that keep it. Run by
tests/flight/run_clients.sh (suite `adbc`) against a running `iceflight serve`; the environment
is test_adbc.py's. Tables go to schemas `frames_a` and `frames_b` of catalog `local`.

pandas maps a column of `decimal.Decimal` objects to SQLAlchemy's `Text` for every database (its
`to_sql` infers no numeric type from objects): that column is given `dtype=Numeric(12, 3)`, as
pandas' documentation has users do; ADBC's ingest takes pyarrow's decimal type by itself.
"""

import contextlib
import datetime
import decimal
import math

import pandas as pd
import pyarrow as pa
import pytest
import sqlalchemy as sa

from test_adbc import CATALOG, server  # noqa: F401 (server: test_adbc's fixture)

SCHEMAS = ("frames_a", "frames_b")


@pytest.fixture(scope="module")
def conn(server):
    c = server.connect()
    with contextlib.closing(c.cursor()) as cur:
        for schema in SCHEMAS:
            cur.execute(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}.{schema}")
    c.adbc_current_catalog = CATALOG
    c.adbc_current_db_schema = SCHEMAS[0]
    yield c
    c.close()


@pytest.fixture(scope="module")
def engine(server, conn):
    host = server.uri.removeprefix("grpc://")
    # The documented URL (docs/flight-sql.md, "pandas and SQLAlchemy"); /SCHEMA is the default
    # schema of its sessions.
    url = sa.engine.URL.create(
        "iceflight",
        username=server.user,
        password=server.password,
        host=host.rsplit(":", 1)[0],
        port=int(host.rsplit(":", 1)[1]),
        database=SCHEMAS[0],
    )
    e = sa.create_engine(url)
    yield e
    e.dispose()


def run(conn, sql):
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql)
        return cur.fetchall()


def every_dtype():
    """Three rows of every dtype pandas has (the last row's nullable columns are null)."""
    return pd.DataFrame(
        {
            "id": pd.Series([1, 2, 3], dtype="int64"),
            "i8": pd.Series([-128, 0, 127], dtype="int8"),
            "i16": pd.Series([-32768, 1, 32767], dtype="int16"),
            "i32": pd.Series([-(2**31), 2, 2**31 - 1], dtype="int32"),
            "i64": pd.Series([-(2**63), 3, 2**63 - 1], dtype="int64"),
            "u8": pd.Series([0, 1, 255], dtype="uint8"),
            "u16": pd.Series([0, 1, 65535], dtype="uint16"),
            "u32": pd.Series([0, 1, 2**32 - 1], dtype="uint32"),
            "f32": pd.Series([0.5, -1.25, 3.0e38], dtype="float32"),
            "f64": pd.Series([1 / 3, -2.5e300, 0.1], dtype="float64"),
            "flag": pd.Series([True, False, True], dtype="bool"),
            "words": pd.Series(["plain", "é ✓ 漢字", ""]),
            "ts": pd.to_datetime(
                ["2024-01-02 03:04:05.123456", "1970-01-01 00:00:00.000000", "2262-04-11 23:47:16.854775"]
            ),
            "ts_utc": pd.to_datetime(
                ["2024-01-02 03:04:05.123456", "1999-12-31 23:59:59.000000", "2038-01-19 03:14:08.000001"],
                utc=True,
            ),
            # Within pandas' datetime64[ns] range: read_sql_table parses DATE columns as dates.
            "on_day": [datetime.date(2024, 2, 29), datetime.date(1900, 1, 1), datetime.date(2200, 12, 31)],
            "amount": [decimal.Decimal("1.500"), decimal.Decimal("-123456789.125"), decimal.Decimal("0.000")],
            "maybe_int": pd.Series([1, 2, None], dtype="Int64"),
            "maybe_float": pd.Series([1.5, float("nan"), None], dtype="float64"),
            "maybe_text": pd.Series(["x", "y", None]),
            "maybe_ts": pd.to_datetime(["2024-05-06 07:08:09", None, None]),
        }
    )


def python_values(frame):
    """Column → values as plain Python objects: NaN, NaT, NA and None all None; timestamps as
    naive or UTC-aware datetimes to the microsecond; numbers as Python numbers."""

    def plain(v):
        if v is None or v is pd.NaT or v is pd.NA:
            return None
        if isinstance(v, float) and math.isnan(v):
            return None
        if isinstance(v, pd.Timestamp):
            v = v.to_pydatetime()
        if isinstance(v, datetime.datetime) and v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc)
        if hasattr(v, "item") and not isinstance(v, (datetime.date, decimal.Decimal)):
            v = v.item()  # numpy scalars
        return v

    frame = frame.sort_values("id").reset_index(drop=True)
    return {c: [plain(v) for v in frame[c].astype(object).tolist()] for c in frame.columns}


def assert_same_values(got, sent):
    assert list(got.columns) == list(sent.columns)
    want = python_values(sent)
    have = python_values(got)
    for column in sent.columns:
        read = [
            # read_sql_table hands DATE columns back as midnight timestamps
            v.date() if isinstance(v, datetime.datetime) and type(w) is datetime.date else v
            for v, w in zip(have[column], want[column])
        ]
        assert read == want[column], f"{column}: read {read!r}, wrote {want[column]!r}"


def stored_types(conn, schema, table):
    return {f.name: f.type for f in conn.adbc_get_table_schema(table, db_schema_filter=schema)}


def assert_faithful_types(types):
    """The stored types keep every value: doubles stay doubles, zones stay zones."""
    assert types["f64"] == pa.float64(), types["f64"]
    assert types["f32"] == pa.float32(), types["f32"]
    assert types["ts_utc"].tz is not None, types["ts_utc"]
    assert types["ts"].tz is None, types["ts"]
    assert types["on_day"] == pa.date32(), types["on_day"]
    assert pa.types.is_decimal(types["amount"]), types["amount"]
    assert types["u32"] == pa.int64(), types["u32"]
    assert types["flag"] == pa.bool_(), types["flag"]


def test_every_dtype_round_trips_through_the_sqlalchemy_dialect(conn, engine):
    name = "every_dtype_sqlalchemy"
    run(conn, f"DROP TABLE IF EXISTS {CATALOG}.{SCHEMAS[0]}.{name}")
    sent = every_dtype()
    sent.to_sql(name, engine, index=False, if_exists="fail", dtype={"amount": sa.Numeric(12, 3)})
    got = pd.read_sql_table(name, engine, coerce_float=False)
    assert_same_values(got, sent)
    assert_faithful_types(stored_types(conn, SCHEMAS[0], name))
    # read_sql of a query too, and `replace` writes the same again.
    sent.to_sql(name, engine, index=False, if_exists="replace", dtype={"amount": sa.Numeric(12, 3)})
    assert_same_values(pd.read_sql(f"SELECT * FROM {name}", engine), sent)


def test_every_dtype_round_trips_through_an_adbc_connection(conn):
    name = "every_dtype_adbc"
    run(conn, f"DROP TABLE IF EXISTS {CATALOG}.{SCHEMAS[0]}.{name}")
    sent = every_dtype()
    sent.to_sql(name, conn, index=False, if_exists="fail")
    got = pd.read_sql(f"SELECT * FROM {name}", conn)
    assert_same_values(got, sent)
    assert_faithful_types(stored_types(conn, SCHEMAS[0], name))


def test_the_inspector_answers_per_schema_with_the_default_schema_set(conn, engine):
    a, b = SCHEMAS
    for schema, table in [(a, "only_in_a"), (b, "only_in_b"), (a, "in_both"), (b, "in_both")]:
        run(conn, f"CREATE TABLE IF NOT EXISTS {CATALOG}.{schema}.{table} (id BIGINT)")
    inspector = sa.inspect(engine)
    assert inspector.default_schema_name == a
    in_a = set(inspector.get_table_names(schema=a))
    in_b = set(inspector.get_table_names(schema=b))
    assert {"only_in_a", "in_both"} <= in_a and "only_in_b" not in in_a, in_a
    assert {"only_in_b", "in_both"} <= in_b and "only_in_a" not in in_b, in_b
    # No schema: the default schema's tables only.
    assert set(inspector.get_table_names()) == in_a
    assert inspector.has_table("only_in_a")
    assert not inspector.has_table("only_in_b")
    assert inspector.has_table("only_in_b", schema=b)
    # Schemas of the session's catalog only (not `system`'s `runtime`).
    schemas = inspector.get_schema_names()
    assert a in schemas and b in schemas and "tpch" in schemas
    assert "runtime" not in schemas, schemas
    columns = {c["name"] for c in inspector.get_columns("only_in_b", schema=b)}
    assert columns == {"id"}


def test_dbapi_rowcount_of_every_write(conn):
    name = "rowcounts"
    run(conn, f"DROP TABLE IF EXISTS {name}")
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(f"CREATE TABLE {name} AS SELECT * FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) t(id, v)")
        assert cur.rowcount == 3
        cur.execute(f"INSERT INTO {name} VALUES (4, 'd'), (5, 'e')")
        assert cur.rowcount == 2
        cur.execute(f"UPDATE {name} SET v = 'z' WHERE id >= 3")
        assert cur.rowcount == 3
        cur.execute(f"DELETE FROM {name} WHERE id = 1")
        assert cur.rowcount == 1
        cur.execute(
            f"MERGE INTO {name} t USING (VALUES (2, 'm'), (9, 'n')) s(id, v) ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"
        )
        assert cur.rowcount == 2
    assert run(conn, f"SELECT count(*) FROM {name}") == [(5,)]
