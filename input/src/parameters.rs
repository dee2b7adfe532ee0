//! The parameter row of a prepared statement, as a client's `DoPut` sends it: Arrow IPC in
//! `FlightData` messages, decoded to one value per placeholder, cast to the type the statement
//! gives it.
//!
//! ```text
//!   DoPut(CommandPreparedStatementQuery) ─► FlightData… ─► ParameterMessages::push (bounded)
//!     ─► decode: arrow-flight's FlightRecordBatchStream ─► exactly one row
//!     ─► one 1-row array per placeholder, cast to its type (arrow-cast, errors on overflow)
//! ```
//!
//! Parameters bind by position: ADBC names its columns "0", "1", …, JDBC uses the names of the
//! parameter schema iceflight sent.

use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::{CastOptions, cast_with_options};
use arrow_flight::FlightData;
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_schema::Schema;
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
    /// A value that does not cast to its placeholder's type.
    #[error("parameter {name}: {message}")]
    Cast {
        /// The placeholder (`$1`, …).
        name: String,
        /// arrow-cast's message.
        message: String,
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

    /// The row bound to the placeholders of `expected`: one 1-row array per field, of the
    /// field's type (a null keeps the type it was sent with).
    ///
    /// Errors: [`ParameterError`] for undecodable IPC, a row count other than one (zero is fine
    /// when `expected` has no fields), a column count other than `expected`'s, a value that
    /// does not cast.
    pub fn decode(self, expected: &Schema) -> Result<Vec<ArrayRef>, ParameterError> {
        let batches = decode_ipc(self.messages)?;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        if rows > 1 {
            return Err(ParameterError::Rows(rows));
        }
        let Some(row) = batches.into_iter().find(|b| b.num_rows() == 1) else {
            return match expected.fields().len() {
                0 => Ok(vec![]),
                _ => Err(ParameterError::NoRow),
            };
        };
        if row.num_columns() != expected.fields().len() {
            return Err(ParameterError::Count {
                expected: expected.fields().len(),
                sent: row.num_columns(),
            });
        }
        let options = CastOptions {
            safe: false,
            ..CastOptions::default()
        };
        row.columns()
            .iter()
            .zip(expected.fields())
            .map(|(value, field)| {
                if value.data_type() == field.data_type() || value.is_null(0) {
                    return Ok(value.clone());
                }
                cast_with_options(value, field.data_type(), &options).map_err(|e| {
                    ParameterError::Cast {
                        name: field.name().clone(),
                        message: e.to_string(),
                    }
                })
            })
            .collect()
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

    use arrow_array::{Int32Array, Int64Array, StringArray};
    use arrow_flight::utils::batches_to_flight_data;
    use arrow_schema::{DataType, Field};

    use super::*;

    fn upload(batch: RecordBatch) -> ParameterMessages {
        let mut messages = ParameterMessages::default();
        for m in batches_to_flight_data(&batch.schema(), vec![batch]).unwrap() {
            messages.push(m).unwrap();
        }
        messages
    }

    fn expected() -> Schema {
        Schema::new(vec![
            Field::new("$1", DataType::Int64, true),
            Field::new("$2", DataType::Utf8, true),
        ])
    }

    #[test]
    fn one_row_is_cast_to_the_placeholder_types() {
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
        let values = upload(batch).decode(&expected()).unwrap();
        assert_eq!(values[0].as_ref(), &Int64Array::from(vec![7]) as &dyn Array);
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
            upload(one_col(vec!["a", "b"])).decode(&expected()),
            Err(ParameterError::Rows(2))
        );
        assert_eq!(
            upload(one_col(vec!["a"])).decode(&expected()),
            Err(ParameterError::Count {
                expected: 2,
                sent: 1
            })
        );
        assert_eq!(
            upload(one_col(vec![])).decode(&expected()),
            Err(ParameterError::NoRow)
        );
        let cast = upload(one_col(vec!["seven"])).decode(&Schema::new(vec![Field::new(
            "$1",
            DataType::Int64,
            true,
        )]));
        assert!(
            matches!(&cast, Err(ParameterError::Cast { name, .. }) if name == "$1"),
            "{cast:?}"
        );
        let mut garbage = ParameterMessages::default();
        garbage
            .push(FlightData::new().with_data_header(vec![1u8, 2, 3]))
            .unwrap();
        assert!(matches!(
            garbage.decode(&expected()),
            Err(ParameterError::Decode(_))
        ));
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
