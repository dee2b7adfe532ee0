//! [`JoinOrder`]: a logical optimizer rule that orders inner-join graphs by estimated
//! cardinality, from the statistics Iceberg metadata gives (`IcebergTableProvider::statistics`).
//!
//! ```text
//!   Join(Inner) trees ──► cluster: leaves (anything else) + equi-join edges + residual filters
//!     leaves ──► estimated rows (table rows × filter selectivity, aggregates, outer joins, ...)
//!     edges  ──► selectivity 1 / max(ndv(left key), ndv(right key))
//!   ≤ DP_MAX_LEAVES leaves: dynamic programming over connected subsets, else greedy (by
//!   each step's output rows);
//!   cost = sum of the intermediate results' estimated rows (C_out) plus the rows each leaf
//!          feeds its join (a probe-side leaf only what the join keeps when the build side is
//!          small enough for its dynamic filter to run in the scan), no cross products;
//!   taken only below MIN_GAIN × the written order's cost
//!   ──► joins rebuilt (smaller estimate on the left, DataFusion's build side), residual filters
//!       at the lowest join that has their columns, a projection restoring the column order
//! ```
//!
//! Safety: only inner equi-joins with `NullEqualsNothing` (not null-aware) form a cluster; one
//! with a volatile condition, or a column two leaves share, is left as written.
//! Outer, semi, anti, null-equal and key-less joins are leaves, moved as a whole and never
//! entered across (cases c08, c09: the null semantics of those joins are not touched). Every
//! equi-condition and residual filter is placed on a join whose inputs hold its columns, so the
//! rows are the same in any order. Leaves are ordered recursively on their own.
//!
//! Estimates, where statistics are missing (a rule of thumb stated here, not measured per
//! table): a scan of unknown size has [`UNKNOWN_ROWS`]; `col = literal` keeps 1/ndv, else 10 %;
//! a range keeps its share of the column's bounds, else 1/3; `LIKE` 10 %; `IN (n values)`
//! n/ndv; any other predicate 1/2; a grouped aggregate keeps the product of its keys' distinct
//! counts, else half its input; a semi or anti join half of its preserved side. Distinct counts
//! come from the scan statistics (`metrics_index.rs`: Puffin `ndv`, else the bounds' range),
//! capped at the leaf's estimated rows.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, NullEquality, Result, ScalarValue, Statistics};
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    BinaryExpr, Expr, Join, JoinConstraint, JoinType, LogicalPlan, Operator, Projection,
};
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

use crate::filter_selectivity::{
    EQ_UNKNOWN, IS_NULL_UNKNOWN, LIKE_UNKNOWN, OTHER_UNKNOWN, RANGE_UNKNOWN, number,
};
use iceflight_options::IceflightOptions;

/// Clusters of at most this many leaves are ordered by dynamic programming (3^n subset pairs);
/// larger ones greedily.
pub const DP_MAX_LEAVES: usize = 10;

/// A new order is taken only where its estimated cost is below this share of the written
/// order's: the estimates are rules of thumb, and a small estimated gain was no gain measured
/// (TPC-H q05 at SF 1 ran 25 % slower in the order preferred by less,
/// `bench/reports/plans-20261201.md`).
pub const MIN_GAIN: f64 = 0.5;

/// A build side of at most this many estimated rows gives its probe-side scan a dynamic filter
/// that the scan's row filter measures as cheap and runs (a hash table this small stays in
/// cache): TPC-H q05's 2 K ASIA suppliers at SF 1 drop 80 % of lineitem's rows in the scan,
/// while a lookup into 227 K orders costs about what the join's own probe does and is left to
/// the join. At SF 10 (20 K suppliers) the lookup ran on only part of the rows and the
/// supplier-first order no longer paid (32 K here: q05 1.02× wall), hence 16 K
/// (`bench/reports/issue32-progress-20261204.md`).
pub const CHEAP_BUILD_ROWS: f64 = 16_384.0;

/// Estimated rows of a scan whose table reports no statistics.
pub const UNKNOWN_ROWS: f64 = 1_000_000.0;

/// The rule (module docs); switched by `iceflight.optimizer.join_reorder`.
#[derive(Debug, Default)]
pub struct JoinOrder;

impl OptimizerRule for JoinOrder {
    fn name(&self) -> &str {
        "iceflight_join_order"
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let options = IceflightOptions::of(&config.options());
        if !options.optimizer.join_reorder {
            return Ok(Transformed::no(plan));
        }
        optimize(
            plan,
            options.scan.dynamic_filter_pruning && options.scan.dynamic_row_filter,
        )
    }
}

/// `plan` with its join clusters ordered; `dynamic_row_filters`: scans may run a join's
/// dynamic filter on their rows (`Model::join_cost`).
fn optimize(plan: LogicalPlan, dynamic_row_filters: bool) -> Result<Transformed<LogicalPlan>> {
    let recurse = |p: LogicalPlan| optimize(p, dynamic_row_filters);
    if is_cluster_join(&plan) {
        let mut cluster = Cluster {
            dynamic_row_filters,
            ..Cluster::default()
        };
        let shape = cluster.flatten(&plan);
        if let Some((order, cost)) = cluster.order()
            && !same_shape(&order, &shape)
            && cluster.pays(&order, cost, &shape)
        {
            let leaves = std::mem::take(&mut cluster.leaves)
                .into_iter()
                .map(|l| recurse(l).map(|t| t.data))
                .collect::<Result<Vec<_>>>()?;
            cluster.leaves = leaves;
            // A join the builder rejects leaves the plan as it was.
            let output: Vec<Column> = plan
                .schema()
                .iter()
                .map(|(q, f)| Column::new(q.cloned(), f.name()))
                .collect();
            let Ok((joined, _)) = cluster.build(&order, &output) else {
                return plan.map_children(recurse);
            };
            let columns = output.into_iter().map(Expr::Column).collect();
            let restored = Projection::try_new(columns, Arc::new(joined))?;
            return Ok(Transformed::yes(LogicalPlan::Projection(restored)));
        }
    }
    plan.map_children(recurse)
}

/// Whether a join of `tree` has only implied conditions between its inputs: no written
/// condition, only members of a class on both sides (`Class::across` would imply one).
fn joins_through_implied(tree: &Tree, keys: &Keys) -> bool {
    let Tree::Join(a, b) = tree else {
        return false;
    };
    let (l, r) = (a.mask(), b.mask());
    let crosses = |x: usize, y: usize| {
        (l & (1 << x) != 0 && r & (1 << y) != 0) || (l & (1 << y) != 0 && r & (1 << x) != 0)
    };
    let written = keys.edges.iter().any(|e| crosses(e.left.0, e.right.0))
        || keys.classes.iter().any(|c| {
            c.written
                .iter()
                .any(|&(i, j)| crosses(c.members[i].0, c.members[j].0))
        });
    !written || joins_through_implied(a, keys) || joins_through_implied(b, keys)
}

/// An inner equi-join whose null semantics allow any order.
pub(crate) fn is_cluster_join(plan: &LogicalPlan) -> bool {
    matches!(plan, LogicalPlan::Join(j)
        if j.join_type == JoinType::Inner
            && j.null_equality == NullEquality::NullEqualsNothing
            && !j.null_aware
            && !j.on.is_empty())
}

/// A join tree over the leaves of a cluster (indices).
#[derive(Debug, Clone)]
pub(crate) enum Tree {
    Leaf(usize),
    Join(Box<Tree>, Box<Tree>),
}

impl Tree {
    /// The leaves under this tree.
    fn mask(&self) -> u64 {
        match self {
            Tree::Leaf(i) => 1 << i,
            Tree::Join(a, b) => a.mask() | b.mask(),
        }
    }
}

/// Equal up to the order of each join's inputs.
fn same_shape(a: &Tree, b: &Tree) -> bool {
    match (a, b) {
        (Tree::Leaf(i), Tree::Leaf(j)) => i == j,
        (Tree::Join(a1, a2), Tree::Join(b1, b2)) => {
            (same_shape(a1, b1) && same_shape(a2, b2)) || (same_shape(a1, b2) && same_shape(a2, b1))
        }
        _ => false,
    }
}

/// One equi-condition between two leaves.
#[derive(Debug, Clone)]
struct Edge {
    left: (usize, Expr),
    right: (usize, Expr),
}

/// Columns the cluster's equi-conditions make equal (`a.x = b.y AND b.y = c.z`), one per leaf:
/// any two of them may join their leaves (`a.x = c.z` is implied: inner joins that drop nulls),
/// and a join between leaves holding members needs one of them as a condition.
#[derive(Debug)]
struct Class {
    /// `(leaf, column)`, at most one per leaf.
    members: Vec<(usize, Expr)>,
    /// The conditions as written (indices into `members`), preferred when a join needs one.
    written: Vec<(usize, usize)>,
}

/// A cluster's equi-conditions: the classes of equal columns, and the conditions outside any
/// class (an expression on a side, or a class with two columns of one leaf, which stays as
/// written).
#[derive(Debug, Default)]
struct Keys {
    edges: Vec<Edge>,
    classes: Vec<Class>,
}

impl Class {
    /// One condition joining a member in `left` with one in `right` (leaf masks): a written
    /// one if there is one, else an implied one; `None` if a side holds no member.
    fn across(&self, left: u64, right: u64) -> Option<(Expr, Expr)> {
        let inside = |m: u64, i: usize| m & (1 << self.members[i].0) != 0;
        let written = self.written.iter().find_map(|&(a, b)| {
            if inside(left, a) && inside(right, b) {
                Some((a, b))
            } else if inside(left, b) && inside(right, a) {
                Some((b, a))
            } else {
                None
            }
        });
        let (l, r) = match written {
            Some(pair) => pair,
            None => (
                (0..self.members.len()).find(|&i| inside(left, i))?,
                (0..self.members.len()).find(|&i| inside(right, i))?,
            ),
        };
        Some((self.members[l].1.clone(), self.members[r].1.clone()))
    }
}

/// The leaves and conditions of one inner-join cluster.
#[derive(Debug, Default)]
pub(crate) struct Cluster {
    pub(crate) leaves: Vec<LogicalPlan>,
    /// Every equi-condition as written, before the leaves are known.
    pub(crate) on: Vec<(Expr, Expr)>,
    /// Non-equi conditions of the cluster's joins.
    residuals: Vec<Expr>,
    /// Scans may run a join's dynamic filter on their rows (`Model::join_cost`).
    pub(crate) dynamic_row_filters: bool,
}

impl Cluster {
    /// Collects the leaves and conditions under `plan`; returns its join tree.
    pub(crate) fn flatten(&mut self, plan: &LogicalPlan) -> Tree {
        match plan {
            LogicalPlan::Join(j) if is_cluster_join(plan) => {
                let left = self.flatten(&j.left);
                let right = self.flatten(&j.right);
                self.on.extend(j.on.iter().cloned());
                if let Some(f) = &j.filter {
                    self.residuals
                        .extend(split_conjunction(f).into_iter().cloned());
                }
                Tree::Join(Box::new(left), Box::new(right))
            }
            // Column pruning puts projections of plain columns between joins: they only drop
            // columns, and the rebuilt cluster projects the original output at the top.
            LogicalPlan::Projection(p)
                if is_cluster_join(&p.input)
                    && p.expr.iter().all(|e| matches!(e, Expr::Column(_))) =>
            {
                self.flatten(&p.input)
            }
            other => {
                self.leaves.push(other.clone());
                Tree::Leaf(self.leaves.len() - 1)
            }
        }
    }

    /// The leaves whose columns `expr` reads, as a mask; `None` if a column is in no leaf or
    /// in several (projections looked through can expose two scans of one table).
    pub(crate) fn leaves_of(&self, expr: &Expr) -> Option<u64> {
        let mut mask = 0;
        for c in expr.column_refs() {
            mask |= 1 << self.leaf_of(c)?;
        }
        Some(mask)
    }

    /// The only leaf holding column `c`.
    pub(crate) fn leaf_of(&self, c: &Column) -> Option<usize> {
        let mut holding = self
            .leaves
            .iter()
            .enumerate()
            .filter(|(_, l)| l.schema().has_column(c));
        let (i, _) = holding.next()?;
        holding.next().is_none().then_some(i)
    }

    /// The conditions between two different leaves, `None` if one reads no leaf, several, or
    /// both sides the same one.
    fn edges(&self) -> Option<Vec<Edge>> {
        self.on
            .iter()
            .map(|(l, r)| {
                let (a, b) = (self.leaves_of(l)?, self.leaves_of(r)?);
                (a.count_ones() == 1 && b.count_ones() == 1 && a != b).then(|| Edge {
                    left: (a.trailing_zeros() as usize, l.clone()),
                    right: (b.trailing_zeros() as usize, r.clone()),
                })
            })
            .collect()
    }

    /// The conditions grouped into classes of equal columns (column = column conditions joined
    /// transitively); `None` as for [`Cluster::edges`].
    fn keys(&self) -> Option<Keys> {
        let edges = self.edges()?;
        // Union-find over the (leaf, column) pairs of column = column conditions.
        let mut nodes: Vec<(usize, Expr)> = Vec::new();
        let mut node = |side: &(usize, Expr)| match nodes.iter().position(|n| n == side) {
            Some(i) => i,
            None => {
                nodes.push(side.clone());
                nodes.len() - 1
            }
        };
        let mut links = Vec::new();
        let mut plain = Vec::new();
        for e in edges {
            if matches!((&e.left.1, &e.right.1), (Expr::Column(_), Expr::Column(_))) {
                links.push((node(&e.left), node(&e.right), e));
            } else {
                plain.push(e);
            }
        }
        let mut parent: Vec<usize> = (0..nodes.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        for &(a, b, _) in &links {
            let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
            parent[ra] = rb;
        }
        let mut classes: Vec<(usize, Class)> = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let r = root(&mut parent, i);
            let at = match classes.iter().position(|(root, _)| *root == r) {
                Some(at) => at,
                None => {
                    classes.push((
                        r,
                        Class {
                            members: Vec::new(),
                            written: Vec::new(),
                        },
                    ));
                    classes.len() - 1
                }
            };
            classes[at].1.members.push(node.clone());
        }
        let mut kept = Vec::new();
        for (r, mut class) in classes {
            let one_per_leaf = class
                .members
                .iter()
                .enumerate()
                .all(|(i, (leaf, _))| class.members[..i].iter().all(|(l, _)| l != leaf));
            let own = links.iter().filter(|(a, _, _)| root(&mut parent, *a) == r);
            if one_per_leaf {
                let at = |n: &(usize, Expr)| class.members.iter().position(|m| m == n);
                class.written = own
                    .filter_map(|(a, b, _)| Some((at(&nodes[*a])?, at(&nodes[*b])?)))
                    .collect();
                kept.push(class);
            } else {
                plain.extend(own.map(|(_, _, e)| e.clone()));
            }
        }
        Some(Keys {
            edges: plain,
            classes: kept,
        })
    }

    /// The cluster's conditions and the model of its estimates.
    fn model(&self) -> Option<(Keys, Model)> {
        let keys = self.keys()?;
        let model = Model::new(&self.leaves, &keys, self.dynamic_row_filters);
        Some((keys, model))
    }

    /// Whether `order` (of estimated `cost`) replaces the `written` one: its cost is below
    /// [`MIN_GAIN`] × the written order's, or it joins through a condition the query implies
    /// but does not write, costs less, and its joins output below [`MIN_GAIN`] × the written
    /// order's rows. The second test sees a cut in the intermediate results that the rows every
    /// order reads hide: TPC-H q05 at SF 10 joined customer with the ASIA nations first at 0.86
    /// × the written order's estimated cost and 0.22 × its join outputs, and ran 15 % faster
    /// (SF 1: 20 %). Among written conditions it took an order of q07 that ran 1.17× slower at
    /// SF 10 (`bench/reports/issue32-progress-20261205.md`), hence the implied condition.
    fn pays(&self, order: &Tree, cost: f64, written: &Tree) -> bool {
        let Some((keys, model)) = self.model() else {
            return false;
        };
        let written_cost = model.tree_cost(written);
        let (out, written_out) = (model.tree_outputs(order), model.tree_outputs(written));
        cost < MIN_GAIN * written_cost
            || (cost < written_cost
                && out < MIN_GAIN * written_out
                && joins_through_implied(order, &keys))
    }

    /// The cheapest order and its cost, or `None` where the cluster cannot be ordered (a
    /// condition over one leaf or none, a disconnected graph, more than 64 leaves).
    fn order(&self) -> Option<(Tree, f64)> {
        let n = self.leaves.len();
        if !(3..=64).contains(&n) {
            return None;
        }
        let (_, model) = self.model()?;
        // A volatile condition (`random() < a.p`) must stay where it was evaluated.
        let volatile = self
            .on
            .iter()
            .flat_map(|(l, r)| [l, r])
            .chain(&self.residuals)
            .any(|e| e.is_volatile());
        if volatile || self.residuals.iter().any(|r| self.leaves_of(r).is_none()) {
            return None;
        }
        let tree = if n <= DP_MAX_LEAVES {
            model.dynamic_programming()
        } else {
            model.greedy()
        }?;
        let cost = model.tree_cost(&tree);
        Some((tree, cost))
    }

    /// The plan of `tree` and the mask of its leaves. Each residual filter goes to the lowest
    /// join holding its columns (one that reads a single leaf onto that leaf, one that reads
    /// none onto the top join).
    ///
    /// Each join below the top keeps only the columns of `output` (the cluster's) and those a
    /// condition above it still reads.
    fn build(&self, tree: &Tree, output: &[Column]) -> Result<(LogicalPlan, u64)> {
        let keys = self.keys().unwrap_or_default();
        let model = Model::new(&self.leaves, &keys, self.dynamic_row_filters);
        let full = tree.mask();
        let residuals: Vec<(u64, &Expr)> = self
            .residuals
            .iter()
            .map(|r| match self.leaves_of(r) {
                Some(0) | None => (full, r),
                Some(m) => (m, r),
            })
            .collect();
        let needed = |c: &Column, inside: u64| {
            let outside = |leaf: usize| inside & (1 << leaf) == 0;
            output.contains(c)
                || keys.edges.iter().any(|e| {
                    (outside(e.left.0) && e.right.1.column_refs().contains(&c))
                        || (outside(e.right.0) && e.left.1.column_refs().contains(&c))
                })
                || keys.classes.iter().any(|class| {
                    class
                        .members
                        .iter()
                        .any(|(_, m)| m.column_refs().contains(&c))
                        && class.members.iter().any(|(leaf, _)| outside(*leaf))
                })
                || residuals
                    .iter()
                    .any(|(m, r)| m & !inside != 0 && r.column_refs().contains(&c))
        };
        self.build_with(tree, &keys, &model, &residuals, &needed)
    }

    fn build_with(
        &self,
        tree: &Tree,
        keys: &Keys,
        model: &Model,
        residuals: &[(u64, &Expr)],
        needed: &dyn Fn(&Column, u64) -> bool,
    ) -> Result<(LogicalPlan, u64)> {
        match tree {
            Tree::Leaf(i) => {
                let leaf = self.leaves[*i].clone();
                let own = residuals
                    .iter()
                    .filter(|(m, _)| *m == 1 << i)
                    .map(|(_, r)| (*r).clone());
                let leaf = match conjunction(own) {
                    Some(predicate) => LogicalPlan::Filter(
                        datafusion::logical_expr::Filter::try_new(predicate, Arc::new(leaf))?,
                    ),
                    None => leaf,
                };
                Ok((leaf, 1 << i))
            }
            Tree::Join(a, b) => {
                let (mut left, mut lm) = self.build_with(a, keys, model, residuals, needed)?;
                let (mut right, mut rm) = self.build_with(b, keys, model, residuals, needed)?;
                if model.rows(rm) < model.rows(lm) {
                    std::mem::swap(&mut left, &mut right);
                    std::mem::swap(&mut lm, &mut rm);
                }
                let mut on: Vec<(Expr, Expr)> = keys
                    .edges
                    .iter()
                    .filter_map(|e| {
                        let (l, r) = (1u64 << e.left.0, 1u64 << e.right.0);
                        if l & lm != 0 && r & rm != 0 {
                            Some((e.left.1.clone(), e.right.1.clone()))
                        } else if l & rm != 0 && r & lm != 0 {
                            Some((e.right.1.clone(), e.left.1.clone()))
                        } else {
                            None
                        }
                    })
                    .collect();
                // One condition per class with members on both sides: within each side its
                // members are already equal (one condition at every join below).
                on.extend(keys.classes.iter().filter_map(|class| class.across(lm, rm)));
                let both = lm | rm;
                let filter = conjunction(
                    residuals
                        .iter()
                        .filter(|(m, _)| m & !both == 0 && m & !lm != 0 && m & !rm != 0)
                        .map(|(_, r)| (*r).clone()),
                );
                let join = Join::try_new(
                    Arc::new(left),
                    Arc::new(right),
                    on,
                    filter,
                    JoinType::Inner,
                    JoinConstraint::On,
                    NullEquality::NullEqualsNothing,
                    false,
                )?;
                let joined = LogicalPlan::Join(join);
                let keep: Vec<Expr> = joined
                    .schema()
                    .iter()
                    .map(|(q, f)| Column::new(q.cloned(), f.name()))
                    .filter(|c| needed(c, both))
                    .map(Expr::Column)
                    .collect();
                if keep.is_empty() || keep.len() == joined.schema().fields().len() {
                    return Ok((joined, both));
                }
                let pruned = Projection::try_new(keep, Arc::new(joined))?;
                Ok((LogicalPlan::Projection(pruned), both))
            }
        }
    }
}

/// Cardinality estimates of a cluster's subsets.
struct Model {
    rows: Vec<f64>,
    /// Per leaf: a scan (through filters and projections) whose rows a join's dynamic filter
    /// can drop inside it, with the settings that let it (`iceflight.scan.dynamic_filter_pruning`
    /// and `iceflight.scan.dynamic_row_filter`).
    filtered_in_scan: Vec<bool>,
    /// `(leaf a, leaf b, selectivity)` of every pair of leaves joined by conditions outside
    /// the classes: the product of their selectivities, floored at 1 / max(rows a, rows b) (a
    /// composite key still matches each row of the larger side at most once in the estimate).
    pairs: Vec<(usize, usize, f64)>,
    /// Per class of equal columns: `(leaf, distinct count)` of its members. `k` members in a
    /// subset keep 1 / d^(k − 1) of the product of their rows, d the largest distinct count
    /// among them (the column with the most values bounds how many can match).
    classes: Vec<Vec<(usize, f64)>>,
    /// `(leaf a, leaf b, factor ≥ 1)` where two or more classes join a and b: their combined
    /// selectivity is floored at 1 / max(rows a, rows b) as for `pairs`.
    floors: Vec<(usize, usize, f64)>,
}

impl Model {
    fn new(leaves: &[LogicalPlan], keys: &Keys, dynamic_row_filters: bool) -> Self {
        let rows: Vec<f64> = leaves.iter().map(|l| rows(l).max(1.0)).collect();
        let filtered_in_scan = leaves
            .iter()
            .map(|l| dynamic_row_filters && is_scan(l))
            .collect();
        let ndv = |(i, expr): &(usize, Expr)| match expr {
            Expr::Column(c) => ndv(&leaves[*i], c).unwrap_or(rows[*i]).min(rows[*i]),
            _ => rows[*i],
        };
        let mut by_pair: HashMap<(usize, usize), f64> = HashMap::new();
        for e in &keys.edges {
            let (a, b) = (e.left.0.min(e.right.0), e.left.0.max(e.right.0));
            let s = 1.0 / ndv(&e.left).max(ndv(&e.right)).max(1.0);
            *by_pair.entry((a, b)).or_insert(1.0) *= s;
        }
        let pairs: Vec<(usize, usize, f64)> = by_pair
            .into_iter()
            .map(|((a, b), s)| (a, b, s.max(1.0 / rows[a].max(rows[b]))))
            .collect();
        let classes = keys
            .classes
            .iter()
            .map(|c| c.members.iter().map(|m| (m.0, ndv(m).max(1.0))).collect())
            .collect();
        Self::from_parts(rows, filtered_in_scan, pairs, classes)
    }

    /// The model of these estimates, with the floors of leaves joined by several classes.
    fn from_parts(
        rows: Vec<f64>,
        filtered_in_scan: Vec<bool>,
        mut pairs: Vec<(usize, usize, f64)>,
        classes: Vec<Vec<(usize, f64)>>,
    ) -> Self {
        pairs.sort_by_key(|&(a, b, _)| (a, b));
        let mut shared: HashMap<(usize, usize), (usize, f64)> = HashMap::new();
        for class in &classes {
            for (i, &(a, da)) in class.iter().enumerate() {
                for &(b, db) in &class[i + 1..] {
                    let e = shared.entry((a.min(b), a.max(b))).or_insert((0, 1.0));
                    e.0 += 1;
                    e.1 /= da.max(db);
                }
            }
        }
        let mut floors: Vec<(usize, usize, f64)> = shared
            .into_iter()
            .filter_map(|((a, b), (n, s))| {
                let floor = 1.0 / rows[a].max(rows[b]);
                (n >= 2 && s < floor).then_some((a, b, floor / s))
            })
            .collect();
        floors.sort_by_key(|&(a, b, _)| (a, b));
        Self {
            rows,
            filtered_in_scan,
            pairs,
            classes,
            floors,
        }
    }

    /// Estimated rows of joining the leaves in `mask`.
    fn rows(&self, mask: u64) -> f64 {
        let inside = |i: usize| mask & (1 << i) != 0;
        let mut r: f64 = (0..self.rows.len())
            .filter(|&i| inside(i))
            .map(|i| self.rows[i])
            .product();
        for &(a, b, s) in &self.pairs {
            if inside(a) && inside(b) {
                r *= s;
            }
        }
        for class in &self.classes {
            let (k, d) = class
                .iter()
                .filter(|(i, _)| inside(*i))
                .fold((0, 1.0f64), |(k, d), &(_, n)| (k + 1, d.max(n)));
            if k >= 2 {
                r /= d.powi(k - 1);
            }
        }
        for &(a, b, f) in &self.floors {
            if inside(a) && inside(b) {
                r *= f;
            }
        }
        r.max(1.0)
    }

    /// The estimated cost of joining in the order of `tree` ([`Self::join_cost`] summed).
    fn tree_cost(&self, tree: &Tree) -> f64 {
        match tree {
            Tree::Leaf(_) => 0.0,
            Tree::Join(a, b) => {
                self.tree_cost(a) + self.tree_cost(b) + self.join_cost(a.mask(), b.mask())
            }
        }
    }

    /// The estimated rows the joins of `tree` output, summed (C_out).
    fn tree_outputs(&self, tree: &Tree) -> f64 {
        match tree {
            Tree::Leaf(_) => 0.0,
            Tree::Join(a, b) => {
                self.tree_outputs(a) + self.tree_outputs(b) + self.rows(tree.mask())
            }
        }
    }

    /// The pairs of leaves a condition joins directly (written or implied by a class).
    fn links(&self) -> Vec<(usize, usize)> {
        let mut links: Vec<(usize, usize)> = self.pairs.iter().map(|&(a, b, _)| (a, b)).collect();
        for class in &self.classes {
            for (i, &(a, _)) in class.iter().enumerate() {
                links.extend(class[i + 1..].iter().map(|&(b, _)| (a.min(b), a.max(b))));
            }
        }
        links.sort_unstable();
        links.dedup();
        links
    }

    /// The estimated cost of joining the leaves in `a` with those in `b`: its output rows
    /// (C_out) plus the rows each input that is a leaf feeds it. The smaller input is the build
    /// side: a leaf there feeds all its rows into the hash table. A leaf on the probe side
    /// feeds all its rows too, unless it is a scan with dynamic row filters on and the build
    /// side is at most [`CHEAP_BUILD_ROWS`]: then the join's dynamic filter is cheap enough to
    /// run in the scan (`row_filter.rs`), and only the rows the join keeps leave it.
    fn join_cost(&self, a: u64, b: u64) -> f64 {
        let out = self.rows(a | b);
        let (ra, rb) = (self.rows(a), self.rows(b));
        let (build, probe, rbuild, rprobe) = if rb < ra {
            (b, a, rb, ra)
        } else {
            (a, b, ra, rb)
        };
        let leaf = |m: u64| m.count_ones() == 1;
        let mut cost = out;
        if leaf(build) {
            cost += rbuild;
        }
        if leaf(probe) {
            let scan = self.filtered_in_scan[probe.trailing_zeros() as usize];
            cost += if scan && rbuild <= CHEAP_BUILD_ROWS {
                rprobe.min(out)
            } else {
                rprobe
            };
        }
        cost
    }

    fn connected(&self, a: u64, b: u64) -> bool {
        let joins = |x: usize, y: usize| {
            (a & (1 << x) != 0 && b & (1 << y) != 0) || (a & (1 << y) != 0 && b & (1 << x) != 0)
        };
        self.pairs.iter().any(|&(x, y, _)| joins(x, y))
            || self.classes.iter().any(|class| {
                class.iter().any(|&(x, _)| a & (1 << x) != 0)
                    && class.iter().any(|&(y, _)| b & (1 << y) != 0)
            })
    }

    /// The order of least cost (`join_cost` summed) over connected subsets (no cross products).
    fn dynamic_programming(&self) -> Option<Tree> {
        let n = self.rows.len();
        let full: u64 = (1 << n) - 1;
        let mut best: HashMap<u64, (f64, Tree)> = HashMap::new();
        for i in 0..n {
            best.insert(1 << i, (0.0, Tree::Leaf(i)));
        }
        let mut masks: Vec<u64> = (1..=full).filter(|m| m.count_ones() >= 2).collect();
        masks.sort_by_key(|m| (m.count_ones(), *m));
        for mask in masks {
            let mut choice: Option<(f64, Tree)> = None;
            // Each split once: the part holding the lowest leaf is `a`.
            let low = mask & mask.wrapping_neg();
            let mut a = (mask - 1) & mask;
            while a > 0 {
                let b = mask ^ a;
                if a & low != 0
                    && let (Some((ca, ta)), Some((cb, tb))) = (best.get(&a), best.get(&b))
                    && self.connected(a, b)
                {
                    let cost = ca + cb + self.join_cost(a, b);
                    if choice.as_ref().is_none_or(|(c, _)| cost < *c) {
                        choice =
                            Some((cost, Tree::Join(Box::new(ta.clone()), Box::new(tb.clone()))));
                    }
                }
                a = (a - 1) & mask;
            }
            if let Some(c) = choice {
                best.insert(mask, c);
            }
        }
        best.remove(&full).map(|(_, t)| t)
    }

    /// Left-deep: the cheapest connected pair first, then always the connected leaf whose join
    /// is smallest.
    fn greedy(&self) -> Option<Tree> {
        let n = self.rows.len();
        let (a, b) = self.links().into_iter().min_by(|x, y| {
            self.rows((1 << x.0) | (1 << x.1))
                .total_cmp(&self.rows((1 << y.0) | (1 << y.1)))
        })?;
        let mut tree = Tree::Join(Box::new(Tree::Leaf(a)), Box::new(Tree::Leaf(b)));
        let mut mask = (1u64 << a) | (1 << b);
        while mask.count_ones() < n as u32 {
            let next = (0..n)
                .filter(|i| mask & (1 << i) == 0 && self.connected(mask, 1 << i))
                .min_by(|&x, &y| {
                    self.rows(mask | (1 << x))
                        .total_cmp(&self.rows(mask | (1 << y)))
                })?;
            tree = Tree::Join(Box::new(tree), Box::new(Tree::Leaf(next)));
            mask |= 1 << next;
        }
        debug_assert_eq!(tree.mask(), mask);
        Some(tree)
    }
}

/// A table scan, possibly under filters and projections: where a join's dynamic filter is
/// evaluated on the rows (an aggregate, a join or a union in between keeps it out).
fn is_scan(plan: &LogicalPlan) -> bool {
    match plan {
        LogicalPlan::TableScan(_) => true,
        LogicalPlan::Filter(f) => is_scan(&f.input),
        LogicalPlan::Projection(p) => is_scan(&p.input),
        LogicalPlan::SubqueryAlias(a) => is_scan(&a.input),
        _ => false,
    }
}

/// Estimated output rows of a plan (module docs for the rules of thumb).
pub(crate) fn rows(plan: &LogicalPlan) -> f64 {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let stats = scan_statistics(scan);
            let base = stats
                .as_ref()
                .and_then(|s| s.num_rows.get_value().copied())
                .map_or(UNKNOWN_ROWS, |r| r as f64);
            let schema = scan.source.schema();
            let sel: f64 = scan
                .filters
                .iter()
                .map(|f| selectivity(f, &|c| column_stats(stats.as_ref(), &schema, c)))
                .product();
            let r = base * sel;
            scan.fetch.map_or(r, |f| r.min(f as f64))
        }
        LogicalPlan::Filter(f) => {
            let input = rows(&f.input);
            input * selectivity(&f.predicate, &|c| leaf_column(&f.input, c))
        }
        LogicalPlan::Aggregate(a) => {
            let input = rows(&a.input);
            if a.group_expr.is_empty() {
                return 1.0;
            }
            let keys: Option<f64> = a
                .group_expr
                .iter()
                .map(|g| match g {
                    Expr::Column(c) => ndv(&a.input, c),
                    _ => None,
                })
                .product();
            keys.map_or(input / 2.0, |k| k.min(input))
        }
        LogicalPlan::Join(j) => {
            let (l, r) = (rows(&j.left), rows(&j.right));
            match j.join_type {
                JoinType::LeftSemi | JoinType::LeftAnti | JoinType::LeftMark => l / 2.0,
                JoinType::RightSemi | JoinType::RightAnti | JoinType::RightMark => r / 2.0,
                JoinType::Left => l,
                JoinType::Right => r,
                JoinType::Full => l + r,
                JoinType::Inner if j.on.is_empty() && j.filter.is_none() => l * r,
                JoinType::Inner => l.max(r),
            }
        }
        LogicalPlan::Limit(l) => {
            let input = rows(&l.input);
            match l.get_fetch_type() {
                Ok(datafusion::logical_expr::FetchType::Literal(Some(n))) => input.min(n as f64),
                _ => input,
            }
        }
        LogicalPlan::Union(u) => u.inputs.iter().map(|i| rows(i)).sum(),
        LogicalPlan::Values(v) => v.values.len() as f64,
        LogicalPlan::EmptyRelation(_) => 1.0,
        other => other.inputs().first().map_or(UNKNOWN_ROWS, |i| rows(i)),
    }
}

fn scan_statistics(scan: &datafusion::logical_expr::TableScan) -> Option<Statistics> {
    source_as_provider(&scan.source).ok()?.statistics()
}

/// Statistics of column `c` (by name) in a table's full-schema statistics.
fn column_stats(
    stats: Option<&Statistics>,
    schema: &arrow::datatypes::Schema,
    c: &Column,
) -> Option<datafusion::common::ColumnStatistics> {
    let i = schema.index_of(c.name()).ok()?;
    stats?.column_statistics.get(i).cloned()
}

/// The statistics of column `c` from the scan under `plan` that produces it (through filters,
/// projections of plain columns, aliases and joins), by column name.
fn leaf_column(plan: &LogicalPlan, c: &Column) -> Option<datafusion::common::ColumnStatistics> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            column_stats(scan_statistics(scan).as_ref(), &scan.source.schema(), c)
        }
        LogicalPlan::Aggregate(_) | LogicalPlan::Window(_) | LogicalPlan::Union(_) => None,
        other => other.inputs().into_iter().find_map(|i| {
            i.schema()
                .fields()
                .iter()
                .any(|f| f.name() == c.name())
                .then(|| leaf_column(i, c))
                .flatten()
        }),
    }
}

/// Distinct values of column `c` in `plan`'s output: the scan's, capped at the plan's rows.
pub(crate) fn ndv(plan: &LogicalPlan, c: &Column) -> Option<f64> {
    let stats = leaf_column(plan, c)?;
    let d = *stats.distinct_count.get_value()? as f64;
    Some(d.min(rows(plan)).max(1.0))
}

/// Fraction of rows `predicate` keeps (module docs), with column statistics from `stats`.
fn selectivity(
    predicate: &Expr,
    stats: &dyn Fn(&Column) -> Option<datafusion::common::ColumnStatistics>,
) -> f64 {
    let ndv = |e: &Expr| -> Option<f64> {
        let Expr::Column(c) = e else { return None };
        Some((*stats(c)?.distinct_count.get_value()? as f64).max(1.0))
    };
    let s = match predicate {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => selectivity(left, stats) * selectivity(right, stats),
            Operator::Or => {
                let (a, b) = (selectivity(left, stats), selectivity(right, stats));
                a + b - a * b
            }
            Operator::Eq => {
                let (col, lit) = column_and_literal(left, right);
                match (col, lit) {
                    (Some(c), Some(_)) => ndv(c).map_or(EQ_UNKNOWN, |d| 1.0 / d),
                    _ => EQ_UNKNOWN,
                }
            }
            Operator::NotEq => 1.0 - EQ_UNKNOWN,
            Operator::Lt | Operator::LtEq | Operator::Gt | Operator::GtEq => {
                range_share(left, *op, right, stats).unwrap_or(RANGE_UNKNOWN)
            }
            Operator::LikeMatch | Operator::ILikeMatch => LIKE_UNKNOWN,
            Operator::NotLikeMatch | Operator::NotILikeMatch => 1.0 - LIKE_UNKNOWN,
            _ => OTHER_UNKNOWN,
        },
        Expr::Between(b) => {
            let low = range_share(&b.expr, Operator::GtEq, &b.low, stats);
            let high = range_share(&b.expr, Operator::LtEq, &b.high, stats);
            let s = match (low, high) {
                (Some(l), Some(h)) => (l + h - 1.0).max(0.0),
                _ => 0.25,
            };
            if b.negated { 1.0 - s } else { s }
        }
        Expr::InList(l) => {
            let n = l.list.len() as f64;
            let s = ndv(&l.expr).map_or(EQ_UNKNOWN * n, |d| n / d).min(1.0);
            if l.negated { 1.0 - s } else { s }
        }
        Expr::Like(l) => {
            if l.negated {
                1.0 - LIKE_UNKNOWN
            } else {
                LIKE_UNKNOWN
            }
        }
        Expr::Not(e) => 1.0 - selectivity(e, stats),
        Expr::IsNull(_) => IS_NULL_UNKNOWN,
        Expr::IsNotNull(_) => 1.0 - IS_NULL_UNKNOWN,
        _ => OTHER_UNKNOWN,
    };
    s.clamp(1e-9, 1.0)
}

fn column_and_literal<'a>(a: &'a Expr, b: &'a Expr) -> (Option<&'a Expr>, Option<&'a ScalarValue>) {
    match (a, b) {
        (Expr::Column(_), Expr::Literal(v, _)) => (Some(a), Some(v)),
        (Expr::Literal(v, _), Expr::Column(_)) => (Some(b), Some(v)),
        _ => (None, None),
    }
}

/// Share of the column's bounds that `col op literal` keeps; `None` without numeric bounds.
fn range_share(
    left: &Expr,
    op: Operator,
    right: &Expr,
    stats: &dyn Fn(&Column) -> Option<datafusion::common::ColumnStatistics>,
) -> Option<f64> {
    let (op, c, v) = match (left, right) {
        (Expr::Column(c), Expr::Literal(v, _)) => (op, c, v),
        (Expr::Literal(v, _), Expr::Column(c)) => (op.swap()?, c, v),
        _ => return None,
    };
    let s = stats(c)?;
    let (lo, hi) = (
        number(s.min_value.get_value()?)?,
        number(s.max_value.get_value()?)?,
    );
    crate::filter_selectivity::range_share(lo, hi, op, number(v)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TPC-H q05 at scale factor `sf` as the model sees it: customer, orders in 1994,
    /// lineitem, supplier, nation, region = 'ASIA' (rows), joined on their keys (classes of
    /// equal columns with their distinct counts; `c_nationkey = s_nationkey = n_nationkey` is
    /// one class of three).
    fn q05_at(sf: f64) -> Model {
        let rows = vec![
            150_000.0 * sf,
            227_000.0 * sf,
            6_000_000.0 * sf,
            10_000.0 * sf,
            25.0,
            1.0,
        ];
        let (c, o, l, s, n, r) = (0, 1, 2, 3, 4, 5);
        let classes = vec![
            vec![(c, 150_000.0 * sf), (o, 100_000.0 * sf)],
            vec![(o, 227_000.0 * sf), (l, 1_500_000.0 * sf)],
            vec![(l, 10_000.0 * sf), (s, 10_000.0 * sf)],
            vec![(c, 25.0), (s, 25.0), (n, 25.0)],
            vec![(n, 5.0), (r, 1.0)],
        ];
        Model::from_parts(rows, vec![true; 6], Vec::new(), classes)
    }

    fn q05() -> Model {
        q05_at(1.0)
    }

    fn join(a: Tree, b: Tree) -> Tree {
        Tree::Join(Box::new(a), Box::new(b))
    }

    /// The leaves joined with leaf `leaf` first (its sibling's mask), in `tree`.
    fn partner(tree: &Tree, leaf: usize) -> Option<u64> {
        match tree {
            Tree::Leaf(_) => None,
            Tree::Join(a, b) => {
                if matches!(**a, Tree::Leaf(i) if i == leaf) {
                    Some(b.mask())
                } else if matches!(**b, Tree::Leaf(i) if i == leaf) {
                    Some(a.mask())
                } else {
                    partner(a, leaf).or_else(|| partner(b, leaf))
                }
            }
        }
    }

    /// A probe-side scan costs its full size unless the build side is small enough for the
    /// join's dynamic filter to run in the scan: q05 joins lineitem with the 2 K ASIA
    /// suppliers (supplier, nation, region) before the 227 K orders of 1994.
    #[test]
    fn q05_joins_lineitem_with_the_small_supplier_side_first() {
        let model = q05();
        let tree = model.dynamic_programming().unwrap();
        let (s, n, r) = (1 << 3, 1 << 4, 1 << 5);
        assert_eq!(partner(&tree, 2), Some(s | n | r), "{tree:?}");
        // lineitem probed through the suppliers (≈ 2 000 rows): only the rows the join keeps
        // count; probed through customer ⋈ orders (≈ 227 000): all 6 M.
        let small = model.join_cost(1 << 2, s | n | r);
        let large = model.join_cost(1 << 2, 1 | 2);
        assert!(model.rows(s | n | r) <= CHEAP_BUILD_ROWS);
        assert!(large > 6_000_000.0 && small < 2.5e6, "{small} {large}");
        // Taken: below MIN_GAIN × the cost of the order written in the query (customer, orders,
        // lineitem, supplier, nation, region, left-deep).
        let written = (1..6).fold(Tree::Leaf(0), |t, i| join(t, Tree::Leaf(i)));
        assert!(model.tree_cost(&tree) < MIN_GAIN * model.tree_cost(&written));
        // Without dynamic row filters in scans, lineitem costs its full size either way: the
        // order is no longer below half the written one's cost.
        let model = Model {
            filtered_in_scan: vec![false; 6],
            ..q05()
        };
        let tree = model.dynamic_programming().unwrap();
        assert!(model.tree_cost(&tree) >= MIN_GAIN * model.tree_cost(&written));
    }

    /// At SF 10 the ASIA suppliers (20 K) are too many for a cheap dynamic filter: customer
    /// joins the ASIA nations first, through `c_nationkey = n_nationkey`, a condition the
    /// query implies (`c_nationkey = s_nationkey AND s_nationkey = n_nationkey`) but does not
    /// write. Every order reads all of lineitem, so the cost falls only to 0.86 × the written
    /// order's; the joins' outputs fall below half, and `Cluster::pays` takes it.
    #[test]
    fn q05_at_sf10_joins_customer_with_the_asia_nations_first() {
        let model = q05_at(10.0);
        let tree = model.dynamic_programming().unwrap();
        let (c, n, r) = (0, 1 << 4, 1 << 5);
        assert_eq!(partner(&tree, c), Some(n | r), "{tree:?}");
        let written = (1..6).fold(Tree::Leaf(0), |t, i| join(t, Tree::Leaf(i)));
        let (new, old) = (model.tree_cost(&tree), model.tree_cost(&written));
        assert!(new < old && new >= MIN_GAIN * old, "{new} {old}");
        let (new, old) = (model.tree_outputs(&tree), model.tree_outputs(&written));
        assert!(new < MIN_GAIN * old, "{new} {old}");
    }

    /// A class of `k` members in a subset counts `k − 1` conditions (the third equality of
    /// `c = s = n` is implied, not a further filter); two classes joining the same two leaves
    /// keep at least one match per row of the larger (a composite key).
    #[test]
    fn classes_count_each_implied_condition_once() {
        let model = q05();
        let (c, s, n) = (1, 1 << 3, 1 << 4);
        let product = 150_000.0 * 10_000.0 * 25.0;
        assert_eq!(model.rows(c | s | n), product / (25.0 * 25.0));
        assert!(model.connected(c, n), "implied: c_nationkey = n_nationkey");
        // partsupp (800 K) and lineitem (6 M) on partkey (200 K values) and suppkey (10 K).
        let model = Model::from_parts(
            vec![800_000.0, 6_000_000.0],
            vec![true; 2],
            Vec::new(),
            vec![
                vec![(0, 200_000.0), (1, 200_000.0)],
                vec![(0, 10_000.0), (1, 10_000.0)],
            ],
        );
        assert_eq!(model.rows(0b11), 800_000.0);
    }

    /// A leaf on the build side always feeds all its rows; a join of two joins only its output.
    #[test]
    fn join_cost_counts_leaves_and_outputs() {
        let model = q05();
        let (n, r) = (1 << 4, 1 << 5);
        // nation (25) ⋈ region (1): the output (5), region builds (1), nation probes through
        // a tiny build side (only its 5 kept rows).
        assert_eq!(model.join_cost(n, r), 5.0 + 1.0 + 5.0);
        let (c, o, s) = (1, 2, 1 << 3);
        assert_eq!(
            model.join_cost(c | o, s | n | r),
            model.rows(c | o | s | n | r)
        );
    }
}
