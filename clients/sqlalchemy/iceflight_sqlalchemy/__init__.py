"""SQLAlchemy dialect for iceflight: ``iceflight://USER:PASSWORD@HOST:PORT[/SCHEMA]``.

It is sqlalchemy-adbc's Flight SQL dialect (ADBC's Go driver underneath) with what pandas, BI
tools and the inspector need from iceflight:

- **Login.** ``USER:PASSWORD@`` logs in with user and password (sqlalchemy-adbc's own URL sends
  the password as a bearer token). ``?token=JWT`` sends a bearer token; ``?tls=true`` uses TLS
  (off by default, as iceflight's own listener). Other query keys go to the driver as they are.
- **One catalog, one default schema.** The session's default schema (the server's, or the URL's
  ``/SCHEMA``) is the inspector's ``default_schema_name``; calls without a schema answer for it
  only, and ``get_schema_names()`` lists the schemas of the session's catalog only.
- **Types as written.** ``Float`` renders ``DOUBLE`` (``REAL`` for a precision of 24 bits or
  fewer), ``DateTime`` ``TIMESTAMP``, ``DateTime(timezone=True)`` ``TIMESTAMP WITH TIME ZONE``
  (stored as Iceberg ``timestamptz``); SQLAlchemy's generic ``DATETIME`` would lose the zone.

Registered under the name ``iceflight`` by this package's entry point.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine.url import URL
from sqlalchemy.sql import compiler
from sqlalchemy_adbc import reflection
from sqlalchemy_adbc.flightsql import ADBCFlightSQLDialect

__all__ = ["IceflightDialect", "IceflightTypeCompiler"]


class IceflightTypeCompiler(compiler.GenericTypeCompiler):
    """SQLAlchemy's generic type names, with floats and timestamps as iceflight stores them."""

    def visit_FLOAT(self, type_: Any, **kw: Any) -> str:
        precision = getattr(type_, "precision", None)
        return "REAL" if precision is not None and precision <= 24 else "DOUBLE"

    def visit_float(self, type_: Any, **kw: Any) -> str:
        return self.visit_FLOAT(type_, **kw)

    def visit_REAL(self, type_: Any, **kw: Any) -> str:
        return "REAL"

    def visit_DOUBLE(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    def visit_double(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    def visit_DOUBLE_PRECISION(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    def _timestamp(self, type_: Any) -> str:
        zoned = getattr(type_, "timezone", False)
        return "TIMESTAMP WITH TIME ZONE" if zoned else "TIMESTAMP"

    def visit_datetime(self, type_: Any, **kw: Any) -> str:
        return self._timestamp(type_)

    def visit_DATETIME(self, type_: Any, **kw: Any) -> str:
        return self._timestamp(type_)

    def visit_TIMESTAMP(self, type_: Any, **kw: Any) -> str:
        return self._timestamp(type_)

    def visit_large_binary(self, type_: Any, **kw: Any) -> str:
        return "VARBINARY"

    def visit_uuid(self, type_: Any, **kw: Any) -> str:
        # Iceberg's uuid has no SQL name here: text, as SQLAlchemy stores it without native UUID.
        return "VARCHAR"


class IceflightDialect(ADBCFlightSQLDialect):
    """The ``iceflight://`` dialect (module docs)."""

    name = "iceflight"
    driver = "adbc"
    supports_statement_cache = True
    type_compiler_cls = IceflightTypeCompiler
    # iceflight answers the rows an INSERT, UPDATE, DELETE or MERGE changed (DB-API rowcount).
    supports_sane_rowcount = True
    # BOOLEAN and DECIMAL columns take and give Python bools and Decimals as they are.
    supports_native_boolean = True
    supports_native_decimal = True

    def build_connect_args(self, url: URL) -> tuple[list[Any], dict[str, Any]]:
        query = {k: (v[-1] if isinstance(v, tuple) else v) for k, v in url.query.items()}
        tls = query.pop("tls", "false").lower() in {"1", "true", "yes", "on"}
        host = url.host or "localhost"
        port = url.port or 50051
        uri = f"{'grpc+tls' if tls else 'grpc'}://{host}:{port}"
        db_kwargs: dict[str, str] = {}
        if url.username is not None:
            db_kwargs["username"] = url.username
        if url.password is not None:
            db_kwargs["password"] = str(url.password)
        token = query.pop("token", None)
        if token is not None:
            from adbc_driver_flightsql import DatabaseOptions

            db_kwargs[DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
        db_kwargs.update(query)
        return [uri], {"db_kwargs": db_kwargs}

    def on_connect_url(self, url: URL) -> Any:
        """Each new connection starts in the URL's schema (``/SCHEMA``), when it names one."""
        schema = url.database or None
        if schema is None:
            return None

        def use_schema(dbapi_connection: Any) -> None:
            dbapi_connection.adbc_current_db_schema = schema

        return use_schema

    # ── the session's place: its catalog and default schema ─────────────────────

    @staticmethod
    def _current(dbapi: Any, attribute: str) -> str | None:
        try:
            value = getattr(dbapi, attribute)
        except Exception:  # noqa: BLE001 - a server without session options has none
            return None
        return value or None

    def _get_default_schema_name(self, connection: Any) -> str | None:
        return self._current(self._adbc_connection(connection), "adbc_current_db_schema")

    def _tree(
        self,
        connection: Any,
        *,
        schema: str | None = None,
        table_name: str | None = None,
        depth: str = "all",
    ) -> list[dict[str, Any]]:
        dbapi = self._adbc_connection(connection)
        if schema is None:
            schema = self._current(dbapi, "adbc_current_db_schema")
        tree = reflection.get_objects_tree(
            dbapi,
            depth=depth,
            catalog_filter=self._current(dbapi, "adbc_current_catalog"),
            db_schema_filter=schema,
            table_name_filter=table_name,
        )
        # The filters are LIKE patterns (`_` matches any one character, and Flight SQL gives no
        # escape): keep the exact names only.
        for catalog in tree:
            schemas = catalog.get("catalog_db_schemas") or []
            if schema is not None:
                schemas = [s for s in schemas if s.get("db_schema_name") == schema]
            if table_name is not None:
                for s in schemas:
                    s["db_schema_tables"] = [
                        t
                        for t in s.get("db_schema_tables") or []
                        if t.get("table_name") == table_name
                    ]
            catalog["catalog_db_schemas"] = schemas
        return tree

    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        dbapi = self._adbc_connection(connection)
        tree = reflection.get_objects_tree(
            dbapi,
            depth="db_schemas",
            catalog_filter=self._current(dbapi, "adbc_current_catalog"),
        )
        return reflection.schema_names_from_tree(tree)

    def get_table_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        tree = self._tree(connection, schema=schema, depth="tables")
        return reflection.table_names_from_tree(tree)

    def get_view_names(self, connection: Any, schema: str | None = None, **kw: Any) -> list[str]:
        tree = self._tree(connection, schema=schema, depth="tables")
        return reflection.view_names_from_tree(tree)

