//! Printing query results as they stream in, in bounded memory: `table` (aligned text, in pages),
//! `csv` (with a header row), `json` (an array of row objects; several statements print one
//! JSON document, an array with one such array per statement, `[]` for a statement without
//! rows or columns).
//!
//! ```text
//!   RecordBatchStream ──► ResultWriter::write_stream ──► table: pages of ≤ PAGE_ROWS rows,
//!                                                         at most `max_rows` shown, then a count
//!                                                       csv / json: every batch as it arrives
//! ```
//!
//! Memory is bounded by one page (table) or one batch (csv, json) whatever the result's size.
//! The first write that fails ends the stream (which stops the query): a reader that closed its
//! end (`iceflight sql … | head -1`) is [`OutputError::Closed`].

use std::io::{ErrorKind, Write};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::util::pretty::pretty_format_batches;
use datafusion::common::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;

/// Output format of `iceflight sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned text table, printed in pages; at most `--max-rows` rows, then a row count.
    Table,
    /// CSV with a header row; streams any number of rows.
    Csv,
    /// JSON array of row objects; streams any number of rows. Several statements: one array
    /// holding each statement's array, in order.
    Json,
}

/// Rows per printed table page: column widths are computed per page, so a page is all the
/// table format ever holds.
pub const PAGE_ROWS: usize = 1000;

/// Default of `--max-rows` (rows the table format shows; 0 = all).
pub const DEFAULT_MAX_ROWS: usize = 1000;

/// Why printing a result stopped.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The reader of the output went away (broken pipe): not an error for the user.
    #[error("output closed")]
    Closed,
    /// Writing failed for another reason (disk full, ...).
    #[error("writing the result: {0}")]
    Write(std::io::Error),
    /// The query failed while it streamed.
    #[error(transparent)]
    Query(DataFusionError),
}

impl From<std::io::Error> for OutputError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == ErrorKind::BrokenPipe {
            Self::Closed
        } else {
            Self::Write(e)
        }
    }
}

/// `out` with the kind of its first failed write kept: arrow's CSV writer reports I/O failures
/// as text only, so a closed reader is recognised here, where the write fails.
struct Tracked<'a> {
    inner: &'a mut dyn Write,
    failed: Option<ErrorKind>,
}

impl Write for Tracked<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| {
            self.failed.get_or_insert(e.kind());
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().inspect_err(|e| {
            self.failed.get_or_insert(e.kind());
        })
    }
}

impl Tracked<'_> {
    /// The error to report for `e`, raised while writing to this output.
    fn error(&self, e: ArrowError) -> OutputError {
        match (self.failed, e) {
            (Some(ErrorKind::BrokenPipe), _) => OutputError::Closed,
            (_, ArrowError::IoError(_, io)) => io.into(),
            (Some(kind), other) => OutputError::Write(std::io::Error::new(kind, other.to_string())),
            (None, other) => OutputError::Query(DataFusionError::ArrowError(Box::new(other), None)),
        }
    }
}

/// Prints query results in one [`Format`].
pub struct ResultWriter<'a> {
    out: Tracked<'a>,
    format: Format,
    max_rows: usize,
    /// JSON of several statements: each result is an element of one outer array.
    several: bool,
    /// Results written so far.
    written: usize,
}

impl<'a> ResultWriter<'a> {
    /// A writer to `out`; `max_rows` caps the rows the table format shows (0 = all).
    pub fn new(out: &'a mut dyn Write, format: Format, max_rows: usize) -> Self {
        Self {
            out: Tracked {
                inner: out,
                failed: None,
            },
            format,
            max_rows,
            several: false,
            written: 0,
        }
    }

    /// The writer of `statements` results in a row: in JSON, more than one make one document
    /// (module docs), closed by [`Self::finish`].
    pub fn for_statements(mut self, statements: usize) -> Self {
        self.several = statements > 1 && self.format == Format::Json;
        self
    }

    /// Ends the output after the last statement (the outer JSON array's `]`).
    ///
    /// Errors: as [`Self::write_stream`]'s writes.
    pub fn finish(&mut self) -> Result<(), OutputError> {
        if self.several {
            if self.written == 0 {
                write!(self.out, "[")?;
            }
            writeln!(self.out, "]")?;
            self.out.flush()?;
        }
        Ok(())
    }

    /// Prints one statement's result as it arrives; returns the number of rows it had.
    /// A statement without columns (DDL, `SET`) prints nothing.
    ///
    /// Errors: [`OutputError::Closed`] when the reader went away, [`OutputError::Write`] for
    /// other write failures, [`OutputError::Query`] when the query fails; each ends the stream
    /// at once (dropping it stops the query).
    pub async fn write_stream(
        &mut self,
        mut stream: SendableRecordBatchStream,
    ) -> Result<u64, OutputError> {
        let schema = stream.schema();
        let mut rows = 0u64;
        if self.several {
            write!(
                self.out,
                "{}",
                if self.written == 0 { "[\n" } else { ",\n" }
            )?;
        }
        self.written += 1;
        if schema.fields().is_empty() {
            while let Some(batch) = stream.next().await {
                batch.map_err(OutputError::Query)?;
            }
            if self.several {
                writeln!(self.out, "[]")?;
            }
            return Ok(0);
        }
        let out = &mut self.out;
        match self.format {
            Format::Table => {
                let mut pages = TablePages::new(schema, self.max_rows);
                while let Some(batch) = stream.next().await {
                    let batch = batch.map_err(OutputError::Query)?;
                    rows += batch.num_rows() as u64;
                    pages.push(out, batch)?;
                }
                pages.finish(out, rows)?;
            }
            Format::Csv => {
                let mut w = arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(&mut *out);
                let mut wrote = false;
                while let Some(batch) = stream.next().await {
                    let batch = batch.map_err(OutputError::Query)?;
                    rows += batch.num_rows() as u64;
                    if let Err(e) = w.write(&batch) {
                        drop(w);
                        return Err(out.error(e));
                    }
                    wrote = true;
                }
                if !wrote && let Err(e) = w.write(&RecordBatch::new_empty(schema)) {
                    drop(w);
                    return Err(out.error(e));
                }
            }
            Format::Json => {
                let mut w = arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::JsonArray>(&mut *out);
                let mut result = Ok(());
                while let Some(batch) = stream.next().await {
                    let batch = batch.map_err(OutputError::Query)?;
                    rows += batch.num_rows() as u64;
                    result = w.write(&batch);
                    if result.is_err() {
                        break;
                    }
                }
                let result = result.and_then(|()| w.finish());
                drop(w);
                result.map_err(|e| out.error(e))?;
                writeln!(out)?;
            }
        }
        self.out.flush()?;
        Ok(rows)
    }
}

/// The table format's state: the rows of the page being filled and how many were shown.
struct TablePages {
    schema: SchemaRef,
    max_rows: usize,
    page: Vec<RecordBatch>,
    page_rows: usize,
    shown: usize,
    printed_any: bool,
}

impl TablePages {
    fn new(schema: SchemaRef, max_rows: usize) -> Self {
        Self {
            schema,
            max_rows,
            page: vec![],
            page_rows: 0,
            shown: 0,
            printed_any: false,
        }
    }

    /// Rows the table may still show.
    fn room(&self) -> usize {
        match self.max_rows {
            0 => usize::MAX,
            n => n - self.shown - self.page_rows,
        }
    }

    /// Adds a batch, printing each page once it is full; rows past `max_rows` are only counted.
    fn push(&mut self, out: &mut Tracked<'_>, batch: RecordBatch) -> Result<(), OutputError> {
        let mut start = 0;
        while start < batch.num_rows() {
            let take = (batch.num_rows() - start)
                .min(PAGE_ROWS - self.page_rows)
                .min(self.room());
            if take == 0 {
                return Ok(()); // past the cap: counted by the caller, not shown
            }
            self.page.push(batch.slice(start, take));
            self.page_rows += take;
            start += take;
            if self.page_rows == PAGE_ROWS || self.room() == 0 {
                self.print_page(out)?;
            }
        }
        Ok(())
    }

    fn print_page(&mut self, out: &mut Tracked<'_>) -> Result<(), OutputError> {
        if self.page.is_empty() && self.printed_any {
            return Ok(());
        }
        let text = if self.page.is_empty() {
            pretty_format_batches(&[RecordBatch::new_empty(Arc::clone(&self.schema))])
        } else {
            pretty_format_batches(&self.page)
        }
        .map_err(|e| out.error(e))?;
        writeln!(out, "{text}")?;
        self.shown += self.page_rows;
        self.page.clear();
        self.page_rows = 0;
        self.printed_any = true;
        Ok(())
    }

    /// Prints the last page and, when rows were left out, how many there were.
    fn finish(mut self, out: &mut Tracked<'_>, rows: u64) -> Result<(), OutputError> {
        self.print_page(out)?;
        if rows > self.shown as u64 {
            writeln!(
                out,
                "({rows} rows, the first {} shown: --max-rows 0 shows all, --format csv streams any size)",
                self.shown
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    use super::*;

    fn numbers(batches: usize, rows: usize) -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let s = Arc::clone(&schema);
        let items = (0..batches).map(move |b| {
            let start = (b * rows) as i64;
            Ok(RecordBatch::try_new(
                Arc::clone(&s),
                vec![Arc::new(Int64Array::from_iter_values(
                    start..start + rows as i64,
                ))],
            )
            .unwrap())
        });
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(items),
        ))
    }

    async fn table(batches: usize, rows: usize, max_rows: usize) -> String {
        let mut out = Vec::new();
        ResultWriter::new(&mut out, Format::Table, max_rows)
            .write_stream(numbers(batches, rows))
            .await
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Rows shown as table body lines (`| 12 |`).
    fn body_rows(text: &str) -> usize {
        text.lines()
            .filter(|l| l.starts_with("| ") && !l.contains(" n "))
            .count()
    }

    #[tokio::test]
    async fn table_caps_rows_and_counts_the_rest() {
        let text = table(3, 700, 1000).await;
        assert_eq!(body_rows(&text), 1000, "{text}");
        assert!(
            text.ends_with("(2100 rows, the first 1000 shown: --max-rows 0 shows all, --format csv streams any size)\n"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn table_prints_everything_in_pages_without_a_cap() {
        let text = table(3, 700, 0).await;
        assert_eq!(body_rows(&text), 2100);
        // Three pages (1000, 1000, 100 rows), each with its own header.
        assert_eq!(text.lines().filter(|l| l.contains("| n ")).count(), 3);
        assert!(!text.contains("shown"), "{text}");
    }

    #[tokio::test]
    async fn empty_results_print_their_header() {
        let text = table(0, 0, 1000).await;
        assert!(text.contains("| n |"), "{text}");
        let mut out = Vec::new();
        ResultWriter::new(&mut out, Format::Json, 0)
            .write_stream(numbers(0, 0))
            .await
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[]\n");
    }

    #[tokio::test]
    async fn json_of_several_statements_is_one_document() {
        let mut out = Vec::new();
        let mut writer = ResultWriter::new(&mut out, Format::Json, 0).for_statements(3);
        writer.write_stream(numbers(2, 2)).await.unwrap();
        writer.write_stream(numbers(0, 0)).await.unwrap();
        let nothing = Box::pin(RecordBatchStreamAdapter::new(
            Arc::new(arrow::datatypes::Schema::empty()),
            futures::stream::empty(),
        ));
        writer.write_stream(nothing).await.unwrap();
        writer.finish().unwrap();
        let text = String::from_utf8(out).unwrap();
        let parsed: serde_json::Value = serde_json::from_str(&text).expect(&text);
        let results = parsed.as_array().expect("an outer array");
        assert_eq!(results.len(), 3, "{text}");
        assert_eq!(results[0].as_array().unwrap().len(), 4, "{text}");
        assert!(results[1].as_array().unwrap().is_empty());
        assert!(results[2].as_array().unwrap().is_empty());
        // One statement keeps its plain array.
        let mut out = Vec::new();
        let mut writer = ResultWriter::new(&mut out, Format::Json, 0).for_statements(1);
        writer.write_stream(numbers(0, 0)).await.unwrap();
        writer.finish().unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "[]\n");
    }

    /// A writer whose reader is gone.
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_closed_reader_stops_every_format() {
        for format in [Format::Table, Format::Csv, Format::Json] {
            let err = ResultWriter::new(&mut Closed, format, 0)
                .write_stream(numbers(10, 5000))
                .await
                .unwrap_err();
            assert!(matches!(err, OutputError::Closed), "{format:?}: {err}");
        }
    }
}
