//! Printing query results: `table` (aligned text), `csv` (with a header row), `json` (an array of
//! objects per statement).

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

/// Output format of `iceflight sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// JSON array of row objects.
    Json,
}

/// Writes one statement's result to `out`.
pub fn write(
    out: &mut dyn Write,
    format: Format,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<(), ArrowError> {
    match format {
        Format::Table => {
            if schema.fields().is_empty() {
                return Ok(());
            }
            let text = if batches.is_empty() {
                arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(
                    schema.clone(),
                )])?
            } else {
                arrow::util::pretty::pretty_format_batches(batches)?
            };
            writeln!(out, "{text}")?;
        }
        Format::Csv => {
            if schema.fields().is_empty() {
                return Ok(());
            }
            let mut w = arrow::csv::WriterBuilder::new()
                .with_header(true)
                .build(&mut *out);
            if batches.is_empty() {
                w.write(&RecordBatch::new_empty(schema.clone()))?;
            }
            for b in batches {
                w.write(b)?;
            }
        }
        Format::Json => {
            let mut w = arrow::json::WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, arrow::json::writer::JsonArray>(&mut *out);
            for b in batches {
                w.write(b)?;
            }
            w.finish()?;
            if batches.is_empty() || batches.iter().all(|b| b.num_rows() == 0) {
                write!(out, "[]")?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}
