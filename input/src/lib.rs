//! What iceflight reads from outside, decoded without DataFusion or iceberg: Flight SQL
//! commands, handles and actions, the `authorization` header, the parameter rows of prepared
//! statements, and the configuration file. Every function here takes untrusted bytes or text
//! and answers a value or a typed error, never a panic (arrow-ipc's own panics are caught:
//! `UPSTREAM.md`); the fuzz targets in `fuzz/` check it (docs/operations.md, "Fuzzing").
//!
//! ```text
//!   client bytes ──► flight::handle / decode_action ─────────────────────► server/src/flight
//!   authorization ──► auth_header::parse_basic / parse_bearer ──────────► server/src/flight
//!   bearer JWT ──► jwt::verify (a JWKS, issuer, audience, expiry) ──────► server/src/flight
//!   DoPut FlightData ──► ipc_bounds (declared sizes) ──► parameters::ParameterMessages
//!                    ──► cast by the server ──► bound statement; bulk ingest
//!   TOML ──► config::Config::from_toml (catalog_config, units) ─────────► server/src/cli.rs
//!   Puffin deletion-vector blob ──► deletion_vector::decode ───────────► iceberg/src
//!   SQL text ──► sql_text::rewrite (time travel, ALTER TABLE … EXECUTE) ──► server/src/sql
//! ```

pub mod auth_header;
pub mod catalog_config;
pub mod config;
pub mod deletion_vector;
pub(crate) mod deprecated_keys;
pub mod flight;
pub mod fuzzing;
pub mod ipc_bounds;
pub mod jwt;
pub mod parameters;
pub mod session_options;
pub mod sql_text;
pub mod units;
