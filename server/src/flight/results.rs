//! Result streaming: Arrow batches → Flight data, in the types every client can read, split far
//! below the 16 MiB message limit (arrow-flight's encoder splits batches above 2 MiB), with one
//! structured log line per query when its stream ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::array::RecordBatch;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::error::FlightError;
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt, TryStreamExt};
use tonic::Status;

use crate::message::LimitExceeded;
use crate::query_history::{QueryHistory, QueryState};

/// A Flight `DoGet` stream.
pub type FlightDataStream =
    std::pin::Pin<Box<dyn Stream<Item = Result<arrow_flight::FlightData, Status>> + Send>>;

fn flight_type(t: &DataType) -> Option<DataType> {
    match t {
        DataType::Utf8View => Some(DataType::Utf8),
        DataType::BinaryView => Some(DataType::Binary),
        _ => None,
    }
}

/// The schema as sent to clients: view types (`Utf8View`, `BinaryView`) become `Utf8` / `Binary`,
/// which the JDBC driver (18.3) can read.
pub fn flight_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema
        .fields()
        .iter()
        .any(|f| flight_type(f.data_type()).is_some())
    {
        return Arc::clone(schema);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match flight_type(f.data_type()) {
            Some(t) => f.as_ref().clone().with_data_type(t),
            None => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Casts a batch to [`flight_schema`].
pub fn flight_batch(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema().as_ref() == schema.as_ref() {
        return Ok(batch);
    }
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| {
            if c.data_type() == f.data_type() {
                Ok(Arc::clone(c))
            } else {
                cast(c, f.data_type())
            }
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// What the per-query log line reports.
#[derive(Debug)]
pub struct QueryLog {
    /// Query id (also in error messages).
    pub id: String,
    /// User.
    pub user: String,
    /// SQL text or command name.
    pub what: String,
    started: Instant,
    rows: AtomicU64,
    bytes: AtomicU64,
    /// The status message of the failure, once the query failed.
    failed: std::sync::OnceLock<String>,
    finished: std::sync::atomic::AtomicBool,
    /// Where the query is listed while it runs and after (`system.runtime.queries`).
    history: Option<Arc<QueryHistory>>,
}

impl QueryLog {
    /// Starts timing a query, listed in `history` until it ends.
    pub fn start(history: Option<Arc<QueryHistory>>, user: &str, what: &str) -> Arc<Self> {
        let log = Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
            user: user.to_string(),
            what: what.chars().take(200).collect(),
            started: Instant::now(),
            rows: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            failed: Default::default(),
            finished: Default::default(),
            history,
        };
        if let Some(h) = &log.history {
            h.started(&log.id, &log.user, &log.what);
        }
        Arc::new(log)
    }

    /// Marks the query failed with the status it ends with (logged at the end, with its message;
    /// the first failure counts).
    pub fn fail(&self, status: &tonic::Status) {
        let _ = self
            .failed
            .set(format!("{:?}: {}", status.code(), status.message()));
    }

    /// Lists the query as waiting for (`true`) or holding (`false`) its slots.
    pub fn queued(&self, queued: bool) {
        if let Some(h) = &self.history {
            h.queued(&self.id, queued);
        }
    }

    /// `kill` ends the query with the reason sent through it (`query_control.rs`).
    pub fn killable(&self, kill: tokio::sync::oneshot::Sender<crate::query_control::QueryKilled>) {
        if let Some(h) = &self.history {
            h.register_kill(&self.id, kill);
        }
    }

    /// Marks the result fully sent; a log dropped before this reports `cancelled`.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
    }

    fn status(&self) -> &'static str {
        match self.state() {
            QueryState::Failed => "error",
            QueryState::Finished => "ok",
            _ => "cancelled",
        }
    }

    fn state(&self) -> QueryState {
        if self.failed.get().is_some() {
            QueryState::Failed
        } else if self.finished.load(Ordering::Relaxed) {
            QueryState::Finished
        } else {
            QueryState::Cancelled
        }
    }
}

/// One line per query: at `info` when it succeeded or was cancelled, at `warn` with the error
/// (gRPC code and message) when it failed, so failures show under the default log filter.
impl Drop for QueryLog {
    fn drop(&mut self) {
        let duration_ms = self.started.elapsed().as_millis() as u64;
        let (rows, bytes) = (
            self.rows.load(Ordering::Relaxed),
            self.bytes.load(Ordering::Relaxed),
        );
        if let Some(h) = &self.history {
            h.ended(
                &self.id,
                self.state(),
                self.started.elapsed(),
                rows,
                bytes,
                self.failed.get().cloned(),
            );
        }
        match self.failed.get() {
            Some(error) => tracing::warn!(
                query_id = %self.id,
                user = %self.user,
                duration_ms,
                rows,
                bytes,
                status = "error",
                // Quoted and escaped (Debug of a string): a message or statement with a line
                // break stays on the query's one log line.
                error = ?error,
                sql = ?self.what,
                "query"
            ),
            None => tracing::info!(
                query_id = %self.id,
                user = %self.user,
                duration_ms,
                rows,
                bytes,
                status = self.status(),
                sql = ?self.what,
                "query"
            ),
        }
    }
}

/// Encodes a DataFusion stream for `DoGet` under `schema` (the one `GetFlightInfo` announced).
/// `guard` is held until the stream ends or is dropped (a concurrency permit, a cancellation
/// registration).
///
/// The bytes counted (the query log, `system.runtime.queries`) and bounded by `max_bytes`
/// (`[query] max_result_bytes`) are those sent: each Flight message's IPC header and body as
/// the encoder wrote them, schema message included. A slice of a larger batch counts only the
/// rows it holds, unlike the Arrow memory its buffers share. The cap applies per message (the
/// encoder splits batches at about 2 MiB): a message that would pass it is not sent.
///
/// Errors (as the stream's last item): the input's, mapped by `to_status`; past `max_bytes`,
/// `ResourceExhausted` ([`LimitExceeded::ResultSize`]), after which nothing more is sent.
pub fn encode<G: Send + 'static>(
    input: SendableRecordBatchStream,
    schema: SchemaRef,
    log: Arc<QueryLog>,
    guard: G,
    max_bytes: Option<u64>,
) -> FlightDataStream {
    let batch_schema = Arc::clone(&schema);
    let counting = Arc::clone(&log);
    let counted = Arc::clone(&log);
    let batches = input
        .map(
            move |b| match b.and_then(|b| flight_batch(b, &batch_schema)) {
                Ok(b) => {
                    counting
                        .rows
                        .fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                    Ok(b)
                }
                Err(e) => {
                    let status = super::status::to_status(e);
                    counting.fail(&status);
                    Err(FlightError::Tonic(Box::new(status)))
                }
            },
        )
        .chain(
            futures::stream::once(async move {
                // Reached only when the input ended: every batch went out (the encoder
                // yields what it queued before it asks for more).
                log.finish();
                drop(guard);
                drop(log);
                Err(FlightError::ProtocolError("end".into()))
            })
            .filter(|_| async { false }),
        );
    let encoded = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(batches)
        .map_err(|e| match e {
            FlightError::Tonic(s) => *s,
            other => Status::internal(other.to_string()),
        });
    let sent = encoded.scan(false, move |over, message| {
        if *over {
            return futures::future::ready(None);
        }
        let message = message.and_then(|data| {
            let size = (data.data_header.len() + data.data_body.len()) as u64;
            match max_bytes {
                // The message that would pass the cap is not sent, nor counted.
                Some(max) if counted.bytes.load(Ordering::Relaxed) + size > max => {
                    *over = true;
                    let limit = LimitExceeded::ResultSize(max);
                    let status =
                        super::status::to_status(DataFusionError::External(Box::new(limit)));
                    counted.fail(&status);
                    Err(status)
                }
                _ => {
                    counted.bytes.fetch_add(size, Ordering::Relaxed);
                    Ok(data)
                }
            }
        });
        futures::future::ready(Some(message))
    });
    Box::pin(sent)
}

/// A `DoGet` stream of fixed batches (metadata results).
pub fn encode_batch(batch: RecordBatch) -> FlightDataStream {
    let schema = batch.schema();
    let stream = FlightDataEncoderBuilder::new()
        .with_schema(schema)
        .build(futures::stream::once(async move { Ok(batch) }));
    Box::pin(stream.map_err(|e| Status::internal(e.to_string())))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int32Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
    use futures::StreamExt;

    use super::{QueryLog, encode};

    fn two_batches() -> datafusion::execution::SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int32Array::from(vec![1, 2]))],
        )
        .unwrap();
        let batches = vec![Ok(batch.clone()), Ok(batch)];
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(batches),
        ))
    }

    #[tokio::test]
    async fn encoded_stream_logs_ok_only_when_drained() {
        let log = QueryLog::start(None, "u", "SELECT x");
        let input = two_batches();
        let schema = input.schema();
        let stream = encode(input, schema, Arc::clone(&log), (), None);
        let messages = stream.collect::<Vec<_>>().await;
        assert!(messages.iter().all(Result::is_ok));
        assert_eq!(log.status(), "ok");
        assert_eq!(log.rows.load(std::sync::atomic::Ordering::Relaxed), 4);

        // A client that stops after the first message leaves the query cancelled.
        let log = QueryLog::start(None, "u", "SELECT x");
        let input = two_batches();
        let schema = input.schema();
        let mut stream = encode(input, schema, Arc::clone(&log), (), None);
        assert!(stream.next().await.is_some());
        drop(stream);
        assert_eq!(log.status(), "cancelled");
    }

    /// One row of a 100 000-row batch (what a point lookup's filter leaves): its buffers
    /// are shared with the whole batch, but only the row is sent and counted.
    fn one_row_of_many() -> datafusion::execution::SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", DataType::Float64, false),
        ]));
        let keys = arrow::array::Int64Array::from_iter_values(0..100_000);
        let values = arrow::array::Float64Array::from_iter_values((0..100_000).map(f64::from));
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(keys), Arc::new(values)])
                .unwrap();
        assert!(batch.get_array_memory_size() > 1_000_000);
        let row = batch.slice(70_000, 1);
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(vec![Ok(row)]),
        ))
    }

    #[tokio::test]
    async fn a_sliced_row_counts_the_bytes_sent_and_passes_a_small_cap() {
        let log = QueryLog::start(None, "u", "SELECT k, v FROM t WHERE k = 70000");
        let input = one_row_of_many();
        let schema = input.schema();
        let stream = encode(input, schema, Arc::clone(&log), (), Some(100_000));
        let messages = stream.collect::<Vec<_>>().await;
        assert!(messages.iter().all(Result::is_ok), "{messages:?}");
        let sent: usize = messages
            .iter()
            .map(|m| {
                m.as_ref()
                    .map_or(0, |d| d.data_header.len() + d.data_body.len())
            })
            .sum();
        let counted = log.bytes.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(counted, sent as u64);
        assert!(counted <= 1024, "a 1-row answer counted {counted} bytes");
        assert_eq!(log.status(), "ok");
    }

    #[tokio::test]
    async fn a_result_past_the_cap_ends_in_resource_exhausted() {
        let log = QueryLog::start(None, "u", "SELECT x");
        let input = two_batches();
        let schema = input.schema();
        // The schema message alone is well over 16 bytes.
        let stream = encode(input, schema, Arc::clone(&log), (), Some(16));
        let messages = stream.collect::<Vec<_>>().await;
        assert_eq!(messages.len(), 1, "nothing is sent past the cap");
        let status = messages[0].as_ref().unwrap_err();
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert_eq!(log.status(), "error");
    }

    #[test]
    fn log_status() {
        let log = QueryLog::start(None, "u", "SELECT 1");
        assert_eq!(log.status(), "cancelled", "dropped before the end");
        log.finish();
        assert_eq!(log.status(), "ok");
        log.fail(&tonic::Status::invalid_argument("bad"));
        assert_eq!(log.status(), "error");
        assert_eq!(log.failed.get().unwrap(), "InvalidArgument: bad");
    }
}
