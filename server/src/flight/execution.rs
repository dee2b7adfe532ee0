//! Execution of planned statements: the query runtime, the concurrency slots and the registry of
//! running queries that `CancelFlightInfo` and the status action read.
//!
//! ```text
//!   Planned::Query ─► slot (≤ max_concurrent_queries, else wait ≤ queue_timeout)
//!                  ─► query runtime: physical plan ─► stream ─► bounded channel ─► results::encode
//!                     registered under (token, ticket) until the response stream ends
//!   Planned::StateChange ─► SessionContext::execute_logical_plan ─► collected, no rows
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::logical_expr::{LogicalPlan, Statement};
use futures::StreamExt;
use tokio::sync::Semaphore;
use tonic::Status;

use datafusion::execution::TaskContext;

use super::results::{self, FlightDataStream, QueryLog, flight_schema};
use super::sessions::Session;
use super::status::to_status;
use crate::distributed::channels::{WorkerFailures, fail_fast};
use crate::message::InvalidSetting;

/// Running queries by (session token, ticket bytes).
type Registry = Mutex<HashMap<(String, Vec<u8>), tokio::task::AbortHandle>>;

/// Runs planned statements (module docs). One per service.
#[derive(Debug)]
pub struct Execution {
    slots: Arc<Semaphore>,
    max_concurrent_queries: usize,
    queue_timeout: Duration,
    running: Arc<Registry>,
}

impl Execution {
    /// At most `max_concurrent_queries` (≥ 1) run at once; the rest wait up to `queue_timeout`.
    pub fn new(max_concurrent_queries: usize, queue_timeout: Duration) -> Self {
        let max = max_concurrent_queries.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max_concurrent_queries: max,
            queue_timeout,
            running: Arc::default(),
        }
    }

    /// Queries whose results are streaming now.
    pub fn running(&self) -> usize {
        self.running.lock().expect("running lock").len()
    }

    /// Cancels the queries of `token` started from any of `tickets`; whether one was running.
    pub fn cancel(&self, token: &str, tickets: &[Vec<u8>]) -> bool {
        let running = self.running.lock().expect("running lock");
        let mut cancelled = false;
        for t in tickets {
            if let Some(abort) = running.get(&(token.to_string(), t.clone())) {
                abort.abort();
                cancelled = true;
            }
        }
        cancelled
    }

    async fn acquire_slot(&self) -> Result<tokio::sync::OwnedSemaphorePermit, Status> {
        let wait = Arc::clone(&self.slots).acquire_owned();
        match tokio::time::timeout(self.queue_timeout, wait).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(Status::resource_exhausted(format!(
                "too many concurrent queries (max {}); retry later",
                self.max_concurrent_queries
            ))),
        }
    }

    /// Runs an optimized query plan and returns its encoded stream, registered for
    /// `CancelFlightInfo` under `(token, ticket)`. Physical planning and execution run on the
    /// query runtime; batches come back over a bounded channel (backpressure), so a CPU-heavy
    /// query never starves the gRPC runtime.
    ///
    /// Errors: no slot within the queue timeout (`ResourceExhausted`); physical planning or
    /// the start of execution failed (mapped by [`to_status`]).
    pub async fn stream(
        &self,
        session: &Session,
        token: &str,
        ticket: Vec<u8>,
        plan: LogicalPlan,
        sql: &str,
    ) -> Result<FlightDataStream, Status> {
        let permit = self.acquire_slot().await?;
        let log = QueryLog::start(&session.user, sql);
        // Batches go out under the schema GetFlightInfo announced (the logical plan's), which
        // clients compare field by field, nullability included.
        let announced = flight_schema(&Arc::new(plan.schema().as_arrow().clone()));
        let ctx = session.ctx.clone();
        let (batches_tx, batches_rx) = tokio::sync::mpsc::channel(2);
        let (schema_tx, schema_rx) = tokio::sync::oneshot::channel();
        // On a coordinator, the first worker this query loses ends its results at once.
        let failures = Arc::new(WorkerFailures::default());
        let task = query_runtime().spawn({
            let failures = Arc::clone(&failures);
            async move {
                let state = ctx.state();
                let stream = async {
                    let physical = state
                        .query_planner()
                        .create_physical_plan(&plan, &state)
                        .await?;
                    let config = state.config().clone().with_extension(failures);
                    let task_ctx = TaskContext::from(&state).with_session_config(config);
                    datafusion::physical_plan::execute_stream(physical, Arc::new(task_ctx))
                }
                .await;
                let mut stream = match stream {
                    Ok(s) => {
                        let _ = schema_tx.send(Ok(s.schema()));
                        s
                    }
                    Err(e) => {
                        let _ = schema_tx.send(Err(e));
                        return;
                    }
                };
                while let Some(batch) = stream.next().await {
                    if batches_tx.send(batch).await.is_err() {
                        break; // the client went away or the query was cancelled
                    }
                }
            }
        });
        let schema = match schema_rx.await {
            Ok(Ok(schema)) => schema,
            Ok(Err(e)) => {
                let status = to_status(e);
                log.fail(&status);
                return Err(status);
            }
            Err(_) => {
                let status = Status::internal("the query task stopped before it started");
                log.fail(&status);
                return Err(status);
            }
        };
        let key = (token.to_string(), ticket);
        self.running
            .lock()
            .expect("running lock")
            .insert(key.clone(), task.abort_handle());
        let cleanup = RunningGuard {
            running: Arc::clone(&self.running),
            key,
            task: task.abort_handle(),
            _permit: permit,
        };
        let batches = fail_fast(
            tokio_stream::wrappers::ReceiverStream::new(batches_rx).boxed(),
            failures,
        );
        let input = Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, batches),
        );
        Ok(results::encode(input, announced, log, cleanup))
    }

    /// Runs a statement that changes state (DDL, `SET`, `INSERT`) to completion and logs it
    /// (`sql`); returns the rows affected (`INSERT`: rows written; else 0).
    ///
    /// Errors: the statement's, mapped by [`to_status`].
    pub async fn run_update(
        session: &Session,
        plan: LogicalPlan,
        sql: &str,
    ) -> Result<i64, Status> {
        let log = QueryLog::start(&session.user, sql);
        // A SET that fails names a setting that does not exist or a value it does not take:
        // bad input, whatever error the setting's parser gave (DataFusion's numeric settings
        // fail with the standard library's parse errors).
        let setting = match &plan {
            LogicalPlan::Statement(Statement::SetVariable(s)) => {
                Some((s.variable.clone(), s.value.clone()))
            }
            _ => None,
        };
        let result = async {
            if let Some(ran) = crate::session::run_own_statement(&session.ctx, &plan).await {
                ran?;
                return Ok(vec![]);
            }
            session
                .ctx
                .execute_logical_plan(plan)
                .await?
                .collect()
                .await
        }
        .await;
        log.finish();
        let batches = result.map_err(|source| {
            let status = match setting {
                Some((key, value)) => {
                    Status::invalid_argument(InvalidSetting { key, value, source }.to_string())
                }
                None => to_status(source),
            };
            log.fail(&status);
            status
        })?;
        Ok(rows_affected(&batches))
    }
}

/// Unregisters a running query, stops its task and releases its concurrency slot when its
/// response stream ends or is dropped.
struct RunningGuard {
    running: Arc<Registry>,
    key: (String, Vec<u8>),
    task: tokio::task::AbortHandle,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.task.abort();
        self.running.lock().expect("running lock").remove(&self.key);
    }
}

/// The runtime queries execute on, one worker per core, apart from the runtime serving gRPC.
/// Kept for the life of the process (a runtime cannot be dropped from async code).
fn query_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::LazyLock<tokio::runtime::Runtime> = std::sync::LazyLock::new(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(2),
            )
            .thread_name("iceflight-query")
            .enable_all()
            .build()
            .expect("start the query runtime")
    });
    &RUNTIME
}

/// The rows a DML statement reports (its single `count` column, DataFusion's DML output); 0 for
/// statements without one.
fn rows_affected(batches: &[arrow::array::RecordBatch]) -> i64 {
    batches
        .iter()
        .filter(|b| b.num_columns() == 1 && b.schema().field(0).name() == "count")
        .filter_map(|b| {
            b.column(0)
                .as_any()
                .downcast_ref::<arrow::array::UInt64Array>()
        })
        .flat_map(|a| a.iter().flatten())
        .map(|n| i64::try_from(n).unwrap_or(i64::MAX))
        .sum()
}
