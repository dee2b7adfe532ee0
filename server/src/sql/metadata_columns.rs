//! Iceberg's metadata columns in queries: `SELECT _row_id, _last_updated_sequence_number,
//! _file, _pos, … FROM t` (Spark's names; `scan/src/model/metadata_columns.rs`).
//!
//! DataFusion 54 has no hidden columns: a column is in a table's schema, and then in its `*`,
//! or it is not there. So the metadata columns are added only where a query asks for them:
//! a query (or `EXPLAIN` of one) that names one of them is planned with every Iceberg table
//! it reads showing the four after its own columns, unless the table has a column of that
//! name itself. Such a query's `*` includes them too; any other statement never sees them.
//!
//! ```text
//!   SELECT _row_id, name FROM t   ──► t's provider ──► t with _file, _pos, _row_id,
//!                                                       _last_updated_sequence_number
//! ```

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, CatalogProviderList, SchemaProvider, TableProvider};
use datafusion::common::Result;
use datafusion::execution::SessionState;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::sql::parser::Statement;
use datafusion::sql::sqlparser::ast::{Expr, Statement as Sql, Visit, Visitor};
use iceflight_scan::IcebergTableProvider;
use iceflight_scan::model::metadata_columns::is_metadata_column_name;
use std::ops::ControlFlow;

/// Whether `statement` is a query, or `EXPLAIN` of one, that names a metadata column
/// (`_row_id`, `_last_updated_sequence_number`, `_file`, `_pos`; an unquoted name in any case).
pub fn names_metadata_column(statement: &Statement) -> bool {
    let query = match statement {
        Statement::Statement(inner) => inner.as_ref(),
        Statement::Explain(explain) => return names_metadata_column(&explain.statement),
        _ => return false,
    };
    if !matches!(query, Sql::Query(_)) {
        return false;
    }
    struct Names(bool);
    impl Visitor for Names {
        type Break = ();
        fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
            let ident = match expr {
                Expr::Identifier(ident) => Some(ident),
                Expr::CompoundIdentifier(parts) => parts.last(),
                _ => None,
            };
            let named = ident.is_some_and(|i| {
                let name = match i.quote_style {
                    None => i.value.to_lowercase(),
                    Some(_) => i.value.clone(),
                };
                is_metadata_column_name(&name)
            });
            if named {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut names = Names(false);
    let _ = query.visit(&mut names);
    names.0
}

/// `state` whose catalogs give every Iceberg table with its metadata columns (module docs):
/// the state to plan a query that [`names_metadata_column`] with.
pub fn with_metadata_columns(state: SessionState) -> SessionState {
    let catalogs = Arc::new(Catalogs(Arc::clone(state.catalog_list())));
    SessionStateBuilder::new_from_existing(state)
        .with_catalog_list(catalogs)
        .build()
}

/// A table with the metadata columns after its own, when it is an Iceberg table without a
/// column of such a name.
fn with_columns(table: Arc<dyn TableProvider>) -> Arc<dyn TableProvider> {
    let Some(iceberg) = table.downcast_ref::<IcebergTableProvider>() else {
        return table;
    };
    let schema = table.schema();
    if schema
        .fields()
        .iter()
        .any(|f| is_metadata_column_name(f.name()))
    {
        return table;
    }
    Arc::new(iceberg.with_metadata_columns())
}

#[derive(Debug)]
struct Catalogs(Arc<dyn CatalogProviderList>);

impl CatalogProviderList for Catalogs {
    fn register_catalog(
        &self,
        name: String,
        catalog: Arc<dyn CatalogProvider>,
    ) -> Option<Arc<dyn CatalogProvider>> {
        self.0.register_catalog(name, catalog)
    }

    fn catalog_names(&self) -> Vec<String> {
        self.0.catalog_names()
    }

    fn catalog(&self, name: &str) -> Option<Arc<dyn CatalogProvider>> {
        let inner = self.0.catalog(name)?;
        Some(Arc::new(Catalog(inner)))
    }
}

#[derive(Debug)]
struct Catalog(Arc<dyn CatalogProvider>);

impl CatalogProvider for Catalog {
    fn schema_names(&self) -> Vec<String> {
        self.0.schema_names()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let inner = self.0.schema(name)?;
        Some(Arc::new(Schema(inner)))
    }

    fn register_schema(
        &self,
        name: &str,
        schema: Arc<dyn SchemaProvider>,
    ) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.0.register_schema(name, schema)
    }
}

#[derive(Debug)]
struct Schema(Arc<dyn SchemaProvider>);

#[async_trait]
impl SchemaProvider for Schema {
    fn table_names(&self) -> Vec<String> {
        self.0.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.0.table(name).await?.map(with_columns))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.0.table_exist(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> bool {
        let statement = datafusion::sql::parser::DFParser::parse_sql(sql)
            .unwrap()
            .pop_front()
            .unwrap();
        names_metadata_column(&statement)
    }

    /// Only queries naming a metadata column (unquoted in any case, or quoted exactly) qualify.
    #[test]
    fn queries_naming_a_metadata_column() {
        assert!(names("SELECT _row_id FROM t"));
        assert!(names("SELECT t._POS FROM t"));
        assert!(names("SELECT a FROM t WHERE \"_file\" LIKE '%x'"));
        assert!(names(
            "EXPLAIN SELECT count(_last_updated_sequence_number) FROM t"
        ));
        assert!(!names("SELECT \"_ROW_ID\" FROM t"));
        assert!(!names("SELECT a, '_row_id' FROM t"));
        assert!(!names("INSERT INTO u SELECT _row_id FROM t"));
        assert!(!names("SELECT * FROM t"));
    }
}
