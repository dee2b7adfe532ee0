//! The privileges a planned statement needs, checked before it runs: every table it reads,
//! writes, creates, alters or drops, every file it touches, every setting it changes.
//!
//! ```text
//!   LogicalPlan (subqueries, views and SQL `EXECUTE`s of `PREPARE`d statements included)
//!     TableScan of an Iceberg table, a version or a metadata table ──► SELECT on the table
//!     TableScan of files (external table, read_*) ──► each path under a file root
//!     Dml INSERT ──► INSERT; INSERT OVERWRITE ──► INSERT, DELETE; DELETE ──► DELETE;
//!         UPDATE ──► UPDATE; into files ──► under a file root; into anything else ──► admins
//!         (MERGE: by its clauses, where `sql/row_change.rs` plans it)
//!     CREATE TABLE [AS] / VIEW / EXTERNAL TABLE ──► OWNERSHIP of the new table (Trino)
//!     DROP TABLE / VIEW, ALTER TABLE (both names of a RENAME) ──► OWNERSHIP
//!     CREATE / DROP SCHEMA ──► owner of the schema
//!     COPY … TO, CREATE EXTERNAL TABLE ──► the location under a file root
//!     SET / RESET ──► `settings.rs`; CREATE CATALOG / INDEX / FUNCTION ──► admins
//!     iceflight_invalidate_cache(…) ──► admins
//! ```
//!
//! Procedures (`ALTER TABLE … EXECUTE`: OWNERSHIP) are checked where they are planned
//! (`sql/procedures.rs`), bulk ingest in `flight/ingest.rs`.

use datafusion::catalog::TableProvider;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, TableReference};
use datafusion::datasource::listing::ListingTable;
use datafusion::datasource::source_as_provider;
use datafusion::datasource::view::ViewTable;
use datafusion::execution::SessionState;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, Expr, LogicalPlan, Statement, WriteOp};
use iceflight_catalog::alter::{AlterOp, AlterTable};
use iceflight_catalog::metadata_tables::MetadataTableProvider;
use iceflight_catalog::tables::CreateTableWith;
use iceflight_scan::IcebergTableProvider;
use iceflight_scan::table::row_change_target::RowChangeTarget;
use iceflight_scan::write::write_mode::RowOperation;

use super::denied::AccessDenied;
use super::rules::Privilege;
use super::session::Access;
use super::settings;

/// Refuses `plan` unless `access` may run it (module docs); `state` resolves partial names.
///
/// Errors: [`AccessDenied`] (as a DataFusion error) for the first thing refused.
pub fn check(access: &Access, state: &SessionState, plan: &LogicalPlan) -> Result<()> {
    plan.apply_with_subqueries(|node| {
        check_node(access, state, node)?;
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::ScalarFunction(f) = e
                    && f.name() == crate::invalidate::NAME
                {
                    access.require_admin("empty the engine's caches")?;
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(TreeNodeRecursion::Continue)
    })?;
    Ok(())
}

fn check_node(access: &Access, state: &SessionState, node: &LogicalPlan) -> Result<()> {
    let name = |reference: &TableReference| {
        let defaults = &state.config_options().catalog;
        let r = reference
            .clone()
            .resolve(&defaults.default_catalog, &defaults.default_schema);
        (
            r.catalog.to_string(),
            r.schema.to_string(),
            r.table.to_string(),
        )
    };
    let owns = |reference: &TableReference| {
        let (c, s, t) = name(reference);
        Ok(access.check_table(&c, &s, &t, &[Privilege::Ownership])?)
    };
    match node {
        LogicalPlan::TableScan(scan) => match source_as_provider(&scan.source) {
            Ok(provider) => read(access, state, provider.as_ref()),
            Err(_) => Ok(()),
        },
        LogicalPlan::Dml(dml) => {
            let target = source_as_provider(&dml.target)?;
            Ok(write(access, &dml.op, target.as_ref(), &dml.table_name)?)
        }
        LogicalPlan::Copy(copy) => {
            access
                .files()
                .resolve_listing(&copy.output_url, "COPY … TO")?;
            Ok(())
        }
        LogicalPlan::Ddl(ddl) => match ddl {
            DdlStatement::CreateExternalTable(create) => {
                access
                    .files()
                    .resolve_listing(&create.location, "CREATE EXTERNAL TABLE")?;
                owns(&create.name)
            }
            DdlStatement::CreateMemoryTable(create) => owns(&create.name),
            DdlStatement::CreateView(create) => owns(&create.name),
            DdlStatement::DropTable(drop) => owns(&drop.name),
            DdlStatement::DropView(drop) => owns(&drop.name),
            DdlStatement::CreateCatalogSchema(create) => {
                let (catalog, schema) = match create.schema_name.split_once('.') {
                    Some((c, s)) => (c.to_string(), s.to_string()),
                    None => (
                        state.config_options().catalog.default_catalog.clone(),
                        create.schema_name.clone(),
                    ),
                };
                Ok(access.check_schema_owner(&catalog, &schema, "CREATE SCHEMA")?)
            }
            DdlStatement::DropCatalogSchema(drop) => {
                let (catalog, schema) = match &drop.name {
                    datafusion::common::SchemaReference::Full { catalog, schema } => {
                        (catalog.to_string(), schema.to_string())
                    }
                    datafusion::common::SchemaReference::Bare { schema } => (
                        state.config_options().catalog.default_catalog.clone(),
                        schema.to_string(),
                    ),
                };
                Ok(access.check_schema_owner(&catalog, &schema, "DROP SCHEMA")?)
            }
            DdlStatement::CreateCatalog(_) => Ok(access.require_admin("create catalogs")?),
            DdlStatement::CreateIndex(_) => Ok(access.require_admin("create indexes")?),
            DdlStatement::CreateFunction(_) | DdlStatement::DropFunction(_) => {
                Ok(access.require_admin("create or drop functions")?)
            }
        },
        LogicalPlan::Statement(statement) => match statement {
            Statement::SetVariable(set) => {
                Ok(settings::check(access, &set.variable, Some(&set.value))?)
            }
            Statement::ResetVariable(reset) => Ok(settings::check(access, &reset.variable, None)?),
            Statement::Prepare(prepare) => {
                access.remember_prepared(&prepare.name, prepare.input.as_ref().clone())
            }
            Statement::Execute(execute) => match access.prepared(&execute.name) {
                Some(plan) => check(access, state, &plan),
                // Prepared by a route that bypassed these checks (none does: every statement
                // of a session passes here): only admins run it unchecked.
                None => Ok(access.require_admin(&format!("EXECUTE {}", execute.name))?),
            },
            Statement::Deallocate(deallocate) => {
                access.forget_prepared(&deallocate.name);
                Ok(())
            }
            Statement::TransactionStart(_) | Statement::TransactionEnd(_) => Ok(()),
        },
        LogicalPlan::Extension(_) => {
            if let Some(alter) = AlterTable::of(node) {
                access.check_table(
                    &alter.catalog,
                    &alter.namespace,
                    &alter.table,
                    &[Privilege::Ownership],
                )?;
                for op in &alter.ops {
                    if let AlterOp::RenameTo(new) = op {
                        access.check_table(
                            &alter.catalog,
                            &alter.namespace,
                            new,
                            &[Privilege::Ownership],
                        )?;
                    }
                }
            }
            if let Some(create) = CreateTableWith::of(node) {
                access.check_table(
                    &create.catalog,
                    &create.namespace,
                    &create.table,
                    &[Privilege::Ownership],
                )?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The privilege a scan of `provider` needs.
fn read(access: &Access, state: &SessionState, provider: &dyn TableProvider) -> Result<()> {
    let any = provider;
    if let Some(table) = any.downcast_ref::<IcebergTableProvider>() {
        return Ok(on_table(access, table, &[Privilege::Select])?);
    }
    if let Some(metadata) = any.downcast_ref::<MetadataTableProvider>() {
        let (catalog, ident) = metadata.base();
        return Ok(access.check_table(
            catalog,
            &ident.namespace().join("."),
            ident.name(),
            &[Privilege::Select],
        )?);
    }
    if let Some(listing) = any.downcast_ref::<ListingTable>() {
        for url in listing.table_paths() {
            access.files().resolve_url(url, "reading files")?;
        }
        return Ok(());
    }
    if let Some(view) = any.downcast_ref::<ViewTable>() {
        return check(access, state, view.logical_plan());
    }
    Ok(())
}

/// The privileges a write of `op` into `target` needs.
fn write(
    access: &Access,
    op: &WriteOp,
    target: &dyn TableProvider,
    name: &TableReference,
) -> Result<(), AccessDenied> {
    let any = target;
    if let Some(table) = any.downcast_ref::<IcebergTableProvider>() {
        let needs: &[Privilege] = match op {
            WriteOp::Insert(InsertOp::Append) | WriteOp::Ctas => &[Privilege::Insert],
            WriteOp::Insert(InsertOp::Overwrite | InsertOp::Replace) => {
                &[Privilege::Insert, Privilege::Delete]
            }
            WriteOp::Delete | WriteOp::Truncate => &[Privilege::Delete],
            WriteOp::Update => &[Privilege::Update],
        };
        return on_table(access, table, needs);
    }
    // UPDATE and merge-on-read DELETE; MERGE is checked by its clauses where it is planned
    // (`sql/row_change.rs`). Their scans of the table need SELECT like any.
    if let Some(change) = any.downcast_ref::<RowChangeTarget>() {
        return match change.operation() {
            RowOperation::Delete => on_table(access, change.table(), &[Privilege::Delete]),
            RowOperation::Update => on_table(access, change.table(), &[Privilege::Update]),
            RowOperation::Merge => Ok(()),
        };
    }
    if let Some(listing) = any.downcast_ref::<ListingTable>() {
        for url in listing.table_paths() {
            access.files().resolve_url(url, "writing files")?;
        }
        return Ok(());
    }
    access.require_admin(&format!("write to {name}"))
}

/// Refuses, in a checked session, unless the user holds `needs` on `table`; `Ok` in the
/// operator's own session (procedures, `MERGE`, planned where their target is known).
///
/// Errors: [`AccessDenied`].
pub fn check_provider(
    ctx: &datafusion::prelude::SessionContext,
    table: &IcebergTableProvider,
    needs: &[Privilege],
) -> Result<(), AccessDenied> {
    match Access::of_context(ctx) {
        Some(access) => on_table(&access, table, needs),
        None => Ok(()),
    }
}

/// Refuses unless `access` holds `needs` on the table `table` was loaded as.
///
/// Errors: [`AccessDenied`].
pub fn on_table(
    access: &Access,
    table: &IcebergTableProvider,
    needs: &[Privilege],
) -> Result<(), AccessDenied> {
    let ident = table.table().identifier();
    match table.planner().catalog() {
        Some(catalog) => {
            access.check_table(catalog, &ident.namespace().join("."), ident.name(), needs)
        }
        None => access.require_admin(&format!("read table {ident}, which names no catalog")),
    }
}
