//! The workload record: what each executed scan of a table filtered on and what that pruned,
//! kept engine-wide in bounded memory, and the layout advice drawn from it.
//!
//! ```text
//!   IcebergScanExec::execute ──► AccessRecorder (one per executed scan, shared by its partitions)
//!   last partition stream and the plan dropped ──► ScanAccess: table, filters (column, shape,
//!       static or dynamic, the share of the column's value range its domain spans), files
//!       planned / pruned / opened, row groups and pages pruned / read, bytes read
//!   ──► TableAccessLog: the last ACCESS_KEPT scans, and totals per table (Prometheus);
//!       with a journal (`[maintenance] table_access_file`) each scan is also appended to it as
//!       one JSON line, and read back when the engine starts (kept to the last ACCESS_KEPT)
//!   ──► layout_advice: per table, the sort column that would let the recorded filters skip
//!       the largest share of bytes
//! ```
//!
//! **Advice.** A table sorted by column `c` (files written in `c` order, `optimize(sort_by =>
//! 'c')`) holds disjoint ranges of `c` per file, so a scan whose domain on `c` spans a share `s`
//! of `c`'s range reads about `s` of its columns' bytes, plus a piece at the edge (files and row
//! groups are pruned by their bounds; uniform values assumed; the pieces are the table's files
//! or, when more, the row groups the scan saw); a domain of `k` known values reads at most the
//! pieces `k` spread values hit, `1 - (1 - 1/pieces)^k`. What a scan would read unpruned is
//! estimated from its bytes read and the share of the table's rows it decoded. For each column,
//! the recorded scans' estimated bytes under that order are summed (a scan without a domain on
//! `c`: its unpruned bytes, as sorting by `c` undoes any other clustering) and set against what
//! they read now; the column with the smallest estimate is advised when it beats that. Only
//! ordered types with a numeric form count (integers, floats, decimals, dates, timestamps).

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use datafusion::common::ScalarValue;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;

use crate::model::columns::ScanColumns;
use crate::plan::metrics_index::FileMetricsIndex;
use crate::pushdown::domain::{ColumnDomain, Domains};
use crate::pushdown::domain_cache::DomainCache;

/// Scans a [`TableAccessLog`] keeps (the oldest dropped first): about 1 KiB each.
pub const ACCESS_KEPT: usize = 10_000;

/// One filtered column of one scan.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FilterUse {
    /// The column (a dotted path for a struct field).
    pub column: String,
    /// What its domain is.
    pub shape: FilterShape,
    /// Whether it came from a join, TopK or aggregate at run time (`dynamic`) or the query's own
    /// filters (`static`).
    pub dynamic: bool,
    /// The share of the column's value range (its bounds over the snapshot's files) the domain
    /// spans, in `[0, 1]`; `None` for a type without a numeric form or unknown bounds.
    pub share: Option<f64>,
}

/// The shape of a column's domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FilterShape {
    /// A range of values.
    Range,
    /// A known set of values.
    Values,
    /// Only `IS NULL` passes.
    Null,
}

impl std::fmt::Display for FilterShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FilterShape::Range => "range",
            FilterShape::Values => "values",
            FilterShape::Null => "null",
        })
    }
}

/// One executed scan (module docs).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScanAccess {
    /// When the scan ended.
    pub at: SystemTime,
    /// `namespace.table`.
    pub table: String,
    /// Its filters, static ones first.
    pub filters: Vec<FilterUse>,
    /// Live data files of the snapshot.
    pub snapshot_files: u64,
    /// Bytes of those files.
    pub snapshot_bytes: u64,
    /// Files pruned by manifests, statistics or dynamic filters.
    pub files_pruned: u64,
    /// Files opened.
    pub files_read: u64,
    /// Row groups pruned / read.
    pub row_groups_pruned: u64,
    /// Row groups read.
    pub row_groups_read: u64,
    /// Pages pruned by the page index.
    pub pages_pruned: u64,
    /// Pages read where the page index was used.
    pub pages_read: u64,
    /// Bytes read from storage (or cache) for the scan's data.
    pub bytes_read: u64,
    /// Rows the Parquet reader decoded (after row group and page pruning).
    pub rows_read: u64,
    /// Rows of the snapshot's live data files.
    pub snapshot_rows: u64,
}

impl ScanAccess {
    /// What the scan would have read with no pruning, estimated from what it read and the share
    /// of the table's rows that was (its projection's bytes for the whole table); `None` when it
    /// read no row.
    pub fn unpruned_bytes(&self) -> Option<f64> {
        (self.rows_read > 0 && self.bytes_read > 0).then(|| {
            self.bytes_read as f64 * (self.snapshot_rows.max(self.rows_read) as f64)
                / self.rows_read as f64
        })
    }
}

/// Totals of one table's recorded scans (never dropped; one entry per table scanned).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccessTotals {
    /// Scans.
    pub scans: u64,
    /// Files pruned.
    pub files_pruned: u64,
    /// Files read.
    pub files_read: u64,
    /// Bytes read.
    pub bytes_read: u64,
}

/// The engine's workload record (module docs), in [`crate::read::caches::ScanCaches`].
#[derive(Debug, Default)]
pub struct TableAccessLog {
    recent: Mutex<VecDeque<ScanAccess>>,
    totals: Mutex<BTreeMap<String, AccessTotals>>,
    journal: Option<Mutex<Journal>>,
}

/// The file a persisted record appends to, and the lines it holds.
#[derive(Debug)]
struct Journal {
    path: PathBuf,
    file: File,
    lines: usize,
}

impl TableAccessLog {
    /// A record kept across restarts in the JSON-lines file `path` (created when missing):
    /// the scans it holds are read back (the last [`ACCESS_KEPT`]; lines that do not parse,
    /// such as one cut short by a crash, are skipped) and it is rewritten to hold only those.
    ///
    /// Errors: the file cannot be read, written or created.
    pub fn persisted(path: &Path) -> std::io::Result<Self> {
        let log = TableAccessLog::default();
        if let Ok(text) = std::fs::read_to_string(path) {
            for line in text.lines() {
                if let Ok(access) = serde_json::from_str::<ScanAccess>(line) {
                    log.remember(access);
                }
            }
        }
        let journal = Journal::rewrite(path, &log.recent())?;
        Ok(TableAccessLog {
            journal: Some(Mutex::new(journal)),
            ..log
        })
    }

    /// Records one scan.
    pub fn record(&self, access: ScanAccess) {
        if let Some(journal) = &self.journal {
            let mut journal = journal.lock().expect("access journal");
            // A full disk loses the journal's line, never the scan's answer.
            let _ = journal.append(&access);
            if journal.lines > 2 * ACCESS_KEPT {
                let mut kept = self.recent();
                kept.push(access.clone());
                let start = kept.len().saturating_sub(ACCESS_KEPT);
                if let Ok(rewritten) = Journal::rewrite(&journal.path.clone(), &kept[start..]) {
                    *journal = rewritten;
                }
            }
        }
        self.remember(access);
    }

    fn remember(&self, access: ScanAccess) {
        {
            let mut totals = self.totals.lock().expect("access totals");
            let t = totals.entry(access.table.clone()).or_default();
            t.scans += 1;
            t.files_pruned += access.files_pruned;
            t.files_read += access.files_read;
            t.bytes_read += access.bytes_read;
        }
        let mut recent = self.recent.lock().expect("access log");
        if recent.len() == ACCESS_KEPT {
            recent.pop_front();
        }
        recent.push_back(access);
    }

    /// The kept scans, oldest first.
    pub fn recent(&self) -> Vec<ScanAccess> {
        self.recent
            .lock()
            .expect("access log")
            .iter()
            .cloned()
            .collect()
    }

    /// Totals per table since the engine started.
    pub fn totals(&self) -> BTreeMap<String, AccessTotals> {
        self.totals.lock().expect("access totals").clone()
    }
}

impl Journal {
    /// `path` written anew (through a temporary file renamed over it) with `scans`, then
    /// opened for appending.
    fn rewrite(path: &Path, scans: &[ScanAccess]) -> std::io::Result<Journal> {
        let mut text = String::new();
        for access in scans {
            text.push_str(&serde_json::to_string(access).map_err(std::io::Error::other)?);
            text.push('\n');
        }
        let temporary = path.with_extension("rewrite");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, path)?;
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
            lines: scans.len(),
        })
    }

    fn append(&mut self, access: &ScanAccess) -> std::io::Result<()> {
        let mut line = serde_json::to_string(access).map_err(std::io::Error::other)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        self.lines += 1;
        Ok(())
    }
}

/// The advice for one table (module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutAdvice {
    /// `namespace.table`.
    pub table: String,
    /// The column to sort the table by.
    pub sort_by: String,
    /// Recorded scans of the table, and how many of them filter on `sort_by`.
    pub scans: u64,
    /// Scans with a domain on `sort_by`.
    pub scans_filtering: u64,
    /// Share of the recorded scans' table bytes they read as the table is now.
    pub read_share_now: f64,
    /// Estimated share they would read sorted by `sort_by`.
    pub read_share_sorted: f64,
}

/// The advice per table from `scans` (module docs): tables whose best column would read less
/// than they read now.
pub fn layout_advice(scans: &[ScanAccess]) -> Vec<LayoutAdvice> {
    let mut by_table: BTreeMap<&str, Vec<&ScanAccess>> = BTreeMap::new();
    for scan in scans {
        by_table.entry(&scan.table).or_default().push(scan);
    }
    let mut out = vec![];
    for (table, scans) in by_table {
        // Scans that read rows: what each read, and would have read unpruned.
        let scans: Vec<(&ScanAccess, f64)> = scans
            .into_iter()
            .filter_map(|s| Some((s, s.unpruned_bytes()?)))
            .collect();
        let total: f64 = scans.iter().map(|(_, full)| full).sum();
        if total <= 0.0 {
            continue;
        }
        let now: f64 = scans.iter().map(|(s, _)| s.bytes_read as f64).sum();
        let mut columns: Vec<&str> = scans
            .iter()
            .flat_map(|(s, _)| s.filters.iter().filter(|f| f.share.is_some()))
            .map(|f| f.column.as_str())
            .collect();
        columns.sort_unstable();
        columns.dedup();
        let best = columns
            .into_iter()
            .map(|column| {
                let mut filtering = 0;
                let estimate: f64 = scans
                    .iter()
                    .map(|(s, full)| {
                        // The narrowest domain a scan had on the column.
                        let share = s
                            .filters
                            .iter()
                            .filter(|f| f.column == column)
                            .filter_map(|f| f.share)
                            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))));
                        if share.is_some() {
                            filtering += 1;
                        }
                        full * share.unwrap_or(1.0)
                    })
                    .sum();
                (column, filtering, estimate)
            })
            .min_by(|a, b| a.2.total_cmp(&b.2));
        let Some((column, filtering, estimate)) = best else {
            continue;
        };
        if estimate >= now {
            continue;
        }
        out.push(LayoutAdvice {
            table: table.to_string(),
            sort_by: column.to_string(),
            scans: scans.len() as u64,
            scans_filtering: filtering,
            read_share_now: now / total,
            read_share_sorted: estimate / total,
        });
    }
    out
}

/// Records one executed scan into the engine's log when the scan and all its partitions'
/// streams are dropped (the query ended, however it ended).
#[derive(Debug)]
pub(crate) struct AccessRecorder {
    /// Where the scan is recorded.
    pub log: Arc<TableAccessLog>,
    /// `namespace.table`.
    pub table: String,
    /// Manifest metrics of the scanned snapshot (column bounds, sizes, rows).
    pub index: Arc<FileMetricsIndex>,
    /// The scan's constrainable columns (names and field ids of domain columns).
    pub columns: Arc<ScanColumns>,
    /// The scan's static domains.
    pub static_domains: Arc<Domains>,
    /// Its dynamic domains, read when the scan ends.
    pub dynamic: Option<Arc<DomainCache>>,
    /// Its metrics, summed over partitions when it ends.
    pub metrics: ExecutionPlanMetricsSet,
    /// Live data files of the snapshot.
    pub snapshot_files: u64,
    /// Set by the first partition executed: only an executed scan is recorded.
    pub executed: AtomicBool,
}

/// An [`AccessRecorder`] made when the scan first executes (one per built scan).
pub(crate) type LazyRecorder = Arc<OnceLock<Arc<AccessRecorder>>>;

impl AccessRecorder {
    /// Marks the scan executed: it is recorded when dropped.
    pub(crate) fn executed(&self) {
        self.executed.store(true, Ordering::Relaxed);
    }

    /// The uses of `domains` (each constrained column); `units` is how many pieces (files or
    /// row groups) the table is pruned in.
    fn uses(&self, domains: &Domains, dynamic: bool, units: u64) -> Vec<FilterUse> {
        let Some(columns) = &domains.columns else {
            return vec![];
        };
        columns
            .iter()
            .filter_map(|(&i, domain)| {
                let column = self.columns.columns().get(i)?;
                let shape = match (&domain.values, &domain.range) {
                    (_, None) => FilterShape::Null,
                    (Some(_), _) => FilterShape::Values,
                    (None, Some(_)) => FilterShape::Range,
                };
                let bounds = self.index.column_range(column.field_id, &column.arrow_type);
                Some(FilterUse {
                    column: column.name.clone(),
                    shape,
                    dynamic,
                    share: bounds.and_then(|(lo, hi)| share(domain, &lo, &hi, units)),
                })
            })
            .collect()
    }
}

impl Drop for AccessRecorder {
    fn drop(&mut self) {
        if !self.executed.load(Ordering::Relaxed) {
            return;
        }
        let metrics = self.metrics.clone_inner().aggregate_by_name();
        let sum = |name: &str| {
            metrics
                .sum_by_name(name)
                .map(|v| v.as_usize() as u64)
                .unwrap_or(0)
        };
        // Pieces the table is pruned in: its files, or the row groups the scan saw when the
        // files hold several (a single large file still prunes by row group).
        let units = self
            .snapshot_files
            .max(sum("row_groups_pruned") + sum("row_groups_matched"));
        let mut filters = self.uses(&self.static_domains, false, units);
        if let Some(dynamic) = &self.dynamic {
            filters.extend(self.uses(&dynamic.current(), true, units));
        }
        self.log.record(ScanAccess {
            at: SystemTime::now(),
            table: self.table.clone(),
            filters,
            snapshot_files: self.snapshot_files,
            snapshot_bytes: self.index.total_bytes(),
            files_pruned: sum("files_pruned_manifest")
                + sum("files_pruned_statistics")
                + sum("files_pruned_dynamic"),
            files_read: sum("files_opened"),
            row_groups_pruned: sum("row_groups_pruned"),
            row_groups_read: sum("row_groups_matched"),
            pages_pruned: sum("pages_pruned"),
            pages_read: sum("pages_matched"),
            bytes_read: sum("bytes_scanned"),
            rows_read: sum("rows_decoded"),
            snapshot_rows: self.index.total_rows(),
        });
    }
}

/// The share of a table of `files` pieces (data files, or row groups) sorted by the column
/// (values in `[lo, hi]`) that a scan under `domain` reads, in `[0, 1]` (module docs): the share
/// of the range the domain spans plus one piece at its edge; for a known set of `k` values, at
/// most the pieces a spread set hits, `1 - (1 - 1/files)^k`.
fn share(domain: &ColumnDomain, lo: &ScalarValue, hi: &ScalarValue, files: u64) -> Option<f64> {
    let (lo, hi) = (numeric(lo)?, numeric(hi)?);
    let width = hi - lo;
    let files = files.max(1) as f64;
    if width <= 0.0 {
        return Some(1.0);
    }
    let Some((from, to)) = &domain.range else {
        return Some(0.0);
    };
    let (from, to) = (numeric(from)?.max(lo), numeric(to)?.min(hi));
    let range = ((to - from).max(0.0) / width + 1.0 / files).min(1.0);
    Some(match &domain.values {
        Some(values) => range.min(1.0 - (1.0 - 1.0 / files).powi(values.len() as i32)),
        None => range,
    })
}

/// `v` as a number on the column's own scale, for ordered types with one.
fn numeric(v: &ScalarValue) -> Option<f64> {
    Some(match v {
        ScalarValue::Int8(Some(x)) => *x as f64,
        ScalarValue::Int16(Some(x)) => *x as f64,
        ScalarValue::Int32(Some(x)) => *x as f64,
        ScalarValue::Int64(Some(x)) => *x as f64,
        ScalarValue::UInt8(Some(x)) => *x as f64,
        ScalarValue::UInt16(Some(x)) => *x as f64,
        ScalarValue::UInt32(Some(x)) => *x as f64,
        ScalarValue::UInt64(Some(x)) => *x as f64,
        ScalarValue::Float32(Some(x)) => *x as f64,
        ScalarValue::Float64(Some(x)) => *x,
        ScalarValue::Decimal128(Some(x), _, s) => *x as f64 / 10f64.powi(*s as i32),
        ScalarValue::Date32(Some(x)) => *x as f64,
        ScalarValue::Date64(Some(x)) => *x as f64,
        ScalarValue::TimestampSecond(Some(x), _)
        | ScalarValue::TimestampMillisecond(Some(x), _)
        | ScalarValue::TimestampMicrosecond(Some(x), _)
        | ScalarValue::TimestampNanosecond(Some(x), _) => *x as f64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persisted_record_survives_a_restart_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("table_access.jsonl");
        let log = TableAccessLog::persisted(&path).unwrap();
        let first = scan(100, vec![("lo_orderdate", 0.25)]);
        log.record(first.clone());
        log.record(scan(200, vec![]));
        drop(log);
        // A line cut short by a crash is skipped.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"{\"at\":").unwrap();
        drop(file);
        let log = TableAccessLog::persisted(&path).unwrap();
        let recent = log.recent();
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0], first);
        assert_eq!(log.totals()["ssb.lineorder"].bytes_read, 300);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
        for i in 0..(2 * ACCESS_KEPT + 1) {
            log.record(scan(i as u64, vec![]));
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 2 * ACCESS_KEPT, "{lines} lines");
        let reread = TableAccessLog::persisted(&path).unwrap();
        assert_eq!(reread.recent().len(), ACCESS_KEPT);
        assert_eq!(reread.recent().last(), log.recent().last());
    }

    fn scan(bytes_read: u64, filters: Vec<(&str, f64)>) -> ScanAccess {
        ScanAccess {
            at: SystemTime::now(),
            table: "ssb.lineorder".into(),
            filters: filters
                .into_iter()
                .map(|(c, s)| FilterUse {
                    column: c.into(),
                    shape: FilterShape::Range,
                    dynamic: false,
                    share: Some(s),
                })
                .collect(),
            snapshot_files: 10,
            snapshot_bytes: 1000,
            files_pruned: 0,
            files_read: 10,
            row_groups_pruned: 0,
            row_groups_read: 10,
            pages_pruned: 0,
            pages_read: 0,
            bytes_read,
            rows_read: 100,
            snapshot_rows: 100,
        }
    }

    /// The column whose recorded domains are narrowest over all scans wins; no advice when
    /// the table reads less already.
    #[test]
    fn advice_picks_the_column_that_skips_most() {
        let scans = vec![
            scan(1000, vec![("d", 0.1), ("q", 0.5)]),
            scan(1000, vec![("d", 0.2)]),
            scan(1000, vec![("q", 0.05)]),
        ];
        let advice = layout_advice(&scans);
        assert_eq!(advice.len(), 1);
        // d: 100 + 200 + 1000 = 1300; q: 500 + 1000 + 50 = 1550.
        assert_eq!(advice[0].sort_by, "d");
        assert_eq!(advice[0].scans_filtering, 2);
        assert!((advice[0].read_share_sorted - 1300.0 / 3000.0).abs() < 1e-9);
        assert!((advice[0].read_share_now - 1.0).abs() < 1e-9);
        // A scan that decoded a tenth of the rows for its 50 bytes would read 500 unpruned:
        // sorted by d it reads 50 (10 %): no gain, no advice.
        let mut pruned = scan(50, vec![("d", 0.1)]);
        pruned.rows_read = 10;
        assert!(layout_advice(&[pruned]).is_empty());
    }

    /// A range's share is clipped to the column's bounds, plus one file; a set of values is at
    /// most what spread values hit.
    #[test]
    fn shares() {
        let range = ColumnDomain {
            range: Some((ScalarValue::Int64(Some(-50)), ScalarValue::Int64(Some(25)))),
            values: None,
            null_allowed: false,
        };
        let (lo, hi) = (ScalarValue::Int64(Some(0)), ScalarValue::Int64(Some(100)));
        assert_eq!(share(&range, &lo, &hi, 20), Some(0.3));
        let spread = ColumnDomain {
            range: Some((ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(99)))),
            values: Some(vec![
                ScalarValue::Int64(Some(1)),
                ScalarValue::Int64(Some(99)),
            ]),
            null_allowed: false,
        };
        // Two values hit at most 2 of 10 files: 1 - 0.9^2.
        assert!((share(&spread, &lo, &hi, 10).unwrap() - 0.19).abs() < 1e-12);
        let text = ScalarValue::Utf8(Some("a".into()));
        assert_eq!(share(&range, &text, &text, 10), None);
    }
}
