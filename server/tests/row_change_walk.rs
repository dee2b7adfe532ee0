//! A randomised walk of `INSERT`, `UPDATE`, `DELETE` and `MERGE INTO` statements run on three
//! iceflight tables (copy-on-write v2, merge-on-read v2 with position delete files,
//! merge-on-read v3 with deletion vectors) and on a DuckDB table (`tests/fixtures/
//! duckdb_oracle.py`), the reference: after every statement the rows changed and every row of
//! each table equal DuckDB's; at the end each table read at every snapshot the walk made
//! (`FOR VERSION AS OF`) equals the rows recorded then. Seeded (`ICEFLIGHT_WALK_SEED`, the
//! seed is in every failure message) and sized by `ICEFLIGHT_WALK_STEPS`.

mod common;

use common::{statement_ok as ok, statement_rows as sql, statement_sorted as sorted};

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// splitmix64: a small seeded generator, enough to choose statements.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len() as u64) as usize]
    }
}

/// DuckDB behind `duckdb_oracle.py`.
struct Oracle {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Oracle {
    fn start() -> Self {
        let mut child = Command::new(common::python())
            .arg(common::repo_root().join("tests/fixtures/duckdb_oracle.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start duckdb_oracle.py");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn ask(&mut self, request: Value) -> Result<Vec<Vec<String>>, String> {
        writeln!(self.stdin, "{request}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let answer: Value = serde_json::from_str(&line).expect("oracle answer");
        match answer.get("ok") {
            Some(rows) => Ok(serde_json::from_value(rows.clone()).unwrap()),
            None => Err(answer["error"].as_str().unwrap_or_default().to_string()),
        }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const PARTS: [&str; 4] = ["'a'", "'b'", "'c'", "NULL"];

/// A condition over `t`'s columns (`prefix` qualifies them).
fn condition(rng: &mut Rng, prefix: &str) -> String {
    let one = |rng: &mut Rng| match rng.below(5) {
        0 => format!("{prefix}v > {}", rng.below(100)),
        1 => format!("{prefix}id % {} = {}", 2 + rng.below(4), rng.below(2)),
        2 => format!("{prefix}part = {}", rng.pick(&PARTS[..3])),
        3 => format!("{prefix}v IS NULL"),
        _ => format!(
            "{prefix}id BETWEEN {} AND {}",
            rng.below(40),
            20 + rng.below(60)
        ),
    };
    match rng.below(3) {
        0 => one(rng),
        1 => format!("({} AND {})", one(rng), one(rng)),
        _ => format!("({} OR {})", one(rng), one(rng)),
    }
}

/// A value for `v`: a number or NULL.
fn value(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => "NULL".to_string(),
        _ => rng.below(100).to_string(),
    }
}

/// The next statement of the walk on table `@T` (replaced by each table's name); `next_id`
/// numbers inserted rows.
fn statement(rng: &mut Rng, next_id: &mut u64) -> String {
    match rng.below(10) {
        0..=2 => {
            let rows: Vec<String> = (0..1 + rng.below(6))
                .map(|_| {
                    *next_id += 1;
                    format!("({}, {}, {})", next_id, rng.pick(&PARTS), value(rng))
                })
                .collect();
            format!("INSERT INTO @T VALUES {}", rows.join(", "))
        }
        3..=5 => {
            let set = match rng.below(3) {
                0 => format!("v = v + {}", 1 + rng.below(9)),
                1 => format!("v = {}, part = {}", value(rng), rng.pick(&PARTS)),
                _ => "v = CASE WHEN v IS NULL THEN 0 ELSE NULL END".to_string(),
            };
            format!("UPDATE @T SET {set} WHERE {}", condition(rng, ""))
        }
        6..=7 => format!("DELETE FROM @T WHERE {}", condition(rng, "")),
        _ => {
            // Distinct source ids: some existing, some new.
            let mut ids: Vec<u64> = (0..1 + rng.below(5))
                .map(|_| match rng.below(2) {
                    0 if *next_id > 0 => 1 + rng.below(*next_id),
                    _ => {
                        *next_id += 1;
                        *next_id
                    }
                })
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let rows: Vec<String> = ids
                .iter()
                .map(|id| format!("({id}, {}, {})", rng.pick(&PARTS), value(rng)))
                .collect();
            format!(
                "MERGE INTO @T AS t USING (VALUES {}) AS s(id, part, v) ON t.id = s.id \
                 WHEN MATCHED AND {} THEN DELETE \
                 WHEN MATCHED THEN UPDATE SET v = s.v, part = coalesce(s.part, t.part) \
                 WHEN NOT MATCHED AND s.v IS NOT NULL THEN INSERT VALUES (s.id, s.part, s.v)",
                rows.join(", "),
                condition(rng, "s.")
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_random_walk_of_row_changes_matches_duckdb_at_every_snapshot() {
    let seed: u64 = std::env::var("ICEFLIGHT_WALK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261205);
    let steps: usize = std::env::var("ICEFLIGHT_WALK_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    common::make_history(dir.path());
    let engine = common::engine(dir.path(), 2).await;
    let ctx = engine.session(None, Some("history"), &[]).unwrap();
    let mut oracle = Oracle::start();
    oracle
        .ask(json!({"sql": "CREATE TABLE T (id BIGINT NOT NULL, part VARCHAR, v BIGINT)"}))
        .unwrap();
    let tables = [
        ("walk_cow", "copy-on-write", 2),
        ("walk_mor2", "merge-on-read", 2),
        ("walk_mor3", "merge-on-read", 3),
    ];
    for (t, mode, version) in tables {
        ok(
            &ctx,
            &format!(
                "CREATE TABLE {t} (id BIGINT NOT NULL, part VARCHAR, v BIGINT) WITH \
                 (partitioning = ARRAY['part'], format_version = {version}, \
                 'write.delete.mode' = '{mode}', 'write.update.mode' = '{mode}', \
                 'write.merge.mode' = '{mode}')"
            ),
        )
        .await;
    }
    // (table, snapshot id, its rows) after every statement that made a snapshot.
    let mut history: Vec<(&str, String, Vec<Vec<String>>)> = vec![];
    let mut next_id = 0;
    for step in 0..steps {
        let text = statement(&mut rng, &mut next_id);
        let at = format!("seed {seed}, step {step}: {text}");
        let want = oracle.ask(json!({"sql": text.replace("@T", "T")}));
        let want_rows = oracle.ask(json!({"rows": "T"})).unwrap();
        for (t, _, _) in tables {
            let got = sql(&ctx, &text.replace("@T", t)).await;
            match (&want, got) {
                (Ok(count), Ok(rows)) => assert_eq!(&rows, count, "{t}, {at}"),
                (Err(_), Err(_)) => {}
                (want, got) => panic!("{t}, {at}: DuckDB {want:?}, iceflight {got:?}"),
            }
            let rows = sorted(&ctx, &format!("SELECT * FROM {t}")).await;
            assert_eq!(rows, want_rows, "{t}, {at}");
            let snapshot = ok(
                &ctx,
                &format!("SELECT snapshot_id FROM \"{t}$refs\" WHERE name = 'main'"),
            )
            .await;
            if let Some(row) = snapshot.first() {
                history.retain(|(table, id, _)| !(*table == t && *id == row[0]));
                history.push((t, row[0].clone(), rows));
            }
        }
    }
    // Every snapshot read back as it was.
    for (t, id, rows) in &history {
        let then = sorted(&ctx, &format!("SELECT * FROM {t} FOR VERSION AS OF {id}")).await;
        assert_eq!(&then, rows, "{t} at snapshot {id} (seed {seed})");
    }
    let made = history.len();
    assert!(
        made > steps,
        "{made} snapshots for {steps} statements on 3 tables"
    );
}
