//! What iceflight needs of Iceberg that iceberg 0.10.1 keeps private or lacks: the
//! [`commit`] of snapshots its transactions cannot produce (row-level changes: data files
//! removed and added, delete files added, deletion vectors replaced), behind the
//! [`commit::CommitCatalog`] trait the catalogs implement, the [`deletion_vector`] blob
//! (Puffin `deletion-vector-v1`, read and written), [`row_lineage`] (first row ids a
//! manifest entry inherits), [`snapshots`] (rollback and expiry), [`orphan_files`] (files nothing references), [`add_files`] (Parquet files
//! already in storage added as data files) and [`time_travel`] (a table read at
//! another snapshot). Below `iceflight-catalog` and
//! `iceflight-scan`; it goes away once iceberg can write overwrite snapshots itself.

pub mod add_files;
pub mod commit;
pub mod deletion_vector;
pub mod orphan_files;
pub mod row_lineage;
pub mod snapshots;
pub mod time_travel;
