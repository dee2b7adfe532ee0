//! DataFusion catalog and schema providers over an iceberg [`iceberg::Catalog`].
//!
//! ```text
//!   SessionContext ──► IcebergCatalogProvider ("local") ──► IcebergSchemaProvider ("tpch", "a.b")
//!                                                              └─► IcebergTableProvider (scan crate)
//! ```
//!
//! Multi-level namespaces appear as dotted schema names (`a.b`). A table name may carry a
//! version or name a metadata table (`orders@<snapshot>`, `orders$files`: `table_ref.rs`). Listings and table loads go
//! through the catalog's shared cache (`cache.rs`: listings for `listing_cache_ttl`, tables for
//! `metadata_cache_ttl`, 0 s by default so a query plans against the current snapshot). DataFusion's listing methods are synchronous: they
//! block the calling thread on the catalog (a multi-threaded tokio runtime is required).

use std::collections::BTreeSet;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::{DataFusionError, Result, plan_datafusion_err, plan_err};
use iceberg::{ErrorKind, NamespaceIdent, TableIdent};
use iceflight_iceberg::commit::CommitCatalog;
use iceflight_scan::IcebergTableProvider;
use iceflight_scan::plan::metrics_index::IndexCache;

use crate::error::{CatalogError, to_df_error};
use crate::table_ref::{self, TableSuffix};
use crate::tables;
use iceflight_iceberg::time_travel::{at_snapshot, resolve};

/// Runs a future to completion from synchronous DataFusion callbacks.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// The default schema of a session that has none (no `default_schema` configured and the
/// catalog does not hold exactly one namespace). Never a namespace name (namespace parts are
/// non-empty), so DataFusion resolves an unqualified table to it and `NoDefaultSchemaProvider`
/// answers with the namespaces to choose from.
pub const NO_DEFAULT_SCHEMA: &str = "";

/// Parses a dotted schema name into a namespace.
fn namespace_of(name: &str) -> Result<NamespaceIdent> {
    NamespaceIdent::from_strs(name.split('.')).map_err(|e| plan_datafusion_err!("{e}"))
}

/// What a session may see of the catalogs (the server's access rules implement it): listings
/// leave out the rest, and loading a table the session may not see fails with the error given.
pub trait Visibility: std::fmt::Debug + Send + Sync {
    /// Whether schema `schema` (a dotted namespace) of catalog `catalog` is listed.
    fn schema(&self, catalog: &str, schema: &str) -> bool;
    /// `Ok` when table `catalog.schema.table` may be seen (listed, loaded); else the refusal.
    ///
    /// Errors: the refusal to hand to the statement.
    fn table(&self, catalog: &str, schema: &str, table: &str) -> Result<()>;
}

/// One iceberg catalog as a DataFusion catalog.
#[derive(Debug)]
pub struct IcebergCatalogProvider {
    name: String,
    uri: String,
    catalog: Arc<dyn CommitCatalog>,
    /// The session's table functions (`generate_series`, ...): DataFusion resolves a call such
    /// as `FROM generate_series(1, 3)` like a table first, so the schema of sessions without a
    /// default schema must let these names through.
    table_functions: Arc<BTreeSet<String>>,
    /// The engine's manifest-metrics cache: loaded tables carry their statistics from it.
    indexes: Option<IndexCache>,
    /// What the session may see (`None`: everything).
    visibility: Option<Arc<dyn Visibility>>,
}

impl IcebergCatalogProvider {
    /// Wraps a connected catalog named `name`, reached at `uri` (named in errors).
    pub fn new(
        name: impl Into<String>,
        uri: impl Into<String>,
        catalog: Arc<dyn CommitCatalog>,
    ) -> Self {
        Self {
            name: name.into(),
            uri: uri.into(),
            catalog,
            table_functions: Arc::default(),
            indexes: None,
            visibility: None,
        }
    }

    /// The provider as `visibility` lets a session see it (module docs of [`Visibility`]).
    pub fn with_visibility(mut self, visibility: Arc<dyn Visibility>) -> Self {
        self.visibility = Some(visibility);
        self
    }

    /// Tables load with their whole-snapshot statistics from `indexes`
    /// ([`IcebergTableProvider::with_index`]): the join order is costed from them.
    pub fn with_statistics(mut self, indexes: IndexCache) -> Self {
        self.indexes = Some(indexes);
        self
    }

    /// The provider with the names of the session's table functions (see the field).
    pub fn with_table_functions(mut self, names: Arc<BTreeSet<String>>) -> Self {
        self.table_functions = names;
        self
    }

    /// The iceberg catalog.
    pub fn catalog(&self) -> &Arc<dyn CommitCatalog> {
        &self.catalog
    }

    /// Every namespace, depth first, as dotted names.
    pub async fn list_all_namespaces(&self) -> Result<Vec<String>> {
        let mut out = BTreeSet::new();
        let mut stack: Vec<Option<NamespaceIdent>> = vec![None];
        while let Some(parent) = stack.pop() {
            let children = self
                .catalog
                .list_namespaces(parent.as_ref())
                .await
                .map_err(to_df_error)?;
            for child in children {
                if out.insert(child.join(".")) {
                    stack.push(Some(child));
                }
            }
        }
        Ok(out.into_iter().collect())
    }
}

impl CatalogProvider for IcebergCatalogProvider {
    fn schema_names(&self) -> Vec<String> {
        let mut names = block_on(self.list_all_namespaces()).unwrap_or_else(|e| {
            tracing::warn!(catalog = %self.name, error = %e, "listing namespaces failed");
            vec![]
        });
        if let Some(visibility) = &self.visibility {
            names.retain(|schema| visibility.schema(&self.name, schema));
        }
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == NO_DEFAULT_SCHEMA {
            let mut catalog = IcebergCatalogProvider::new(
                self.name.clone(),
                self.uri.clone(),
                Arc::clone(&self.catalog),
            )
            .with_table_functions(Arc::clone(&self.table_functions));
            catalog.visibility = self.visibility.clone();
            return Some(Arc::new(NoDefaultSchemaProvider { catalog }));
        }
        let namespace = namespace_of(name).ok()?;
        match block_on(self.catalog.namespace_exists(&namespace)) {
            Ok(true) => Some(Arc::new(IcebergSchemaProvider {
                indexes: self.indexes.clone(),
                visibility: self.visibility.clone(),
                ..IcebergSchemaProvider::new(
                    self.name.clone(),
                    Arc::clone(&self.catalog),
                    namespace,
                )
            })),
            Ok(false) => None,
            // DataFusion's lookup cannot fail here: hand back a schema whose tables report the
            // outage, so the query fails with "unavailable" rather than "not found".
            Err(e) => {
                tracing::debug!(catalog = %self.name, error = %e, "namespace lookup failed");
                Some(Arc::new(UnavailableSchemaProvider {
                    error: CatalogError::typed_source(&e).unwrap_or_else(|| {
                        CatalogError::Unavailable {
                            catalog: self.name.clone(),
                            uri: self.uri.clone(),
                            message: e.to_string(),
                        }
                    }),
                }))
            }
        }
    }

    /// `DROP SCHEMA c.ns` drops the namespace `ns`; `None` when it does not exist.
    ///
    /// Errors: the catalog cannot be reached (its typed error); the namespace holds tables
    /// (Trino's "Cannot drop non-empty schema"); `CASCADE`, which Iceberg catalogs do not offer.
    fn deregister_schema(
        &self,
        name: &str,
        cascade: bool,
    ) -> Result<Option<Arc<dyn SchemaProvider>>> {
        let Some(schema) = self.schema(name) else {
            return Ok(None);
        };
        if let Some(e) = outage(&schema) {
            return Err(e);
        }
        if cascade {
            return plan_err!(
                "DROP SCHEMA … CASCADE is not supported: drop the tables of {}.{name} first",
                self.name
            );
        }
        let namespace = namespace_of(name)?;
        let tables = block_on(self.catalog.list_tables(&namespace)).map_err(to_df_error)?;
        if !tables.is_empty() {
            return plan_err!(
                "Cannot drop non-empty schema {}.{name}: it holds {} table(s)",
                self.name,
                tables.len()
            );
        }
        block_on(self.catalog.drop_namespace(&namespace)).map_err(to_df_error)?;
        Ok(Some(schema))
    }

    /// `CREATE SCHEMA c.ns` creates the namespace `ns` (dots make a multi-level namespace).
    fn register_schema(
        &self,
        name: &str,
        _schema: Arc<dyn SchemaProvider>,
    ) -> Result<Option<Arc<dyn SchemaProvider>>> {
        let namespace = namespace_of(name)?;
        crate::names::check_namespace(&namespace)?;
        block_on(
            self.catalog
                .create_namespace(&namespace, Default::default()),
        )
        .map_err(to_df_error)?;
        Ok(None)
    }
}

/// The error of the catalog behind `schema` when it could not be reached or refused us (the
/// stand-in [`IcebergCatalogProvider::schema`] hands out then); `None` for any other schema.
/// DDL checks it: DataFusion would answer `CREATE SCHEMA` and `DROP TABLE` from the stand-in
/// ("already exists", "doesn't exist").
pub fn outage(schema: &Arc<dyn SchemaProvider>) -> Option<DataFusionError> {
    Some(
        schema
            .downcast_ref::<UnavailableSchemaProvider>()?
            .failure(),
    )
}

/// A namespace of a catalog that could not be reached or refused us: every table lookup fails
/// with that error ([`CatalogError::Unavailable`] or [`CatalogError::Unauthenticated`]).
#[derive(Debug)]
struct UnavailableSchemaProvider {
    error: CatalogError,
}

impl UnavailableSchemaProvider {
    /// The error, for one more caller.
    fn failure(&self) -> DataFusionError {
        let error = self
            .error
            .duplicate()
            .unwrap_or_else(|| CatalogError::Load(self.error.to_string()));
        DataFusionError::External(Box::new(error))
    }
}

#[async_trait]
impl SchemaProvider for UnavailableSchemaProvider {
    fn table_names(&self) -> Vec<String> {
        vec![]
    }

    async fn table(&self, _name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Err(self.failure())
    }

    fn table_exist(&self, _name: &str) -> bool {
        false
    }
}

/// The schema of unqualified names when a session has no default schema: every table lookup
/// but a table function's fails with [`CatalogError::NotFound`] listing the catalog's
/// namespaces to qualify with.
#[derive(Debug)]
struct NoDefaultSchemaProvider {
    catalog: IcebergCatalogProvider,
}

#[async_trait]
impl SchemaProvider for NoDefaultSchemaProvider {
    fn table_names(&self) -> Vec<String> {
        vec![]
    }

    async fn table(&self, table: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if self.catalog.table_functions.contains(table) {
            return Ok(None);
        }
        let catalog = &self.catalog.name;
        let mut namespaces = self.catalog.list_all_namespaces().await?;
        if let Some(visibility) = &self.catalog.visibility {
            namespaces.retain(|schema| visibility.schema(catalog, schema));
        }
        // Where the table is, so the hint names a place that holds it.
        let mut holding = vec![];
        for namespace in &namespaces {
            let ident = TableIdent::new(
                NamespaceIdent::from_strs(namespace.split('.')).map_err(to_df_error)?,
                table.to_string(),
            );
            let visible = self
                .catalog
                .visibility
                .as_ref()
                .is_none_or(|v| v.table(catalog, namespace, table).is_ok());
            if visible
                && self
                    .catalog
                    .catalog
                    .table_exists(&ident)
                    .await
                    .unwrap_or(false)
            {
                holding.push(namespace.as_str());
            }
        }
        let choose = "or choose a schema (`--schema`, `default_schema` in the config, the \
                      session's `schema` option)";
        let message = match (namespaces.as_slice(), holding.as_slice()) {
            ([], _) => format!(
                "table {table} not found: catalog {catalog} holds no namespace yet \
                 (`iceflight load tpch --scale 0.1 --namespace tpch` makes one)"
            ),
            (_, []) => format!(
                "table {table} not found: no default schema is set, and no namespace of catalog \
                 {catalog} ({}) holds a table of that name",
                namespaces.join(", ")
            ),
            (_, [only]) => format!(
                "table {table} not found: no default schema is set; it is in {catalog}.{only}: \
                 qualify the name ({catalog}.{only}.{table}) {choose}"
            ),
            (_, [first, ..]) => format!(
                "table {table} not found: no default schema is set, and namespaces {} of catalog \
                 {catalog} hold a table of that name: qualify the name ({catalog}.{first}.{table}) \
                 {choose}",
                holding.join(", ")
            ),
        };
        Err(DataFusionError::External(Box::new(CatalogError::NotFound(
            message,
        ))))
    }

    fn table_exist(&self, _name: &str) -> bool {
        false
    }
}

/// One namespace as a DataFusion schema.
#[derive(Debug)]
pub struct IcebergSchemaProvider {
    catalog_name: String,
    catalog: Arc<dyn CommitCatalog>,
    namespace: NamespaceIdent,
    indexes: Option<IndexCache>,
    /// What the session may see (`None`: everything).
    visibility: Option<Arc<dyn Visibility>>,
}

impl IcebergSchemaProvider {
    /// A schema provider for `namespace` of `catalog`.
    pub fn new(
        catalog_name: String,
        catalog: Arc<dyn CommitCatalog>,
        namespace: NamespaceIdent,
    ) -> Self {
        Self {
            catalog_name,
            catalog,
            namespace,
            indexes: None,
            visibility: None,
        }
    }

    fn list(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = block_on(self.catalog.list_tables(&self.namespace))
            .map_err(to_df_error)?
            .into_iter()
            .map(|t| t.name().to_string())
            .filter(|t| self.visible(t).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Whether the session may see table `name` of this namespace ([`Visibility`]).
    ///
    /// Errors: the refusal.
    fn visible(&self, name: &str) -> Result<()> {
        match &self.visibility {
            None => Ok(()),
            Some(v) => v.table(&self.catalog_name, &self.namespace.join("."), name),
        }
    }

    /// The table `name` of this namespace; `None` when there is none.
    async fn load(&self, name: &str) -> Result<Option<iceberg::table::Table>> {
        let ident = TableIdent::new(self.namespace.clone(), name.to_string());
        match self.catalog.load_table(&ident).await {
            Ok(table) => Ok(Some(table)),
            Err(e) if e.kind() == ErrorKind::TableNotFound => Ok(None),
            Err(e) => Err(to_df_error(e)),
        }
    }

    /// A loaded table (at its current snapshot, or one chosen by `time_travel.rs`) as a
    /// DataFusion table, with its statistics when the engine keeps them; `INSERT` appends to
    /// it when `writable` (its current snapshot).
    async fn provider(
        &self,
        table: iceberg::table::Table,
        writable: bool,
    ) -> Result<Arc<dyn TableProvider>> {
        let mut provider =
            IcebergTableProvider::try_new(table)?.with_catalog(self.catalog_name.clone());
        if writable {
            provider = provider.with_writes(Arc::clone(&self.catalog));
        }
        let provider = match &self.indexes {
            Some(indexes) => {
                let index = indexes.load(provider.table()).await.map_err(to_df_error)?;
                provider.with_index(&index)?
            }
            None => provider,
        };
        Ok(Arc::new(provider))
    }
}

/// A [`CatalogError::NotFound`] as a DataFusion error.
fn not_found(message: String) -> DataFusionError {
    DataFusionError::External(Box::new(CatalogError::NotFound(message)))
}

#[async_trait]
impl SchemaProvider for IcebergSchemaProvider {
    fn table_names(&self) -> Vec<String> {
        self.list().unwrap_or_else(|e| {
            tracing::warn!(catalog = %self.catalog_name, error = %e, "listing tables failed");
            vec![]
        })
    }

    /// `name`, else `name` split into a base table and a version or metadata table
    /// (`table_ref.rs`): `orders@<snapshot id | branch | tag | ts:ms>`, `orders$snapshots`.
    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let split = table_ref::split(name);
        // A version or metadata table is seen as its table is.
        match &split {
            Some(Ok((base, _))) if self.visible(name).is_err() => self.visible(base)?,
            _ => self.visible(name)?,
        }
        match self.load(name).await {
            Ok(Some(table)) => return Ok(Some(self.provider(table, true).await?)),
            Ok(None) => {}
            // A catalog may refuse such a name outright: Nessie reads `t@x` as its own
            // reference syntax (400 Bad Request, not 404).
            Err(e) if matches!(split, Some(Ok(_))) => {
                tracing::debug!(table = name, error = %e, "loading the full name failed; splitting it");
            }
            Err(e) => return Err(e),
        }
        let (base, suffix) = match split {
            None => return Ok(None),
            Some(Err(e)) => return Err(not_found(e.to_string())),
            Some(Ok(split)) => split,
        };
        let Some(table) = self.load(base).await? else {
            return Ok(None);
        };
        match suffix {
            TableSuffix::Version(version) => {
                let (snapshot, schema) =
                    resolve(&table, &version).map_err(|e| not_found(e.message().to_string()))?;
                let table = at_snapshot(&table, snapshot, schema).map_err(to_df_error)?;
                Ok(Some(self.provider(table, false).await?))
            }
            TableSuffix::Metadata(kind) => {
                Ok(Some(kind.provider(&self.catalog_name, &table).await?))
            }
        }
    }

    /// `CREATE TABLE name (…)` and `CREATE TABLE name AS SELECT …`: DataFusion hands over the
    /// rows as an in-memory table; an Iceberg table (format v2, unpartitioned) is created with
    /// its columns and the rows appended in one snapshot (`tables.rs`).
    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> Result<Option<Arc<dyn TableProvider>>> {
        let ident = TableIdent::new(self.namespace.clone(), name);
        block_on(tables::create_from(self.catalog.as_ref(), &ident, table))?;
        Ok(None)
    }

    /// `DROP TABLE`: the table leaves the catalog (its files stay, as the embedded and REST
    /// catalogs' drop leaves them; `purge` is not requested).
    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(table) = block_on(self.load(name))? else {
            if let Some(Ok((base, _))) = table_ref::split(name) {
                return datafusion::common::plan_err!(
                    "{name} is a version or metadata table of {base}, not a table to drop"
                );
            }
            return Ok(None);
        };
        block_on(self.catalog.drop_table(table.identifier())).map_err(to_df_error)?;
        Ok(Some(Arc::new(IcebergTableProvider::try_new(table)?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        let ident = TableIdent::new(self.namespace.clone(), name.to_string());
        block_on(self.catalog.table_exists(&ident)).unwrap_or(false)
    }
}
