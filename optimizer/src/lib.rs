//! iceflight's optimizer rules that need no Iceberg, each behind an `iceflight.optimizer.*`
//! setting (`iceflight-options`): the analyzer rule [`shared_ctes::SharedCtes`] (with its
//! barrier node and planner in [`cte_reference`]); logical [`join_order::JoinOrder`],
//! [`aggregate_reduction::AggregateReduction`] and [`grouping_sets::GroupingSetsFromFinest`];
//! physical
//! [`filter_selectivity::FilterSelectivity`], [`join_partition_mode::JoinPartitionMode`],
//! [`eager_aggregation::EagerAggregation`],
//! [`constant_group_keys::ConstantGroupKeys`], [`like_segments::LikeSegments`],
//! [`decimal_arithmetic::DecimalArithmetic`] (the last two
//! through `expr_rewrite`), [`join_filters::NullSafeJoinFilters`] and
//! [`outer_join_constants::OuterJoinConstants`]. The rules that rewrite
//! the Iceberg scan itself live with it (`scan/src/exec/`).

pub mod aggregate_reduction;
pub mod constant_group_keys;
pub mod cte_reference;
pub mod decimal_arithmetic;
pub mod eager_aggregation;
pub(crate) mod expr_rewrite;
pub mod filter_selectivity;
pub mod grouping_sets;
pub mod join_filters;
pub mod join_order;
pub mod join_partition_mode;
pub mod like_segments;
pub mod outer_join_constants;
pub mod shared_ctes;
#[cfg(test)]
mod test_rows;
