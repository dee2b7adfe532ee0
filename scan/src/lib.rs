//! iceflight's Iceberg scan: a DataFusion `TableProvider` and `ExecutionPlan` that read Iceberg
//! tables with our Parquet read path on parquet's async reader (iceberg-rust's reader for the
//! files it does not cover) and Iceberg semantics (field-id projection, schema evolution,
//! identity-partition constants, positional and null-safe equality deletes), and write them
//! (appends, copy-on-write `DELETE`).
//!
//! ```text
//!   SQL ──► DataFusion planner ──► IcebergTableProvider::scan ──► IcebergScanExec ──► batches
//!           (table/)                (plan/: predicate, plan_files,   (exec/: opener per task,
//!                                    split, PlannedScan)              read/, pushdown/)
//! ```
//!
//! Folders, bottom-up; each imports only the folders before it (`README.md` in each, checked by
//! `scripts/check_modules.py`): [`model`] → [`pushdown`] → [`plan`] → [`read`] → [`exec`] →
//! [`write`](mod@write) → [`distributed`] → [`table`]. Below this crate: `iceflight-cache` (block cache,
//! disk tier, I/O attribution), `iceflight-iceberg` (commits iceberg cannot make, time travel),
//! `iceflight-options` (settings). See `README.md`.

pub mod distributed;
pub mod exec;
pub mod model;
pub mod plan;
pub mod pushdown;
pub mod read;
pub mod table;
pub mod write;

pub use exec::dynamic_filter_rule::DynamicFilterRule;
pub use exec::scan_exec::IcebergScanExec;
pub use iceflight_options::IceflightOptions;
pub use table::provider::IcebergTableProvider;
pub use table::register::register;
