//! What one logged-in user may do: their identity, whether they are an admin, the rules in
//! force and the file roots; a session extension every check reads (module docs of
//! `access/`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionConfig;

use super::denied::AccessDenied;
use super::files::FileRoots;
use super::rules::{CatalogAccess, Identity, Privilege};
use super::source::RulesSource;

/// SQL `PREPARE`d statements one session may hold.
pub const MAX_SQL_PREPARED: usize = 1000;

/// What a session of one logged-in user may do (a session config extension; module docs).
#[derive(Debug)]
pub struct Access {
    identity: Identity,
    admin: bool,
    rules: Arc<RulesSource>,
    files: Arc<FileRoots>,
    /// The plans of this session's SQL `PREPARE`s by name, checked again at each `EXECUTE`
    /// (DataFusion keeps its own copy out of reach).
    prepared: Mutex<HashMap<String, LogicalPlan>>,
}

impl Access {
    /// The access of `identity` (`admin`: passes privilege checks) under `rules`, with file
    /// access limited to `files`.
    pub fn new(
        identity: Identity,
        admin: bool,
        rules: Arc<RulesSource>,
        files: Arc<FileRoots>,
    ) -> Self {
        Self {
            identity,
            admin,
            rules,
            files,
            prepared: Mutex::default(),
        }
    }

    /// Records the plan of SQL `PREPARE name AS …` (checked now) for the `EXECUTE`s to come.
    ///
    /// Errors: `ResourcesExhausted` when the session already holds [`MAX_SQL_PREPARED`]
    /// others (DataFusion keeps each executed one for the session's life).
    pub(crate) fn remember_prepared(&self, name: &str, plan: LogicalPlan) -> Result<()> {
        let mut prepared = self.lock_prepared();
        if prepared.len() >= MAX_SQL_PREPARED && !prepared.contains_key(name) {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "this session holds {MAX_SQL_PREPARED} SQL prepared statements; DEALLOCATE \
                 some before PREPARE {name}"
            )));
        }
        prepared.insert(name.to_string(), plan);
        Ok(())
    }

    /// The plan of SQL `PREPARE name`, if this session prepared one.
    pub(crate) fn prepared(&self, name: &str) -> Option<LogicalPlan> {
        self.lock_prepared().get(name).cloned()
    }

    /// Forgets `PREPARE name` (`DEALLOCATE`).
    pub(crate) fn forget_prepared(&self, name: &str) {
        self.lock_prepared().remove(name);
    }

    fn lock_prepared(&self) -> std::sync::MutexGuard<'_, HashMap<String, LogicalPlan>> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The access of a session (`None`: the operator's own session, unchecked).
    pub fn of(config: &SessionConfig) -> Option<Arc<Access>> {
        config.get_extension::<Access>()
    }

    /// The access of `ctx`'s session ([`Self::of`]).
    pub fn of_context(ctx: &datafusion::prelude::SessionContext) -> Option<Arc<Access>> {
        Self::of(ctx.state_ref().read().config())
    }

    /// The user's name.
    pub fn user(&self) -> &str {
        &self.identity.user
    }

    /// Whether the user is an admin (`[server] admins`).
    pub fn is_admin(&self) -> bool {
        self.admin
    }

    /// The directories statements may read and write files in.
    pub fn files(&self) -> &FileRoots {
        &self.files
    }

    /// Refuses unless the user is an admin; `what` completes "only admins may …".
    ///
    /// Errors: [`AccessDenied`] naming the user and `what`.
    pub fn require_admin(&self, what: &str) -> Result<(), AccessDenied> {
        match self.admin {
            true => Ok(()),
            false => Err(AccessDenied(format!(
                "only admins may {what} (user {} is not one: [server] admins)",
                self.identity.user
            ))),
        }
    }

    /// Whether the user holds `privilege` on `catalog.schema.table`: the table rules, and a
    /// catalog rule that allows it (`read-only` allows only reading).
    pub fn holds(&self, catalog: &str, schema: &str, table: &str, privilege: Privilege) -> bool {
        if self.admin {
            return true;
        }
        let rules = self.rules.current();
        let catalog_allows = match rules.catalog_access(&self.identity, catalog) {
            CatalogAccess::All => true,
            CatalogAccess::ReadOnly => !privilege.writes(),
            CatalogAccess::None => false,
        };
        catalog_allows
            && rules
                .table_privileges(&self.identity, catalog, schema, table)
                .contains(&privilege)
    }

    /// Refuses unless the user holds every one of `privileges` on `catalog.schema.table`.
    ///
    /// Errors: [`AccessDenied`] naming the first privilege missing and the table.
    pub fn check_table(
        &self,
        catalog: &str,
        schema: &str,
        table: &str,
        privileges: &[Privilege],
    ) -> Result<(), AccessDenied> {
        match privileges
            .iter()
            .find(|p| !self.holds(catalog, schema, table, **p))
        {
            None => Ok(()),
            Some(p) => Err(AccessDenied(format!(
                "user {} has no {} privilege on table {catalog}.{schema}.{table}",
                self.identity.user,
                p.as_str()
            ))),
        }
    }

    /// Refuses unless the user owns schema `catalog.schema` in a catalog it may change
    /// (`CREATE SCHEMA`, `DROP SCHEMA`); `action` names the statement in the message.
    ///
    /// Errors: [`AccessDenied`] naming the schema and the statement.
    pub fn check_schema_owner(
        &self,
        catalog: &str,
        schema: &str,
        action: &str,
    ) -> Result<(), AccessDenied> {
        if self.admin {
            return Ok(());
        }
        let rules = self.rules.current();
        let owner = rules.catalog_access(&self.identity, catalog) == CatalogAccess::All
            && rules.schema_owner(&self.identity, catalog, schema);
        match owner {
            true => Ok(()),
            false => Err(AccessDenied(format!(
                "user {} does not own schema {catalog}.{schema} ({action} needs its ownership)",
                self.identity.user
            ))),
        }
    }

    /// Whether the user may see table `catalog.schema.table`: some privilege on it.
    pub fn table_visible(&self, catalog: &str, schema: &str, table: &str) -> bool {
        if self.admin {
            return true;
        }
        let rules = self.rules.current();
        rules.catalog_access(&self.identity, catalog) != CatalogAccess::None
            && !rules
                .table_privileges(&self.identity, catalog, schema, table)
                .is_empty()
    }

    /// Whether the user may see schema `catalog.schema` (owns it, or some table rule in it
    /// could give a privilege).
    pub fn schema_visible(&self, catalog: &str, schema: &str) -> bool {
        self.admin
            || self
                .rules
                .current()
                .schema_visible(&self.identity, catalog, schema)
    }

    /// Whether the user may see catalog `catalog`.
    pub fn catalog_visible(&self, catalog: &str) -> bool {
        self.admin
            || self
                .rules
                .current()
                .catalog_visible(&self.identity, catalog)
    }
}

/// The catalogs' side of access: listings leave out what the session may not see, and loading
/// a table it holds no privilege on fails with [`AccessDenied`].
impl iceflight_catalog::provider::Visibility for Access {
    fn schema(&self, catalog: &str, schema: &str) -> bool {
        self.schema_visible(catalog, schema)
    }

    fn table(&self, catalog: &str, schema: &str, table: &str) -> Result<()> {
        match self.table_visible(catalog, schema, table) {
            true => Ok(()),
            false => Err(AccessDenied(format!(
                "user {} has no privilege on table {catalog}.{schema}.{table}",
                self.identity.user
            ))
            .into_error()),
        }
    }
}
