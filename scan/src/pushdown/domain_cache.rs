//! The scan's dynamic filters as domains, recomputed only when a filter's generation changes.
//!
//! ```text
//!   task open ──► generations of every dynamic filter (snapshot_generation, a few atomics)
//!                   │ same as cached?  ── yes ──► cached Arc<Domains>           (no lock, no work)
//!                   │ no
//!                   ▼
//!                 normalise (domain.rs) ──► publish unless a newer result is already there
//! ```
//!
//! Lock-free on the read path: the cache is an [`ArcSwapOption`]. A caller that computed from
//! older generations than the ones already published (it raced an update) returns the newer
//! published domains and leaves them in place.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arc_swap::ArcSwapOption;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::snapshot_generation;

use crate::model::columns::ColumnResolver;
use crate::pushdown::domain::{Domains, normalize};

/// Domains computed from one set of filter generations.
#[derive(Debug)]
struct Cached {
    /// `snapshot_generation` of each filter, in the order of [`DomainCache::filters`].
    generations: Vec<u64>,
    domains: Arc<Domains>,
}

/// The AND of a scan's dynamic filters as [`Domains`], cached per filter generation.
#[derive(Debug)]
pub struct DomainCache {
    filters: Vec<Arc<dyn PhysicalExpr>>,
    columns: Arc<dyn ColumnResolver>,
    cap: usize,
    null_may_pass: bool,
    cached: ArcSwapOption<Cached>,
    computations: AtomicUsize,
}

impl DomainCache {
    /// A cache over `filters` (their columns resolved by `columns`); `cap` bounds value sets
    /// (`hash_join_inlist_pushdown_max_distinct_values`); `null_may_pass` as in
    /// [`normalize`].
    pub fn new(
        filters: Vec<Arc<dyn PhysicalExpr>>,
        columns: Arc<dyn ColumnResolver>,
        cap: usize,
        null_may_pass: bool,
    ) -> Self {
        Self {
            filters,
            columns,
            cap,
            null_may_pass,
            cached: ArcSwapOption::empty(),
            computations: AtomicUsize::new(0),
        }
    }

    /// The value-set cap the domains are computed with.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The filters' current domains.
    pub fn current(&self) -> Arc<Domains> {
        let generations = self.generations();
        if let Some(hit) = self.cached_for(&generations) {
            return hit;
        }
        let domains = self.compute();
        self.publish(generations, domains)
    }

    /// The newest published domains, if any (for display).
    pub fn latest(&self) -> Option<Arc<Domains>> {
        self.cached.load_full().map(|c| Arc::clone(&c.domains))
    }

    /// How many times the domains were normalised (cache misses).
    #[cfg(test)]
    fn computations(&self) -> usize {
        self.computations.load(Ordering::Relaxed)
    }

    fn generations(&self) -> Vec<u64> {
        self.filters.iter().map(snapshot_generation).collect()
    }

    fn cached_for(&self, generations: &[u64]) -> Option<Arc<Domains>> {
        let guard = self.cached.load();
        let cached = guard.as_ref()?;
        (cached.generations == generations).then(|| Arc::clone(&cached.domains))
    }

    fn compute(&self) -> Domains {
        self.computations.fetch_add(1, Ordering::Relaxed);
        self.filters.iter().fold(Domains::all(), |acc, f| {
            acc.and(normalize(
                f,
                self.columns.as_ref(),
                self.cap,
                self.null_may_pass,
            ))
        })
    }

    /// Publishes `domains` computed at `generations`, unless what is published is at least as new
    /// in every filter and newer in one; returns whichever is kept.
    fn publish(&self, generations: Vec<u64>, domains: Domains) -> Arc<Domains> {
        let mine = Arc::new(Cached {
            generations,
            domains: Arc::new(domains),
        });
        let previous = self.cached.rcu(|current| match current {
            Some(c) if newer(&c.generations, &mine.generations) => Some(Arc::clone(c)),
            _ => Some(Arc::clone(&mine)),
        });
        match previous {
            Some(c) if newer(&c.generations, &mine.generations) => Arc::clone(&c.domains),
            _ => Arc::clone(&mine.domains),
        }
    }
}

/// `a` is newer than `b`: no filter older, at least one newer.
fn newer(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x >= y) && a != b
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, DynamicFilterPhysicalExpr, col, lit};

    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![Field::new("k", DataType::Int32, true)])
    }

    fn setup() -> (Arc<DynamicFilterPhysicalExpr>, DomainCache) {
        let k = col("k", &schema()).unwrap();
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(vec![k], lit(true)));
        let as_expr: Arc<dyn PhysicalExpr> = Arc::clone(&filter) as _;
        let cache = DomainCache::new(vec![as_expr], Arc::new(schema()), 150, false);
        (filter, cache)
    }

    fn k_at_least(v: i32) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(
            col("k", &schema()).unwrap(),
            Operator::GtEq,
            lit(v),
        ))
    }

    #[test]
    fn recomputed_once_per_generation() {
        let (filter, cache) = setup();
        assert_eq!(cache.current().columns.as_ref().unwrap().len(), 0);
        assert_eq!(cache.current().columns.as_ref().unwrap().len(), 0);
        assert_eq!(cache.computations(), 1);
        filter.update(k_at_least(5)).unwrap();
        let d = cache.current();
        assert_eq!(d.columns.as_ref().unwrap().len(), 1);
        cache.current();
        assert_eq!(cache.computations(), 2);
    }

    #[test]
    fn delayed_caller_keeps_the_newer_result() {
        let (filter, cache) = setup();
        // A caller reads the generations and computes, then is delayed before publishing.
        let stale_generations = cache.generations();
        let stale = cache.compute();
        // Meanwhile the filter is updated and another caller publishes the newer domains.
        filter.update(k_at_least(7)).unwrap();
        let fresh = cache.current();
        assert_eq!(fresh.columns.as_ref().unwrap().len(), 1);
        // The delayed caller gets the newer domains back and does not overwrite them.
        let got = cache.publish(stale_generations, stale);
        assert!(Arc::ptr_eq(&got, &fresh));
        assert!(Arc::ptr_eq(&cache.latest().unwrap(), &fresh));
        // Later tasks see the newer domain without recomputing.
        let before = cache.computations();
        assert!(Arc::ptr_eq(&cache.current(), &fresh));
        assert_eq!(cache.computations(), before);
    }
}
