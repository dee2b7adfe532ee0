//! The Flight SQL service: arrow-flight's `FlightSqlService` decodes every command and action
//! and calls the method named after it; each method here authorizes the caller and hands the
//! command to its planner (`planner.rs` for SQL, `metadata.rs` and `sql_info.rs` for catalog
//! commands) and the result to `execution.rs` or `results.rs`.
//!
//! ```text
//!   GetFlightInfo(statement | prepared) ─► caller ─► planner ─► Planned ─► session handle ─► ticket
//!   DoGet(ticket)                       ─► caller ─► session.planned(handle) ─► execution
//!   DoPut(update)                       ─► caller ─► planner ─► Execution::run_update
//!   metadata commands                   ─► caller ─► metadata.rs ─► results::encode_batch
//! ```

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::datatypes::{Schema, SchemaRef};
use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionClosePreparedStatementRequest, ActionCreatePreparedStatementRequest,
    ActionCreatePreparedStatementResult, Any, CommandGetCatalogs, CommandGetCrossReference,
    CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys, CommandGetPrimaryKeys,
    CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandPreparedStatementQuery, CommandPreparedStatementUpdate, CommandStatementIngest,
    CommandStatementQuery, CommandStatementUpdate, DoPutPreparedStatementResult, ProstMessageExt,
    SqlInfo, TicketStatementQuery,
};
use arrow_flight::{
    Action, ActionType, CancelFlightInfoResult, CancelStatus, FlightDescriptor, FlightEndpoint,
    FlightInfo, HandshakeRequest, HandshakeResponse, Ticket,
};
use datafusion::common::DataFusionError;
use futures::{Stream, StreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use super::auth::Users;
use super::binding::{BoundRows, Placeholders};
use super::execution::{Execution, Limits};
use super::login_throttle::LoginThrottle;
use super::metadata::{self, TableTypeNames};
use super::planner;
use super::results::{self, FlightDataStream};
use super::session_options::{
    CLOSED, CloseSessionResult, ERROR, GetSessionOptionsResult, INVALID_NAME, INVALID_VALUE,
    SessionOptionValue, SetSessionOptionsError, SetSessionOptionsResult,
};
use super::sessions::Planned;
use super::sessions::{Prepared, Session, SessionLimits, Sessions};
use super::sql_info::SQL_INFO;
use super::status::to_status;
use super::{ingest, jwt};
use crate::access::{Access, Identity};
use crate::session::Engine;
use datafusion::prelude::SessionContext;
use iceflight_input::auth_header::{parse_basic, parse_bearer};
use iceflight_input::flight::{SessionAction, decode_action, handle};
use iceflight_input::parameters::ParameterMessages;

pub use iceflight_input::flight::SERVER_STATUS_ACTION;

/// Service settings from the configuration.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// Require a login (false only when the config says `auth = "none"`).
    pub auth_required: bool,
    /// Concurrency, queueing, timeout and result-size bounds of queries.
    pub limits: Limits,
    /// Failed logins that lock a user name (4 × that a peer address); 0: no throttling.
    pub max_failed_logins: u32,
    /// How long a locked user name or peer is refused.
    pub login_lockout: Duration,
    /// Sessions at once (`server.max_sessions`); 0: no bound.
    pub max_sessions: usize,
    /// Users who see and may kill every query (`server.admins`).
    pub admins: Vec<String>,
    /// The privileges of users (`server.access_rules`, `access/`).
    pub rules: Arc<crate::access::RulesSource>,
    /// The directories statements may reach files in (`query.file_roots`).
    pub files: Arc<crate::access::FileRoots>,
    /// What one session may hold (`server.max_prepared_statements`,
    /// `max_pending_parameter_bytes`).
    pub session_limits: SessionLimits,
    /// Login with bearer JWTs (`[server.jwt]`).
    pub jwt: Option<Arc<jwt::JwtLogin>>,
}

/// The Flight SQL service.
#[derive(Clone)]
pub struct IceflightService {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    users: Arc<Users>,
    /// Failed logins per user and peer (`login_throttle.rs`).
    throttle: LoginThrottle,
    sessions: Arc<Sessions>,
    auth_required: bool,
    max_sessions: usize,
    admins: Vec<String>,
    rules: Arc<crate::access::RulesSource>,
    files: Arc<crate::access::FileRoots>,
    session_limits: SessionLimits,
    jwt: Option<Arc<jwt::JwtLogin>>,
    anonymous: Arc<Session>,
    execution: Execution,
}

/// The caller: its session and the token that names it (empty for the anonymous session).
struct Caller {
    token: String,
    session: Arc<Session>,
}

impl IceflightService {
    /// Creates the service. Errors if the engine cannot make a session (bad default catalog).
    pub fn try_new(
        engine: Engine,
        users: Users,
        sessions: Arc<Sessions>,
        options: ServiceOptions,
    ) -> datafusion::error::Result<Self> {
        // Without login, anyone who reaches the port is an admin, as before privileges; the
        // file roots hold for them too.
        let ctx = user_context(
            &engine,
            &options.rules,
            &options.files,
            "anonymous",
            vec![],
            true,
        )?;
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                users: Arc::new(users),
                throttle: LoginThrottle::new(options.max_failed_logins, options.login_lockout),
                sessions,
                auth_required: options.auth_required,
                max_sessions: options.max_sessions,
                admins: options.admins,
                rules: options.rules,
                files: options.files,
                anonymous: Arc::new(
                    Session::new("anonymous".into(), ctx).with_limits(options.session_limits),
                ),
                session_limits: options.session_limits,
                jwt: options.jwt,
                execution: Execution::new(options.limits),
            }),
        })
    }

    /// A new session's context for `user` (in `groups`), with what the user may do.
    fn user_context(&self, user: &str, groups: Vec<String>) -> Result<SessionContext, Status> {
        let inner = &self.inner;
        let admin = !inner.auth_required || inner.admins.iter().any(|a| a == user);
        user_context(
            &inner.engine,
            &inner.rules,
            &inner.files,
            user,
            groups,
            admin,
        )
        .map_err(to_status)
    }

    /// Drops idle sessions and handles, the anonymous session's included; returns (sessions,
    /// prepared statements) dropped.
    pub fn expire(&self) -> (usize, usize) {
        let (sessions, prepared) = self.inner.sessions.expire();
        let anonymous = self.inner.sessions.expire_in(&self.inner.anonymous);
        (sessions, prepared + anonymous)
    }

    /// The session a request belongs to: the one its bearer token names; a bearer JWT
    /// (`[server.jwt]`) that names none yet opens one, kept under the token until it expires.
    ///
    /// Errors: `Unauthenticated` for a missing, unknown, expired or invalid credential.
    async fn caller<T>(&self, req: &Request<T>) -> Result<Caller, Status> {
        let header = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        match header.and_then(parse_bearer) {
            Some(token) => match self.inner.sessions.get(token, req.remote_addr()) {
                Some(session) => Ok(Caller {
                    token: token.to_string(),
                    session,
                }),
                None if self.inner.jwt.is_some() && jwt::looks_like_jwt(token) => {
                    let session = self.jwt_session(token, req.remote_addr()).await?;
                    self.inner.sessions.open_as(
                        token.to_string(),
                        session,
                        req.remote_addr(),
                        self.inner.max_sessions,
                    )?;
                    let session = self
                        .inner
                        .sessions
                        .get(token, req.remote_addr())
                        .ok_or_else(|| Status::unauthenticated("the JWT has expired"))?;
                    Ok(Caller {
                        token: token.to_string(),
                        session,
                    })
                }
                None => Err(Status::unauthenticated(
                    "unknown or expired session token; log in again (a password goes in the \
                     handshake as HTTP Basic with the user name, not as a bearer token)",
                )),
            },
            None if self.inner.auth_required => Err(Status::unauthenticated(
                "missing credentials: log in with user and password",
            )),
            None => Ok(Caller {
                token: String::new(),
                session: Arc::clone(&self.inner.anonymous),
            }),
        }
    }

    /// A new session for the user a bearer JWT names, ending when the token expires; a token
    /// that does not verify counts as a failed login of its peer.
    ///
    /// Errors: `Unauthenticated` naming why the token is refused; a locked peer.
    async fn jwt_session(
        &self,
        token: &str,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<Session, Status> {
        let Some(login) = &self.inner.jwt else {
            return Err(Status::unauthenticated("JWT login is not configured"));
        };
        let peer_ip = peer.map(|a| a.ip());
        if let Err(locked) = self.inner.throttle.check(None, peer_ip) {
            self.inner.sessions.login_failed();
            return Err(Status::unauthenticated(locked.to_string()));
        }
        let identity = match login.verify(token).await {
            Ok(identity) => identity,
            Err(e) => {
                self.inner.throttle.failed(None, peer_ip);
                self.inner.sessions.login_failed();
                let peer = peer.map(|a| a.to_string()).unwrap_or_default();
                tracing::warn!(%peer, reason = %e, "JWT login failed");
                return Err(Status::unauthenticated(e.to_string()));
            }
        };
        let ctx = self.user_context(&identity.user, identity.groups)?;
        Ok(Session::new(identity.user, ctx)
            .with_limits(self.inner.session_limits)
            .with_expiry(identity.expires))
    }

    /// `GetFlightInfo` of a planned statement: stores it in the caller's session; the ticket is
    /// its handle.
    fn planned_info(
        caller: &Caller,
        planned: Planned,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = planned.schema();
        let handle = caller.session.add_planned(planned);
        let ticket = TicketStatementQuery {
            statement_handle: handle.into_bytes().into(),
        };
        let info = Self::flight_info(&schema, ticket.as_any().encode_to_vec(), descriptor)?;
        Ok(Response::new(info))
    }

    /// `DoGet` of a planned statement: streams a query; runs a state change (no rows). The
    /// plan is checked again first: the rules may have changed since `GetFlightInfo`, and a
    /// query's ticket may be fetched again later.
    async fn execute(
        &self,
        caller: &Caller,
        planned: Planned,
        ticket: Vec<u8>,
    ) -> Result<Response<FlightDataStream>, Status> {
        if let Some(access) = Access::of_context(&caller.session.ctx) {
            let (Planned::Query { plan, .. } | Planned::StateChange { plan, .. }) = &planned;
            crate::access::plan::check(&access, &caller.session.ctx.state(), plan)
                .map_err(to_status)?;
        }
        match planned {
            Planned::Query { sql, plan } => {
                let session = &caller.session;
                let stream = self
                    .inner
                    .execution
                    .stream(session, &caller.token, ticket, plan, &sql)
                    .await?;
                Ok(Response::new(stream))
            }
            Planned::StateChange { sql, plan } => {
                self.inner
                    .execution
                    .run_update(&caller.session, plan, &sql)
                    .await?;
                Ok(Response::new(results::encode_batch(
                    RecordBatch::new_empty(Arc::new(Schema::empty())),
                )))
            }
        }
    }

    /// `GetFlightInfo` for a metadata command: authorize, then one endpoint whose ticket is the
    /// command itself.
    async fn command_info<C: ProstMessageExt>(
        &self,
        command: &C,
        schema: SchemaRef,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.caller(&request).await?;
        let info = Self::flight_info(
            &schema,
            command.as_any().encode_to_vec(),
            request.into_inner(),
        )?;
        Ok(Response::new(info))
    }

    /// `DoGet` of a result with no rows (key commands: Iceberg tables declare no keys).
    async fn empty_result(
        &self,
        schema: SchemaRef,
        request: &Request<Ticket>,
    ) -> Result<Response<FlightDataStream>, Status> {
        self.caller(request).await?;
        Ok(Response::new(results::encode_batch(
            RecordBatch::new_empty(schema),
        )))
    }

    fn flight_info(
        schema: &SchemaRef,
        ticket: Vec<u8>,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let endpoint = FlightEndpoint::new().with_ticket(Ticket::new(ticket));
        FlightInfo::new()
            .try_with_schema(schema.as_ref())
            .map_err(|e| Status::internal(e.to_string()))
            .map(|i| {
                i.with_endpoint(endpoint)
                    .with_descriptor(descriptor)
                    .with_total_records(-1)
                    .with_total_bytes(-1)
            })
    }

    fn prepared(session: &Session, bytes: &[u8]) -> Result<(String, Prepared), Status> {
        let handle = prepared_handle(bytes)?;
        session
            .prepared(handle)
            .map(|p| (handle.to_string(), p))
            .ok_or_else(unknown_prepared)
    }

    /// The prepared statement of `bytes` for one execution, with the rows bound to it by the
    /// last `DoPut(CommandPreparedStatementQuery)`, which later executions no longer see.
    fn prepared_for_execution(
        session: &Session,
        bytes: &[u8],
    ) -> Result<(Prepared, Option<BoundRows>), Status> {
        session
            .take_binding(prepared_handle(bytes)?)
            .ok_or_else(unknown_prepared)
    }
}

/// A session of `engine` for `user` in `groups` (an admin or not) under `rules`, reaching files
/// under `files` (`access/`).
///
/// Errors: the engine's session errors.
fn user_context(
    engine: &Engine,
    rules: &Arc<crate::access::RulesSource>,
    files: &Arc<crate::access::FileRoots>,
    user: &str,
    groups: Vec<String>,
    admin: bool,
) -> datafusion::error::Result<SessionContext> {
    let identity = Identity {
        user: user.to_string(),
        groups,
    };
    let access = Access::new(identity, admin, Arc::clone(rules), Arc::clone(files));
    engine.user_session(Arc::new(access))
}

/// The stream a handshake answers with.
type HandshakeStream = Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>;

/// The handshake's answer: the session token, in the payload and as the bearer header ADBC
/// reads.
fn handshake_answer(token: String) -> Result<Response<HandshakeStream>, Status> {
    let response = HandshakeResponse {
        protocol_version: 0,
        payload: token.clone().into(),
    };
    let mut resp: Response<HandshakeStream> =
        Response::new(Box::pin(futures::stream::once(async move { Ok(response) })));
    let value = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|e| Status::internal(e.to_string()))?;
    resp.metadata_mut().insert("authorization", value);
    Ok(resp)
}

/// How the caller names table types ([`TableTypeNames`]), from its gRPC user agent.
fn table_type_names<T>(request: &Request<T>) -> TableTypeNames {
    let agent = request
        .metadata()
        .get("user-agent")
        .and_then(|v| v.to_str().ok());
    TableTypeNames::for_user_agent(agent)
}

fn prepared_handle(bytes: &[u8]) -> Result<&str, Status> {
    handle(bytes, "prepared statement").map_err(|e| Status::invalid_argument(e.to_string()))
}

fn unknown_prepared() -> Status {
    Status::not_found("unknown prepared statement handle (closed, expired or of another session)")
}

/// The parameter rows a client uploads in a `DoPut`, cast for `placeholders`.
///
/// Errors: `InvalidArgument` for an upload that is too large, not Arrow IPC, of another column
/// count, or with a value that does not fit its placeholder.
async fn uploaded_rows(
    messages: PeekableFlightDataStream,
    placeholders: &Placeholders,
) -> Result<BoundRows, Status> {
    let mut upload = ParameterMessages::default();
    let mut messages = messages;
    while let Some(message) = messages.next().await {
        upload
            .push(message?)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
    }
    let rows = upload
        .decode(placeholders.len())
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    placeholders.rows(rows)
}

fn action_result(bytes: Vec<u8>) -> Response<<IceflightService as FlightService>::DoActionStream> {
    let result = arrow_flight::Result { body: bytes.into() };
    Response::new(Box::pin(futures::stream::once(async move { Ok(result) })))
}

#[tonic::async_trait]
impl FlightSqlService for IceflightService {
    type FlightService = IceflightService;

    async fn do_handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<
        Response<Pin<Box<dyn Stream<Item = Result<HandshakeResponse, Status>> + Send>>>,
        Status,
    > {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok());
        let peer_ip = request.remote_addr().map(|a| a.ip());
        let peer = request
            .remote_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "unknown".into());
        // A bearer JWT (`[server.jwt]`): its session ends when the token does.
        if let Some(token) = header.and_then(parse_bearer)
            && self.inner.jwt.is_some()
            && jwt::looks_like_jwt(token)
        {
            let session = self.jwt_session(token, request.remote_addr()).await?;
            let token = self.inner.sessions.open(
                session,
                request.remote_addr(),
                self.inner.max_sessions,
            )?;
            return handshake_answer(token);
        }
        let user = match header.and_then(parse_basic) {
            Some((user, password)) if self.inner.auth_required => {
                if let Err(locked) = self.inner.throttle.check(Some(&user), peer_ip) {
                    self.inner.sessions.login_failed();
                    tracing::warn!(%user, %peer, reason = %locked, "login refused");
                    return Err(Status::unauthenticated(locked.to_string()));
                }
                // argon2 is CPU-bound: off the runtime's threads.
                let users = Arc::clone(&self.inner.users);
                let name = user.clone();
                let verified = tokio::task::spawn_blocking(move || users.verify(&name, &password))
                    .await
                    .unwrap_or(false);
                if !verified {
                    self.inner.throttle.failed(Some(&user), peer_ip);
                    self.inner.sessions.login_failed();
                    tracing::warn!(%user, %peer, reason = "invalid user name or password", "login failed");
                    return Err(Status::unauthenticated("invalid user name or password"));
                }
                self.inner.throttle.succeeded(&user);
                user
            }
            Some((user, _)) => user,
            None if self.inner.auth_required => {
                let reason = if header.is_some() {
                    "malformed Basic credentials"
                } else {
                    "no credentials"
                };
                self.inner.sessions.login_failed();
                tracing::warn!(%peer, reason, "login failed");
                return Err(Status::unauthenticated(
                    "missing credentials: use HTTP Basic user and password",
                ));
            }
            None => "anonymous".to_string(),
        };
        let ctx = self.user_context(&user, self.inner.users.groups(&user))?;
        let token = self.inner.sessions.open(
            Session::new(user, ctx).with_limits(self.inner.session_limits),
            request.remote_addr(),
            self.inner.max_sessions,
        )?;
        handshake_answer(token)
    }

    async fn do_get_fallback(
        &self,
        request: Request<Ticket>,
        message: Any,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        Err(Status::invalid_argument(format!(
            "unknown ticket type {}",
            message.type_url
        )))
    }

    // Statements

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request).await?;
        let planned = planner::plan_sql(&caller.session, &query.query).await?;
        Self::planned_info(&caller, planned, request.into_inner())
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let planned = handle(&ticket.statement_handle, "statement")
            .ok()
            .and_then(|handle| caller.session.planned(handle))
            .ok_or_else(|| {
                Status::not_found(
                    "unknown statement ticket (expired, already run, or of another session); \
                     call GetFlightInfo again",
                )
            })?;
        let raw_ticket = request.get_ref().ticket.to_vec();
        self.execute(&caller, planned, raw_ticket).await
    }

    async fn do_put_statement_update(
        &self,
        command: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request).await?;
        let plan = planner::logical_plan(&caller.session, &command.query).await?;
        self.inner
            .execution
            .run_update(&caller.session, plan, &command.query)
            .await
    }

    async fn do_put_statement_ingest(
        &self,
        command: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request).await?;
        let catalogs = self.inner.engine.catalogs();
        let label = format!("INGEST INTO {}", command.table);
        let work = ingest::ingest(&caller.session, catalogs, command, request.into_inner());
        self.inner
            .execution
            .run_admitted(&caller.session, &label, true, work)
            .await
    }

    // Prepared statements

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let caller = self.caller(&request).await?;
        let sql = planner::number_placeholders(&query.query);
        let plan = planner::logical_plan(&caller.session, &sql).await?;
        // A state change (DDL, SET, INSERT) announces no columns, as its statement does: the
        // JDBC driver then runs it as an update (DoPut), which answers the rows it wrote.
        let dataset_schema = match crate::sql::is_state_change(&plan) {
            true => Arc::new(Schema::empty()),
            false => results::flight_schema(&Arc::new(plan.schema().as_arrow().clone())),
        };
        let placeholders = Placeholders::of(&plan)?;
        let result = ActionCreatePreparedStatementResult {
            prepared_statement_handle: Default::default(),
            dataset_schema: planner::schema_bytes(&dataset_schema)?,
            parameter_schema: planner::schema_bytes(placeholders.schema())?,
        };
        let handle = caller.session.add_prepared(Prepared::new(
            query.query,
            plan,
            dataset_schema,
            placeholders,
        ));
        Ok(ActionCreatePreparedStatementResult {
            prepared_statement_handle: handle.into_bytes().into(),
            ..result
        })
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let caller = self.caller(&request).await?;
        let (prepared, rows) =
            Self::prepared_for_execution(&caller.session, &cmd.prepared_statement_handle)?;
        let planned =
            match planner::plan_prepared(&caller.session, &prepared, rows.as_ref()).await? {
                // ADBC executes a prepared statement with GetFlightInfo alone (planner.rs); a
                // client that fetches anyway gets the command back as its ticket, which DoGet
                // answers with no rows (do_get_prepared_statement).
                // A write's rows affected go in `total_records`, which ADBC reports as the
                // DB-API cursor's `rowcount` (its Go driver's ExecuteQuery answers it).
                Planned::StateChange { sql, plan } => {
                    let dml = matches!(plan, datafusion::logical_expr::LogicalPlan::Dml(_))
                        || iceflight_catalog::tables::CreateTableWith::of(&plan)
                            .is_some_and(|c| c.query.is_some());
                    let written = self
                        .inner
                        .execution
                        .run_update(&caller.session, plan, &sql)
                        .await?;
                    let empty = Arc::new(Schema::empty());
                    let ticket = cmd.as_any().encode_to_vec();
                    let mut info = Self::flight_info(&empty, ticket, request.into_inner())?;
                    if dml || written > 0 {
                        info = info.with_total_records(written);
                    }
                    return Ok(Response::new(info));
                }
                query => query,
            };
        Self::planned_info(&caller, planned, request.into_inner())
    }

    async fn do_get_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        // Our tickets are statement handles; a client that sends the command itself is
        // planned here. A state change ran at GetFlightInfo (with its binding, used up there):
        // its fetch has no rows.
        let caller = self.caller(&request).await?;
        let (_, prepared) = Self::prepared(&caller.session, &cmd.prepared_statement_handle)?;
        if crate::sql::is_state_change(&prepared.plan) {
            return Ok(Response::new(results::encode_batch(
                RecordBatch::new_empty(Arc::new(Schema::empty())),
            )));
        }
        let (prepared, rows) =
            Self::prepared_for_execution(&caller.session, &cmd.prepared_statement_handle)?;
        let planned = planner::plan_prepared(&caller.session, &prepared, rows.as_ref()).await?;
        let raw_ticket = request.get_ref().ticket.to_vec();
        self.execute(&caller, planned, raw_ticket).await
    }

    async fn do_put_prepared_statement_query(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let caller = self.caller(&request).await?;
        let (handle, prepared) = Self::prepared(&caller.session, &cmd.prepared_statement_handle)?;
        let rows = uploaded_rows(request.into_inner(), &prepared.placeholders)
            .await
            .map_err(|s| planner::failed(&caller.session, &prepared.sql, s))?;
        caller
            .session
            .bind(&handle, rows)
            .map_err(|s| planner::failed(&caller.session, &prepared.sql, s))?;
        Ok(DoPutPreparedStatementResult {
            prepared_statement_handle: Some(handle.into_bytes().into()),
        })
    }

    /// An update's parameters are the rows of its own `DoPut` stream (ADBC's `executemany`,
    /// JDBC's `executeUpdate` and `executeBatch`); all of them run as one statement, one
    /// snapshot, and the answer is the rows changed by all (`binding.rs`). A stream without
    /// rows runs with the rows a `DoPut(CommandPreparedStatementQuery)` bound and no execution
    /// used yet (arrow-rs's client binds that way, then sends the update empty); either way
    /// that binding is used up here.
    async fn do_put_prepared_statement_update(
        &self,
        cmd: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let caller = self.caller(&request).await?;
        let (_, prepared) = Self::prepared(&caller.session, &cmd.prepared_statement_handle)?;
        let sent = uploaded_rows(request.into_inner(), &prepared.placeholders)
            .await
            .map_err(|s| planner::failed(&caller.session, &prepared.sql, s))?;
        let (prepared, pending) =
            Self::prepared_for_execution(&caller.session, &cmd.prepared_statement_handle)?;
        let rows = match sent.is_empty() {
            true => pending,
            false => Some(sent),
        };
        let plan = match planner::plan_prepared(&caller.session, &prepared, rows.as_ref()).await? {
            Planned::StateChange { plan, .. } | Planned::Query { plan, .. } => plan,
        };
        self.inner
            .execution
            .run_update(&caller.session, plan, &prepared.sql)
            .await
    }

    async fn do_action_close_prepared_statement(
        &self,
        query: ActionClosePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<(), Status> {
        let caller = self.caller(&request).await?;
        // Closing is idempotent: a handle that already expired is simply gone.
        if let Ok(handle) = handle(&query.prepared_statement_handle, "prepared statement") {
            caller.session.close_prepared(handle);
        }
        Ok(())
    }

    // Metadata

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let batch = metadata::catalogs(&caller.session.ctx, query).map_err(to_status)?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let batch = metadata::db_schemas(&caller.session.ctx, query).map_err(to_status)?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let names = table_type_names(&request);
        let batch = metadata::tables(&caller.session.ctx, query, names)
            .await
            .map_err(to_status)?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        let batch = metadata::table_types(query, table_type_names(&request)).map_err(to_status)?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder(&SQL_INFO).schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        let batch = query
            .into_builder(&SQL_INFO)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder(&metadata::XDBC_TYPES).schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.caller(&request).await?;
        let batch = query
            .into_builder(&metadata::XDBC_TYPES)
            .build()
            .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::primary_keys_schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        let caller = self.caller(&request).await?;
        let batch = metadata::primary_keys(&caller.session.ctx, &query)
            .await
            .map_err(to_status)?;
        Ok(Response::new(results::encode_batch(batch)))
    }

    async fn get_flight_info_exported_keys(
        &self,
        query: CommandGetExportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::foreign_keys_schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.empty_result(metadata::foreign_keys_schema(), &request)
            .await
    }

    async fn get_flight_info_imported_keys(
        &self,
        query: CommandGetImportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::foreign_keys_schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.empty_result(metadata::foreign_keys_schema(), &request)
            .await
    }

    async fn get_flight_info_cross_reference(
        &self,
        query: CommandGetCrossReference,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = metadata::foreign_keys_schema();
        self.command_info(&query, schema, request).await
    }

    async fn do_get_cross_reference(
        &self,
        _query: CommandGetCrossReference,
        request: Request<Ticket>,
    ) -> Result<Response<<Self as FlightService>::DoGetStream>, Status> {
        self.empty_result(metadata::foreign_keys_schema(), &request)
            .await
    }

    // Session options, CloseSession, CancelFlightInfo, server status

    async fn do_action_fallback(
        &self,
        request: Request<Action>,
    ) -> Result<Response<<Self as FlightService>::DoActionStream>, Status> {
        let caller = self.caller(&request).await?;
        let action = request.into_inner();
        let decoded = decode_action(&action.r#type, &action.body)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        match decoded {
            SessionAction::SetSessionOptions(req) => {
                let mut errors = HashMap::new();
                for (name, value) in req.session_options {
                    let code = set_session_option(&caller.session, &name, &value);
                    if let Some(code) = code {
                        errors.insert(name, SetSessionOptionsError { value: code });
                    }
                }
                Ok(action_result(
                    SetSessionOptionsResult { errors }.encode_to_vec(),
                ))
            }
            SessionAction::GetSessionOptions => {
                let options = caller.session.ctx.copied_config().options().catalog.clone();
                let session_options = HashMap::from([
                    (
                        "catalog".to_string(),
                        SessionOptionValue::string(options.default_catalog),
                    ),
                    (
                        "schema".to_string(),
                        SessionOptionValue::string(options.default_schema),
                    ),
                ]);
                Ok(action_result(
                    GetSessionOptionsResult { session_options }.encode_to_vec(),
                ))
            }
            SessionAction::CloseSession => {
                if !caller.token.is_empty() {
                    self.inner.sessions.close(&caller.token);
                }
                Ok(action_result(
                    CloseSessionResult { status: CLOSED }.encode_to_vec(),
                ))
            }
            SessionAction::CancelFlightInfo { tickets } => {
                let cancelled = self.inner.execution.cancel(&caller.token, &tickets);
                let status = if cancelled {
                    CancelStatus::Cancelled
                } else {
                    CancelStatus::NotCancellable
                };
                Ok(action_result(
                    CancelFlightInfoResult::new(status).encode_to_vec(),
                ))
            }
            SessionAction::ServerStatus => {
                let (sessions, prepared, planned) = self.inner.sessions.counts();
                let running = self.inner.execution.running();
                let body = format!(
                    r#"{{"sessions":{sessions},"prepared_statements":{},"planned_statements":{},"running_queries":{running}}}"#,
                    prepared + self.inner.anonymous.prepared_count(),
                    planned + self.inner.anonymous.planned_count(),
                );
                Ok(action_result(body.into_bytes()))
            }
        }
    }

    async fn list_custom_actions(&self) -> Option<Vec<Result<ActionType, Status>>> {
        let action = |t: &str, d: &str| {
            Ok(ActionType {
                r#type: t.to_string(),
                description: d.to_string(),
            })
        };
        Some(vec![
            action(
                "SetSessionOptions",
                "Set session options: catalog, schema, datafusion.*, iceflight.*",
            ),
            action("GetSessionOptions", "Current catalog and schema"),
            action("CloseSession", "End the session"),
            action("CancelFlightInfo", "Cancel a running query"),
            action(
                SERVER_STATUS_ACTION,
                "Open sessions, prepared statements and running queries (JSON)",
            ),
        ])
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}

/// Applies one session option; returns the `SetSessionOptions` error code, if any.
fn set_session_option(session: &Session, name: &str, value: &SessionOptionValue) -> Option<i32> {
    let Some(text) = value.as_text() else {
        return Some(INVALID_VALUE);
    };
    let state = session.ctx.state_ref();
    let key = match name {
        "catalog" => {
            if session.ctx.catalog(&text).is_none() {
                return Some(INVALID_VALUE);
            }
            "datafusion.catalog.default_catalog".to_string()
        }
        "schema" => {
            let catalog = state
                .read()
                .config()
                .options()
                .catalog
                .default_catalog
                .clone();
            let exists = session
                .ctx
                .catalog(&catalog)
                .and_then(|c| c.schema(&text))
                .is_some();
            if !exists {
                return Some(INVALID_VALUE);
            }
            "datafusion.catalog.default_schema".to_string()
        }
        n if n.starts_with("datafusion.") || n.starts_with("iceflight.") => {
            // The process's settings are the admins' (`access/settings.rs`), as with `SET`.
            if let Some(access) = Access::of_context(&session.ctx)
                && crate::access::settings::check(&access, n, Some(&text)).is_err()
            {
                return Some(ERROR);
            }
            n.to_string()
        }
        _ => return Some(INVALID_NAME),
    };
    let mut guard = state.write();
    match guard.config_mut().options_mut().set(&key, &text) {
        Ok(()) => None,
        Err(DataFusionError::Configuration(_)) => Some(INVALID_VALUE),
        Err(_) => Some(INVALID_VALUE),
    }
}
