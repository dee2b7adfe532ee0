//! iceflight's byte cache of immutable lake files, below the scan and the catalogs: the
//! [`block_cache`] every read passes, its optional [`disk_tier`], and [`io_scope`], which
//! attributes each read to the scan that made it. Builds without DataFusion (its counters are
//! behind [`io_scope::IoCounters`], which the scan implements with DataFusion's metrics).

pub mod block_cache;
pub mod disk_tier;
pub mod io_scope;
