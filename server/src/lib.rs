//! The `iceflight` server and CLI: configuration, sessions over the configured Iceberg catalogs,
//! and the command line.
//!
//! ```text
//!   CLI / (Flight SQL) ──► Config ──► Engine (catalogs) ──► SessionContext ──► our Iceberg scan
//! ```

pub mod access;
pub mod cli;
/// The configuration file, parsed in `iceflight-input` (no DataFusion there, so it is fuzzed).
pub use iceflight_input::config;
pub mod distributed;
pub mod flight;
pub(crate) mod float_semantics;
pub(crate) mod invalidate;
pub mod message;
pub(crate) mod output;
pub(crate) mod query_control;
pub(crate) mod query_history;
pub mod serving;
pub mod session;
pub(crate) mod signals;
pub mod sql;
pub(crate) mod system;
pub mod tls;
pub mod worker;
