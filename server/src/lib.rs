//! The `iceflight` server and CLI: configuration, sessions over the configured Iceberg catalogs,
//! and the command line.
//!
//! ```text
//!   CLI / (Flight SQL) ──► Config ──► Engine (catalogs) ──► SessionContext ──► our Iceberg scan
//! ```

pub mod cli;
/// The configuration file, parsed in `iceflight-input` (no DataFusion there, so it is fuzzed).
pub use iceflight_input::config;
pub mod delete_statement;
pub mod distributed;
pub mod flight;
pub mod invalidate;
pub mod join_filters;
pub mod message;
pub mod metrics;
pub mod output;
pub mod query_history;
pub mod session;
pub mod signals;
pub mod system;
pub mod table_versions;
