//! The queries of the engine: the running ones and the last [`KEPT`] finished, for
//! `system.runtime.queries` (`system.rs`), and their totals for `/metrics` (`metrics.rs`).
//!
//! ```text
//!   QueryLog::start ──► running (until its log is dropped: result sent, failed or cancelled)
//!   QueryLog drop   ──► finished (the last KEPT, oldest dropped first) + metrics: count by
//!                       state, latency histogram, rows and bytes sent
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use datafusion::common::DataFusionError;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// Finished queries kept for `system.runtime.queries`.
pub const KEPT: usize = 1000;

/// Upper bounds (seconds) of the latency histogram's buckets; the last bucket is unbounded.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// Where a query is (Trino's state names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryState {
    /// Waiting for a query slot (`max_concurrent_queries`, `max_queries_per_user`).
    Queued,
    /// Still running or sending rows.
    Running,
    /// Every row sent.
    Finished,
    /// Ended by an error (its message in [`QueryRecord::error`]).
    Failed,
    /// Ended by the client: cancelled, or its stream dropped before the end.
    Cancelled,
}

impl QueryState {
    /// `RUNNING`, `FINISHED`, `FAILED` or `CANCELLED`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Queued => "QUEUED",
            Self::Running => "RUNNING",
            Self::Finished => "FINISHED",
            Self::Failed => "FAILED",
            Self::Cancelled => "CANCELLED",
        }
    }
}

/// One query as `system.runtime.queries` shows it.
#[derive(Debug, Clone)]
pub struct QueryRecord {
    /// The id in the server log and in error messages.
    pub id: String,
    /// Who ran it.
    pub user: String,
    /// Its SQL text (or the command's name), at most 200 characters.
    pub query: String,
    pub state: QueryState,
    /// When it started.
    pub created: SystemTime,
    /// How long it ran (so far, when running).
    pub duration: Duration,
    /// Rows sent to the client.
    pub rows: u64,
    /// Bytes sent to the client (its Arrow IPC messages).
    pub bytes: u64,
    /// The gRPC code and message it failed with.
    pub error: Option<String>,
}

/// Metrics of finished queries, for `/metrics` (prometheus-client's live metrics, registered
/// by `metrics.rs`).
#[derive(Debug, Clone)]
pub struct QueryMetrics {
    /// Finished queries, labelled `state` (`FINISHED`, `FAILED`, `CANCELLED`).
    pub queries: Family<Vec<(String, String)>, Counter>,
    /// Their durations, seconds ([`LATENCY_BUCKETS`]).
    pub latency: Histogram,
    /// Rows sent to clients.
    pub rows: Counter,
    /// Bytes sent to clients (their Arrow IPC messages).
    pub bytes: Counter,
}

impl Default for QueryMetrics {
    fn default() -> Self {
        Self {
            queries: Family::default(),
            latency: Histogram::new(LATENCY_BUCKETS),
            rows: Counter::default(),
            bytes: Counter::default(),
        }
    }
}

/// The engine's queries (module docs). Shared by every session of one engine.
#[derive(Debug, Default)]
pub struct QueryHistory {
    running: Mutex<HashMap<String, QueryRecord>>,
    /// How to end each running query that can be killed (`query_control.rs`): its reason goes
    /// through the sender.
    kills: Mutex<HashMap<String, tokio::sync::oneshot::Sender<QueryKilled>>>,
    finished: Mutex<VecDeque<QueryRecord>>,
    /// Totals since the start.
    pub metrics: QueryMetrics,
}

impl QueryHistory {
    /// Records a query that started now.
    pub fn started(&self, id: &str, user: &str, query: &str) {
        let record = QueryRecord {
            id: id.to_string(),
            user: user.to_string(),
            query: query.to_string(),
            state: QueryState::Running,
            created: SystemTime::now(),
            duration: Duration::ZERO,
            rows: 0,
            bytes: 0,
            error: None,
        };
        self.running
            .lock()
            .expect("query history")
            .insert(id.to_string(), record);
    }

    /// Query `id` waits for (`true`) or got (`false`) its slots.
    pub fn queued(&self, id: &str, queued: bool) {
        if let Some(r) = self.running.lock().expect("query history").get_mut(id) {
            r.state = match queued {
                true => QueryState::Queued,
                false => QueryState::Running,
            };
        }
    }

    /// `kill` ends query `id` with the reason sent through it, once `kill_query` asks.
    pub fn register_kill(&self, id: &str, kill: tokio::sync::oneshot::Sender<QueryKilled>) {
        self.kills
            .lock()
            .expect("query kills")
            .insert(id.to_string(), kill);
    }

    /// Kills query `id` for `caller` (`query_control.rs`): its owner or an admin.
    ///
    /// Errors: no such running or queued query (or one that cannot be killed: a statement
    /// that changes state runs to its end); another user's query and `caller` is no admin.
    pub fn kill(
        &self,
        id: &str,
        caller: &Caller,
        message: Option<String>,
    ) -> Result<(), QueryControlError> {
        let owner = self
            .running
            .lock()
            .expect("query history")
            .get(id)
            .map(|r| r.user.clone());
        let Some(owner) = owner else {
            return Err(QueryControlError::NotFound(id.to_string()));
        };
        if owner != caller.user && !caller.admin {
            return Err(QueryControlError::NotOwner { id: id.to_string() });
        }
        let Some(kill) = self.kills.lock().expect("query kills").remove(id) else {
            return Err(QueryControlError::NotFound(id.to_string()));
        };
        let reason = QueryKilled {
            id: id.to_string(),
            by: caller.user.clone(),
            message,
        };
        // A query that ended meanwhile dropped its receiver: nothing left to kill.
        kill.send(reason)
            .map_err(|_| QueryControlError::NotFound(id.to_string()))
    }

    /// Records the end of query `id`: its state (not `Running`), duration, rows and bytes sent
    /// and error.
    pub fn ended(
        &self,
        id: &str,
        state: QueryState,
        duration: Duration,
        rows: u64,
        bytes: u64,
        error: Option<String>,
    ) {
        self.kills.lock().expect("query kills").remove(id);
        let Some(mut record) = self.running.lock().expect("query history").remove(id) else {
            return;
        };
        record.state = state;
        record.duration = duration;
        record.rows = rows;
        record.bytes = bytes;
        record.error = error;
        self.metrics
            .queries
            .get_or_create(&vec![("state".to_string(), state.name().to_string())])
            .inc();
        self.metrics.latency.observe(duration.as_secs_f64());
        self.metrics.rows.inc_by(rows);
        self.metrics.bytes.inc_by(bytes);
        let mut finished = self.finished.lock().expect("query history");
        if finished.len() == KEPT {
            finished.pop_front();
        }
        finished.push_back(record);
    }

    /// Every running query (duration so far) and the kept finished ones, oldest first.
    pub fn records(&self) -> Vec<QueryRecord> {
        let mut out: Vec<QueryRecord> = self
            .finished
            .lock()
            .expect("query history")
            .iter()
            .cloned()
            .collect();
        let mut running: Vec<QueryRecord> = self
            .running
            .lock()
            .expect("query history")
            .values()
            .map(|r| QueryRecord {
                duration: r.created.elapsed().unwrap_or_default(),
                ..r.clone()
            })
            .collect();
        running.sort_by_key(|r| r.created);
        out.extend(running);
        out
    }

    /// Queries running now.
    pub fn running(&self) -> usize {
        self.running.lock().expect("query history").len()
    }
}

/// Who asks to kill a query (from the session's `Access`, `query_control.rs`): the user, and
/// whether `[server] admins` names them.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The logged-in user (`anonymous` without login).
    pub user: String,
    /// Sees every query and session and may kill any query.
    pub admin: bool,
}

/// Why `kill_query` refused.
#[derive(Debug, thiserror::Error)]
pub enum QueryControlError {
    /// No running or queued query has that id.
    #[error("no running or queued query {0} (see system.runtime.queries)")]
    NotFound(String),
    /// The query is another user's and the caller is no admin.
    #[error(
        "query {id} belongs to another user; only its owner or an admin ([server] admins) may kill it"
    )]
    NotOwner {
        /// The query.
        id: String,
    },
}

/// The error a killed query ends with (`Cancelled` at the edge).
#[derive(Debug, thiserror::Error)]
#[error("query {id} was killed by {by}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
pub struct QueryKilled {
    /// The query.
    pub id: String,
    /// Who killed it.
    pub by: String,
    /// The message given to `kill_query`.
    pub message: Option<String>,
}

impl QueryKilled {
    /// This kill as a DataFusion error (`External`, so the type survives to the edge).
    pub fn into_error(self) -> DataFusionError {
        DataFusionError::External(Box::new(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_then_finished_with_totals() {
        let h = QueryHistory::default();
        h.started("a", "alice", "SELECT 1");
        h.started("b", "bob", "SELECT 2");
        assert_eq!(h.running(), 2);
        h.ended(
            "a",
            QueryState::Finished,
            Duration::from_millis(30),
            1,
            8,
            None,
        );
        h.ended(
            "b",
            QueryState::Failed,
            Duration::from_secs(100),
            0,
            0,
            Some("InvalidArgument: x".into()),
        );
        assert_eq!(h.running(), 0);
        let records = h.records();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].error.as_deref(), Some("InvalidArgument: x"));
        let count = |state: &str| {
            h.metrics
                .queries
                .get_or_create(&vec![("state".to_string(), state.to_string())])
                .get()
        };
        assert_eq!((count("FINISHED"), count("FAILED")), (1, 1));
        assert_eq!((h.metrics.rows.get(), h.metrics.bytes.get()), (1, 8));
        for i in 0..KEPT + 5 {
            h.started(&i.to_string(), "u", "q");
            h.ended(
                &i.to_string(),
                QueryState::Cancelled,
                Duration::ZERO,
                0,
                0,
                None,
            );
        }
        assert_eq!(h.records().len(), KEPT);
    }
}
