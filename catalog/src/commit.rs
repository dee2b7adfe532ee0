//! The embedded (SQL) catalog, able to commit the snapshots of `iceberg/src/commit.rs`.
//!
//! iceberg-catalog-sql 0.10.1 commits only a `TableCommit`, which no code outside iceberg can
//! build. [`EmbeddedCatalog`] passes every `Catalog` call to it and adds
//! [`CommitCatalog::commit_updates`], done as iceberg-catalog-sql's own `update_table` does it
//! (its `catalog.rs`): check the requirements against the current metadata, apply the updates,
//! write the next metadata file, then move the table's row in `iceberg_tables` from the old
//! metadata location to the new one only if it still holds the old one (compare-and-swap). A
//! row that moved meanwhile is a retryable `CatalogCommitConflicts`, the written metadata file
//! an orphan.

use std::str::FromStr;

use async_trait::async_trait;
use iceberg::table::Table;
use iceberg::{
    Catalog, Error, ErrorKind, MetadataLocation, Namespace, NamespaceIdent, Result, TableCommit,
    TableCreation, TableIdent, TableRequirement, TableUpdate,
};
use iceberg_catalog_sql::SqlCatalog;
use iceflight_iceberg::commit::CommitCatalog;
use sqlx::AnyPool;

/// iceberg-catalog-sql's embedded catalog with [`CommitCatalog`] (module docs).
#[derive(Debug)]
pub struct EmbeddedCatalog {
    inner: SqlCatalog,
    /// The catalog's name: the `catalog_name` column of its rows.
    name: String,
    /// A second connection pool on the catalog's database, for the compare-and-swap.
    pool: AnyPool,
    /// `?` placeholders (sqlite, MySQL) or `$n` (PostgreSQL), as `sql_bind_style` says.
    dollar_placeholders: bool,
    /// The warehouse location new tables go under.
    warehouse: String,
}

impl EmbeddedCatalog {
    /// Wraps `inner`, named `name`, whose database is at `uri`.
    ///
    /// Errors: an in-memory database (`sqlite::memory:`), or the database cannot be opened.
    pub async fn connect(
        inner: SqlCatalog,
        name: String,
        uri: &str,
        dollar_placeholders: bool,
        warehouse: String,
    ) -> Result<Self> {
        // An in-memory database is private to its connection: a second pool would not see it.
        if uri.contains(":memory:") {
            return Err(Error::new(
                ErrorKind::FeatureUnsupported,
                format!("catalog {name}: an in-memory catalog database ({uri}) is not supported"),
            ));
        }
        let pool = sqlx::any::AnyPoolOptions::new()
            .max_connections(2)
            .connect(uri)
            .await
            .map_err(|e| Error::new(ErrorKind::Unexpected, format!("catalog database: {e}")))?;
        Ok(Self {
            inner,
            name,
            pool,
            dollar_placeholders,
            warehouse: warehouse.trim_end_matches('/').to_string(),
        })
    }

    /// Where a new table `name` of `namespace` goes: iceberg-catalog-sql's own choice (the
    /// namespace's `location` property, else `<warehouse>/<namespace parts>`, then `/<name>`)
    /// when no other table's location is it, lies above it or below it; otherwise
    /// `<name>-<uuid>` beside it (Trino's unique table locations). A table renamed keeps its
    /// location, a dropped one leaves its files: the next table of that name must not share
    /// them, nor a table of a nested namespace (`a.b`'s `c`) sit inside table `a.b`'s files.
    async fn new_table_location(&self, namespace: &NamespaceIdent, name: &str) -> Result<String> {
        let properties = self
            .inner
            .get_namespace(namespace)
            .await?
            .properties()
            .clone();
        let parent = match properties.get("location") {
            Some(location) => location.trim_end_matches('/').to_string(),
            None => format!("{}/{}", self.warehouse, namespace.join("/")),
        };
        let natural = format!("{parent}/{name}");
        let free = match natural.strip_prefix("file://") {
            Some(path) => location_is_free(
                std::path::Path::new(path),
                self.warehouse
                    .strip_prefix("file://")
                    .map(std::path::Path::new),
            ),
            // Not a local warehouse: no cheap look at what lies there.
            None => false,
        };
        Ok(match free {
            true => natural,
            false => format!("{natural}-{}", uuid::Uuid::new_v4().simple()),
        })
    }
}

/// Whether no table's files are at `location` (a local directory), below it, or in a directory
/// above it up to `warehouse`: no `metadata/*.metadata.json` in any of them.
fn location_is_free(location: &std::path::Path, warehouse: Option<&std::path::Path>) -> bool {
    let holds_table = |dir: &std::path::Path| {
        std::fs::read_dir(dir.join("metadata")).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".metadata.json"))
        })
    };
    // Above: each parent up to the warehouse (a table's location is never the warehouse).
    let mut dir = location.parent();
    while let Some(d) = dir {
        if warehouse.is_some_and(|w| d == w) || holds_table(d) {
            break;
        }
        dir = d.parent();
    }
    if dir.is_some_and(|d| warehouse.is_none_or(|w| d != w)) {
        return false;
    }
    // At or below: any table's metadata in the tree (empty when the directory is new).
    let mut stack = vec![location.to_path_buf()];
    while let Some(d) = stack.pop() {
        if holds_table(&d) {
            return false;
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .map(|e| e.path()),
            );
        }
    }
    true
}

#[async_trait]
impl CommitCatalog for EmbeddedCatalog {
    async fn commit_updates(
        &self,
        table: &TableIdent,
        requirements: Vec<TableRequirement>,
        updates: Vec<TableUpdate>,
    ) -> Result<()> {
        let current = self.inner.load_table(table).await?;
        for requirement in &requirements {
            requirement.check(Some(current.metadata()))?;
        }
        let location = current.metadata_location_result()?.to_string();
        let mut builder = current
            .metadata()
            .clone()
            .into_builder(Some(location.clone()));
        for update in updates {
            builder = update.apply(builder)?;
        }
        let metadata = builder.build()?.metadata;
        let next = MetadataLocation::from_str(&location)?
            .with_next_version()
            .with_new_metadata(&metadata);
        metadata.write_to(current.file_io(), &next).await?;

        let sql = if self.dollar_placeholders {
            "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2 \
             WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 \
             AND metadata_location = $6"
        } else {
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ? \
             WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? \
             AND metadata_location = ?"
        };
        let done = sqlx::query(sql)
            .bind(next.to_string())
            .bind(location.clone())
            .bind(self.name.clone())
            .bind(table.namespace().join("."))
            .bind(table.name().to_string())
            .bind(location)
            .execute(&self.pool)
            .await
            .map_err(|e| Error::new(ErrorKind::Unexpected, format!("catalog database: {e}")))?;
        if done.rows_affected() == 0 {
            return Err(Error::new(
                ErrorKind::CatalogCommitConflicts,
                format!("table {table} was changed by another commit"),
            )
            .with_retryable(true));
        }
        Ok(())
    }
}

#[async_trait]
impl Catalog for EmbeddedCatalog {
    async fn list_namespaces(
        &self,
        parent: Option<&NamespaceIdent>,
    ) -> Result<Vec<NamespaceIdent>> {
        self.inner.list_namespaces(parent).await
    }

    async fn create_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: std::collections::HashMap<String, String>,
    ) -> Result<Namespace> {
        self.inner.create_namespace(namespace, properties).await
    }

    async fn get_namespace(&self, namespace: &NamespaceIdent) -> Result<Namespace> {
        self.inner.get_namespace(namespace).await
    }

    async fn namespace_exists(&self, namespace: &NamespaceIdent) -> Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn update_namespace(
        &self,
        namespace: &NamespaceIdent,
        properties: std::collections::HashMap<String, String>,
    ) -> Result<()> {
        self.inner.update_namespace(namespace, properties).await
    }

    async fn drop_namespace(&self, namespace: &NamespaceIdent) -> Result<()> {
        self.inner.drop_namespace(namespace).await
    }

    async fn list_tables(&self, namespace: &NamespaceIdent) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    /// A table created without a location gets one of its own ([`Self::new_table_location`]).
    async fn create_table(
        &self,
        namespace: &NamespaceIdent,
        mut creation: TableCreation,
    ) -> Result<Table> {
        if creation.location.is_none() {
            creation.location = Some(self.new_table_location(namespace, &creation.name).await?);
        }
        self.inner.create_table(namespace, creation).await
    }

    async fn load_table(&self, table: &TableIdent) -> Result<Table> {
        self.inner.load_table(table).await
    }

    async fn drop_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.drop_table(table).await
    }

    async fn purge_table(&self, table: &TableIdent) -> Result<()> {
        self.inner.purge_table(table).await
    }

    async fn table_exists(&self, table: &TableIdent) -> Result<bool> {
        self.inner.table_exists(table).await
    }

    async fn rename_table(&self, src: &TableIdent, dest: &TableIdent) -> Result<()> {
        self.inner.rename_table(src, dest).await
    }

    async fn register_table(&self, table: &TableIdent, metadata_location: String) -> Result<Table> {
        self.inner.register_table(table, metadata_location).await
    }

    async fn update_table(&self, commit: TableCommit) -> Result<Table> {
        self.inner.update_table(commit).await
    }
}
