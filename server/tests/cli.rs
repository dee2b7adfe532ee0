//! The `iceflight` binary as a user runs it: every failure one `error:` line with its documented
//! exit status (1 failed, 2 bad command line, 130 interrupted; `cli.rs`), output that streams in
//! bounded memory and stops when its reader does, loads that leave all or nothing whenever they
//! are interrupted, and a demo that heals an interrupted first start.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iceflight"));
    c.env_remove("ICEFLIGHT_CONFIG")
        .env_remove("ICEFLIGHT_LOG")
        .env_remove("ICEFLIGHT_DEFAULT_SCHEMA")
        .env_remove("ICEFLIGHT_DATA_DIR");
    c
}

fn iceflight(dir: &Path, args: &[&str]) -> Output {
    bin()
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("run iceflight")
}

fn with_stdin(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = bin()
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The single `error:` line of a failed run with exit status `code`.
fn failure(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line expected, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

/// The `error:` line ending a failed run with exit status `code` that printed progress first
/// (a load): the only error line, and the last line.
fn failure_after_progress(out: &Output, code: i32) -> String {
    assert_eq!(out.status.code(), Some(code), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert_eq!(err.lines().last(), Some(errors[0]), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    errors[0].to_string()
}

/// Writes the config file `name` in `dir`: `data_dir = dir`, then `rest`.
fn write_config(dir: &Path, name: &str, rest: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("data_dir = {:?}\n{rest}", dir.display().to_string()),
    )
    .unwrap();
    path
}

/// A data directory holding TPC-H SF 0.001 in namespace `t`, its only namespace.
fn tpch_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    stdout(&iceflight(
        dir.path(),
        &["load", "tpch", "--scale", "0.001", "--namespace", "t"],
    ));
    dir
}

/// Files (not directories) under `dir`.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Namespaces of the embedded catalog in `dir`, as `sql` lists them.
fn namespaces(dir: &Path) -> String {
    stdout(&iceflight(
        dir,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT schema_name FROM information_schema.schemata \
             WHERE catalog_name = 'local' AND schema_name <> 'information_schema' ORDER BY 1",
        ],
    ))
}

/// Kills process `pid` when dropped: a failing assertion must not leave a server running.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([name, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Reads `reader` line by line until a line contains `needle`; returns everything read.
fn read_until(reader: &mut impl BufRead, needle: &str) -> String {
    let mut seen = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("{needle:?} never came; read:\n{seen}");
        }
        seen.push_str(&line);
        if line.contains(needle) {
            return seen;
        }
    }
}

/// Row counts of SF 0.1 TPC-H per table (the reference answers' `tables.json`).
fn expected_sf01_rows() -> Vec<(String, u64)> {
    let path = common::repo_root().join("bench/answers/tpch/sf0.1/tables.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out: Vec<(String, u64)> = json
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, v)| (t.clone(), v["rows"].as_u64().unwrap()))
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------- errors: one line, its status

/// SQL errors, unknown objects and bad settings: status 1, one line naming what was wrong.
#[test]
fn sql_errors_are_one_line_naming_the_object() {
    let dir = tpch_dir();
    let d = dir.path();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["sql", "SELECT * FROM t.nope"],
            &["table local.t.nope does not exist"],
        ),
        (&["sql", "SELECT * FROM nons.region"], &["nons"]),
        (
            &["sql", "--catalog", "nocat", "SELECT 1"],
            &["unknown catalog nocat"],
        ),
        (&["sql", "SELECT nope FROM region"], &["nope"]),
        (&["sql", "SELECT 1 / 0"], &["Divide by zero"]),
        (
            &["sql", "--set", "iceflight.scan.nope=1", "SELECT 1"],
            &["unknown setting iceflight.scan.nope"],
        ),
        (
            &[
                "sql",
                "--set",
                "datafusion.execution.batch_size=abc",
                "SELECT 1",
            ],
            &["datafusion.execution.batch_size=abc", "invalid digit"],
        ),
        (
            &[
                "sql",
                "--set",
                "iceflight.scan.dynamic_filter_wait=2h",
                "SELECT 1",
            ],
            &["iceflight.scan.dynamic_filter_wait", "at most 1h", "2h"],
        ),
        (&["sql", "--set", "novalue", "SELECT 1"], &["KEY=VALUE"]),
    ];
    for (args, wanted) in cases {
        let err = failure(&iceflight(d, args), 1);
        for w in *wanted {
            assert!(err.contains(w), "{args:?}: {err:?} lacks {w:?}");
        }
    }
    // A syntax error reads as the parser's message, without Rust's Debug wrapping.
    let err = failure(&iceflight(d, &["sql", "SELEC 1"]), 1);
    assert!(
        err.contains("SELEC") && !err.contains("ParserError("),
        "{err}"
    );
    // Durations up to the cap are taken in hours and minutes too.
    for wait in ["1h", "5m", "250ms", "2s"] {
        let set = format!("iceflight.scan.dynamic_filter_wait={wait}");
        let out = iceflight(
            d,
            &["sql", "--format", "csv", "--set", &set, "SELECT 1 AS x"],
        );
        assert_eq!(stdout(&out), "x\n1\n", "{wait}");
    }
}

/// Command lines clap cannot parse: status 2, one line, pointing at the subcommand's help.
#[test]
fn usage_errors_are_one_line_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["load", "tpch", "--scale", "abc", "--namespace", "x"],
            &["invalid value 'abc'", "iceflight load tpch --help"],
        ),
        (
            &["sql", "--format", "xml", "SELECT 1"],
            &["possible values", "iceflight sql --help"],
        ),
        (&["--bogus"], &["unexpected argument '--bogus'"]),
        (
            &["load", "tpch", "--namespace", "x"],
            &["--scale", "iceflight load tpch --help"],
        ),
        (&["hash-password", "secret"], &["shell history"]),
        (
            &[],
            &[
                "requires a subcommand",
                "sql, load, serve",
                "iceflight --help",
            ],
        ),
        (
            &["load"],
            &[
                "a command is required: tpch, nested",
                "iceflight load --help",
            ],
        ),
    ];
    for (args, wanted) in cases {
        let err = failure(&iceflight(d, args), 2);
        for w in *wanted {
            assert!(err.contains(w), "{args:?}: {err:?} lacks {w:?}");
        }
    }
    // No argument at all: clap would print the whole help; one line instead.
    let err = failure(&bin().output().unwrap(), 2);
    assert!(
        err.contains("a command is required: sql, load, serve, demo, hash-password"),
        "{err}"
    );
    // Help is not an error.
    let out = iceflight(d, &["--help"]);
    let help = stdout(&out);
    assert!(
        help.contains("ICEFLIGHT_LOG") && help.contains("Exit status"),
        "{help}"
    );
}

/// Scale factors must be finite and at most 1000; nothing is created for a refused one.
#[test]
fn load_refuses_scales_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for scale in ["-1", "0", "inf", "NaN", "1e9", "1001"] {
        let err = failure(
            &iceflight(d, &["load", "tpch", "--scale", scale, "--namespace", "x"]),
            1,
        );
        assert!(
            err.contains("--scale") && err.contains("out of range") && err.contains("1000"),
            "{scale}: {err}"
        );
    }
    assert!(files_under(d).is_empty(), "{:?}", files_under(d));
}

/// `sql` and `serve` only read: a data directory without a catalog is an error naming it, and
/// nothing is created there.
#[test]
fn read_only_commands_never_create_a_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("iceflgiht-data");
    for args in [
        &["sql", "SELECT 1"][..],
        &["serve", "--user", "a:b", "--listen", "127.0.0.1:0"][..],
    ] {
        let err = failure(&iceflight(&typo, args), 1);
        assert!(
            err.contains(&typo.display().to_string()) && err.contains("no iceflight catalog"),
            "{err}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
}

/// `init` creates an empty catalog (with namespace `default`) where `sql` refused to; a second
/// `init` changes nothing. The user's own files come in with `CREATE TABLE … AS SELECT` from
/// `read_parquet` (a directory of files), `read_csv` and `read_json`, with the rows they hold;
/// a missing path is one line.
#[test]
fn init_creates_an_empty_catalog_and_files_come_in() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("lake");
    let made = stdout(&iceflight(&d, &["init"]));
    assert!(made.contains("created: namespace local.default"), "{made}");
    let again = stdout(&iceflight(&d, &["init"]));
    assert!(
        again.contains("already existed; nothing changed"),
        "{again}"
    );

    let files = dir.path().join("files");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("people.csv"), "id,name\n1,ann\n2,bob\n3,cy\n").unwrap();
    std::fs::write(
        files.join("events.json"),
        "{\"id\": 1, \"kind\": \"a\"}\n{\"id\": 2, \"kind\": \"b\"}\n",
    )
    .unwrap();
    let csv = files.join("people.csv").display().to_string();
    let json = files.join("events.json").display().to_string();
    stdout(&iceflight(
        &d,
        &[
            "sql",
            &format!(
                "CREATE TABLE people AS SELECT * FROM read_csv('{csv}'); \
                 CREATE TABLE events AS SELECT * FROM read_json('{json}'); \
                 CREATE TABLE big AS SELECT value AS id, value * 2 AS v FROM generate_series(1, 5000)"
            ),
        ],
    ));
    // The Parquet files of `big` as a user's directory of files.
    let big = files_under(&d)
        .into_iter()
        .find(|p| {
            p.to_string_lossy().contains("/big/data/")
                && p.extension().is_some_and(|e| e == "parquet")
        })
        .expect("big's data file");
    let big_dir = big.parent().unwrap().display().to_string();
    let out = stdout(&iceflight(
        &d,
        &[
            "sql",
            &format!(
                "CREATE TABLE imported AS SELECT * FROM read_parquet('{big_dir}'); \
                 SELECT (SELECT count(*) || ' ' || sum(v) FROM imported) AS parquet, \
                 (SELECT string_agg(name, ',' ORDER BY id) FROM people) AS csv, \
                 (SELECT string_agg(kind, ',' ORDER BY id) FROM events) AS json"
            ),
        ],
    ));
    assert!(out.contains("5000 25005000"), "{out}");
    assert!(out.contains("ann,bob,cy") && out.contains("a,b"), "{out}");
    let missing = dir.path().join("nope.parquet").display().to_string();
    let err = failure(
        &iceflight(
            &d,
            &["sql", &format!("SELECT * FROM read_parquet('{missing}')")],
        ),
        1,
    );
    assert!(err.contains("no such file or directory"), "{err}");
}

/// Passwords: never empty, never on the command line; `hash-password` reads stdin.
#[test]
fn passwords_are_read_safely() {
    let dir = tpch_dir();
    let d = dir.path();
    let err = failure(
        &iceflight(d, &["serve", "--user", "alice:", "--listen", "127.0.0.1:0"]),
        1,
    );
    assert!(err.contains("empty password"), "{err}");
    let err = failure(&with_stdin(d, &["hash-password"], "\n"), 1);
    assert!(err.contains("empty password"), "{err}");
    let out = with_stdin(d, &["hash-password"], "s3cret\n");
    let hash = stdout(&out);
    assert!(hash.starts_with("$argon2id$"), "{hash}");
    assert!(!hash.contains("s3cret"));
}

/// A query over the memory limit fails; a catalog that is down is unavailable, named with its
/// URI; unreadable and invalid config files name the file and line.
#[test]
fn limits_outages_and_config_files() {
    let dir = tpch_dir();
    let d = dir.path();
    let small = write_config(d, "small.toml", "[query]\nmemory_limit = \"64KiB\"\n");
    let big = "SELECT count(*) FROM t.lineitem a JOIN t.orders b ON a.l_orderkey = b.o_orderkey AND a.l_comment = b.o_comment";
    let err = failure(
        &iceflight(d, &["--config", small.to_str().unwrap(), "sql", big]),
        1,
    );
    assert!(err.to_lowercase().contains("resources exhausted"), "{err}");
    stdout(&iceflight(d, &["sql", "--format", "csv", big]));

    let down = write_config(
        d,
        "down.toml",
        "[[catalog]]\nname = \"lake\"\ntype = \"rest\"\nuri = \"http://127.0.0.1:1\"\n",
    );
    let err = failure(
        &iceflight(
            d,
            &[
                "--config",
                down.to_str().unwrap(),
                "sql",
                "SELECT * FROM lake.ns.t",
            ],
        ),
        1,
    );
    assert!(
        err.contains("catalog lake at http://127.0.0.1:1 is unavailable"),
        "{err}"
    );

    let err = failure(
        &iceflight(
            d,
            &["--config", "/nonexistent/iceflight.toml", "sql", "SELECT 1"],
        ),
        1,
    );
    assert!(err.contains("cannot read config file"), "{err}");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "data_dir = 3\n").unwrap();
    let err = failure(
        &iceflight(d, &["--config", bad.to_str().unwrap(), "sql", "SELECT 1"]),
        1,
    );
    assert!(
        err.contains("invalid config file") && err.contains("line 1"),
        "{err}"
    );
}

// ---------------------------------------------------------------- sql: schema and output

/// The only namespace is the default schema; with several, an unqualified name fails listing
/// them, while table functions still resolve.
#[test]
fn default_schema_is_the_only_namespace() {
    let dir = tpch_dir();
    let d = dir.path();
    let count = |sql: &str| stdout(&iceflight(d, &["sql", "--format", "csv", sql]));
    assert_eq!(count("SELECT count(*) AS n FROM nation"), "n\n25\n");
    stdout(&iceflight(d, &["sql", "CREATE SCHEMA local.other"]));
    // The hint names where the table is (not the first namespace listed).
    let err = failure(&iceflight(d, &["sql", "SELECT count(*) FROM nation"]), 1);
    assert!(
        err.contains("it is in local.t: qualify the name (local.t.nation)")
            && err.contains("--schema"),
        "{err}"
    );
    let err = failure(&iceflight(d, &["sql", "SELECT * FROM nowhere"]), 1);
    assert!(
        err.contains("no namespace of catalog local (other, t) holds a table of that name"),
        "{err}"
    );
    assert_eq!(
        count("SELECT count(*) AS n FROM generate_series(1, 3)"),
        "n\n3\n"
    );
    let out = iceflight(
        d,
        &[
            "sql",
            "--schema",
            "t",
            "--format",
            "json",
            "SELECT count(*) AS n FROM nation",
        ],
    );
    assert_eq!(stdout(&out).trim(), r#"[{"n":25}]"#);
    // Statements from stdin, DDL then a query.
    let out = with_stdin(
        d,
        &["sql", "--format", "csv"],
        "CREATE SCHEMA local.s1; SELECT 1 AS one, 'x' AS two",
    );
    assert_eq!(stdout(&out), "one,two\n1,x\n");
    // JSON of several statements is one document; a write prints the rows it wrote, CREATE
    // TABLE … AS SELECT as INSERT does.
    let out = iceflight(
        d,
        &[
            "sql",
            "--schema",
            "other",
            "--format",
            "json",
            "CREATE TABLE c AS SELECT * FROM t.region; INSERT INTO c SELECT * FROM t.region WHERE r_regionkey < 2; SELECT count(*) AS n FROM c",
        ],
    );
    let text = stdout(&out);
    let document: serde_json::Value = serde_json::from_str(&text).expect(&text);
    assert_eq!(
        document,
        serde_json::json!([[{"count": 5}], [{"count": 2}], [{"n": 7}]]),
        "{text}"
    );
    // With a namespace named as the demo's among several, `sql` takes it, as the demo does.
    stdout(&iceflight(
        d,
        &[
            "sql",
            "CREATE SCHEMA local.tpch; CREATE TABLE local.tpch.notes (id BIGINT)",
        ],
    ));
    assert_eq!(count("SELECT count(*) AS n FROM notes"), "n\n0\n");
}

/// The table format shows `--max-rows` rows and counts the rest, or prints every row in pages.
#[test]
fn table_output_caps_rows_and_counts_the_rest() {
    let dir = tpch_dir();
    let d = dir.path();
    let sql = "SELECT v FROM generate_series(1, 2500) t(v)";
    let out = stdout(&iceflight(d, &["sql", "--max-rows", "10", sql]));
    let body = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains(" v "))
        .count();
    assert_eq!(body, 10, "{out}");
    assert!(out.contains("(2500 rows, the first 10 shown"), "{out}");
    let out = stdout(&iceflight(d, &["sql", "--max-rows", "0", sql]));
    let body = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.contains(" v "))
        .count();
    assert_eq!(body, 2500);
    assert!(!out.contains("shown"));
}

/// A table-format result larger than the process may map completes: `sql` holds one page at a
/// time. (glibc reserves 64 MiB of address space per thread arena; two arenas keep that
/// reservation from deciding the test.)
#[test]
fn table_output_streams_under_an_address_space_limit() {
    let dir = tpch_dir();
    let limit_kib = 400 * 1024;
    let rows = 700_000;
    let sql = format!("SELECT v, repeat('x', 2000) AS pad FROM generate_series(1, {rows}) t(v)");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {limit_kib} && exec \"$0\" --data-dir \"$1\" sql --max-rows 0 \"$2\""
        ))
        .arg(env!("CARGO_BIN_EXE_iceflight"))
        .arg(dir.path())
        .arg(&sql)
        .env("MALLOC_ARENA_MAX", "2")
        .env_remove("ICEFLIGHT_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut bytes = 0u64;
    let mut body_rows = 0u64;
    let mut reader = BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).unwrap() > 0 {
        bytes += line.len() as u64;
        if line.starts_with(b"| ") && !line.starts_with(b"| v ") {
            body_rows += 1;
        }
        line.clear();
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {err}");
    assert_eq!(body_rows, rows);
    assert!(
        bytes > 3 * limit_kib * 1024,
        "{bytes} bytes of output is not far above the {limit_kib} KiB limit"
    );
}

/// `sql … | head -1`: once the reader closes the pipe the query stops and the command exits
/// at once, with status 0 and nothing on stderr, in every format.
#[test]
fn a_closed_pipe_ends_the_query_quietly() {
    let dir = tpch_dir();
    for format in ["csv", "table", "json"] {
        let mut child = bin()
            .arg("--data-dir")
            .arg(dir.path())
            .args([
                "sql",
                "--format",
                format,
                "--max-rows",
                "0",
                "SELECT v, repeat('y', 100) AS pad FROM generate_series(1, 200000000) t(v)",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Some output (a JSON array is one long line), then the reader is dropped: the pipe
        // closes, as when `head -1` exits.
        let mut first = [0u8; 4096];
        let n = child.stdout.take().unwrap().read(&mut first).unwrap();
        assert!(n > 0);
        let closed = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                closed.elapsed() < Duration::from_secs(1),
                "{format}: still running 1 s after its reader went away"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_eq!(status.code(), Some(0), "{format}: {err}");
        assert!(err.is_empty(), "{format}: {err}");
    }
}

// ---------------------------------------------------------------- loads: all or nothing

/// Loading again without `--replace` is refused and keeps the data; a failing load removes its
/// tables, files and namespace; a two-level namespace gets its parent.
#[test]
fn loads_are_all_or_nothing() {
    let dir = tpch_dir();
    let d = dir.path();
    let err = failure(
        &iceflight(d, &["load", "tpch", "--scale", "0.001", "--namespace", "t"]),
        1,
    );
    assert!(
        err.contains("already exists") && err.contains("--replace"),
        "{err}"
    );
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM t.region",
        ],
    );
    assert_eq!(stdout(&out), "n\n5\n");

    let err = failure(
        &iceflight(
            d,
            &[
                "load",
                "tpch",
                "--scale",
                "0.001",
                "--namespace",
                "u",
                "--sort",
                "lineitem=nope",
            ],
        ),
        1,
    );
    assert!(err.contains("no column nope"), "{err}");
    let err = failure(
        &iceflight(
            d,
            &["load", "nested", "--rows", "10", "--namespace", "a..b"],
        ),
        1,
    );
    assert!(
        err.contains("every dot-separated part must be non-empty"),
        "{err}"
    );
    stdout(&iceflight(
        d,
        &["load", "nested", "--rows", "10", "--namespace", "p.q"],
    ));
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM local.\"p.q\".nested",
        ],
    );
    assert_eq!(stdout(&out), "n\n10\n");
    assert_eq!(
        namespaces(d),
        "schema_name\np\np.q\nt\n",
        "a refused load creates nothing"
    );

    // lineitem's data directory is blocked by a file: the load fails half-way.
    let blocked = d.join("warehouse/broken/lineitem");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join("data"), "not a directory").unwrap();
    failure_after_progress(
        &iceflight(
            d,
            &["load", "tpch", "--scale", "0.001", "--namespace", "broken"],
        ),
        1,
    );
    assert_eq!(namespaces(d), "schema_name\np\np.q\nt\n");
    for table in ["region", "nation", "orders"] {
        assert!(
            files_under(&d.join("warehouse/broken").join(table)).is_empty(),
            "{table} files left behind"
        );
    }
}

/// SIGINT or SIGTERM at any point of a load: it removes what it wrote (no namespace, no file)
/// and exits 130 / 143 with one line.
#[test]
fn an_interrupted_load_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Signal right after the start line, after the first tables, and during lineitem.
    for (after, sig, code) in [
        ("loading TPC-H SF 0.1", "-INT", 130),
        ("customer:", "-TERM", 143),
        ("orders:", "-INT", 130),
    ] {
        let mut child = bin()
            .arg("--data-dir")
            .arg(d)
            .args(["load", "tpch", "--scale", "0.1", "--namespace", "tpch"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut seen = read_until(&mut err, after);
        signal(&child, sig);
        err.read_to_string(&mut seen).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code), "after {after:?}: {seen}");
        let last = seen.lines().last().unwrap_or_default();
        assert_eq!(
            last, "error: load interrupted; removed what it had written",
            "{seen}"
        );
        assert_eq!(namespaces(d), "schema_name\n", "after {after:?}");
        let left = files_under(&d.join("warehouse"));
        assert!(left.is_empty(), "after {after:?}: {left:?}");
    }
}

// ---------------------------------------------------------------- serve and demo

/// `serve` says where it listens, what it serves and whether login is on; it warns when it is
/// off; failed logins and failed queries reach the log with their reason.
#[test]
fn serve_start_line_and_log() {
    let dir = tpch_dir();
    let d = dir.path();
    let mut child = bin()
        .arg("--data-dir")
        .arg(d)
        .args(["serve", "--user", "alice:secret", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(child.id());
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let line = read_until(&mut out, "serving");
    assert!(
        line.starts_with("iceflight ")
            && line.contains("serving Flight SQL on 127.0.0.1:")
            && line.contains("catalogs local")
            && line.contains("default schema local.t")
            && line.contains("login required (1 user)"),
        "{line}"
    );
    let addr = line
        .split("serving Flight SQL on ")
        .nth(1)
        .and_then(|rest| rest.split(": ").next())
        .unwrap()
        .to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let channel = common::channel(&addr).await;
        let mut client = arrow_flight::sql::client::FlightSqlServiceClient::new(channel);
        assert!(client.handshake("alice", "wrong").await.is_err());
        client.handshake("alice", "secret").await.unwrap();
        assert!(
            client
                .execute("SELECT nope\nFROM nation".into(), None)
                .await
                .is_err()
        );
    });
    signal(&child, "-TERM");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        log.contains("login failed") && log.contains("invalid user name or password"),
        "{log}"
    );
    // One line per query, the statement's line break escaped.
    let failed = log
        .lines()
        .find(|l| l.contains("status=\"error\""))
        .unwrap_or_else(|| panic!("no failed query logged:\n{log}"));
    assert!(
        failed.contains("No field named nope")
            && failed.contains(r#"sql="SELECT nope\nFROM nation""#),
        "{failed}"
    );

    // Without login, a warning.
    let open = write_config(
        d,
        "open.toml",
        "[server]\nauth = \"none\"\nlisten = \"127.0.0.1:0\"\n",
    );
    let mut child = bin()
        .args(["--config", open.to_str().unwrap(), "serve"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _kill_open = KillOnDrop(child.id());
    let line = read_until(&mut BufReader::new(child.stdout.take().unwrap()), "serving");
    assert!(line.contains("no login"), "{line}");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let warning = read_until(&mut err, "warning");
    assert!(warning.contains("server.auth = \"none\""), "{warning}");
    signal(&child, "-TERM");
    assert!(child.wait().unwrap().success());
}

/// A demo process whose stdout and stderr are read line by line.
struct Demo {
    child: Child,
    out: BufReader<ChildStdout>,
    err: BufReader<ChildStderr>,
}

/// A failing assertion must not leave the server running.
impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_demo(dir: &Path) -> Demo {
    let mut child = bin()
        .arg("--data-dir")
        .arg(dir)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Demo {
        out: BufReader::new(child.stdout.take().unwrap()),
        err: BufReader::new(child.stderr.take().unwrap()),
        child,
    }
}

/// The demo's first start interrupted (SIGINT twice at different points, then SIGKILL): the
/// next start finds the data incomplete, loads it again and serves all eight tables with their
/// row counts; the JDBC URL it prints connects, queries and closes cleanly with the Flight SQL
/// JDBC driver under exactly the Java flag it prints.
#[test]
fn demo_heals_an_interrupted_first_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (after, how) in [
        ("region:", "-INT"),
        ("partsupp:", "-INT"),
        ("orders:", "-KILL"),
    ] {
        let mut demo = start_demo(d);
        let first = read_until(&mut demo.out, "TPC-H SF 0.1");
        assert!(first.contains("loading"), "{first}");
        let mut seen = read_until(&mut demo.err, after);
        signal(&demo.child, how);
        demo.err.read_to_string(&mut seen).unwrap();
        let status = demo.child.wait().unwrap();
        if how == "-INT" {
            assert_eq!(status.code(), Some(130), "{seen}");
            assert_eq!(namespaces(d), "schema_name\n", "after {after:?}: {seen}");
        }
    }
    // SIGKILL left tables behind; the next start loads again.
    let mut demo = start_demo(d);
    let banner = read_until(&mut demo.out, "Stop with Ctrl-C");
    assert!(
        banner.contains("local.tpch is incomplete")
            && banner.contains("loading TPC-H SF 0.1 again"),
        "{banner}"
    );
    assert!(banner.contains("adbc_driver_flightsql") && banner.contains("grpc://127.0.0.1:"));
    let url = banner
        .split_whitespace()
        .find(|w| w.starts_with("jdbc:arrow-flight-sql://"))
        .expect("a JDBC URL")
        .to_string();
    // The password is the one made at the first start, kept readable by its owner only.
    let file = d.join(iceflight::cli::DEMO_PASSWORD_FILE);
    let password = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_eq!(password.len(), 24, "{password}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        url.contains(&format!("user=demo&password={password}")) && !url.contains("catalog="),
        "{url}"
    );
    let java_flag = banner
        .split_whitespace()
        .find(|w| w.starts_with("--add-opens="))
        .expect("the Java 17 flag")
        .trim_end_matches([')', ':', ','])
        .to_string();
    let jdbc = Command::new("bash")
        .arg(common::repo_root().join("tests/flight/jdbc/run.sh"))
        .arg("ConnectUrl.java")
        .env("ICEFLIGHT_JDBC_URL", &url)
        .env("ICEFLIGHT_JAVA_OPTS", &java_flag)
        .env("ICEFLIGHT_JDBC_TIMEOUT", "120")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&jdbc.stdout);
    assert!(
        jdbc.status.success() && said.contains("value: 600572"),
        "JDBC with {url} and {java_flag}: {said}\n{}",
        String::from_utf8_lossy(&jdbc.stderr)
    );
    signal(&demo.child, "-TERM");
    assert!(demo.child.wait().unwrap().success());

    // Every table is complete; a further start loads nothing.
    for (table, rows) in expected_sf01_rows() {
        let sql = format!("SELECT count(*) AS n FROM tpch.{table}");
        let out = iceflight(d, &["sql", "--format", "csv", &sql]);
        assert_eq!(stdout(&out), format!("n\n{rows}\n"), "{table}");
    }
    let mut demo = start_demo(d);
    let banner = read_until(&mut demo.out, "Stop with Ctrl-C");
    assert!(!banner.contains("loading"), "{banner}");
    signal(&demo.child, "-TERM");
    assert!(demo.child.wait().unwrap().success());
}
