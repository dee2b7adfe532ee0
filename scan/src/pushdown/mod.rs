//! Filters as per-column domains and what they prune: domains and their cache, file pruning
//! from manifest bounds, the gate, row groups, the page index, the row filter, and the static
//! predicate conversion to iceberg's. Imports `model` (`README.md`).

pub mod domain;
pub(crate) mod domain_cache;
pub(crate) mod gate;
pub(crate) mod integer_set;
pub(crate) mod page_index;
pub(crate) mod predicate;
pub(crate) mod prune;
pub(crate) mod row_filter;
pub(crate) mod row_groups;
