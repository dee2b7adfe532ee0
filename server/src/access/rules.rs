//! The access rules file: Trino's file-based system access control (its catalog, schema and
//! table rules), read from JSON and evaluated for one user and their groups.
//!
//! ```text
//!   { "catalogs": [ {user?, group?, catalog?, allow: all | read-only | none} … ],
//!     "schemas":  [ {user?, group?, catalog?, schema?, owner: bool} … ],
//!     "tables":   [ {user?, group?, catalog?, schema?, table?, privileges: [SELECT, INSERT,
//!                    DELETE, UPDATE, OWNERSHIP, GRANT_SELECT]} … ] }
//! ```
//!
//! As in Trino (docs/operations.md, "Privileges"): each field is a regular expression that must
//! match the whole name (absent: any); a `group` pattern matches when one of the user's groups
//! does (a user without groups matches no `group` pattern); within a section the first rule that
//! matches decides, and when none matches access is denied; a section that is absent allows
//! everything at its level. Trino's other sections (`queries`, `functions`, session properties,
//! impersonation) and the row filters, column masks and roles of its rules are refused when the
//! file is read rather than ignored, so a file never grants more than it says.

use std::collections::BTreeSet;

use regex::Regex;
use serde::Deserialize;

/// A table privilege of Trino's file-based access control.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Privilege {
    /// Read the table's rows (queries, time travel, metadata tables, `COPY` from it).
    Select,
    /// Add rows (`INSERT`, `MERGE … INSERT`, bulk ingest appends).
    Insert,
    /// Remove rows (`DELETE`, `MERGE … DELETE`, `INSERT OVERWRITE`).
    Delete,
    /// Change rows (`UPDATE`, `MERGE … UPDATE`).
    Update,
    /// Create, alter, drop and maintain the table (`ALTER TABLE … EXECUTE`, ingest that creates
    /// or replaces it).
    Ownership,
    /// Read through a view another user defines (accepted for Trino files; iceflight has no
    /// shared views, so it grants nothing more).
    GrantSelect,
}

impl Privilege {
    /// The privilege as the rules file spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Delete => "DELETE",
            Privilege::Update => "UPDATE",
            Privilege::Ownership => "OWNERSHIP",
            Privilege::GrantSelect => "GRANT_SELECT",
        }
    }

    /// Whether the privilege changes the table (refused in a `read-only` catalog).
    pub fn writes(self) -> bool {
        !matches!(self, Privilege::Select | Privilege::GrantSelect)
    }
}

/// What a catalog rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CatalogAccess {
    /// Nothing in the catalog.
    None,
    /// Reading and listing only.
    ReadOnly,
    /// No restriction beyond the schema and table rules.
    All,
}

impl<'de> Deserialize<'de> for CatalogAccess {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Trino also takes the legacy booleans: true = all, false = none.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(true) => Ok(CatalogAccess::All),
            Raw::Bool(false) => Ok(CatalogAccess::None),
            Raw::Text(t) => match t.as_str() {
                "all" => Ok(CatalogAccess::All),
                "read-only" => Ok(CatalogAccess::ReadOnly),
                "none" => Ok(CatalogAccess::None),
                other => Err(serde::de::Error::custom(format!(
                    "allow must be all, read-only or none, not {other:?}"
                ))),
            },
        }
    }
}

/// Who is asking: a user name and the groups it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user name (a password user's name, or a JWT's user claim).
    pub user: String,
    /// The user's groups (`[[server.user]] groups`, or a JWT's groups claim).
    pub groups: Vec<String>,
}

/// Why a rules file cannot be used: one line naming the rule.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The file is not JSON of the expected shape.
    #[error("access rules: {0}")]
    Json(#[from] serde_json::Error),
    /// A pattern is not a regular expression.
    #[error(
        "access rules: {section} rule {index}: {field} {pattern:?} is not a regular expression: {reason}"
    )]
    Pattern {
        /// `catalogs`, `schemas` or `tables`.
        section: &'static str,
        /// The rule's position in its section, from 1.
        index: usize,
        /// The field holding the pattern.
        field: &'static str,
        /// The pattern as written.
        pattern: String,
        /// The regex crate's reason, on one line.
        reason: String,
    },
    /// A field of Trino's rules that iceflight does not enforce.
    #[error(
        "access rules: {section} rule {index}: {field} is not supported by iceflight \
         ({why}); remove it, or the rule would grant more than it says"
    )]
    Unsupported {
        /// `catalogs`, `schemas` or `tables`.
        section: &'static str,
        /// The rule's position in its section, from 1.
        index: usize,
        /// The field.
        field: &'static str,
        /// What it would have done.
        why: &'static str,
    },
}

/// A parsed rules file.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    catalogs: Option<Vec<CatalogRule>>,
    schemas: Option<Vec<SchemaRule>>,
    tables: Option<Vec<TableRule>>,
}

/// The subjects and object of a rule: each a pattern, absent = any.
#[derive(Debug, Clone)]
struct Pattern {
    user: Option<Regex>,
    group: Option<Regex>,
    catalog: Option<Regex>,
    schema: Option<Regex>,
    table: Option<Regex>,
}

#[derive(Debug, Clone)]
struct CatalogRule {
    pattern: Pattern,
    allow: CatalogAccess,
}

#[derive(Debug, Clone)]
struct SchemaRule {
    pattern: Pattern,
    owner: bool,
}

#[derive(Debug, Clone)]
struct TableRule {
    pattern: Pattern,
    privileges: BTreeSet<Privilege>,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    catalogs: Option<Vec<RawRule>>,
    schemas: Option<Vec<RawRule>>,
    tables: Option<Vec<RawRule>>,
}

/// One rule as written (every section's fields; each section checks which it takes).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    user: Option<String>,
    group: Option<String>,
    role: Option<String>,
    catalog: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    allow: Option<CatalogAccess>,
    owner: Option<bool>,
    privileges: Option<Vec<Privilege>>,
    columns: Option<serde_json::Value>,
    filter: Option<serde_json::Value>,
    filter_environment: Option<serde_json::Value>,
}

impl Rules {
    /// Parses a rules file's text.
    ///
    /// Errors: not JSON; a section or field Trino's system-level file does not have; a field
    /// iceflight does not enforce (`role`, `columns`, `filter`); a pattern that is not a
    /// regular expression; a rule without its required field (`allow`, `owner`, `privileges`);
    /// a field its section does not take.
    pub fn parse(text: &str) -> Result<Self, RulesError> {
        let file: File = serde_json::from_str(text)?;
        Ok(Self {
            catalogs: section(file.catalogs, |raw, index| {
                raw.only(
                    index,
                    "catalogs",
                    &["schema", "table", "owner", "privileges"],
                )?;
                Ok(CatalogRule {
                    pattern: raw.pattern("catalogs", index)?,
                    allow: raw
                        .allow
                        .ok_or_else(|| missing("catalogs", index, "allow"))?,
                })
            })?,
            schemas: section(file.schemas, |raw, index| {
                raw.only(index, "schemas", &["table", "allow", "privileges"])?;
                Ok(SchemaRule {
                    pattern: raw.pattern("schemas", index)?,
                    owner: raw
                        .owner
                        .ok_or_else(|| missing("schemas", index, "owner"))?,
                })
            })?,
            tables: section(file.tables, |raw, index| {
                raw.only(index, "tables", &["allow", "owner"])?;
                Ok(TableRule {
                    pattern: raw.pattern("tables", index)?,
                    privileges: raw
                        .privileges
                        .clone()
                        .ok_or_else(|| missing("tables", index, "privileges"))?
                        .into_iter()
                        .collect(),
                })
            })?,
        })
    }

    /// Rules that allow everything (no file).
    pub fn allow_all() -> Self {
        Self::default()
    }

    /// What catalog rules allow `who` in `catalog`: the first matching rule's `allow`, `None`
    /// when none matches, `All` without a `catalogs` section.
    pub fn catalog_access(&self, who: &Identity, catalog: &str) -> CatalogAccess {
        let Some(rules) = &self.catalogs else {
            return CatalogAccess::All;
        };
        rules
            .iter()
            .find(|r| r.pattern.matches(who, Some(catalog), None, None))
            .map_or(CatalogAccess::None, |r| r.allow)
    }

    /// Whether `who` owns schema `catalog.schema` (may create and drop it): the first matching
    /// schema rule's `owner`, false when none matches, true without a `schemas` section.
    pub fn schema_owner(&self, who: &Identity, catalog: &str, schema: &str) -> bool {
        let Some(rules) = &self.schemas else {
            return true;
        };
        rules
            .iter()
            .find(|r| r.pattern.matches(who, Some(catalog), Some(schema), None))
            .is_some_and(|r| r.owner)
    }

    /// The privileges of `who` on table `catalog.schema.table` from the table rules alone (the
    /// first matching rule's; none when no rule matches; all without a `tables` section).
    pub fn table_privileges(
        &self,
        who: &Identity,
        catalog: &str,
        schema: &str,
        table: &str,
    ) -> BTreeSet<Privilege> {
        let Some(rules) = &self.tables else {
            return ALL.iter().copied().collect();
        };
        rules
            .iter()
            .find(|r| {
                r.pattern
                    .matches(who, Some(catalog), Some(schema), Some(table))
            })
            .map(|r| r.privileges.clone())
            .unwrap_or_default()
    }

    /// Whether some table of `catalog.schema` could give `who` a privilege, or `who` owns the
    /// schema (Trino's schema visibility: tables need not exist yet).
    pub fn schema_visible(&self, who: &Identity, catalog: &str, schema: &str) -> bool {
        if self.catalog_access(who, catalog) == CatalogAccess::None {
            return false;
        }
        self.schema_owner(who, catalog, schema)
            || match &self.tables {
                None => true,
                Some(rules) => rules.iter().any(|r| {
                    !r.privileges.is_empty()
                        && r.pattern.matches(who, Some(catalog), Some(schema), None)
                }),
            }
    }

    /// Whether some schema or table of `catalog` could be visible to `who` (Trino's catalog
    /// visibility).
    pub fn catalog_visible(&self, who: &Identity, catalog: &str) -> bool {
        if self.catalog_access(who, catalog) == CatalogAccess::None {
            return false;
        }
        let owns_some = match &self.schemas {
            None => true,
            Some(rules) => rules
                .iter()
                .any(|r| r.owner && r.pattern.matches(who, Some(catalog), None, None)),
        };
        owns_some
            || match &self.tables {
                None => true,
                Some(rules) => rules.iter().any(|r| {
                    !r.privileges.is_empty() && r.pattern.matches(who, Some(catalog), None, None)
                }),
            }
    }
}

/// Every privilege: what a table has without a `tables` section.
const ALL: [Privilege; 6] = [
    Privilege::Select,
    Privilege::Insert,
    Privilege::Delete,
    Privilege::Update,
    Privilege::Ownership,
    Privilege::GrantSelect,
];

fn missing(section: &'static str, index: usize, field: &str) -> RulesError {
    RulesError::Json(serde::de::Error::custom(format!(
        "{section} rule {index} has no {field}"
    )))
}

fn section<T>(
    rules: Option<Vec<RawRule>>,
    parse: impl Fn(&RawRule, usize) -> Result<T, RulesError>,
) -> Result<Option<Vec<T>>, RulesError> {
    rules
        .map(|rules| {
            rules
                .iter()
                .enumerate()
                .map(|(i, raw)| parse(raw, i + 1))
                .collect()
        })
        .transpose()
}

impl RawRule {
    /// Refuses what iceflight does not enforce, and the fields of other sections (`foreign`).
    fn only(
        &self,
        index: usize,
        section: &'static str,
        foreign: &[&'static str],
    ) -> Result<(), RulesError> {
        let unsupported = |field, why| RulesError::Unsupported {
            section,
            index,
            field,
            why,
        };
        if self.role.is_some() {
            return Err(unsupported(
                "role",
                "iceflight has users and groups, no roles",
            ));
        }
        if self.columns.is_some() {
            return Err(unsupported("columns", "column masks and hidden columns"));
        }
        if self.filter.is_some() || self.filter_environment.is_some() {
            return Err(unsupported("filter", "row filters"));
        }
        let present = [
            ("schema", self.schema.is_some()),
            ("table", self.table.is_some()),
            ("allow", self.allow.is_some()),
            ("owner", self.owner.is_some()),
            ("privileges", self.privileges.is_some()),
        ];
        for (field, set) in present {
            if set && foreign.contains(&field) {
                return Err(RulesError::Json(serde::de::Error::custom(format!(
                    "{section} rule {index}: a {section} rule has no field {field}"
                ))));
            }
        }
        Ok(())
    }

    fn pattern(&self, section: &'static str, index: usize) -> Result<Pattern, RulesError> {
        let compile = |field: &'static str, text: &Option<String>| {
            text.as_ref()
                .map(|p| {
                    // Trino matches the whole name (Java's `Matcher.matches`).
                    Regex::new(&format!("^(?:{p})$")).map_err(|e| RulesError::Pattern {
                        section,
                        index,
                        field,
                        pattern: p.clone(),
                        reason: e.to_string().lines().last().unwrap_or_default().to_string(),
                    })
                })
                .transpose()
        };
        Ok(Pattern {
            user: compile("user", &self.user)?,
            group: compile("group", &self.group)?,
            catalog: compile("catalog", &self.catalog)?,
            schema: compile("schema", &self.schema)?,
            table: compile("table", &self.table)?,
        })
    }
}

impl Pattern {
    /// Whether the rule applies to `who` and the object; an object part given as `None` is not
    /// checked (any schema, any table).
    fn matches(
        &self,
        who: &Identity,
        catalog: Option<&str>,
        schema: Option<&str>,
        table: Option<&str>,
    ) -> bool {
        let part = |pattern: &Option<Regex>, value: Option<&str>| match (pattern, value) {
            (Some(p), Some(v)) => p.is_match(v),
            _ => true,
        };
        let group = match &self.group {
            None => true,
            Some(p) => who.groups.iter().any(|g| p.is_match(g)),
        };
        part(&self.user, Some(&who.user))
            && group
            && part(&self.catalog, catalog)
            && part(&self.schema, schema)
            && part(&self.table, table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(user: &str, groups: &[&str]) -> Identity {
        Identity {
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    const RULES: &str = r#"{
      "catalogs": [
        {"user": "guest", "allow": "none"},
        {"catalog": "archive", "allow": "read-only"},
        {"allow": "all"}
      ],
      "schemas": [
        {"user": "alice", "schema": "alice", "owner": true},
        {"group": "eng", "schema": "eng", "owner": true}
      ],
      "tables": [
        {"user": "alice", "schema": "alice", "privileges": ["SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP"]},
        {"group": "eng", "schema": "eng", "privileges": ["SELECT", "INSERT"]},
        {"schema": "shared", "table": "notes", "privileges": ["SELECT"]},
        {"user": "bob", "schema": "alice", "privileges": []}
      ]
    }"#;

    /// First match wins, no match denies, patterns match whole names, groups match any group.
    #[test]
    fn first_matching_rule_decides() {
        let rules = Rules::parse(RULES).unwrap();
        let alice = who("alice", &[]);
        let bob = who("bob", &["eng"]);
        let privileges = |w: &Identity, s: &str, t: &str| -> Vec<&str> {
            rules
                .table_privileges(w, "local", s, t)
                .into_iter()
                .map(Privilege::as_str)
                .collect()
        };
        assert_eq!(
            privileges(&alice, "alice", "t"),
            ["SELECT", "INSERT", "DELETE", "UPDATE", "OWNERSHIP"]
        );
        assert_eq!(privileges(&bob, "eng", "t"), ["SELECT", "INSERT"]);
        assert!(privileges(&alice, "eng", "t").is_empty());
        assert_eq!(privileges(&alice, "shared", "notes"), ["SELECT"]);
        // The whole name must match: `notes2` is not `notes`, `alice2` not `alice`.
        assert!(privileges(&alice, "shared", "notes2").is_empty());
        assert!(privileges(&alice, "alice2", "t").is_empty());
        assert!(privileges(&bob, "alice", "t").is_empty());
        assert!(rules.schema_owner(&alice, "local", "alice"));
        assert!(!rules.schema_owner(&bob, "local", "alice"));
        assert!(rules.schema_owner(&bob, "local", "eng"));
        assert_eq!(
            rules.catalog_access(&alice, "archive"),
            CatalogAccess::ReadOnly
        );
        assert_eq!(
            rules.catalog_access(&who("guest", &[]), "local"),
            CatalogAccess::None
        );
    }

    /// Trino's visibility: a schema shows when owned or when a table rule could grant something
    /// in it; a catalog whose rule says none shows nothing.
    #[test]
    fn visibility_follows_possible_privileges() {
        let rules = Rules::parse(RULES).unwrap();
        let alice = who("alice", &[]);
        assert!(rules.schema_visible(&alice, "local", "alice"));
        assert!(rules.schema_visible(&alice, "local", "shared"));
        assert!(!rules.schema_visible(&alice, "local", "eng"));
        assert!(rules.schema_visible(&who("carol", &["eng"]), "local", "eng"));
        assert!(rules.catalog_visible(&alice, "local"));
        assert!(!rules.catalog_visible(&who("guest", &[]), "local"));
        assert!(!rules.schema_visible(&who("guest", &[]), "local", "shared"));
    }

    /// Absent sections allow everything at their level; an empty section denies.
    #[test]
    fn absent_sections_allow_and_empty_ones_deny() {
        let open = Rules::parse("{}").unwrap();
        let anyone = who("x", &[]);
        assert_eq!(open.table_privileges(&anyone, "c", "s", "t").len(), 6);
        assert!(open.schema_owner(&anyone, "c", "s"));
        assert_eq!(open.catalog_access(&anyone, "c"), CatalogAccess::All);
        let closed = Rules::parse(r#"{"tables": [], "schemas": []}"#).unwrap();
        assert!(closed.table_privileges(&anyone, "c", "s", "t").is_empty());
        assert!(!closed.schema_owner(&anyone, "c", "s"));
        assert!(!closed.schema_visible(&anyone, "c", "s"));
    }

    /// What iceflight would not enforce is refused with one line naming the rule.
    #[test]
    fn unenforced_fields_are_refused() {
        let e = Rules::parse(r#"{"tables": [{"privileges": ["SELECT"], "filter": "a = 1"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tables rule 1: filter is not supported"), "{e}");
        let e = Rules::parse(r#"{"catalogs": [{"role": "admin", "allow": "all"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("catalogs rule 1: role is not supported"), "{e}");
        let e = Rules::parse(r#"{"queries": []}"#).unwrap_err().to_string();
        assert!(e.contains("unknown field `queries`"), "{e}");
        let e = Rules::parse(r#"{"tables": [{"table": "(", "privileges": []}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tables rule 1: table \"(\" is not a regular expression"),
            "{e}"
        );
        let e = Rules::parse(r#"{"tables": [{"table": "t"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("tables rule 1 has no privileges"), "{e}");
        let e = Rules::parse(r#"{"tables": [{"privileges": ["DROP"]}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `DROP`"), "{e}");
        let e = Rules::parse(r#"{"catalogs": [{"allow": "some"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("allow must be all, read-only or none"), "{e}");
        let e = Rules::parse(r#"{"schemas": [{"owner": true, "privileges": []}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a schemas rule has no field privileges"), "{e}");
    }
}
