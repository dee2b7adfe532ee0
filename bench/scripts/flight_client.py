"""ADBC helpers the bench scripts share: a Flight SQL connection with a user and password, a
statement's rows, and a statement's wall time."""

from __future__ import annotations

import time

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager


def connect(url: str, user: str, password: str):
    """An autocommit ADBC connection to the Flight SQL server at `url`."""
    kwargs = {
        adbc_driver_manager.DatabaseOptions.USERNAME.value: user,
        adbc_driver_manager.DatabaseOptions.PASSWORD.value: password,
    }
    return flight_sql.connect(url, db_kwargs=kwargs, autocommit=True)


def run(conn, sql: str):
    """`sql`'s rows."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def timed(fn) -> tuple[float, object]:
    """`fn()`'s wall time in seconds and its result."""
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out
