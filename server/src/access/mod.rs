//! Who may do what, for the sessions of a server many people share: privileges per catalog,
//! schema and table from a rules file in Trino's shape, the server's own files out of reach
//! except under configured roots, and the settings only admins may change.
//!
//! ```text
//!   Flight SQL login (password or JWT) ──► Principal {user, groups, admin}
//!      └─► Access (a session extension: principal + the rules in force + the file roots)
//!            catalogs' listings and table loads ──► visible? (catalog/src/provider.rs, Visibility)
//!            every planned statement ──► plan.rs: the privileges its tables need, files, settings
//!            procedures, ingest, metadata commands, system tables ──► the same checks
//!   a refusal ──► AccessDenied ──► PermissionDenied, one line naming the table and the privilege
//! ```
//!
//! Admins (`[server] admins`) pass every privilege check; file roots and statement bounds hold
//! for them too. A session without an [`Access`] (the CLI's `sql`, tests of the engine) is the
//! operator's own and is not checked. Without a rules file (`[server] access_rules`) every
//! user holds every privilege, as Trino's default access control.

pub mod denied;
pub mod files;
pub mod plan;
pub mod rules;
pub mod session;
pub mod settings;
pub mod source;

pub use denied::AccessDenied;
pub use files::FileRoots;
pub use rules::{CatalogAccess, Identity, Privilege, Rules};
pub use session::Access;
pub use source::RulesSource;
