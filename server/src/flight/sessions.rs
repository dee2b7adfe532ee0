//! Flight SQL sessions: one DataFusion `SessionContext` per bearer token (current catalog and
//! schema, `SET` values), its prepared statements, its planned statements, and idle expiry.
//!
//! ```text
//!   Handshake ──► token ──► Session { user, SessionContext, prepared, planned }
//!   every call: authorization: Bearer <token> ──► Session (idle TTL refreshed)
//!   GetFlightInfo ──► Planned ──► handle (the ticket) ──► DoGet in the same session
//! ```
//!
//! A handle, prepared or planned, is 128 random bits (UUID v4) and names an entry of one
//! session only: another session's handle is unknown here. Both kinds expire after
//! `prepared_statement_ttl` unused.
//!
//! **Clients that go.** Flight SQL has no "goodbye" every client sends: ADBC sends
//! `CloseSession`, the JDBC driver 18.3 only when its URL names a catalog, and a process that
//! exits sends nothing. What the server does see is the client's TCP connection closing
//! (`connections.rs`). When the last connection a session was used on closes, the session is
//! **parked**: it leaves `system.runtime.sessions` and the server status at once; its prepared
//! statements expire as any do (`prepared_statement_ttl` unused) and its token stays valid until
//! `session_ttl` after its last use, because a gRPC client also closes a connection that is
//! merely idle (grpc-go after 30 minutes; a proxy recycling its upstream connection) and comes
//! back on a new one with the same token, which finds its session (current catalog and schema,
//! `SET` values) as it left it.
//!
//! ```text
//!   Handshake on connection c ──► live {c} ──(call on d)──► live {c, d}
//!   c and d closed ──► parked (not listed) ──(call with the token)──► live
//!                         └─(session_ttl since its last use)──► gone
//! ```

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::datatypes::{Schema, SchemaRef};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;

use super::binding::{BoundRows, Placeholders};
use super::results::flight_schema;

/// A prepared statement: its plan with placeholders, and the parameter rows the last
/// `DoPut(CommandPreparedStatementQuery)` bound for its next execution (`binding.rs`).
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Original SQL text.
    pub sql: String,
    /// Logical plan with placeholders `$1..$n`.
    pub plan: LogicalPlan,
    /// Result schema (as sent to clients).
    pub dataset_schema: SchemaRef,
    /// The placeholders: their types and the parameter schema sent to clients.
    pub placeholders: Placeholders,
    /// Rows bound for the next execution, which takes them ([`Session::take_binding`]).
    binding: Option<BoundRows>,
    last_used: Instant,
}

impl Prepared {
    /// A new statement, not yet bound.
    pub fn new(
        sql: String,
        plan: LogicalPlan,
        dataset_schema: SchemaRef,
        placeholders: Placeholders,
    ) -> Self {
        Self {
            sql,
            plan,
            dataset_schema,
            placeholders,
            binding: None,
            last_used: Instant::now(),
        }
    }
}

/// One client session.
pub struct Session {
    /// An id naming the session in `system.runtime.sessions` (not its token).
    pub id: String,
    /// When it was opened.
    pub created: std::time::SystemTime,
    /// Authenticated user (`anonymous` when auth is off).
    pub user: String,
    /// The session's DataFusion context; `SET` and session options change it.
    pub ctx: SessionContext,
    prepared: Mutex<HashMap<String, Prepared>>,
    planned: Mutex<HashMap<String, (Instant, Planned)>>,
    last_used: Mutex<Instant>,
    /// The open client connections (peer addresses) the session was used on.
    connections: Mutex<HashSet<SocketAddr>>,
    limits: SessionLimits,
    /// When the credential it was opened with expires (a JWT's `exp`); `None`: never.
    expires: Option<std::time::SystemTime>,
}

/// What one session may hold at once (`[server] max_prepared_statements`,
/// `max_pending_parameter_bytes`), so that no client grows the server's memory without bound.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    /// Prepared statements (and, apart, statements planned by `GetFlightInfo` awaiting their
    /// `DoGet`); beyond it the one used least recently is closed.
    pub max_prepared: usize,
    /// Arrow bytes of parameter rows bound and not yet executed; an upload beyond it is
    /// refused with `ResourceExhausted`.
    pub max_bound_bytes: u64,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_prepared: 1000,
            max_bound_bytes: 256 << 20,
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("user", &self.user)
            .field("session_id", &self.ctx.session_id())
            .field("prepared", &self.prepared_count())
            .finish()
    }
}

impl Session {
    /// A new session for `user`.
    /// The engine's query history, which every session's configuration carries.
    pub fn history(&self) -> Option<Arc<crate::query_history::QueryHistory>> {
        self.ctx
            .state_ref()
            .read()
            .config()
            .get_extension::<crate::query_history::QueryHistory>()
    }

    pub fn new(user: String, ctx: SessionContext) -> Self {
        Self {
            id: uuid::Uuid::new_v4().simple().to_string(),
            created: std::time::SystemTime::now(),
            user,
            ctx,
            prepared: Mutex::new(HashMap::new()),
            planned: Mutex::new(HashMap::new()),
            last_used: Mutex::new(Instant::now()),
            connections: Mutex::new(HashSet::new()),
            limits: SessionLimits::default(),
            expires: None,
        }
    }

    /// The session ends when its credential expires at `at` (a JWT's `exp`).
    pub fn with_expiry(mut self, at: std::time::SystemTime) -> Self {
        self.expires = Some(at);
        self
    }

    /// Whether its credential has expired.
    fn expired(&self) -> bool {
        self.expires
            .is_some_and(|at| std::time::SystemTime::now() >= at)
    }

    /// The session bounded by `limits`.
    pub fn with_limits(mut self, limits: SessionLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Marks the session used now, on the connection of `peer` (`None`: not a TCP connection).
    fn touch(&self, peer: Option<SocketAddr>) {
        *self.last_used.lock().expect("session lock") = Instant::now();
        if let Some(peer) = peer {
            self.connections.lock().expect("session lock").insert(peer);
        }
    }

    /// Forgets the connection of `peer`; `true` when that was the last one the session had.
    fn disconnected(&self, peer: SocketAddr) -> bool {
        let mut connections = self.connections.lock().expect("session lock");
        connections.remove(&peer) && connections.is_empty()
    }

    /// How long the session has not been used.
    pub fn idle(&self) -> Duration {
        self.last_used.lock().expect("session lock").elapsed()
    }

    /// Stores a prepared statement and returns its handle; at the session's bound the one
    /// used least recently is closed first (a client that leaks handles loses its oldest).
    pub fn add_prepared(&self, p: Prepared) -> String {
        let handle = uuid::Uuid::new_v4().simple().to_string();
        let mut map = self.prepared.lock().expect("prepared lock");
        while map.len() >= self.limits.max_prepared.max(1) {
            let Some(oldest) = map
                .iter()
                .min_by_key(|(_, p)| p.last_used)
                .map(|(h, _)| h.clone())
            else {
                break;
            };
            tracing::debug!(user = %self.user, "closing the least recently used prepared statement");
            map.remove(&oldest);
        }
        map.insert(handle.clone(), p);
        handle
    }

    /// A copy of a prepared statement of this session (refreshing its idle time), without its
    /// binding.
    pub fn prepared(&self, handle: &str) -> Option<Prepared> {
        let mut map = self.prepared.lock().expect("prepared lock");
        let p = map.get_mut(handle)?;
        p.last_used = Instant::now();
        Some(Prepared {
            binding: None,
            ..p.clone()
        })
    }

    /// Binds parameter rows to a prepared statement's next execution, replacing an earlier
    /// binding that no execution took.
    ///
    /// Errors: `NotFound` for an unknown handle; `ResourceExhausted` when the session's bound
    /// rows would pass `max_pending_parameter_bytes`.
    pub fn bind(&self, handle: &str, rows: BoundRows) -> Result<(), tonic::Status> {
        let mut map = self.prepared.lock().expect("prepared lock");
        let others: u64 = map
            .iter()
            .filter(|(h, _)| h.as_str() != handle)
            .filter_map(|(_, p)| p.binding.as_ref().map(BoundRows::bytes))
            .sum();
        let max = self.limits.max_bound_bytes;
        if others + rows.bytes() > max {
            return Err(tonic::Status::resource_exhausted(format!(
                "parameters bound in this session and not yet executed would pass {max} bytes                  (server.max_pending_parameter_bytes); execute or close prepared statements first"
            )));
        }
        match map.get_mut(handle) {
            Some(p) => {
                p.binding = Some(rows);
                p.last_used = Instant::now();
                Ok(())
            }
            None => Err(tonic::Status::not_found(
                "unknown prepared statement handle (closed, expired or of another session)",
            )),
        }
    }

    /// A prepared statement for one execution: a copy, with the rows bound to it, which no
    /// later execution sees (`None`: nothing was bound). `None` if the handle is unknown.
    pub fn take_binding(&self, handle: &str) -> Option<(Prepared, Option<BoundRows>)> {
        let mut map = self.prepared.lock().expect("prepared lock");
        let p = map.get_mut(handle)?;
        p.last_used = Instant::now();
        let rows = p.binding.take();
        Some((p.clone(), rows))
    }

    /// Removes a prepared statement; `false` if unknown.
    pub fn close_prepared(&self, handle: &str) -> bool {
        self.prepared
            .lock()
            .expect("prepared lock")
            .remove(handle)
            .is_some()
    }

    /// Number of open prepared statements.
    pub fn prepared_count(&self) -> usize {
        self.prepared.lock().expect("prepared lock").len()
    }

    /// Stores a statement planned by `GetFlightInfo`; returns its handle (the ticket). At
    /// the session's bound the one used least recently is dropped first.
    pub fn add_planned(&self, p: Planned) -> String {
        let handle = uuid::Uuid::new_v4().simple().to_string();
        let mut map = self.planned.lock().expect("planned lock");
        while map.len() >= self.limits.max_prepared.max(1) {
            let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (used, _))| *used)
                .map(|(h, _)| h.clone())
            else {
                break;
            };
            map.remove(&oldest);
        }
        map.insert(handle.clone(), (Instant::now(), p));
        handle
    }

    /// The planned statement of `handle` for `DoGet`. A query stays (a ticket may be fetched
    /// again) and its idle time is refreshed; a state change is taken, so it runs once.
    pub fn planned(&self, handle: &str) -> Option<Planned> {
        let mut map = self.planned.lock().expect("planned lock");
        let (used, p) = map.get_mut(handle)?;
        if matches!(p, Planned::StateChange { .. }) {
            return map.remove(handle).map(|(_, p)| p);
        }
        *used = Instant::now();
        Some(p.clone())
    }

    /// Number of planned statements waiting for or kept after `DoGet`.
    pub fn planned_count(&self) -> usize {
        self.planned.lock().expect("planned lock").len()
    }

    fn expire_prepared(&self, ttl: Duration) -> usize {
        self.planned
            .lock()
            .expect("planned lock")
            .retain(|_, (used, _)| used.elapsed() < ttl);
        let mut map = self.prepared.lock().expect("prepared lock");
        let before = map.len();
        map.retain(|_, p| p.last_used.elapsed() < ttl);
        before - map.len()
    }
}

/// All sessions by bearer token: the live ones and the parked ones (module docs).
#[derive(Debug)]
pub struct Sessions {
    by_token: Mutex<Tokens>,
    session_ttl: Duration,
    prepared_ttl: Duration,
    /// Sessions one user may hold, live or parked (`server.max_sessions_per_user`); 0: no
    /// bound.
    max_per_user: usize,
    expired_prepared: AtomicU64,
    /// Logins refused since the start: wrong or missing credentials, or a locked name or
    /// address (`/metrics`).
    failed_logins: AtomicU64,
}

#[derive(Debug, Default)]
struct Tokens {
    live: HashMap<String, Arc<Session>>,
    /// Sessions whose every connection closed, by token.
    parked: HashMap<String, Arc<Session>>,
    /// The client connections open now (`connections.rs`): a session records only these, so a
    /// call that arrives after its connection's end is reported cannot keep the session live.
    open: HashSet<SocketAddr>,
}

impl Tokens {
    /// Ends the parked session used least recently among those `pick` takes; whether there
    /// was one.
    fn evict_parked(&mut self, pick: impl Fn(&Session) -> bool) -> bool {
        let oldest = self
            .parked
            .iter()
            .filter(|(_, s)| pick(s))
            .max_by_key(|(_, s)| s.idle())
            .map(|(token, _)| token.clone());
        match oldest {
            Some(token) => self.parked.remove(&token).is_some(),
            None => false,
        }
    }

    /// `peer` if its connection is open.
    fn open_peer(&self, peer: Option<SocketAddr>) -> Option<SocketAddr> {
        peer.filter(|p| self.open.contains(p))
    }
}

impl Sessions {
    /// Counts a refused login.
    pub fn login_failed(&self) {
        self.failed_logins.fetch_add(1, Ordering::Relaxed);
    }

    /// Logins refused since the start.
    pub fn failed_logins(&self) -> u64 {
        self.failed_logins.load(Ordering::Relaxed)
    }

    /// Sessions idle longer than `session_ttl` and prepared statements idle longer than
    /// `prepared_ttl` are dropped by [`Self::expire`].
    pub fn new(session_ttl: Duration, prepared_ttl: Duration) -> Self {
        Self {
            by_token: Mutex::default(),
            session_ttl,
            prepared_ttl,
            max_per_user: 0,
            expired_prepared: AtomicU64::new(0),
            failed_logins: AtomicU64::new(0),
        }
    }

    /// The sessions bounded to `max` per user (0: no bound).
    pub fn with_max_per_user(mut self, max: usize) -> Self {
        self.max_per_user = max;
        self
    }

    /// Registers a session opened on the connection of `peer` and returns its new random
    /// token.
    pub fn open(
        &self,
        session: Session,
        peer: Option<SocketAddr>,
        max_sessions: usize,
    ) -> Result<String, tonic::Status> {
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.open_as(token, session, peer, max_sessions)
    }

    /// Registers a session under a token the client already holds (a JWT sent on every call)
    /// and returns it.
    ///
    /// Errors: `ResourceExhausted` at `max_sessions`.
    pub fn open_as(
        &self,
        token: String,
        session: Session,
        peer: Option<SocketAddr>,
        max_sessions: usize,
    ) -> Result<String, tonic::Status> {
        let mut tokens = self.by_token.lock().expect("sessions lock");
        // Parked sessions count, so that a client dropping its connection after each login
        // cannot open sessions without bound; at a bound, the parked session used least
        // recently makes room (its client is gone, or logs in again), and only live ones refuse.
        while max_sessions > 0 && tokens.live.len() + tokens.parked.len() >= max_sessions {
            if !tokens.evict_parked(|_| true) {
                return Err(tonic::Status::resource_exhausted(format!(
                    "too many sessions (server.max_sessions = {max_sessions}); close one (ADBC \
                     and JDBC close theirs with the connection) or retry later"
                )));
            }
        }
        let user = session.user.clone();
        while self.max_per_user > 0
            && (tokens.live.values())
                .chain(tokens.parked.values())
                .filter(|s| s.user == user)
                .count()
                >= self.max_per_user
        {
            if !tokens.evict_parked(|s| s.user == user) {
                return Err(tonic::Status::resource_exhausted(format!(
                    "too many sessions of user {user} (server.max_sessions_per_user = {}); \
                     close one or retry later",
                    self.max_per_user
                )));
            }
        }
        session.touch(tokens.open_peer(peer));
        tokens.live.insert(token.clone(), Arc::new(session));
        Ok(token)
    }

    /// The session of `token`, used now on the connection of `peer`; a parked session is live
    /// again.
    pub fn get(&self, token: &str, peer: Option<SocketAddr>) -> Option<Arc<Session>> {
        let mut tokens = self.by_token.lock().expect("sessions lock");
        let session = match tokens.live.get(token) {
            Some(s) => Arc::clone(s),
            None => {
                let s = tokens.parked.remove(token)?;
                tokens.live.insert(token.to_string(), Arc::clone(&s));
                s
            }
        };
        if session.expired() {
            tokens.live.remove(token);
            return None;
        }
        session.touch(tokens.open_peer(peer));
        Some(session)
    }

    /// A client connection from `peer` opened.
    pub fn connected(&self, peer: SocketAddr) {
        self.by_token
            .lock()
            .expect("sessions lock")
            .open
            .insert(peer);
    }

    /// The client connection of `peer` closed: each session it was the last open connection
    /// of is parked (module docs). Returns how many were.
    pub fn disconnected(&self, peer: SocketAddr) -> usize {
        let mut tokens = self.by_token.lock().expect("sessions lock");
        tokens.open.remove(&peer);
        let gone: Vec<String> = tokens
            .live
            .iter()
            .filter(|(_, s)| s.disconnected(peer))
            .map(|(token, _)| token.clone())
            .collect();
        for token in &gone {
            if let Some(session) = tokens.live.remove(token) {
                tokens.parked.insert(token.clone(), session);
            }
        }
        gone.len()
    }

    /// Ends a session; `false` if unknown.
    pub fn close(&self, token: &str) -> bool {
        let mut tokens = self.by_token.lock().expect("sessions lock");
        tokens.live.remove(token).is_some() || tokens.parked.remove(token).is_some()
    }

    /// Drops idle sessions (live or parked), prepared statements and planned statements;
    /// returns (sessions, prepared statements) dropped.
    pub fn expire(&self) -> (usize, usize) {
        let mut tokens = self.by_token.lock().expect("sessions lock");
        let before = tokens.live.len() + tokens.parked.len();
        tokens
            .live
            .retain(|_, s| s.idle() < self.session_ttl && !s.expired());
        tokens
            .parked
            .retain(|_, s| s.idle() < self.session_ttl && !s.expired());
        let sessions = before - tokens.live.len() - tokens.parked.len();
        let statements: usize = (tokens.live.values())
            .chain(tokens.parked.values())
            .map(|s| self.expire_in(s))
            .sum();
        (sessions, statements)
    }

    /// Drops the idle prepared and planned statements of one session (also one that is not
    /// registered here, such as the anonymous session); returns the prepared ones dropped.
    pub fn expire_in(&self, session: &Session) -> usize {
        let n = session.expire_prepared(self.prepared_ttl);
        self.expired_prepared.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Every live session, for `system.runtime.sessions`.
    pub fn list(&self) -> Vec<Arc<Session>> {
        self.by_token
            .lock()
            .expect("sessions lock")
            .live
            .values()
            .cloned()
            .collect()
    }

    /// `(live sessions, open prepared statements, planned statements)`.
    pub fn counts(&self) -> (usize, usize, usize) {
        let tokens = self.by_token.lock().expect("sessions lock");
        (
            tokens.live.len(),
            tokens.live.values().map(|s| s.prepared_count()).sum(),
            tokens.live.values().map(|s| s.planned_count()).sum(),
        )
    }
}

/// A statement planned by `GetFlightInfo`, waiting for `DoGet`.
#[derive(Debug, Clone)]
pub enum Planned {
    /// A query: its optimized logical plan, ready for physical planning.
    Query {
        /// SQL text (for the query log).
        sql: String,
        /// The optimized plan.
        plan: LogicalPlan,
    },
    /// DDL or `SET`: run at execute, returns no rows.
    StateChange {
        /// SQL text (for the query log).
        sql: String,
        /// The plan as the SQL planner made it (`SessionContext::execute_logical_plan` runs it).
        plan: LogicalPlan,
    },
}

impl Planned {
    /// The SQL text.
    pub fn sql(&self) -> &str {
        match self {
            Self::Query { sql, .. } | Self::StateChange { sql, .. } => sql,
        }
    }

    /// The result schema announced to the client: the plan's, in [`flight_schema`]'s types;
    /// no columns for a state change.
    pub fn schema(&self) -> SchemaRef {
        match self {
            Self::Query { plan, .. } => flight_schema(&Arc::new(plan.schema().as_arrow().clone())),
            Self::StateChange { .. } => Arc::new(Schema::empty()),
        }
    }
}

/// What `system.runtime.sessions` shows of each live session.
impl crate::system::SessionDirectory for Sessions {
    fn sessions(&self, viewer: Option<&str>) -> Vec<crate::system::SessionRow> {
        self.list()
            .iter()
            .filter(|s| viewer.is_none_or(|user| s.user == user))
            .map(|s| {
                let state = s.ctx.state_ref();
                let state = state.read();
                let catalog = &state.config().options().catalog;
                crate::system::SessionRow {
                    id: s.id.clone(),
                    user: s.user.clone(),
                    catalog: catalog.default_catalog.clone(),
                    schema: catalog.default_schema.clone(),
                    created: s.created,
                    idle: s.idle(),
                    prepared_statements: s.prepared_count(),
                }
            })
            .collect()
    }
}
