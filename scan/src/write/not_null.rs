//! `NOT NULL` columns (Iceberg's required fields) checked as rows reach a writer, so that a
//! refusal names the column and the table. DataFusion's own check (`DataSinkExec`) names a
//! column index only, so a sink offers it a schema with every column nullable
//! ([`accepting`]) and checks the rows itself ([`checked`]).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::{Result, exec_err};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

/// `schema` with every column nullable: what a sink tells `DataSinkExec` it accepts.
pub fn accepting(schema: &Schema) -> SchemaRef {
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// `data` (rows in the column order of `table_schema`) ended by an error at the first batch
/// with a NULL in a column `table_schema` declares NOT NULL.
///
/// Errors (in the stream): `column {name} of table {table} is declared NOT NULL; a row gives
/// it NULL`.
pub fn checked(
    data: SendableRecordBatchStream,
    table_schema: &Schema,
    table: &str,
) -> SendableRecordBatchStream {
    let required: Vec<(usize, String)> = table_schema
        .fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.is_nullable())
        .map(|(i, f)| (i, f.name().clone()))
        .collect();
    if required.is_empty() {
        return data;
    }
    let table = table.to_string();
    let schema = data.schema();
    Box::pin(RecordBatchStreamAdapter::new(
        schema,
        data.map(move |batch| check(batch?, &required, &table)),
    ))
}

fn check(batch: RecordBatch, required: &[(usize, String)], table: &str) -> Result<RecordBatch> {
    for (index, name) in required {
        let nulls = batch
            .columns()
            .get(*index)
            .and_then(|c| c.logical_nulls())
            .map_or(0, |n| n.null_count());
        if nulls > 0 {
            return exec_err!(
                "column {name} of table {table} is declared NOT NULL; a row gives it NULL"
            );
        }
    }
    Ok(batch)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field};
    use futures::TryStreamExt;

    use super::*;

    #[tokio::test]
    async fn a_null_in_a_required_column_names_it() {
        let table = Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("body", DataType::Utf8, true),
        ]);
        let accepted = accepting(&table);
        assert!(accepted.fields().iter().all(|f| f.is_nullable()));
        let rows = |ids: Vec<Option<i64>>| {
            let n = ids.len();
            RecordBatch::try_new(
                Arc::clone(&accepted),
                vec![
                    Arc::new(Int64Array::from(ids)),
                    Arc::new(StringArray::from(vec![None::<&str>; n])),
                ],
            )
            .unwrap()
        };
        let stream = |batch: RecordBatch| -> SendableRecordBatchStream {
            Box::pin(RecordBatchStreamAdapter::new(
                batch.schema(),
                futures::stream::iter(vec![Ok(batch)]),
            ))
        };
        let fine = checked(stream(rows(vec![Some(1)])), &table, "eng.notes");
        assert_eq!(fine.try_collect::<Vec<_>>().await.unwrap().len(), 1);
        let refused = checked(stream(rows(vec![Some(1), None])), &table, "eng.notes");
        let error = refused.try_collect::<Vec<_>>().await.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("column id of table eng.notes is declared NOT NULL; a row gives it NULL"),
            "{error}"
        );
    }
}
