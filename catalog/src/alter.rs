//! `ALTER TABLE` on Iceberg tables. DataFusion 54 plans no `ALTER TABLE`, so the SQL front end
//! (`server/src/session.rs`, `plan_statement`) turns the statement into an [`AlterTable`] node,
//! which the statement's executor runs with [`alter_table`] instead of DataFusion.
//!
//! ```text
//!   ALTER TABLE t ADD COLUMN c INT        ──► iceberg UpdateSchemaAction::add_column (optional;
//!                                             older files read NULL for it)
//!   ALTER TABLE t DROP COLUMN c [, d]     ──► UpdateSchemaAction::delete_column (the data stays
//!                                             in older files, unread)
//!   ALTER TABLE t RENAME TO u             ──► Catalog::rename_table
//!   ALTER TABLE t RENAME COLUMN a TO b    ──► not supported: iceberg 0.10.1 has no rename
//!   ALTER TABLE t SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read', format_version = 3)
//!                                         ──► UpdatePropertiesAction / UpgradeFormatVersionAction
//! ```
//!
//! The schema changes of one statement are one commit (iceberg's `Transaction::commit`, retried
//! on conflict); a `RENAME TO` in the same statement runs after it, so a failed rename leaves
//! the schema change committed. A column added with `NOT NULL` is refused: rows already
//! written have no value for it.

use std::fmt;
use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{
    DFSchema, DFSchemaRef, DataFusionError, Result, not_impl_err, plan_datafusion_err, plan_err,
};
use datafusion::logical_expr::{Expr, LogicalPlan, UserDefinedLogicalNodeCore};
use iceberg::spec::FormatVersion;
use iceberg::spec::Type;
use iceberg::transaction::{AddColumn, ApplyTransactionAction, Transaction};
use iceberg::{Catalog, NamespaceIdent, TableIdent};

use crate::error::CatalogError;
use crate::error::to_df_error;

/// One operation of an `ALTER TABLE` statement (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub enum AlterOp {
    /// `ADD COLUMN [IF NOT EXISTS] name type`.
    AddColumn {
        /// Column name.
        name: String,
        /// Its type, as DataFusion planned it.
        data_type: DataType,
        /// `IF NOT EXISTS`: a column of that name already there is no error.
        if_not_exists: bool,
    },
    /// `DROP COLUMN [IF EXISTS] a [, b …]`.
    DropColumns {
        /// Column names.
        names: Vec<String>,
        /// `IF EXISTS`: a missing column is no error.
        if_exists: bool,
    },
    /// `RENAME TO name` (same namespace).
    RenameTo(String),
    /// `RENAME COLUMN old TO new`: refused when run (module docs).
    RenameColumn(String, String),
    /// `SET TBLPROPERTIES ('key' = 'value', …)` / `SET PROPERTIES key = value`: Iceberg table
    /// properties by name; `format_version` (or `format-version`) upgrades the table's format.
    SetProperties(Vec<(String, String)>),
}

/// An `ALTER TABLE` statement as a logical plan node: a carrier, run by [`alter_table`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct AlterTable {
    /// The configured catalog's name.
    pub catalog: String,
    /// The namespace, dotted.
    pub namespace: String,
    /// The table's name.
    pub table: String,
    /// `ALTER TABLE IF EXISTS`: a missing table is no error.
    pub if_exists: bool,
    /// The operations, in statement order.
    pub ops: Vec<AlterOp>,
}

static NO_COLUMNS: LazyLock<DFSchemaRef> = LazyLock::new(|| Arc::new(DFSchema::empty()));

impl AlterTable {
    /// The node as a logical plan.
    pub fn into_plan(self) -> LogicalPlan {
        LogicalPlan::Extension(datafusion::logical_expr::Extension {
            node: Arc::new(self),
        })
    }

    /// The node inside `plan`, when `plan` is one.
    pub fn of(plan: &LogicalPlan) -> Option<&AlterTable> {
        match plan {
            LogicalPlan::Extension(e) => e.node.as_any().downcast_ref::<AlterTable>(),
            _ => None,
        }
    }
}

impl UserDefinedLogicalNodeCore for AlterTable {
    fn name(&self) -> &str {
        "AlterTable"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![]
    }

    fn schema(&self) -> &DFSchemaRef {
        &NO_COLUMNS
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "AlterTable: {}.{}.{} {:?}",
            self.catalog, self.namespace, self.table, self.ops
        )
    }

    fn with_exprs_and_inputs(&self, _exprs: Vec<Expr>, _inputs: Vec<LogicalPlan>) -> Result<Self> {
        Ok(self.clone())
    }
}

/// Runs `node` against `catalog` (module docs).
///
/// Errors: the table does not exist (`NotFound`, unless `IF EXISTS`); a column to add exists
/// or one to drop does not (unless `IF [NOT] EXISTS`); a type Iceberg cannot store; `NOT NULL`
/// on an added column; `RENAME COLUMN` (not implemented); the catalog's.
pub async fn alter_table(catalog: &dyn Catalog, node: &AlterTable) -> Result<()> {
    let namespace = NamespaceIdent::from_strs(node.namespace.split('.')).map_err(to_df_error)?;
    let ident = TableIdent::new(namespace.clone(), node.table.clone());
    let table = match catalog.load_table(&ident).await {
        Ok(table) => table,
        Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound && node.if_exists => {
            return Ok(());
        }
        Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => {
            return Err(DataFusionError::External(Box::new(CatalogError::NotFound(
                format!("table {ident} not found"),
            ))));
        }
        Err(e) => return Err(to_df_error(e)),
    };
    let schema = table.metadata().current_schema();
    let mut update = Transaction::new(&table).update_schema();
    let mut changes = 0;
    let mut rename = None;
    let mut properties: Vec<(String, String)> = vec![];
    let mut version = None;
    for op in &node.ops {
        match op {
            AlterOp::AddColumn {
                name,
                data_type,
                if_not_exists,
            } => {
                if schema.field_by_name(name).is_some() {
                    if *if_not_exists {
                        continue;
                    }
                    return plan_err!("table {ident} already has a column {name}");
                }
                update =
                    update.add_column(AddColumn::optional(name, iceberg_type(name, data_type)?));
                changes += 1;
            }
            AlterOp::DropColumns { names, if_exists } => {
                for name in names {
                    if schema.field_by_name(name).is_none() {
                        if *if_exists {
                            continue;
                        }
                        return plan_err!("table {ident} has no column {name}");
                    }
                    update = update.delete_column(name);
                    changes += 1;
                }
            }
            AlterOp::RenameTo(name) => {
                crate::names::check_part("table", name)?;
                rename = Some(name.clone());
            }
            AlterOp::SetProperties(pairs) => {
                for (key, value) in pairs {
                    match key.as_str() {
                        "format_version" | "format-version" => {
                            let asked = match value.as_str() {
                                "1" => FormatVersion::V1,
                                "2" => FormatVersion::V2,
                                "3" => FormatVersion::V3,
                                _ => {
                                    return plan_err!(
                                        "format_version takes 1, 2 or 3, not {value}"
                                    );
                                }
                            };
                            if asked < table.metadata().format_version() {
                                return plan_err!(
                                    "table {ident} is format {}; a format version cannot go \
                                     down to {asked}",
                                    table.metadata().format_version()
                                );
                            }
                            version = Some(asked);
                        }
                        "partitioning" | "sorted_by" | "location" => {
                            return not_impl_err!(
                                "changing {key} of existing table {ident} is not supported yet; \
                                 create a new table WITH ({key} = …) AS SELECT from it"
                            );
                        }
                        "write.delete.mode" | "write.update.mode" | "write.merge.mode"
                            if !["copy-on-write", "merge-on-read"].contains(&value.as_str()) =>
                        {
                            return plan_err!(
                                "table property {key} takes 'copy-on-write' or 'merge-on-read', \
                                 not '{value}'"
                            );
                        }
                        _ => {
                            crate::names::check_location_property(
                                table.metadata().location(),
                                key,
                                value,
                            )?;
                            properties.push((key.clone(), value.clone()))
                        }
                    }
                }
            }
            AlterOp::RenameColumn(old, new) => {
                return not_impl_err!(
                    "RENAME COLUMN {old} TO {new} on Iceberg table {ident} is not supported yet: \
                     iceberg 0.10.1's schema update cannot rename"
                );
            }
        }
    }
    if changes > 0 || !properties.is_empty() || version.is_some() {
        // iceberg refuses a change the table cannot take (a partition or sort source dropped,
        // a reserved property) as invalid data: the statement's mistake.
        let refused = |e: iceberg::Error| match e.kind() {
            iceberg::ErrorKind::DataInvalid | iceberg::ErrorKind::FeatureUnsupported => {
                plan_datafusion_err!("ALTER TABLE {ident}: {}", e.message())
            }
            _ => to_df_error(e),
        };
        let mut tx = Transaction::new(&table);
        if changes > 0 {
            tx = update.apply(tx).map_err(refused)?;
        }
        if !properties.is_empty() {
            let mut set = tx.update_table_properties();
            for (key, value) in properties {
                set = set.set(key, value);
            }
            tx = set.apply(tx).map_err(refused)?;
        }
        if let Some(version) = version
            && version != table.metadata().format_version()
        {
            tx = tx
                .upgrade_table_version()
                .set_format_version(version)
                .apply(tx)
                .map_err(refused)?;
        }
        tx.commit(catalog).await.map_err(refused)?;
    }
    if let Some(name) = rename {
        let to = TableIdent::new(namespace, name);
        catalog.rename_table(&ident, &to).await.map_err(|e| {
            if e.kind() == iceberg::ErrorKind::TableAlreadyExists {
                DataFusionError::External(Box::new(CatalogError::AlreadyExists(format!(
                    "table {to} already exists"
                ))))
            } else {
                to_df_error(e)
            }
        })?;
    }
    Ok(())
}

/// The Iceberg type of a column of Arrow type `data_type` (as `CREATE TABLE` maps them).
///
/// Errors: a type Iceberg cannot store.
fn iceberg_type(name: &str, data_type: &DataType) -> Result<Type> {
    let schema = crate::tables::iceberg_columns(&Arc::new(Schema::new(vec![Field::new(
        name,
        data_type.clone(),
        true,
    )])))?;
    let schema =
        iceberg::arrow::arrow_schema_to_schema_auto_assign_ids(&schema).map_err(to_df_error)?;
    match schema.as_struct().fields().first() {
        Some(field) => Ok(field.field_type.as_ref().clone()),
        None => plan_err!("column {name} of type {data_type} has no Iceberg type"),
    }
}
