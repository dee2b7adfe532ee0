"""A shared iceflight through the real ADBC Flight SQL driver: logged-in users who are not
admins try what they must not do, and each sees and changes only what the rules give.

Run by tests/flight/run_clients.sh (suite `security`) against the server of
server/tests/security.rs, with:
    ICEFLIGHT_URI            grpc://127.0.0.1:PORT
    ICEFLIGHT_SECURITY_DIR   the server's lab: rules.json, imports/ (the file root), outside/
    ICEFLIGHT_JWT_DIR        tokens of tests/fixtures/jwt_tokens.py (the server trusts jwks.json)

Users (password = name + "pw"): admin, alice (owns schema alice), bob (group eng: owns eng),
carol (reads schema shared only). Tables local.alice.private, local.eng.events,
local.shared.notes hold two rows each; every test leaves them as it found them.
"""

import os
import pathlib
import time

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pytest
from adbc_driver_manager import AdbcStatusCode

URI = os.environ.get("ICEFLIGHT_URI", "")
LAB = pathlib.Path(os.environ.get("ICEFLIGHT_SECURITY_DIR", "/nonexistent"))
JWT = pathlib.Path(os.environ.get("ICEFLIGHT_JWT_DIR", "/nonexistent"))
TIMEOUTS = {
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_QUERY.value: "60",
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_FETCH.value: "60",
    adbc_driver_flightsql.DatabaseOptions.TIMEOUT_UPDATE.value: "60",
}


def connect(user=None, token=None):
    assert URI, "ICEFLIGHT_URI is not set"
    db_kwargs = dict(TIMEOUTS)
    if user:
        db_kwargs.update(username=user, password=f"{user}pw")
    if token:
        db_kwargs[adbc_driver_flightsql.DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
    return flight_sql.connect(URI, db_kwargs=db_kwargs, autocommit=True)


def rows(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def refused(conn, sql, says, status=AdbcStatusCode.UNAUTHORIZED, params=None):
    with conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as raised:
            cur.execute(sql, params)
            cur.fetchall()
    assert raised.value.status_code == status, (sql, raised.value)
    assert says in str(raised.value), (sql, str(raised.value))
    return raised.value


def counts():
    with connect("admin") as admin:
        return {
            t: rows(admin, f"SELECT count(*) FROM local.{t}")[0][0]
            for t in ("alice.private", "eng.events", "shared.notes")
        }


@pytest.fixture(autouse=True)
def tables_unchanged():
    before = counts()
    yield
    assert counts() == before


def test_each_user_lists_only_what_the_rules_give():
    def listed(user):
        with connect(user) as conn:
            objects = conn.adbc_get_objects(depth="tables", catalog_filter="local").read_all().to_pylist()
        return sorted(
            f"{s['db_schema_name']}.{t['table_name']}"
            for c in objects
            for s in c["catalog_db_schemas"] or []
            for t in s["db_schema_tables"] or []
            if s["db_schema_name"] != "information_schema"
        )

    assert listed("carol") == ["shared.notes"]
    assert listed("bob") == ["eng.events", "shared.notes"]
    assert listed("alice") == ["alice.private", "shared.notes"]
    assert listed("admin") == ["alice.private", "eng.events", "shared.notes"]
    with connect("carol") as carol:
        shown = {(r[1], r[2]) for r in rows(carol, "SHOW TABLES") if r[0] == "local" and r[1] != "information_schema"}
        assert shown == {("shared", "notes")}


def test_reads_and_writes_follow_the_rules():
    with connect("carol") as carol, connect("bob") as bob, connect("alice") as alice:
        assert rows(alice, "SELECT count(*) FROM local.alice.private") == [(2,)]
        e = refused(carol, "SELECT * FROM local.alice.private", "alice.private")
        assert "carol" in str(e)
        refused(carol, "SELECT * FROM local.alice.\"private$snapshots\"", "alice.private")
        refused(bob, "INSERT INTO local.shared.notes VALUES (3, 'x')", "INSERT privilege on table local.shared.notes")
        refused(bob, "DELETE FROM local.shared.notes", "DELETE privilege")
        refused(bob, "DROP TABLE local.shared.notes", "OWNERSHIP privilege")
        refused(carol, "ALTER TABLE local.shared.notes EXECUTE optimize", "OWNERSHIP privilege")
        # Parameters do not change what a statement may touch.
        refused(carol, "SELECT * FROM local.alice.private WHERE column1 = ?", "alice.private", params=(1,))
        with bob.cursor() as cur:
            cur.executemany("INSERT INTO local.eng.events VALUES (?, ?)", [(10, "a"), (11, "b")])
            assert cur.rowcount == 2
        rows(bob, "DELETE FROM local.eng.events WHERE column1 >= 10")
        assert rows(bob, "SELECT count(*) FROM local.eng.events") == [(2,)]
        with carol.cursor() as cur:
            with pytest.raises(adbc_driver_manager.Error) as raised:
                cur.executemany("INSERT INTO local.shared.notes VALUES (?, ?)", [(10, "a"), (11, "b")])
            assert raised.value.status_code == AdbcStatusCode.UNAUTHORIZED, raised.value


def test_ingest_needs_insert_or_ownership():
    data = pa.table({"a": pa.array([1, 2], pa.int64())})
    with connect("carol") as carol, carol.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error) as raised:
            cur.adbc_ingest("mine", data, mode="create", db_schema_name="shared", catalog_name="local")
        assert raised.value.status_code == AdbcStatusCode.UNAUTHORIZED, raised.value
        assert "OWNERSHIP" in str(raised.value)
    with connect("bob") as bob:
        with bob.cursor() as cur:
            assert cur.adbc_ingest("ingested", data, mode="create", db_schema_name="eng", catalog_name="local") == 2
        assert rows(bob, "SELECT count(*) FROM local.eng.ingested") == [(2,)]
        rows(bob, "DROP TABLE local.eng.ingested")


def test_server_files_are_out_of_reach():
    outside = LAB / "outside"
    imports = LAB / "imports"
    before = sorted(p.name for p in outside.iterdir())
    with connect("carol") as carol:
        for target in (outside / "x.csv", imports / "leak" / "x.csv", f"{imports}/../outside/x.csv"):
            refused(carol, f"COPY (SELECT 1 AS a) TO '{target}' STORED AS CSV", "may not use")
        refused(carol, "SELECT * FROM read_csv('/etc/passwd')", "read_csv may not use")
        refused(carol, f"SELECT * FROM read_csv('{imports}/leak/secret.csv')", "read_csv may not use")
        refused(
            carol,
            "CREATE EXTERNAL TABLE local.shared.etc (l VARCHAR) STORED AS CSV LOCATION '/etc/'",
            "CREATE EXTERNAL TABLE may not use",
        )
        refused(carol, "SET datafusion.runtime.memory_limit = '100G'", "only admins may change")
        refused(carol, "SET datafusion.runtime.temp_directory = '/etc'", "only admins may change")
        assert rows(carol, f"SELECT count(*) FROM read_csv('{imports}/ok.csv')") == [(2,)]
    assert sorted(p.name for p in outside.iterdir()) == before


def test_deep_statements_fail_in_one_line_and_the_server_goes_on():
    with connect("carol") as carol:
        e = refused(
            carol,
            "SELECT " + "(" * 10_000 + "1" + ")" * 10_000,
            "more than 2000",
            status=AdbcStatusCode.INVALID_ARGUMENT,
        )
        assert "\n" not in str(e).strip()
        ors = " OR ".join(f"column1 = {i}" for i in range(10_000))
        refused(
            carol,
            f"SELECT count(*) FROM local.shared.notes WHERE {ors}",
            "more than 2000",
            status=AdbcStatusCode.INVALID_ARGUMENT,
        )
        assert rows(carol, "SELECT 1") == [(1,)]


def test_a_rules_change_takes_effect_without_a_restart():
    rules = LAB / "rules.json"
    original = rules.read_text()
    with connect("carol") as carol:
        refused(carol, "SELECT count(*) FROM local.eng.events", "eng.events")
        try:
            rules.write_text(
                original.replace(
                    '{"schema": "shared", "privileges": ["SELECT"]}',
                    '{"schema": "shared", "privileges": ["SELECT"]},\n    '
                    '{"user": "carol", "schema": "eng", "privileges": ["SELECT"]}',
                )
            )
            time.sleep(1.3)
            assert rows(carol, "SELECT count(*) FROM local.eng.events") == [(2,)]
        finally:
            rules.write_text(original)
        time.sleep(1.3)
        refused(carol, "SELECT count(*) FROM local.eng.events", "eng.events")


def test_jwt_login():
    token = lambda name: (JWT / f"{name}.jwt").read_text().strip()  # noqa: E731
    with connect(token=token("alice")) as alice:
        assert rows(alice, "SELECT count(*) FROM local.alice.private") == [(2,)]
        assert rows(alice, 'SELECT "user" FROM system.runtime.sessions') == [("alice",)]
    with connect(token=token("bob")) as bob:
        assert rows(bob, "SELECT count(*) FROM local.eng.events") == [(2,)]
    for name, says in (("expired", "expired"), ("wrong_audience", "audience"), ("wrong_signature", "signature")):
        with pytest.raises(adbc_driver_manager.Error) as raised:
            with connect(token=token(name)) as conn:
                rows(conn, "SELECT 1")
        assert raised.value.status_code == AdbcStatusCode.UNAUTHENTICATED, (name, raised.value)
        assert says in str(raised.value), (name, str(raised.value))
