"""iceflight through a real Flight SQL client: the ADBC Flight SQL driver (Go, from PyPI).

Run by tests/flight/run_clients.sh against a running `iceflight serve`, with:
    ICEFLIGHT_URI       grpc://127.0.0.1:PORT  (required: the tests fail, not skip, without it)
    ICEFLIGHT_USER      default alice
    ICEFLIGHT_PASSWORD  default secret
    ICEFLIGHT_REPO      repository root (default: two levels above this file)
    ICEFLIGHT_TPCH_SCALE answers directory under bench/answers/tpch (default sf0.01)

The server holds TPC-H (ICEFLIGHT_TPCH_SCALE) in catalog `local`, schema `tpch`.

What the driver does on the wire (adbc-driver-flightsql 1.13; more in README.md):
connect = Handshake (Basic auth, base64 possibly unpadded) then GetSqlInfo([8]) + DoGet;
every query = CreatePreparedStatement, [DoPut(parameters)], GetFlightInfo(PreparedStatementQuery),
DoGet, ClosePreparedStatement; close = CloseSession.
"""

import contextlib
import decimal
import json
import os
import pathlib
import time

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from adbc_driver_manager import AdbcStatusCode

import tpch_answers

HERE = pathlib.Path(__file__).resolve().parent
TPCH_TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
QUERIES = [f"q{i:02d}" for i in range(1, 23)]
CATALOG = "local"
SCHEMA = "tpch"
DRIVER_DEFAULT_VENDOR_NAME = "Flight SQL"  # what the Go driver reports when the server says nothing
DRIVER_UNKNOWN_VERSION = "(unknown or development build)"
# Bounds every RPC so that a hung server fails the test instead of hanging it.
RPC_TIMEOUTS = {
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_QUERY.value: "120",
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_FETCH.value: "120",
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_UPDATE.value: "120",
}


class Server:
    def __init__(self):
        self.uri = os.environ.get("ICEFLIGHT_URI", "")
        self.user = os.environ.get("ICEFLIGHT_USER", "alice")
        self.password = os.environ.get("ICEFLIGHT_PASSWORD", "secret")
        self.repo = os.environ.get("ICEFLIGHT_REPO") or str(HERE.parent.parent)
        self.scale = os.environ.get("ICEFLIGHT_TPCH_SCALE", "sf0.01")
        with open(os.path.join(self.repo, "bench", "answers", "tpch", self.scale, "tables.json")) as f:
            self.tables = json.load(f)

    def connect(self, *, user=..., password=..., db_kwargs=None, conn_kwargs=None):
        """A DB-API connection; user/password default to the test user, None leaves them out."""
        kwargs = dict(RPC_TIMEOUTS)
        user = self.user if user is ... else user
        password = self.password if password is ... else password
        if user is not None:
            kwargs[adbc_driver_manager.DatabaseOptions.USERNAME.value] = user
        if password is not None:
            kwargs[adbc_driver_manager.DatabaseOptions.PASSWORD.value] = password
        kwargs.update(db_kwargs or {})
        return flight_sql.connect(self.uri, db_kwargs=kwargs, conn_kwargs=conn_kwargs, autocommit=True)

    def column_names(self, table):
        return list(self.tables[table]["columns"].keys())


@pytest.fixture(scope="session")
def server():
    if not os.environ.get("ICEFLIGHT_URI"):
        pytest.fail(
            "ICEFLIGHT_URI is not set: start `iceflight serve --listen 127.0.0.1:PORT ...` with TPC-H "
            "loaded and export ICEFLIGHT_URI=grpc://127.0.0.1:PORT (see tests/flight/run_clients.sh)",
            pytrace=False,
        )
    return Server()


@pytest.fixture(scope="module")
def conn(server):
    """One authenticated connection whose current catalog/schema are local.tpch (set through ADBC)."""
    c = server.connect()
    try:
        c.adbc_current_catalog = CATALOG
        c.adbc_current_db_schema = SCHEMA
    except Exception:
        c.close()
        raise
    yield c
    c.close()


def query_all(conn, sql, parameters=None):
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute(sql, parameters)
        return cur.fetch_arrow_table()


def scalar(conn, sql, parameters=None):
    t = query_all(conn, sql, parameters)
    assert t.num_rows == 1 and t.num_columns == 1, f"{sql!r} gave {t.num_rows}x{t.num_columns}: {t}"
    return t.column(0)[0].as_py()


def objects(conn, **kwargs):
    return conn.adbc_get_objects(**kwargs).read_all().to_pylist()


def find(rows, key, value):
    hits = [r for r in rows if r[key] == value]
    assert hits, f"no {key}={value!r} among {[r[key] for r in rows]}"
    assert len(hits) == 1, f"{key}={value!r} listed {len(hits)} times"
    return hits[0]


# ---------------------------------------------------------------- authentication


def test_login_with_user_and_password(server):
    with server.connect() as c:
        with contextlib.closing(c.cursor()) as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)


def test_wrong_password_is_unauthenticated(server):
    with pytest.raises(adbc_driver_manager.Error) as err:
        with server.connect(password=server.password + "-wrong") as c:
            query_all(c, "SELECT 1")
    assert err.value.status_code == AdbcStatusCode.UNAUTHENTICATED, err.value


def test_unknown_user_is_unauthenticated(server):
    with pytest.raises(adbc_driver_manager.Error) as err:
        with server.connect(user="mallory", password=server.password) as c:
            query_all(c, "SELECT 1")
    assert err.value.status_code == AdbcStatusCode.UNAUTHENTICATED, err.value


def test_missing_credentials_are_unauthenticated(server):
    # No handshake happens without credentials: the first RPC that needs a session must say no.
    with pytest.raises(adbc_driver_manager.Error) as err:
        with server.connect(user=None, password=None) as c:
            query_all(c, "SELECT 1")
    assert err.value.status_code == AdbcStatusCode.UNAUTHENTICATED, err.value


def test_missing_credentials_cannot_list_metadata(server):
    with pytest.raises(adbc_driver_manager.Error) as err:
        with server.connect(user=None, password=None) as c:
            objects(c, depth="tables")
    assert err.value.status_code == AdbcStatusCode.UNAUTHENTICATED, err.value


def test_forged_bearer_token_is_unauthenticated(server):
    header = {adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value: "Bearer not-a-token"}
    with pytest.raises(adbc_driver_manager.Error) as err:
        with server.connect(user=None, password=None, db_kwargs=header) as c:
            query_all(c, "SELECT 1")
    assert err.value.status_code == AdbcStatusCode.UNAUTHENTICATED, err.value


# ---------------------------------------------------------------- plain queries


def test_select_1(conn):
    with contextlib.closing(conn.cursor()) as cur:
        cur.execute("SELECT 1")
        assert cur.fetchone() == (1,)
        assert cur.fetchone() is None
        assert len(cur.description) == 1


@pytest.mark.parametrize("name", QUERIES)
def test_tpch_query_matches_answer(conn, server, name):
    sql = tpch_answers.load_query(server.repo, name)
    answer = tpch_answers.load_answer(server.repo, server.scale, name)
    table = query_all(conn, sql)
    problems = tpch_answers.compare(table, answer)
    assert not problems, f"{name} differs from the DuckDB answer:\n  " + "\n  ".join(problems)


def test_row_counts_match_tables(conn, server):
    for table in TPCH_TABLES:
        assert scalar(conn, f"SELECT count(*) FROM {table}") == server.tables[table]["rows"], table


def test_fully_qualified_names(conn):
    assert scalar(conn, f"SELECT count(*) FROM {CATALOG}.{SCHEMA}.region") == 5
    assert scalar(conn, f"SELECT count(*) FROM {SCHEMA}.nation") == 25


def test_large_result_is_split_into_messages_under_16_mib(conn, server):
    # 60175 rows x 2500 bytes: one 8192-row batch would be ~20 MiB, over the client's 16 MiB
    # receive limit, so the server must split batches by size.
    t = query_all(conn, "SELECT l_orderkey, repeat('x', 2500) AS pad FROM lineitem")
    assert t.num_rows == server.tables["lineitem"]["rows"]
    assert pc.sum(pc.utf8_length(t.column("pad").cast(pa.string()))).as_py() == 2500 * t.num_rows


# ---------------------------------------------------------------- prepared statements


def _expected_counts(conn, column_expr, bounds):
    cases = ", ".join(
        f"sum(CASE WHEN {column_expr} < {b} THEN 1 ELSE 0 END) AS c{i}" for i, b in enumerate(bounds)
    )
    t = query_all(conn, f"SELECT {cases} FROM lineitem")
    return [t.column(i)[0].as_py() or 0 for i in range(len(bounds))]


@pytest.mark.parametrize("placeholder", ["?", "$1"])
def test_prepared_statement_with_parameter_three_times(conn, server, placeholder):
    bounds = [1000, 30000, 10**9]
    want = _expected_counts(conn, "l_orderkey", bounds)
    assert want[-1] == server.tables["lineitem"]["rows"]
    assert len(set(want)) == 3, want
    sql = f"SELECT count(*) FROM lineitem WHERE l_orderkey < {placeholder}"
    with contextlib.closing(conn.cursor()) as cur:
        params = cur.adbc_prepare(sql)
        assert params is not None and len(params) == 1, (
            f"CreatePreparedStatement should return a parameter_schema with one field, got {params}"
        )
        assert pa.types.is_integer(params.field(0).type), params
        got = []
        for b in bounds:  # same text: prepared once, bound and executed three times
            cur.execute(sql, (b,))
            got.append(cur.fetchone()[0])
    assert got == want


def test_prepared_statement_with_string_parameter(conn):
    sql = "SELECT count(*) FROM nation WHERE n_name = ?"
    with contextlib.closing(conn.cursor()) as cur:
        got = []
        for name in ["GERMANY", "ATLANTIS", "JAPAN"]:
            cur.execute(sql, (name,))
            got.append(cur.fetchone()[0])
    assert got == [1, 0, 1]


def test_prepared_statement_result_schema_without_execution(conn):
    with contextlib.closing(conn.cursor()) as cur:
        schema = cur.adbc_execute_schema("SELECT r_regionkey, r_name FROM region")
    assert schema.names == ["r_regionkey", "r_name"]


# ---------------------------------------------------------------- errors


def test_set_takes_effect_fetched_or_not(server):
    # DB-API's execute prepares every statement: SET runs at execute and a fetch of its
    # (empty) result must not fail.
    with server.connect() as c:
        with contextlib.closing(c.cursor()) as cur:
            cur.execute("SET datafusion.execution.batch_size = 1234")
            assert cur.fetchall() == []
        with contextlib.closing(c.cursor()) as cur:
            cur.execute("SET datafusion.execution.batch_size = 4321")
        assert "4321" in str(query_all(c, "SHOW datafusion.execution.batch_size").to_pylist())


def test_bad_sql_is_invalid_argument_with_parser_message(conn):
    with contextlib.closing(conn.cursor()) as cur:
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("SELEC 1")
    assert err.value.status_code == AdbcStatusCode.INVALID_ARGUMENT, err.value
    assert "Expected: an SQL statement, found: SELEC" in str(err.value), str(err.value)
    # The connection survives the error.
    assert scalar(conn, "SELECT 1") == 1


def test_unknown_table_error_names_the_table(conn):
    with contextlib.closing(conn.cursor()) as cur:
        with pytest.raises(adbc_driver_manager.Error) as err:
            cur.execute("SELECT * FROM no_such_table_xyz")
    assert err.value.status_code in (AdbcStatusCode.INVALID_ARGUMENT, AdbcStatusCode.NOT_FOUND), err.value
    assert "no_such_table_xyz" in str(err.value), str(err.value)


def test_statement_timeout_option_ends_the_query_on_the_server(server):
    """ADBC's statement timeout (the per-RPC deadline ``adbc.flight.sql.rpc.timeout_seconds.*``,
    set here on the statement) cancels the result stream at the deadline, and the server ends
    the query: listed CANCELLED in system.runtime.queries, not left RUNNING."""
    marker = -7351
    slow = ("SELECT count(*) FROM lineitem a, lineitem b "
            f"WHERE a.l_orderkey + b.l_orderkey = {marker}")
    with server.connect() as c:
        c.adbc_current_catalog = CATALOG
        c.adbc_current_db_schema = SCHEMA
        with contextlib.closing(c.cursor()) as cur:
            cur.adbc_statement.set_options(**{
                adbc_driver_flightsql.DatabaseOptions.TIMEOUT_QUERY.value: "1",
                adbc_driver_flightsql.DatabaseOptions.TIMEOUT_FETCH.value: "1",
            })
            start = time.monotonic()
            with pytest.raises(adbc_driver_manager.Error) as err:
                cur.execute(slow)
                cur.fetch_arrow_table()
            elapsed = time.monotonic() - start
        assert elapsed < 20, f"the 1 s timeout took {elapsed:.1f} s"
        assert err.value.status_code in (AdbcStatusCode.TIMEOUT, AdbcStatusCode.CANCELLED), err.value
        lookup = ("SELECT state FROM system.runtime.queries "
                  f"WHERE query LIKE '%= {marker}%' AND query NOT LIKE '%system.runtime%'")
        deadline = time.monotonic() + 15
        while True:
            states = [r["state"] for r in query_all(c, lookup).to_pylist()]
            if states == ["CANCELLED"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert states == ["CANCELLED"], states


# ---------------------------------------------------------------- session: current schema


def test_db_schema_set_on_connection_then_unqualified_query(server):
    with server.connect() as c:
        c.adbc_current_db_schema = SCHEMA  # ADBC option adbc.connection.db_schema -> SetSessionOptions
        assert scalar(c, "SELECT count(*) FROM region") == 5
        assert scalar(c, "SELECT n_name FROM nation WHERE n_nationkey = 7") == "GERMANY"


def test_db_schema_given_at_connect_then_unqualified_query(server):
    key = adbc_driver_manager.ConnectionOptions.CURRENT_DB_SCHEMA.value
    with server.connect(conn_kwargs={key: SCHEMA}) as c:
        assert scalar(c, "SELECT count(*) FROM supplier") == server.tables["supplier"]["rows"]


def test_db_schema_with_cookie_middleware(server):
    cookies = {adbc_driver_flightsql.DatabaseOptions.WITH_COOKIE_MIDDLEWARE.value: "true"}
    with server.connect(db_kwargs=cookies) as c:
        c.adbc_current_db_schema = SCHEMA
        assert scalar(c, "SELECT count(*) FROM region") == 5


def test_current_schema_reads_back(server):
    # The getter is a GetSessionOptions call; the server must report what was set.
    with server.connect() as c:
        c.adbc_current_catalog = CATALOG
        c.adbc_current_db_schema = SCHEMA
        assert c.adbc_current_catalog == CATALOG
        assert c.adbc_current_db_schema == SCHEMA


def test_sessions_are_per_connection(server):
    # Two connections of one user are two sessions: what one sets must not leak into the other, and
    # closing one (CloseSession) must not end the other's session.
    with server.connect() as a:
        a.adbc_current_catalog = CATALOG
        a.adbc_current_db_schema = SCHEMA
        with server.connect() as b:
            try:
                b.adbc_current_catalog = "no_such_catalog_xyz"  # the server may refuse it: fine
            except adbc_driver_manager.Error:
                pass
            assert scalar(a, "SELECT count(*) FROM region") == 5
        assert scalar(a, "SELECT count(*) FROM nation") == 25


# ---------------------------------------------------------------- metadata


def test_get_objects_catalogs(conn):
    rows = objects(conn, depth="catalogs")
    names = [r["catalog_name"] for r in rows]
    assert CATALOG in names, names
    assert len(names) == len(set(names)), names
    for r in rows:
        assert not r["catalog_db_schemas"], r  # nothing below the requested depth


def test_get_objects_db_schemas(conn):
    rows = objects(conn, depth="db_schemas")
    local = find(rows, "catalog_name", CATALOG)
    schemas = local["catalog_db_schemas"] or []
    tpch = find(schemas, "db_schema_name", SCHEMA)
    assert not tpch["db_schema_tables"], tpch


def test_get_objects_tables(conn):
    rows = objects(conn, depth="tables", db_schema_filter=SCHEMA)
    local = find(rows, "catalog_name", CATALOG)
    tpch = find(local["catalog_db_schemas"] or [], "db_schema_name", SCHEMA)
    tables = tpch["db_schema_tables"] or []
    assert sorted(t["table_name"] for t in tables) == TPCH_TABLES
    for t in tables:
        # ADBC's spelling for ADBC clients (server/src/flight/metadata.rs, TableTypeNames).
        assert t["table_type"] == "table", t
        assert not t["table_columns"], t


def test_get_objects_columns(conn, server):
    rows = objects(conn, depth="columns", db_schema_filter=SCHEMA, table_name_filter="lineitem")
    local = find(rows, "catalog_name", CATALOG)
    tpch = find(local["catalog_db_schemas"] or [], "db_schema_name", SCHEMA)
    tables = tpch["db_schema_tables"] or []
    assert [t["table_name"] for t in tables] == ["lineitem"]
    cols = sorted(tables[0]["table_columns"], key=lambda c: c["ordinal_position"])
    assert [c["column_name"] for c in cols] == server.column_names("lineitem")
    assert [c["ordinal_position"] for c in cols] == list(range(1, 17))
    by_name = {c["column_name"]: c for c in cols}
    # XDBC type codes the driver derives from the Arrow types in table_schema.
    assert by_name["l_orderkey"]["xdbc_data_type"] == -5, by_name["l_orderkey"]  # BIGINT
    assert by_name["l_quantity"]["xdbc_data_type"] == 3, by_name["l_quantity"]  # DECIMAL
    assert by_name["l_shipdate"]["xdbc_data_type"] == 91, by_name["l_shipdate"]  # DATE
    assert by_name["l_comment"]["xdbc_data_type"] in (12, -1), by_name["l_comment"]  # (LONG)VARCHAR


def test_get_objects_all_depths_everything(conn, server):
    rows = objects(conn, depth="all")
    local = find(rows, "catalog_name", CATALOG)
    tpch = find(local["catalog_db_schemas"] or [], "db_schema_name", SCHEMA)
    tables = {t["table_name"]: t for t in tpch["db_schema_tables"] or []}
    assert sorted(tables) == TPCH_TABLES
    for name, t in tables.items():
        cols = sorted(t["table_columns"] or [], key=lambda c: c["ordinal_position"])
        assert [c["column_name"] for c in cols] == server.column_names(name), name


def test_get_objects_filter_patterns(conn):
    def table_names(**kw):
        rows = objects(conn, depth="tables", **kw)
        out = []
        for cat in rows:
            for sch in cat["catalog_db_schemas"] or []:
                out += [t["table_name"] for t in sch["db_schema_tables"] or []]
        return sorted(out)

    assert table_names(db_schema_filter=SCHEMA, table_name_filter="line%") == ["lineitem"]
    assert table_names(db_schema_filter=SCHEMA, table_name_filter="%part%") == ["part", "partsupp"]
    assert table_names(db_schema_filter="tp_h", table_name_filter="regio_") == ["region"]
    assert table_names(db_schema_filter=SCHEMA, table_name_filter="nothing_matches%") == []
    assert table_names(db_schema_filter=SCHEMA, table_types_filter=["VIEW"]) == []
    # A type filter matches either spelling.
    assert table_names(db_schema_filter=SCHEMA, table_types_filter=["TABLE"]) == TPCH_TABLES
    assert table_names(db_schema_filter=SCHEMA, table_types_filter=["table"]) == TPCH_TABLES


def test_get_table_schema(conn, server):
    schema = conn.adbc_get_table_schema("lineitem", catalog_filter=CATALOG, db_schema_filter=SCHEMA)
    assert schema.names == server.column_names("lineitem")
    assert schema.field("l_orderkey").type == pa.int64()
    assert schema.field("l_quantity").type == pa.decimal128(15, 2)
    assert schema.field("l_shipdate").type == pa.date32()
    t = schema.field("l_comment").type
    assert pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t), t
    region = conn.adbc_get_table_schema("region", db_schema_filter=SCHEMA)
    assert region.names == server.column_names("region")


def test_get_table_schema_unknown_table(conn):
    with pytest.raises(adbc_driver_manager.Error) as err:
        conn.adbc_get_table_schema("no_such_table_xyz", db_schema_filter=SCHEMA)
    assert err.value.status_code == AdbcStatusCode.NOT_FOUND, err.value


def test_get_table_types(conn):
    assert conn.adbc_get_table_types() == ["table", "view"]


def test_get_info_vendor(conn):
    info = conn.adbc_get_info()
    name = info.get("vendor_name")
    version = info.get("vendor_version")
    assert name and name != DRIVER_DEFAULT_VENDOR_NAME, f"server sent no FLIGHT_SQL_SERVER_NAME: {info}"
    assert version and version != DRIVER_UNKNOWN_VERSION, f"server sent no FLIGHT_SQL_SERVER_VERSION: {info}"
    assert info.get("driver_name"), info


def test_results_after_metadata_calls(conn):
    # Metadata calls and queries interleave on one connection.
    objects(conn, depth="tables", db_schema_filter=SCHEMA)
    assert scalar(conn, "SELECT sum(r_regionkey) FROM region") == 10
    assert isinstance(scalar(conn, "SELECT sum(l_quantity) FROM lineitem"), decimal.Decimal)


# ---------------------------------------------------------------- bulk ingest (adbc_ingest)
# Into schema `ingest` of catalog `local`. The JDBC suite (run after this one by
# run_clients.sh) reads `local.ingest.big` back.

INGEST = "ingest"
BIG_ROWS = 1_000_000


def big_table(first=0, rows=BIG_ROWS):
    ids = pa.array(range(first, first + rows), pa.int64())
    return pa.table({
        "id": ids,
        "v": pc.divide(pc.cast(ids, pa.float64()), 10.0),
        "s": pc.cast(pc.remainder(ids, 1000), pa.string()),
    })


def ingest(conn, table, data, mode):
    # Sent as a stream of 128 Ki-row batches: the Go driver refuses to send one gRPC message
    # over 16 MiB, and a million rows in one batch is 22 MB.
    reader = data.to_reader(max_chunksize=128 * 1024)
    with contextlib.closing(conn.cursor()) as cur:
        return cur.adbc_ingest(table, reader, mode=mode, catalog_name=CATALOG, db_schema_name=INGEST)


@pytest.fixture(scope="module")
def ingest_conn(server):
    c = server.connect()
    with contextlib.closing(c.cursor()) as cur:
        cur.execute(f"CREATE SCHEMA IF NOT EXISTS {CATALOG}.{INGEST}")
    yield c
    c.close()


def ingest_totals(conn, table):
    return query_all(
        conn, f"SELECT count(*) AS n, sum(id) AS ids, count(DISTINCT s) AS s FROM {CATALOG}.{INGEST}.{table}"
    ).to_pylist()[0]


def ingest_status(fn):
    with pytest.raises(adbc_driver_manager.Error) as err:
        fn()
    return err.value.status_code


def test_ingest_create_then_append_a_million_rows(ingest_conn):
    assert ingest(ingest_conn, "big", big_table(), "create") == BIG_ROWS
    assert ingest_totals(ingest_conn, "big") == {"n": BIG_ROWS, "ids": BIG_ROWS * (BIG_ROWS - 1) // 2, "s": 1000}
    # create again: the table exists
    assert ingest_status(lambda: ingest(ingest_conn, "big", big_table(0, 10), "create")) == AdbcStatusCode.ALREADY_EXISTS
    assert ingest(ingest_conn, "big_appended", big_table(), "create") == BIG_ROWS
    assert ingest(ingest_conn, "big_appended", big_table(BIG_ROWS), "append") == BIG_ROWS
    n = 2 * BIG_ROWS
    assert ingest_totals(ingest_conn, "big_appended") == {"n": n, "ids": n * (n - 1) // 2, "s": 1000}


def test_ingest_replace_and_create_append(ingest_conn):
    assert ingest(ingest_conn, "replaced", big_table(), "replace") == BIG_ROWS  # created
    other = pa.table({"k": pa.array(["a", "b"]), "n": pa.array([1, 2], pa.int32())})
    assert ingest(ingest_conn, "replaced", other, "replace") == 2
    got = query_all(ingest_conn, f"SELECT * FROM {CATALOG}.{INGEST}.replaced ORDER BY k")
    assert got.column_names == ["k", "n"] and got.to_pylist() == [{"k": "a", "n": 1}, {"k": "b", "n": 2}]
    assert ingest(ingest_conn, "ca", big_table(0, BIG_ROWS), "create_append") == BIG_ROWS
    assert ingest(ingest_conn, "ca", big_table(BIG_ROWS, 5), "create_append") == 5
    assert ingest_totals(ingest_conn, "ca")["n"] == BIG_ROWS + 5


def test_delete_answers_the_rows_deleted(ingest_conn):
    ingest(ingest_conn, "shrinking", big_table(0, 1000), "create")
    table = f'"{CATALOG}".{INGEST}.shrinking'
    condition = "id % 3 = 0 OR s = '7'"
    want = query_all(ingest_conn, f"SELECT count(*) AS n FROM {table} WHERE {condition}").to_pylist()[0]["n"]
    stmt = adbc_driver_manager.AdbcStatement(ingest_conn.adbc_connection)
    try:
        stmt.set_sql_query(f"DELETE FROM {table} WHERE {condition}")
        assert stmt.execute_update() == want
    finally:
        stmt.close()
    left = query_all(ingest_conn, f"SELECT count(*) AS n, count(*) FILTER (WHERE {condition}) AS hit FROM {table}")
    assert left.to_pylist() == [{"n": 1000 - want, "hit": 0}]


def test_update_and_merge_answer_the_rows_changed(ingest_conn):
    ingest(ingest_conn, "changing", big_table(0, 1000), "create")
    table = f'"{CATALOG}".{INGEST}.changing'

    def update(sql):
        stmt = adbc_driver_manager.AdbcStatement(ingest_conn.adbc_connection)
        try:
            stmt.set_sql_query(sql)
            return stmt.execute_update()
        finally:
            stmt.close()

    want = query_all(ingest_conn, f"SELECT count(*) AS n FROM {table} WHERE id % 7 = 0").to_pylist()[0]["n"]
    assert update(f"UPDATE {table} SET s = 'seven' WHERE id % 7 = 0") == want
    got = query_all(ingest_conn, f"SELECT count(*) AS n FROM {table} WHERE s = 'seven'").to_pylist()[0]["n"]
    assert got == want
    # Two source rows match (one updated), one does not (inserted).
    n = update(
        f"MERGE INTO {table} AS t USING (VALUES (0, 'zero'), (5000, 'new')) AS s(id, s) ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET s = s.s WHEN NOT MATCHED THEN INSERT (id, s) VALUES (s.id, s.s)"
    )
    assert n == 2
    got = query_all(ingest_conn, f"SELECT id, s FROM {table} WHERE id IN (0, 5000) ORDER BY id").to_pylist()
    assert got == [{"id": 0, "s": "zero"}, {"id": 5000, "s": "new"}]
    assert query_all(ingest_conn, f"SELECT count(*) AS n FROM {table}").to_pylist()[0]["n"] == 1001
    # Parameters: execute, then executemany on the same cursor (the statement prepared before
    # the first commit: the second runs again on the new snapshot, with its own values).
    with ingest_conn.cursor() as cur:
        cur.execute(f"UPDATE {table} SET s = ? WHERE id = ?", ("p1", 1))
        cur.executemany(f"UPDATE {table} SET s = ? WHERE id = ?", [("p2", 2), ("p3", 3)])
    got = query_all(ingest_conn, f"SELECT id, s FROM {table} WHERE id IN (1, 2, 3) ORDER BY id").to_pylist()
    assert got == [{"id": 1, "s": "p1"}, {"id": 2, "s": "p2"}, {"id": 3, "s": "p3"}], got
    # A prepared query run again on one cursor reads the table as it is now, not as prepared.
    with ingest_conn.cursor() as cur:
        cur.execute(f"SELECT s FROM {table} WHERE id = 1")
        assert cur.fetchall() == [("p1",)]
        update(f"UPDATE {table} SET s = 'after' WHERE id = 1")
        cur.execute(f"SELECT s FROM {table} WHERE id = 1")
        assert cur.fetchall() == [("after",)]


def test_ingest_errors_are_clear_and_commit_nothing(ingest_conn):
    assert ingest_status(lambda: ingest(ingest_conn, "no_such", big_table(0, 3), "append")) == AdbcStatusCode.NOT_FOUND
    ingest(ingest_conn, "strict", big_table(0, 3), "create")
    wrong = pa.table({"id": pa.array([1], pa.int64()), "other": pa.array([1.0])})
    with pytest.raises(adbc_driver_manager.Error) as err:
        ingest(ingest_conn, "strict", wrong, "append")
    assert err.value.status_code == AdbcStatusCode.INVALID_ARGUMENT, err.value
    assert "missing [v, s]" in str(err.value) and "not in the table [other]" in str(err.value), err.value
    assert ingest_totals(ingest_conn, "strict")["n"] == 3
    # A value that does not fit the column fails the upload; it is never written as NULL.
    narrow = pa.table({"n": pa.array([1], pa.int32())})
    ingest(ingest_conn, "narrow", narrow, "create")
    too_big = pa.table({"n": pa.array([2**40], pa.int64())})
    with pytest.raises(adbc_driver_manager.Error) as err:
        ingest(ingest_conn, "narrow", too_big, "append")
    assert err.value.status_code == AdbcStatusCode.INVALID_ARGUMENT, err.value
    assert query_all(ingest_conn, f"SELECT n FROM {CATALOG}.{INGEST}.narrow").to_pylist() == [{"n": 1}]


def test_ingest_maps_types_both_ways(ingest_conn):
    data = pa.table({
        "b": pa.array([True, None]),
        "i8": pa.array([-1, None], pa.int8()),
        "i16": pa.array([300, None], pa.int16()),
        "i32": pa.array([70000, None], pa.int32()),
        "i64": pa.array([2**40, None], pa.int64()),
        "f32": pa.array([1.5, None], pa.float32()),
        "f64": pa.array([2.25, None], pa.float64()),
        "dec": pa.array([decimal.Decimal("12.34"), None], pa.decimal128(10, 2)),
        "s": pa.array(["x", None], pa.string()),
        "ls": pa.array(["y", None], pa.large_string()),
        "bin": pa.array([b"\x00\x01", None], pa.binary()),
        "d": pa.array([19000, None], pa.date32()),
        "ts": pa.array([1_700_000_000_000_000, None], pa.timestamp("us")),
        "tstz": pa.array([1_700_000_000_000_000, None], pa.timestamp("us", tz="UTC")),
    })
    assert ingest(ingest_conn, "types", data, "create") == 2
    got = query_all(ingest_conn, f"SELECT * FROM {CATALOG}.{INGEST}.types ORDER BY i64 NULLS LAST")
    # Iceberg's types read back: small integers widen to int, strings are utf8.
    want = {"i8": pa.int32(), "i16": pa.int32(), "ls": pa.string(), "dec": pa.decimal128(10, 2),
            "ts": pa.timestamp("us"), "i64": pa.int64(), "d": pa.date32()}
    for name, t in want.items():
        assert got.schema.field(name).type == t, (name, got.schema.field(name).type)
    assert pa.types.is_timestamp(got.schema.field("tstz").type) and got.schema.field("tstz").type.tz
    rows = got.to_pylist()
    expected = data.to_pylist()
    for column in data.column_names:
        assert [r[column] for r in rows] == [r[column] for r in expected], column
