//! The parameter row of a prepared statement, as a client's `DoPut` sends it: Arrow IPC in
//! `FlightData` messages, decoded to one value per placeholder. The server casts each to its
//! placeholder's type with DataFusion's `ScalarValue::cast_to` (`server/src/flight/service.rs`).
//!
//! ```text
//!   DoPut(CommandPreparedStatementQuery) ─► FlightData… ─► ParameterMessages::push (bounded)
//!     ─► decode: arrow-flight's FlightRecordBatchStream ─► exactly one row
//!     ─► one 1-row array per placeholder, as sent
//! ```
//!
//! Parameters bind by position: ADBC names its columns "0", "1", …, JDBC uses the names of the
//! parameter schema iceflight sent.

use arrow_array::{ArrayRef, RecordBatch};
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use futures::{TryStreamExt, stream};

/// Most `FlightData` messages one `DoPut` of parameters may send (schema, row, dictionaries).
pub const MAX_PARAMETER_MESSAGES: usize = 64;

/// Most bytes (headers and bodies) one `DoPut` of parameters may send: 64 MiB.
pub const MAX_PARAMETER_BYTES: usize = 64 << 20;

/// A parameter upload that cannot be bound; each message is one line for the client
/// (`InvalidArgument`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParameterError {
    /// Not Arrow IPC that arrow-flight can decode.
    #[error("reading parameters: {0}")]
    Decode(String),
    /// More than [`MAX_PARAMETER_MESSAGES`] messages or [`MAX_PARAMETER_BYTES`] bytes.
    #[error(
        "parameters are limited to {MAX_PARAMETER_MESSAGES} messages and {MAX_PARAMETER_BYTES} bytes"
    )]
    TooLarge,
    /// More than one row.
    #[error("bind exactly one parameter row per execution (got {0})")]
    Rows(usize),
    /// No row, for a statement with placeholders.
    #[error("no parameter row was sent")]
    NoRow,
    /// Another number of columns than placeholders.
    #[error("the statement takes {expected} parameter(s), {sent} were sent")]
    Count {
        /// Placeholders of the statement.
        expected: usize,
        /// Columns sent.
        sent: usize,
    },
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
    /// [`MAX_PARAMETER_BYTES`].
    pub fn push(&mut self, message: FlightData) -> Result<(), ParameterError> {
        self.bytes += message.data_header.len() + message.data_body.len();
        self.messages.push(message);
        if self.messages.len() > MAX_PARAMETER_MESSAGES || self.bytes > MAX_PARAMETER_BYTES {
            return Err(ParameterError::TooLarge);
        }
        Ok(())
    }

    /// The row bound to `placeholders` placeholders: one 1-row array per placeholder, in
    /// order, of the type it was sent with.
    ///
    /// Errors: [`ParameterError`] for undecodable IPC, a row count other than one (zero is fine
    /// for a statement without placeholders), a column count other than `placeholders`.
    pub fn decode(self, placeholders: usize) -> Result<Vec<ArrayRef>, ParameterError> {
        let batches = decode_ipc(self.messages)?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows > 1 {
            return Err(ParameterError::Rows(rows));
        }
        let Some(row) = batches.into_iter().find(|b| b.num_rows() == 1) else {
            return match placeholders {
                0 => Ok(vec![]),
                _ => Err(ParameterError::NoRow),
            };
        };
        if row.num_columns() != placeholders {
            return Err(ParameterError::Count {
                expected: placeholders,
                sent: row.num_columns(),
            });
        }
        Ok(row.columns().to_vec())
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

    fn upload(batch: RecordBatch) -> ParameterMessages {
        let mut messages = ParameterMessages::default();
        for m in batches_to_flight_data(&batch.schema(), vec![batch]).unwrap() {
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
        let values = upload(batch).decode(2).unwrap();
        assert_eq!(values[0].as_ref(), &Int32Array::from(vec![7]) as &dyn Array);
        assert_eq!(
            values[1].as_ref(),
            &StringArray::from(vec!["x"]) as &dyn Array
        );
    }

    #[test]
    fn wrong_shapes_are_refused() {
        let one_col = |v: Vec<&str>| {
            let schema = Arc::new(Schema::new(vec![Field::new("0", DataType::Utf8, true)]));
            RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(v))]).unwrap()
        };
        assert_eq!(
            upload(one_col(vec!["a", "b"])).decode(1),
            Err(ParameterError::Rows(2))
        );
        assert_eq!(
            upload(one_col(vec!["a"])).decode(2),
            Err(ParameterError::Count {
                expected: 2,
                sent: 1
            })
        );
        assert_eq!(
            upload(one_col(vec![])).decode(1),
            Err(ParameterError::NoRow)
        );
        assert_eq!(upload(one_col(vec![])).decode(0), Ok(vec![]));
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
