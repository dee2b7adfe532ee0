//! Execution of planned statements: the query runtime, the concurrency slots and the registry of
//! running queries that `CancelFlightInfo` and the status action read.
//!
//! ```text
//!   Planned::Query ─► slots (≤ max_queries_per_user, ≤ max_concurrent_queries; else wait ≤
//!                     queue_timeout) ─► query runtime: physical plan ─► stream ─► bounded channel
//!                  ─► results::encode (≤ max_result_bytes, as sent); all within query.timeout
//!                     registered under (token, ticket) until the response stream ends
//!   Planned::StateChange, bulk ingest ─► the same slots, timeout and kill (run_admitted)
//!                  ─► SessionContext::execute_logical_plan ─► collected, no rows
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::common::DataFusionError;
use datafusion::logical_expr::{LogicalPlan, Statement};
use futures::StreamExt;
use tokio::sync::Semaphore;
use tonic::Status;

use datafusion::execution::TaskContext;

use super::results::{self, FlightDataStream, QueryLog, flight_schema};
use super::sessions::Session;
use super::status::to_status;
use crate::distributed::channels::{WorkerFailures, fail_fast};
use crate::message::{InvalidSetting, LimitExceeded};

/// Running queries by (session token, ticket bytes).
type Registry = Mutex<HashMap<(String, Vec<u8>), tokio::task::AbortHandle>>;

/// The bounds queries run under (`[server]` and `[query]`).
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Queries running at once (≥ 1).
    pub max_concurrent_queries: usize,
    /// Queries of one user running at once; 0: no per-user bound.
    pub max_queries_per_user: usize,
    /// How long a query waits for its slots before `ResourceExhausted`.
    pub queue_timeout: Duration,
    /// `query.timeout`: longest a query runs, start to last row sent.
    pub timeout: Option<Duration>,
    /// `query.max_result_bytes`: largest result, in bytes sent (`results::encode`).
    pub max_result_bytes: Option<u64>,
    /// `server.stream_idle_timeout`: how long a result may wait for its client to read
    /// before the query ends and frees its slots.
    pub stream_idle_timeout: Option<Duration>,
}

/// Runs planned statements (module docs). One per service.
#[derive(Debug)]
pub struct Execution {
    slots: Arc<Semaphore>,
    limits: Limits,
    /// Per-user slots (`max_queries_per_user`), by user name.
    user_slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    running: Arc<Registry>,
}

impl Execution {
    /// Queries run under `limits`: the rest wait up to its queue timeout.
    pub fn new(mut limits: Limits) -> Self {
        limits.max_concurrent_queries = limits.max_concurrent_queries.max(1);
        Self {
            slots: Arc::new(Semaphore::new(limits.max_concurrent_queries)),
            limits,
            user_slots: Mutex::default(),
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

    /// A slot of `user` (when users are bounded) and then one of the server, both within
    /// the queue timeout.
    async fn acquire_slots(&self, user: &str) -> Result<Slots, Status> {
        let deadline = tokio::time::Instant::now() + self.limits.queue_timeout;
        let user_slot = match self.limits.max_queries_per_user {
            0 => None,
            max => {
                let slots = Arc::clone(
                    self.user_slots
                        .lock()
                        .expect("user slots")
                        .entry(user.to_string())
                        .or_insert_with(|| Arc::new(Semaphore::new(max))),
                );
                match tokio::time::timeout_at(deadline, slots.acquire_owned()).await {
                    Ok(Ok(permit)) => Some(permit),
                    _ => {
                        return Err(Status::resource_exhausted(format!(
                            "too many concurrent queries of user {user} (max {max}); retry later"
                        )));
                    }
                }
            }
        };
        let wait = Arc::clone(&self.slots).acquire_owned();
        match tokio::time::timeout_at(deadline, wait).await {
            Ok(Ok(permit)) => Ok(Slots {
                _server: permit,
                _user: user_slot,
            }),
            _ => Err(Status::resource_exhausted(format!(
                "too many concurrent queries (max {}); retry later",
                self.limits.max_concurrent_queries
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
        // Logged (and listed as FAILED) also when it never gets its slots.
        let log = QueryLog::start(session.history(), &session.user, sql);
        // `kill_query` ends it from here on, queued or running (`query_control.rs`).
        let (kill_tx, mut kill_rx) = tokio::sync::oneshot::channel();
        log.killable(kill_tx);
        // `kill_query` takes no slot: a user whose slots a runaway query holds can end it.
        let slot = !crate::query_control::is_kill(&plan);
        let permit = self.admit(session, &log, slot, &mut kill_rx).await?;
        let timeout = self.timeout_of(session);
        let max_bytes = self.limits.max_result_bytes;
        let idle = self.limits.stream_idle_timeout;
        // The slots go with the query's task: a result its client stopped reading frees them
        // when the task gives up on it, even while the response stream itself lingers.
        let slots = permit;
        let started = std::time::Instant::now();
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
                let _slots = slots;
                let work = async {
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
                        let sent = match idle {
                            None => batches_tx.send(batch).await.is_ok(),
                            Some(idle) => {
                                match tokio::time::timeout(idle, batches_tx.send(batch)).await {
                                    Ok(sent) => sent.is_ok(),
                                    Err(_) => {
                                        tracing::warn!(
                                            idle_secs = idle.as_secs(),
                                            "a client stopped reading its result; the query ends"
                                        );
                                        false
                                    }
                                }
                            }
                        };
                        if !sent {
                            break; // the client went away, stopped reading, or cancelled
                        }
                    }
                };
                let limited = async {
                    match timeout {
                        None => {
                            work.await;
                            None
                        }
                        Some(limit) => tokio::time::timeout(limit, work).await.err().map(|_| {
                            DataFusionError::External(Box::new(LimitExceeded::Timeout(limit)))
                        }),
                    }
                };
                let ended = tokio::select! {
                    ended = limited => ended,
                    Ok(killed) = kill_rx => Some(killed.into_error()),
                };
                if let Some(e) = ended {
                    let _ = batches_tx.send(Err(e)).await;
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
            // The timeout ended the task while it was still planning.
            Err(_) if timeout.is_some_and(|t| started.elapsed() >= t) => {
                let limit = LimitExceeded::Timeout(timeout.unwrap_or_default());
                let status = to_status(DataFusionError::External(Box::new(limit)));
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
        };
        let batches = fail_fast(
            tokio_stream::wrappers::ReceiverStream::new(batches_rx).boxed(),
            failures,
        );
        let input = Box::pin(
            datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, batches),
        );
        Ok(results::encode(input, announced, log, cleanup, max_bytes))
    }

    /// Runs a statement that changes state (DDL, `SET`, `INSERT`, procedures) to completion
    /// and logs it (`sql`); returns the rows affected (`INSERT`: rows written; else 0). It
    /// takes its slots and obeys the timeout and `kill_query` as a query does
    /// ([`Self::run_admitted`]); statements that only change the session (`SET`, `PREPARE`)
    /// take no slot.
    ///
    /// Errors: the statement's, mapped by [`to_status`]; no slot, the timeout, a kill.
    pub async fn run_update(
        &self,
        session: &Session,
        plan: LogicalPlan,
        sql: &str,
    ) -> Result<i64, Status> {
        // A SET that fails names a setting that does not exist or a value it does not take:
        // bad input, whatever error the setting's parser gave (DataFusion's numeric settings
        // fail with the standard library's parse errors).
        let setting = match &plan {
            LogicalPlan::Statement(Statement::SetVariable(s)) => {
                Some((s.variable.clone(), s.value.clone()))
            }
            _ => None,
        };
        let session_only =
            matches!(&plan, LogicalPlan::Statement(s) if !matches!(s, Statement::Execute(_)));
        let work = async {
            let result = async {
                if let Some(ran) = crate::sql::run_own_statement(&session.ctx, &plan).await {
                    return match ran? {
                        None => Ok(vec![]),
                        Some(rows) => Ok(vec![crate::sql::statement::count_batch(rows)?]),
                    };
                }
                session
                    .ctx
                    .execute_logical_plan(plan)
                    .await?
                    .collect()
                    .await
            }
            .await;
            result.map_err(|source| match setting {
                Some((key, value)) => {
                    Status::invalid_argument(InvalidSetting { key, value, source }.to_string())
                }
                None => to_status(source),
            })
        };
        let batches = self.run_admitted(session, sql, !session_only, work).await?;
        Ok(rows_affected(&batches))
    }

    /// Runs `work`, a statement that returns no result stream (DDL, DML, procedures, bulk
    /// ingest), as a query runs: logged under `sql`, killable, within its user's and the
    /// server's slots (`slot`: false for statements that only change the session) and the
    /// timeout (the session's own within the server's). Cut short by the timeout or a kill, a
    /// write commits nothing: its files stay behind for `remove_orphan_files`.
    ///
    /// Errors: `work`'s; `ResourceExhausted` with no slot within the queue timeout;
    /// `DeadlineExceeded`; `Cancelled` when killed.
    pub async fn run_admitted<T>(
        &self,
        session: &Session,
        sql: &str,
        slot: bool,
        work: impl std::future::Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        let log = QueryLog::start(session.history(), &session.user, sql);
        let (kill_tx, mut kill_rx) = tokio::sync::oneshot::channel();
        log.killable(kill_tx);
        let _slots = self.admit(session, &log, slot, &mut kill_rx).await?;
        let timeout = self.timeout_of(session);
        let limited = async {
            match timeout {
                None => work.await,
                Some(limit) => match tokio::time::timeout(limit, work).await {
                    Ok(done) => done,
                    Err(_) => Err(to_status(DataFusionError::External(Box::new(
                        LimitExceeded::Timeout(limit),
                    )))),
                },
            }
        };
        let result = tokio::select! {
            done = limited => done,
            Ok(killed) = kill_rx => Err(to_status(killed.into_error())),
        };
        log.finish();
        result.inspect_err(|status| log.fail(status))
    }

    /// The slots of a statement of `session` (`slot`: it needs them), waited for as
    /// `QUEUED` until they come, the queue timeout passes or `kill_query` ends it (`log`
    /// records the failure).
    ///
    /// Errors: `ResourceExhausted` past the queue timeout; `Cancelled` when killed.
    async fn admit(
        &self,
        session: &Session,
        log: &QueryLog,
        slot: bool,
        kill: &mut tokio::sync::oneshot::Receiver<crate::query_control::QueryKilled>,
    ) -> Result<Option<Slots>, Status> {
        if !slot {
            return Ok(None);
        }
        log.queued(true);
        let acquired = tokio::select! {
            acquired = self.acquire_slots(&session.user) => acquired,
            Ok(killed) = kill => Err(to_status(killed.into_error())),
        };
        log.queued(false);
        acquired.map(Some).inspect_err(|status| log.fail(status))
    }

    /// The timeout of a statement of `session`: its own (`SET iceflight.query.timeout`)
    /// within the server's.
    fn timeout_of(&self, session: &Session) -> Option<Duration> {
        let options = session.ctx.state().config_options().clone();
        let own = iceflight_scan::IceflightOptions::of(&options)
            .query
            .timeout
            .0;
        match (self.limits.timeout, own) {
            (Some(server), Some(own)) => Some(server.min(own)),
            (server, own) => server.or(own),
        }
    }
}

/// The concurrency slots a query holds while it runs: the server's and its user's.
struct Slots {
    _server: tokio::sync::OwnedSemaphorePermit,
    _user: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Unregisters a running query and stops its task (which releases its concurrency slots) when
/// its response stream ends or is dropped.
struct RunningGuard {
    running: Arc<Registry>,
    key: (String, Vec<u8>),
    task: tokio::task::AbortHandle,
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
            // As the main runtime's (`main.rs`): expressions chain or nest up to about 2 000
            // operators.
            .thread_stack_size(8 << 20)
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
