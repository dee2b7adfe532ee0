//! The parameter rows of a prepared statement, as a client's `DoPut` sends them: Arrow IPC in
//! `FlightData` messages, decoded to one column per placeholder. The server casts each to its
//! placeholder's type and binds the rows (`server/src/flight/binding.rs`).
//!
//! ```text
//!   DoPut(CommandPreparedStatementQuery | Update) ─► FlightData… ─► ParameterMessages::push
//!     (bounded) ─► decode: arrow-flight's FlightRecordBatchStream ─► every batch's rows
//!     ─► ParameterRows: one array per placeholder, as sent, all rows concatenated
//! ```
//!
//! Parameters bind by position: ADBC names its columns "0", "1", …, JDBC uses the names of the
//! parameter schema iceflight sent. One upload may hold many rows: ADBC's `executemany` and
//! JDBC's `executeBatch` send every row of the batch in one `DoPut` (FlightSql.proto: "all of
//! the bound parameter sets will be executed as a single atomic execution").

use arrow_array::{ArrayRef, RecordBatch};
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use futures::{TryStreamExt, stream};

/// Most `FlightData` messages one `DoPut` of parameters may send (schema, batches,
/// dictionaries).
pub const MAX_PARAMETER_MESSAGES: usize = 4096;

/// Most bytes (headers and bodies) one `DoPut` of parameters may send: 64 MiB.
pub const MAX_PARAMETER_BYTES: usize = 64 << 20;

/// A parameter upload that cannot be bound; each message is one line for the client
/// (`InvalidArgument`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    /// Not Arrow IPC that arrow-flight can decode, or batches that do not stack.
    #[error("reading parameters: {0}")]
    Decode(String),
    /// More than [`MAX_PARAMETER_MESSAGES`] messages or [`MAX_PARAMETER_BYTES`] bytes.
    #[error(
        "parameters are limited to {MAX_PARAMETER_MESSAGES} messages and {MAX_PARAMETER_BYTES} \
         bytes per DoPut; send fewer rows at once, or bulk-load with ingest (adbc_ingest)"
    )]
    TooLarge,
    /// Another number of columns than placeholders.
    #[error("the statement takes {expected} parameter(s), {sent} were sent")]
    Count {
        /// Placeholders of the statement.
        expected: usize,
        /// Columns sent.
        sent: usize,
    },
}

/// The rows of one parameter upload: `columns[i]` holds placeholder `i + 1`'s value of every
/// row, as sent (not cast), each `rows` long. No row: no columns.
#[derive(Debug, Clone, PartialEq)]
pub struct ParameterRows {
    /// One array per placeholder, in order.
    pub columns: Vec<ArrayRef>,
    /// Rows sent.
    pub rows: usize,
    /// Bytes of the upload (IPC headers and bodies): what the arrays, which may be slices of
    /// the bodies, can hold in memory at most.
    pub bytes: usize,
}

/// The `FlightData` of one parameter upload, collected within the bounds.
#[derive(Debug, Default)]
pub struct ParameterMessages {
    messages: Vec<FlightData>,
    bytes: usize,
}

impl ParameterMessages {
    /// Adds one message.
    ///
    /// Errors: [`ParameterError::TooLarge`] past [`MAX_PARAMETER_MESSAGES`] or
    /// [`MAX_PARAMETER_BYTES`]; [`ParameterError::Decode`] for a message whose compressed
    /// buffers declare more than `ipc_bounds::MAX_DECLARED_BYTES`.
    pub fn push(&mut self, message: FlightData) -> Result<(), ParameterError> {
        crate::ipc_bounds::check_declared_lengths(&message, crate::ipc_bounds::MAX_DECLARED_BYTES)
            .map_err(ParameterError::Decode)?;
        self.bytes += message.data_header.len() + message.data_body.len();
        self.messages.push(message);
        if self.messages.len() > MAX_PARAMETER_MESSAGES || self.bytes > MAX_PARAMETER_BYTES {
            return Err(ParameterError::TooLarge);
        }
        Ok(())
    }

    /// The rows bound to `placeholders` placeholders (module docs). An upload without rows
    /// (nothing sent, a descriptor or a schema alone, ADBC's empty binding) is zero rows
    /// whatever its columns:
    /// whether that may run is the statement's to say.
    ///
    /// Errors: [`ParameterError::Decode`] for undecodable IPC; [`ParameterError::Count`] for
    /// rows of another column count than `placeholders`.
    pub fn decode(self, placeholders: usize) -> Result<ParameterRows, ParameterError> {
        // A message without an IPC header carries only the descriptor (arrow-rs's client sends
        // an update's command so, with no parameters).
        let messages = self
            .messages
            .into_iter()
            .filter(|m| !m.data_header.is_empty())
            .collect();
        let batches: Vec<RecordBatch> = decode_ipc(messages)?
            .into_iter()
            .filter(|b| b.num_rows() > 0)
            .collect();
        let Some(first) = batches.first() else {
            return Ok(ParameterRows {
                columns: vec![],
                rows: 0,
                bytes: 0,
            });
        };
        if first.num_columns() != placeholders {
            return Err(ParameterError::Count {
                expected: placeholders,
                sent: first.num_columns(),
            });
        }
        let rows = batches.iter().map(RecordBatch::num_rows).sum();
        let columns = (0..placeholders)
            .map(|i| {
                let parts: Vec<&dyn arrow_array::Array> =
                    batches.iter().map(|b| b.column(i).as_ref()).collect();
                arrow_select::concat::concat(&parts)
                    .map_err(|e| ParameterError::Decode(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ParameterRows {
            columns,
            rows,
            bytes: self.bytes,
        })
    }
}

/// The batches of `messages`, decoded by arrow-flight (arrow-ipc underneath).
///
/// arrow-ipc 58 panics on some malformed input instead of answering an error (an
/// `assert!` in `BooleanBuffer::new`, `unimplemented!` for some schema fields:
/// `input/UPSTREAM.md`); such a panic is caught here and answered as
/// [`ParameterError::Decode`], so a client's bad upload never takes a request down.
fn decode_ipc(messages: Vec<FlightData>) -> Result<Vec<RecordBatch>, ParameterError> {
    let decode = move || {
        let decoded = FlightRecordBatchStream::new_from_flight_data(stream::iter(
            messages.into_iter().map(Ok),
        ))
        .try_collect::<Vec<RecordBatch>>();
        futures::executor::block_on(decoded).map_err(|e| ParameterError::Decode(e.to_string()))
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("the decoder failed");
        Err(ParameterError::Decode(format!(
            "malformed Arrow IPC: {why}"
        )))
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int32Array, StringArray};
    use arrow_flight::utils::batches_to_flight_data;
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn upload(batches: Vec<RecordBatch>) -> ParameterMessages {
        let mut messages = ParameterMessages::default();
        let schema = batches[0].schema();
        for m in batches_to_flight_data(&schema, batches).unwrap() {
            messages.push(m).unwrap();
        }
        messages
    }

    #[test]
    fn one_row_is_bound_as_sent() {
        let sent = Arc::new(Schema::new(vec![
            Field::new("0", DataType::Int32, true),
            Field::new("1", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            sent,
            vec![
                Arc::new(Int32Array::from(vec![7])),
                Arc::new(StringArray::from(vec!["x"])),
            ],
        )
        .unwrap();
        let bound = upload(vec![batch]).decode(2).unwrap();
        assert_eq!(bound.rows, 1);
        assert_eq!(
            bound.columns[0].as_ref(),
            &Int32Array::from(vec![7]) as &dyn Array
        );
        assert_eq!(
            bound.columns[1].as_ref(),
            &StringArray::from(vec!["x"]) as &dyn Array
        );
    }

    /// Rows of several batches stack in order, one column per placeholder.
    #[test]
    fn rows_of_several_batches_stack() {
        let bound = upload(vec![
            one_col(vec!["a", "b"]),
            one_col(vec![]),
            one_col(vec!["c"]),
        ])
        .decode(1)
        .unwrap();
        assert_eq!(bound.rows, 3);
        assert_eq!(
            bound.columns[0].as_ref(),
            &StringArray::from(vec!["a", "b", "c"]) as &dyn Array
        );
    }

    fn one_col(v: Vec<&str>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("0", DataType::Utf8, true)]));
        RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(v))]).unwrap()
    }

    #[test]
    fn wrong_shapes_are_refused() {
        assert_eq!(
            upload(vec![one_col(vec!["a"])]).decode(2),
            Err(ParameterError::Count {
                expected: 2,
                sent: 1
            })
        );
        let none = ParameterRows {
            columns: vec![],
            rows: 0,
            bytes: 0,
        };
        assert_eq!(upload(vec![one_col(vec![])]).decode(1), Ok(none.clone()));
        assert_eq!(upload(vec![one_col(vec![])]).decode(0), Ok(none.clone()));
        let mut descriptor_only = ParameterMessages::default();
        descriptor_only.push(FlightData::new()).unwrap();
        assert_eq!(descriptor_only.decode(2), Ok(none));
        let mut garbage = ParameterMessages::default();
        garbage
            .push(FlightData::new().with_data_header(vec![1u8, 2, 3]))
            .unwrap();
        assert!(matches!(garbage.decode(1), Err(ParameterError::Decode(_))));
    }

    #[test]
    fn uploads_are_bounded() {
        let mut messages = ParameterMessages::default();
        for _ in 0..MAX_PARAMETER_MESSAGES {
            messages.push(FlightData::new()).unwrap();
        }
        assert_eq!(
            messages.push(FlightData::new()),
            Err(ParameterError::TooLarge)
        );
    }
}
