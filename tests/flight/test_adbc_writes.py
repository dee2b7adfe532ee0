"""Writes with parameters through the real Python clients: the ADBC Flight SQL driver's DB-API
(`execute`, `executemany`), and pandas through SQLAlchemy's ADBC dialect (`sqlalchemy-adbc`).
Every test compares the rows stored with the rows sent.

Run by tests/flight/run_clients.sh (suite `adbc`) against a running `iceflight serve`; the
environment is test_adbc.py's. Tables go to schema `params` of catalog `local`.

What the clients send (server/src/flight/binding.rs): `execute(sql, row)` binds the row with
DoPut(CommandPreparedStatementQuery) and runs it with GetFlightInfo; `executemany(sql, rows)` sends
every row in the stream of one DoPut(CommandPreparedStatementUpdate). pandas' `to_sql` through
SQLAlchemy creates the table (DROP TABLE first for if_exists="replace") and inserts with
`executemany`; `read_sql_table` reflects the table through GetObjects.
"""

import contextlib
import decimal
import subprocess
import sys
import time

import adbc_driver_manager
import pandas as pd
import pytest
import sqlalchemy as sa
from adbc_driver_manager import AdbcStatusCode

from test_adbc import CATALOG, find, objects, server  # noqa: F401 (server: test_adbc's fixture)

SCHEMA = "params"


@pytest.fixture(scope="module")
def conn(server):
    c = server.connect()
    with contextlib.closing(c.cursor()) as cur:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}.{SCHEMA}")
    c.adbc_current_catalog = CATALOG
    c.adbc_current_db_schema = SCHEMA
    yield c
    c.close()


def run(conn, sql, parameters=None):
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql, parameters)
        return cur.fetchall()


def fresh_table(conn, name, columns="id BIGINT NOT NULL, name VARCHAR, amount DECIMAL(10, 2)"):
    run(conn, f"DROP TABLE IF EXISTS {name}")
    run(conn, f"CREATE TABLE {name} ({columns})")
    return name


def stored(conn, name):
    return run(conn, f"SELECT * FROM {name} ORDER BY id")


def snapshots(conn, name):
    return run(conn, f'SELECT count(*) FROM "{name}$snapshots"')[0][0]


def status(fn):
    with pytest.raises(adbc_driver_manager.Error) as err:
        fn()
    return err.value


def row(i):
    return (i, f"name {i}" if i % 7 else None, decimal.Decimal(i) / 100)


# ---------------------------------------------------------------- executemany and execute


@pytest.mark.parametrize("rows", [1, 2, 10_000])
def test_executemany_on_a_fresh_cursor_writes_every_row_in_one_snapshot(conn, rows):
    table = fresh_table(conn, f"many_{rows}")
    sent = [row(i) for i in range(rows)]
    with contextlib.closing(conn.cursor()) as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", sent)
        assert cur.rowcount == rows
    assert stored(conn, table) == sent
    assert snapshots(conn, table) == 1


def test_execute_and_executemany_interleaved_on_one_cursor(conn):
    """The reported fault: executemany after execute on one cursor wrote the execute's row again."""
    table = fresh_table(conn, "interleaved")
    insert = f"INSERT INTO {table} VALUES (?, ?, ?)"
    sent = []
    with contextlib.closing(conn.cursor()) as cur:
        for step in range(3):
            one = row(100 * step)
            cur.execute(insert, one)
            sent.append(one)
            batch = [row(100 * step + i) for i in range(1, 1 + 2 * step + 1)]
            cur.executemany(insert, batch)
            assert cur.rowcount == len(batch)
            sent += batch
            # A query of other parameter values on the same cursor between the writes.
            cur.execute(f"SELECT count(*) FROM {table} WHERE id >= ?", (100 * step,))
            assert cur.fetchall() == [(1 + len(batch),)]
        cur.executemany(insert, [row(1000)])
        sent.append(row(1000))
    assert stored(conn, table) == sorted(sent)
    assert snapshots(conn, table) == 7


def test_executemany_delete_removes_the_rows_of_every_parameter_row(conn):
    table = fresh_table(conn, "deleted")
    with contextlib.closing(conn.cursor()) as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", [row(i) for i in range(50)])
        cur.executemany(f"DELETE FROM {table} WHERE id = ?", [(3,), (10,), (11,), (3,), (999,)])
        assert cur.rowcount == 3
        cur.executemany(f"DELETE FROM {table} WHERE id > ? AND name IS NOT NULL", [(45,), (47,)])
        assert cur.rowcount == 3  # 46, 47, 48 (49's name is NULL)
    kept = [i for i in range(50) if i not in (3, 10, 11, 46, 47, 48)]
    assert [r[0] for r in stored(conn, table)] == kept
    assert snapshots(conn, table) == 3


def test_table_procedures_run_through_adbc(conn):
    """ALTER TABLE … EXECUTE over Flight SQL (ADBC prepares every statement): optimize
    compacts three one-row files into one and answers its metrics; the rows stay."""
    table = fresh_table(conn, "compacted")
    for i in range(3):
        run(conn, f"INSERT INTO {table} VALUES (?, ?, ?)", row(i))
    before = stored(conn, table)
    metrics = dict(run(conn, f"ALTER TABLE {table} EXECUTE optimize"))
    assert metrics["rewritten_data_files_count"] == 3
    assert metrics["added_data_files_count"] == 1
    assert stored(conn, table) == before
    assert run(conn, f'SELECT count(*) FROM "{table}$files"')[0][0] == 1
    err = status(lambda: run(conn, f"ALTER TABLE {table} EXECUTE vacuum"))
    assert "unknown procedure vacuum" in str(err)


def test_drop_table_and_drop_schema_through_adbc(conn):
    """DROP TABLE and DROP SCHEMA run by iceflight (server/src/sql/ddl.rs): the rows written with
    executemany are stored as sent until the drop; a missing table or schema is NOT_FOUND, a
    schema that still holds a table INVALID_ARGUMENT, and IF EXISTS makes a missing one no error."""
    schema = f"{CATALOG}.dropped"
    table = f"{schema}.t"
    run(conn, f"CREATE SCHEMA IF NOT EXISTS {schema}")
    run(conn, f"DROP TABLE IF EXISTS {table}")
    run(conn, f"CREATE TABLE {table} (id BIGINT NOT NULL, name VARCHAR, amount DECIMAL(10, 2))")
    sent = [row(i) for i in range(1, 21)]
    with contextlib.closing(conn.cursor()) as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", sent)
    assert stored(conn, table) == sent
    refused = status(lambda: run(conn, f"DROP SCHEMA {schema}"))
    assert refused.status_code == AdbcStatusCode.INVALID_ARGUMENT, refused
    assert "Cannot drop non-empty schema" in str(refused), refused
    assert stored(conn, table) == sent, "nothing dropped"
    run(conn, f"DROP TABLE {table}")
    gone = status(lambda: stored(conn, table))
    assert gone.status_code == AdbcStatusCode.NOT_FOUND, gone
    again = status(lambda: run(conn, f"DROP TABLE {table}"))
    assert again.status_code == AdbcStatusCode.NOT_FOUND, again
    assert f"table {table} does not exist" in str(again), again
    run(conn, f"DROP TABLE IF EXISTS {table}")
    run(conn, f"DROP SCHEMA {schema}")
    missing = status(lambda: run(conn, f"DROP SCHEMA {schema}"))
    assert missing.status_code == AdbcStatusCode.NOT_FOUND, missing
    run(conn, f"DROP SCHEMA IF EXISTS {schema}")


def test_parameters_of_the_wrong_count_or_type_are_refused_and_write_nothing(conn):
    table = fresh_table(conn, "refused")
    insert = f"INSERT INTO {table} VALUES (?, ?, ?)"
    with contextlib.closing(conn.cursor()) as cur:
        cur.executemany(insert, [row(1)])
        before = snapshots(conn, table)
        bad = [
            lambda: cur.executemany(insert, [(2, "b")]),  # too few columns
            lambda: cur.executemany(insert, [(2, "b", 1, 4)]),  # too many
            lambda: cur.executemany(insert, [("x", "c", 2)]),  # not a BIGINT
            lambda: cur.executemany(insert, [(2.5, "b", 1)]),  # does not fit a BIGINT
            lambda: cur.executemany(insert, [(2, "b", decimal.Decimal("1.001"))]),  # scale 2
            lambda: cur.execute(insert, (2, "b")),  # the query path, too few
            lambda: cur.executemany(insert, [(2, "b", 1), (None, "c", 2)]),  # not for NOT NULL
        ]
        for attempt in bad:
            e = status(attempt)
            assert e.status_code == AdbcStatusCode.INVALID_ARGUMENT, e
    assert stored(conn, table) == [row(1)]
    assert snapshots(conn, table) == before
    # Whole numbers sent as floats fit a BIGINT placeholder, -0.0 as 0.
    assert run(conn, f"SELECT count(*) FROM {table} WHERE id = ?", (1.0,)) == [(1,)]
    assert run(conn, f"SELECT count(*) FROM {table} WHERE id = ?", (-0.0,)) == [(0,)]


def test_untyped_placeholders_keep_the_type_sent(conn):
    with contextlib.closing(conn.cursor()) as cur:
        for value in (1, 2.5, "text", True, None):
            cur.execute("SELECT ? AS x", (value,))
            assert cur.fetchall() == [(value,)], value
        cur.execute("SELECT ? + 1 AS x", (41,))
        assert cur.fetchall() == [(42,)]


def test_table_schema_reports_column_nullability(conn):
    """A NOT NULL column is not nullable in GetTables' table schema, and carries the XDBC keys
    ADBC defines for it. (The ADBC Go driver 1.13's GetObjects reads neither: its
    `flightSqlMetadata` keeps only the `ARROW:FLIGHT:SQL:*` keys, so `xdbc_nullable` and
    `xdbc_is_nullable` stay NULL whatever a server sends; docs/flight-sql.md, "Clients".)"""
    table = fresh_table(conn, "nullability", "id BIGINT NOT NULL, name VARCHAR")
    schema = conn.adbc_get_table_schema(table, catalog_filter=CATALOG, db_schema_filter=SCHEMA)
    assert [(f.name, f.nullable) for f in schema] == [("id", False), ("name", True)]
    keys = [(f.metadata[b"XDBC_NULLABLE"], f.metadata[b"XDBC_IS_NULLABLE"]) for f in schema]
    assert keys == [(b"0", b"NO"), (b"1", b"YES")]


# ---------------------------------------------------------------- sessions of clients that go


CHILD = """
import sys, time, adbc_driver_flightsql.dbapi as flight_sql, os
c = flight_sql.connect(sys.argv[1], db_kwargs={"username": sys.argv[2], "password": sys.argv[3]}, autocommit=True)
cur = c.cursor()
cur.execute("SELECT 1")
cur.fetchall()
print("connected", flush=True)
sys.stdin.readline()
os._exit(0)  # no close: the session ends with the process
"""


def live_sessions(conn):
    return run(conn, "SELECT count(*) FROM system.runtime.sessions")[0][0]


def test_a_process_that_exits_without_closing_leaves_no_session(conn, server):
    before = live_sessions(conn)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, server.uri, server.user, server.password],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "connected"
        assert live_sessions(conn) == before + 1
    finally:
        child.stdin.write("\n")
        child.stdin.flush()
        child.wait(timeout=30)
    deadline = time.monotonic() + 10
    while live_sessions(conn) != before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_sessions(conn) == before


# ---------------------------------------------------------------- pandas through SQLAlchemy


@pytest.fixture(scope="module")
def engine(server, conn):
    host = server.uri.removeprefix("grpc://")
    # sqlalchemy-adbc's form that logs in with user and password; its `user:password@host`
    # form sends the password as a bearer token (docs/flight-sql.md, "Clients").
    url = f"adbc+flightsql://{host}?tls=false&username={server.user}&password={server.password}"
    e = sa.create_engine(url)
    yield e
    e.dispose()


def frame(first, rows):
    return pd.DataFrame({
        "id": range(first, first + rows),
        "name": [f"n{i}" for i in range(first, first + rows)],
        "score": [i / 4 for i in range(first, first + rows)],
    })


def read_back(engine, name):
    got = pd.read_sql_table(name, engine, schema=SCHEMA)
    return got.sort_values("id").reset_index(drop=True)


def test_pandas_to_sql_append_replace_and_read_sql_table(engine):
    name = "pandas_frame"
    with engine.begin() as c:
        c.exec_driver_sql(f"DROP TABLE IF EXISTS {CATALOG}.{SCHEMA}.{name}")
    first = frame(0, 1000)
    first.to_sql(name, engine, schema=SCHEMA, if_exists="fail", index=False)
    assert name in sa.inspect(engine).get_table_names(schema=SCHEMA)
    pd.testing.assert_frame_equal(read_back(engine, name), first, check_dtype=False)
    second = frame(1000, 1)  # one row: pandas sends it with execute, not executemany
    second.to_sql(name, engine, schema=SCHEMA, if_exists="append", index=False)
    both = pd.concat([first, second], ignore_index=True)
    pd.testing.assert_frame_equal(read_back(engine, name), both, check_dtype=False)
    replacement = frame(5000, 17)
    replacement.to_sql(name, engine, schema=SCHEMA, if_exists="replace", index=False)
    pd.testing.assert_frame_equal(read_back(engine, name), replacement, check_dtype=False)
    columns = {c["name"]: c for c in sa.inspect(engine).get_columns(name, schema=SCHEMA)}
    assert sorted(columns) == ["id", "name", "score"]
