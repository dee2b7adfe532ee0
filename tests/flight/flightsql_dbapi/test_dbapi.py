"""iceflight through flightsql-dbapi 0.2.2: its DB-API and its SQLAlchemy dialect.

Same environment as ../test_adbc.py (ICEFLIGHT_URI required; ICEFLIGHT_USER, ICEFLIGHT_PASSWORD).

What this client does on the wire (pyarrow.flight underneath):
  * FlightSQLClient(host, port, user=, password=, insecure=True): Handshake with
    `authorization: Basic <base64 with padding>`; it reads `authorization: Bearer <t>` from the
    handshake's response headers and sends it on every later call;
  * cursor.execute(sql) without parameters: GetFlightInfo(CommandStatementQuery), then DoGet on
    endpoints[0].ticket (a plain statement, never prepared);
  * the SQLAlchemy dialect, on first connect: GetSqlInfo([0, 2, 3, 504]) + DoGet and it indexes the
    answer by those ids (SERVER_NAME, SERVER_ARROW_VERSION, SERVER_READ_ONLY as a bool,
    SQL_IDENTIFIER_QUOTE_CHAR as a string); reflection uses GetDbSchemas and GetTables
    (include_schema=True, whose table_schema it opens with pyarrow.ipc.open_stream).
"""

import os
import urllib.parse

import pyarrow.flight
import pytest
import sqlalchemy

import flightsql
import flightsql.sqlalchemy  # registers the dialect name "datafusion.flightsql"
from flightsql import FlightSQLClient

TPCH_TABLES = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]


class Server:
    def __init__(self):
        uri = os.environ["ICEFLIGHT_URI"]
        parsed = urllib.parse.urlparse(uri)
        if parsed.scheme not in ("grpc", "grpc+tcp") or not parsed.hostname or not parsed.port:
            pytest.fail(f"ICEFLIGHT_URI must look like grpc://HOST:PORT, got {uri!r}", pytrace=False)
        self.host = parsed.hostname
        self.port = parsed.port
        self.user = os.environ.get("ICEFLIGHT_USER", "alice")
        self.password = os.environ.get("ICEFLIGHT_PASSWORD", "secret")

    def client(self, password=None):
        return FlightSQLClient(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password if password is None else password,
            insecure=True,  # plain grpc:// (grpc+tcp); without it the client speaks TLS
        )

    def sqlalchemy_url(self):
        user = urllib.parse.quote(self.user, safe="")
        password = urllib.parse.quote(self.password, safe="")
        # insecure=true -> plain TCP; any other query key would be sent as a gRPC header.
        return f"datafusion+flightsql://{user}:{password}@{self.host}:{self.port}?insecure=true"


@pytest.fixture(scope="session")
def server():
    if not os.environ.get("ICEFLIGHT_URI"):
        pytest.fail(
            "ICEFLIGHT_URI is not set: start `iceflight serve` and export ICEFLIGHT_URI=grpc://127.0.0.1:PORT "
            "(see tests/flight/run_clients.sh)",
            pytrace=False,
        )
    return Server()


@pytest.fixture
def conn(server):
    c = flightsql.connect(server.client())
    yield c
    c.close()
    c.client.close()


def test_select_1(conn):
    cur = conn.cursor()
    cur.execute("select 1")
    rows = cur.fetchall()
    assert rows == [[1]], rows
    assert len(cur.description) == 1
    cur.close()


def test_qualified_table_query(conn):
    cur = conn.cursor()
    cur.execute("select count(*) from local.tpch.lineitem where l_orderkey < 1000")
    (n,) = cur.fetchone()
    assert n > 0
    cur.execute("select r_name from local.tpch.region order by r_regionkey")
    assert [r[0] for r in cur.fetchall()] == ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
    cur.close()


def test_wrong_password_is_refused(server):
    with pytest.raises(pyarrow.flight.FlightUnauthenticatedError):
        server.client(password=server.password + "-wrong")


def test_sql_info_for_dialect(conn):
    info = conn.flightsql_get_sql_info([0, 2, 3, 504])
    assert set(info) >= {0, 2, 3, 504}, info
    assert isinstance(info[0], str) and info[0], info
    assert isinstance(info[3], bool), info
    assert isinstance(info[504], str) and info[504], info


def test_sqlalchemy_dialect_connects(server):
    engine = sqlalchemy.create_engine(server.sqlalchemy_url())
    try:
        with engine.connect() as c:
            assert c.execute(sqlalchemy.text("select 1")).scalar() == 1
            dialect = c.dialect
            assert dialect.identifier_preparer.initial_quote, dialect.sql_info
        inspector = sqlalchemy.inspect(engine)
        assert "tpch" in inspector.get_schema_names()
        assert sorted(inspector.get_table_names(schema="tpch")) == TPCH_TABLES
        cols = inspector.get_columns("region", schema="tpch")
        assert [c["name"] for c in cols] == ["r_regionkey", "r_name", "r_comment"]
    finally:
        engine.dispose()
