//! The columns a filter can constrain: the scan's output columns and the primitive leaves of its
//! struct columns, each with its iceberg **field id**.
//!
//! ```text
//!   output schema  [id, s struct<a int, addr struct<city string>>, tags list<string>, "x.y" int]
//!   columns         0    1                                          2                   3
//!   nested leaves   4 = s.a (field id 3)    5 = s.addr.city (field id 6)
//!                   (nothing under tags: a list element is refused)
//!
//!   s@1                                  → column 1 (the struct: only `s IS NULL`, no bounds)
//!   get_field(s@1, a)                    → column 4
//!   get_field(get_field(s@1, addr), city)
//!   get_field(s@1, addr, city)           → column 5
//!   "x.y"@3                              → column 3 (a dotted top-level name is not a path)
//! ```
//!
//! Paths are walked through the Arrow types and end at a field id (`PARQUET:field_id`, which
//! `schema_to_arrow_schema` puts on struct children too, `scan/UPSTREAM.md`, "Field ids on every Arrow field"), so names are
//! never parsed. A path through a list, a map or a non-struct resolves to nothing: the filter then
//! constrains nothing and still runs above the scan. Field names match exactly, as `get_field`
//! matches them.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use iceberg::spec::{PrimitiveType, Schema as IcebergSchema, Type};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::model::metadata_columns::is_metadata_column;

/// One column a domain can constrain.
#[derive(Debug, Clone, PartialEq)]
pub struct ScanColumn {
    /// Display name: the output column's name, or the dotted path of a nested leaf (`s.addr.city`).
    pub name: String,
    /// Iceberg field id (`-1` when the Arrow field carries none).
    pub field_id: i32,
    /// Arrow type of the values (of a domain's literals).
    pub arrow_type: DataType,
    /// Iceberg type when the field is primitive in the table's current schema.
    pub iceberg_type: Option<PrimitiveType>,
    /// A leaf inside a struct column (not an output column).
    pub nested: bool,
}

/// Maps filter expressions to constrainable columns and back to names; implemented by
/// [`ScanColumns`] and, for top-level columns only, by an Arrow [`Schema`].
pub trait ColumnResolver: std::fmt::Debug + Send + Sync {
    /// The column index and Arrow type of `expr` when it names a constrainable column.
    fn resolve(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, DataType)>;

    /// Display name and Arrow type of column `index`.
    fn describe(&self, index: usize) -> Option<(&str, &DataType)>;
}

impl ColumnResolver for Schema {
    fn resolve(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, DataType)> {
        let c = expr.downcast_ref::<Column>()?;
        let field = self.fields().get(c.index())?;
        Some((c.index(), field.data_type().clone()))
    }

    fn describe(&self, index: usize) -> Option<(&str, &DataType)> {
        let f = self.fields().get(index)?;
        Some((f.name().as_str(), f.data_type()))
    }
}

/// The constrainable columns of one scan: output columns `0..n` (same indices as the output
/// schema), then every primitive leaf reachable through structs only.
#[derive(Debug, Clone)]
pub struct ScanColumns {
    schema: SchemaRef,
    columns: Vec<ScanColumn>,
    by_field_id: HashMap<i32, usize>,
}

impl ScanColumns {
    /// Builds the columns of output `schema` (fields carry `PARQUET:field_id`); iceberg types
    /// come from `current`, the table's current schema.
    pub fn new(schema: &SchemaRef, current: &IcebergSchema) -> Self {
        let primitive = |id: i32| {
            current
                .field_by_id(id)
                .and_then(|f| match f.field_type.as_ref() {
                    Type::Primitive(p) => Some(p.clone()),
                    _ => None,
                })
        };
        let mut columns: Vec<ScanColumn> = schema
            .fields()
            .iter()
            .map(|f| {
                let id = field_id(f).unwrap_or(-1);
                ScanColumn {
                    name: f.name().clone(),
                    field_id: id,
                    arrow_type: f.data_type().clone(),
                    iceberg_type: primitive(id),
                    nested: false,
                }
            })
            .collect();
        let mut leaves = vec![];
        for f in schema.fields() {
            collect_leaves(f, f.name(), &mut leaves);
        }
        for (name, f) in leaves {
            let Some(id) = field_id(&f) else { continue };
            columns.push(ScanColumn {
                name,
                field_id: id,
                arrow_type: f.data_type().clone(),
                iceberg_type: primitive(id),
                nested: true,
            });
        }
        let by_field_id = columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.field_id >= 0)
            .map(|(i, c)| (c.field_id, i))
            .collect();
        Self {
            schema: Arc::clone(schema),
            columns,
            by_field_id,
        }
    }

    /// Every column, output columns first.
    pub fn columns(&self) -> &[ScanColumn] {
        &self.columns
    }

    /// Resolves `get_field(base, name, …)` with `base` a column or another `get_field`.
    fn resolve_path(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<Arc<Field>> {
        if let Some(c) = expr.downcast_ref::<Column>() {
            return self.schema.fields().get(c.index()).cloned();
        }
        let func = expr.downcast_ref::<ScalarFunctionExpr>()?;
        if func.name() != "get_field" || func.args().len() < 2 {
            return None;
        }
        let mut field = self.resolve_path(&func.args()[0])?;
        for arg in &func.args()[1..] {
            let name = match arg.downcast_ref::<Literal>()?.value() {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)) => s.clone(),
                _ => return None,
            };
            // Only structs are descended; a map key or anything else ends the path.
            let DataType::Struct(children) = field.data_type() else {
                return None;
            };
            field = Arc::clone(children.iter().find(|c| c.name() == &name)?);
        }
        Some(field)
    }
}

impl ColumnResolver for ScanColumns {
    fn resolve(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, DataType)> {
        if let Some(c) = expr.downcast_ref::<Column>() {
            // Only output columns: indices past them belong to nested leaves. A metadata
            // column (`_pos`, `_row_id`, …) is in no file's statistics and no domain may
            // constrain it: a file without such a column would read as all NULL.
            let col = self
                .columns
                .get(c.index())
                .filter(|c| !c.nested && !is_metadata_column(c.field_id))?;
            return Some((c.index(), col.arrow_type.clone()));
        }
        let field = self.resolve_path(expr)?;
        let index = *self.by_field_id.get(&field_id(&field)?)?;
        let col = &self.columns[index];
        // The field found must be the leaf recorded for that id (same type).
        (col.nested && &col.arrow_type == field.data_type())
            .then(|| (index, col.arrow_type.clone()))
    }

    fn describe(&self, index: usize) -> Option<(&str, &DataType)> {
        let c = self.columns.get(index)?;
        Some((c.name.as_str(), &c.arrow_type))
    }
}

fn field_id(f: &Field) -> Option<i32> {
    f.metadata().get(PARQUET_FIELD_ID_META_KEY)?.parse().ok()
}

/// Primitive leaves under `f` reached through structs only, with their dotted paths.
fn collect_leaves(f: &Field, path: &str, out: &mut Vec<(String, Field)>) {
    let DataType::Struct(children) = f.data_type() else {
        return;
    };
    for c in children {
        let child_path = format!("{path}.{}", c.name());
        match c.data_type() {
            DataType::Struct(_) => collect_leaves(c, &child_path, out),
            t if t.is_nested() => {} // list, map, …: refused
            _ => out.push((child_path, c.as_ref().clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap as Map;

    use datafusion::common::config::ConfigOptions;
    use datafusion::logical_expr::ScalarUDF;
    use datafusion::physical_expr::expressions::{col, lit};
    use iceberg::arrow::schema_to_arrow_schema;
    use iceberg::spec::{ListType, MapType, NestedField};

    use super::*;

    fn iceberg_schema() -> IcebergSchema {
        let string = || Type::Primitive(PrimitiveType::String);
        let int = || Type::Primitive(PrimitiveType::Int);
        let addr = Type::Struct(iceberg::spec::StructType::new(vec![
            NestedField::optional(6, "city", string()).into(),
            NestedField::optional(7, "zip", int()).into(),
        ]));
        let s = Type::Struct(iceberg::spec::StructType::new(vec![
            NestedField::optional(4, "a", int()).into(),
            NestedField::optional(5, "addr", addr).into(),
        ]));
        let tags = Type::List(ListType::new(
            NestedField::list_element(8, string(), false).into(),
        ));
        let attrs = Type::Map(MapType::new(
            NestedField::map_key_element(9, string()).into(),
            NestedField::map_value_element(10, int(), false).into(),
        ));
        IcebergSchema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", int()).into(),
                NestedField::optional(2, "s", s).into(),
                NestedField::optional(3, "x.y", int()).into(),
                NestedField::optional(11, "tags", tags).into(),
                NestedField::optional(12, "attrs", attrs).into(),
            ])
            .build()
            .unwrap()
    }

    fn get_field(
        schema: &Schema,
        base: Arc<dyn PhysicalExpr>,
        names: &[&str],
    ) -> Arc<dyn PhysicalExpr> {
        let udf = Arc::new(ScalarUDF::from(
            datafusion::functions::core::getfield::GetFieldFunc::new(),
        ));
        let mut args = vec![base];
        args.extend(names.iter().map(|n| lit(*n)));
        Arc::new(
            ScalarFunctionExpr::try_new(udf, args, schema, Arc::new(ConfigOptions::default()))
                .unwrap_or_else(|_| panic!("get_field {names:?}")),
        )
    }

    fn fixture() -> (SchemaRef, ScanColumns) {
        let ice = iceberg_schema();
        let arrow = Arc::new(schema_to_arrow_schema(&ice).unwrap());
        let cols = ScanColumns::new(&arrow, &ice);
        (arrow, cols)
    }

    #[test]
    fn leaves_of_structs_only() {
        let (_, cols) = fixture();
        let names: Map<&str, (i32, bool)> = cols
            .columns()
            .iter()
            .map(|c| (c.name.as_str(), (c.field_id, c.nested)))
            .collect();
        assert_eq!(names.len(), 8, "{names:?}");
        assert_eq!(names["s.a"], (4, true));
        assert_eq!(names["s.addr.city"], (6, true));
        assert_eq!(names["s.addr.zip"], (7, true));
        assert_eq!(names["x.y"], (3, false));
        assert!(
            !names
                .keys()
                .any(|n| n.starts_with("tags.") || n.starts_with("attrs."))
        );
    }

    #[test]
    fn paths_resolve_by_field_id_at_any_depth() {
        let (arrow, cols) = fixture();
        let s = col("s", &arrow).unwrap();
        let name = |e: &Arc<dyn PhysicalExpr>| {
            cols.resolve(e)
                .map(|(i, t)| (cols.describe(i).unwrap().0.to_string(), t))
        };
        assert_eq!(
            name(&get_field(&arrow, Arc::clone(&s), &["a"])),
            Some(("s.a".into(), DataType::Int32))
        );
        let flat = get_field(&arrow, Arc::clone(&s), &["addr", "city"]);
        let chained = get_field(
            &arrow,
            get_field(&arrow, Arc::clone(&s), &["addr"]),
            &["city"],
        );
        assert_eq!(name(&flat), Some(("s.addr.city".into(), DataType::Utf8)));
        assert_eq!(name(&flat), name(&chained));
        // The struct itself is a column (IS NULL on it is a top-level domain), a struct-valued
        // path is not a leaf.
        assert_eq!(name(&s).map(|n| n.0), Some("s".into()));
        assert_eq!(name(&get_field(&arrow, Arc::clone(&s), &["addr"])), None);
        // A dotted top-level name is that column, never a path.
        assert_eq!(
            name(&col("x.y", &arrow).unwrap()),
            Some(("x.y".into(), DataType::Int32))
        );
        // Map values are refused.
        let attrs = col("attrs", &arrow).unwrap();
        assert_eq!(name(&get_field(&arrow, attrs, &["k"])), None);
    }

    #[test]
    fn struct_fields_carry_ids() {
        let (arrow, _) = fixture();
        let DataType::Struct(children) = arrow.field_with_name("s").unwrap().data_type() else {
            panic!("s is a struct");
        };
        let ids: Vec<Option<i32>> = children.iter().map(|c| field_id(c)).collect();
        assert_eq!(ids, [Some(4), Some(5)]);
    }
}
