//! The `iceflight` binary on bad input: one clear line on stderr, exit code 1, nothing changed.

use std::process::{Command, Output};

fn iceflight(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iceflight"))
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("ICEFLIGHT_CONFIG")
        .output()
        .expect("run iceflight")
}

fn failure(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line expected, got: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    lines[0].to_string()
}

#[test]
fn sql_load_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // SQL without FROM, DDL, then a query in csv with a header.
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "CREATE SCHEMA s1; SELECT 1 AS one, 'x' AS two",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one,two\n1,x\n");

    // Load a tiny TPC-H and query it.
    let out = iceflight(d, &["load", "tpch", "--scale", "0.001", "--namespace", "t"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
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
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r#"[{"n":25}]"#);

    // Loading again without --replace is refused and leaves the data in place.
    let err = failure(&iceflight(
        d,
        &["load", "tpch", "--scale", "0.001", "--namespace", "t"],
    ));
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
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n5\n");

    // Unknown table, namespace, catalog; SQL syntax error; bad --set; bad sort column.
    let err = failure(&iceflight(d, &["sql", "SELECT * FROM t.nope"]));
    assert!(err.contains("nope") && err.contains("not found"), "{err}");
    let err = failure(&iceflight(d, &["sql", "SELECT * FROM nons.region"]));
    assert!(err.contains("nons"), "{err}");
    let err = failure(&iceflight(d, &["sql", "--catalog", "nocat", "SELECT 1"]));
    assert!(err.contains("unknown catalog nocat"), "{err}");
    let err = failure(&iceflight(d, &["sql", "SELEC 1"]));
    assert!(err.contains("SELEC"), "{err}");
    let err = failure(&iceflight(
        d,
        &["sql", "--set", "iceflight.scan.nope=1", "SELECT 1"],
    ));
    assert!(err.contains("unknown setting iceflight.scan.nope"), "{err}");
    let err = failure(&iceflight(
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
    ));
    assert!(err.contains("no column nope"), "{err}");
    let err = failure(&iceflight(
        d,
        &["load", "nested", "--rows", "10", "--namespace", "a..b"],
    ));
    assert!(
        err.contains("every dot-separated part must be non-empty"),
        "{err}"
    );
    // A two-level namespace gets its parent, so listings still see every table.
    let out = iceflight(d, &["load", "nested", "--rows", "10", "--namespace", "p.q"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM local.\"p.q\".nested",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "n\n10\n");
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM information_schema.schemata WHERE schema_name = 'u'",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "n\n0\n",
        "a refused load creates nothing"
    );

    // A load that fails half-way (lineitem's data directory is blocked by a file) removes every
    // table it wrote, their files and the namespace.
    let blocked = d.join("warehouse/broken/lineitem");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join("data"), "not a directory").unwrap();
    let err = failure(&iceflight(
        d,
        &["load", "tpch", "--scale", "0.001", "--namespace", "broken"],
    ));
    assert!(!err.is_empty());
    let out = iceflight(
        d,
        &[
            "sql",
            "--format",
            "csv",
            "SELECT count(*) AS n FROM information_schema.schemata WHERE schema_name = 'broken'",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "n\n0\n",
        "the failed load left its namespace"
    );
    for table in ["region", "nation", "orders"] {
        assert!(
            !d.join("warehouse/broken").join(table).exists(),
            "{table} files left behind"
        );
    }

    // The memory limit is enforced: a query that needs more fails instead of growing.
    let small = d.join("small.toml");
    std::fs::write(
        &small,
        format!(
            "data_dir = {:?}\n[query]\nmemory_limit = \"64KiB\"\n",
            d.display().to_string()
        ),
    )
    .unwrap();
    let big = "SELECT count(*) FROM t.lineitem a JOIN t.orders b ON a.l_orderkey = b.o_orderkey AND a.l_comment = b.o_comment";
    let err = failure(&iceflight(
        d,
        &["--config", small.to_str().unwrap(), "sql", big],
    ));
    assert!(err.to_lowercase().contains("resources exhausted"), "{err}");
    let out = iceflight(d, &["sql", "--format", "csv", big]);
    assert!(
        out.status.success(),
        "without the limit it runs: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A catalog that cannot be reached is reported as unavailable, naming it and its URI.
    let down = d.join("down.toml");
    std::fs::write(
        &down,
        format!(
            "data_dir = {:?}\n[[catalog]]\nname = \"lake\"\ntype = \"rest\"\nuri = \"http://127.0.0.1:1\"\n",
            d.display().to_string()
        ),
    )
    .unwrap();
    let err = failure(&iceflight(
        d,
        &[
            "--config",
            down.to_str().unwrap(),
            "sql",
            "SELECT * FROM lake.ns.t",
        ],
    ));
    assert!(
        err.contains("catalog lake at http://127.0.0.1:1 is unavailable"),
        "{err}"
    );

    // Unreadable and invalid config files.
    let err = failure(&iceflight(
        d,
        &["--config", "/nonexistent/iceflight.toml", "sql", "SELECT 1"],
    ));
    assert!(err.contains("cannot read config file"), "{err}");
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "data_dir = 3\n").unwrap();
    let err = failure(&iceflight(
        d,
        &["--config", bad.to_str().unwrap(), "sql", "SELECT 1"],
    ));
    assert!(
        err.contains("invalid config file") && err.contains("line 1"),
        "{err}"
    );
}

#[test]
fn demo_loads_tpch_serves_and_stops_on_sigterm() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_iceflight"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["demo", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .env_remove("ICEFLIGHT_CONFIG")
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("jdbc:arrow-flight-sql://") {
            break;
        }
    }
    assert!(seen.contains("loading TPC-H SF 0.1"), "{seen}");
    assert!(
        seen.contains("adbc_driver_flightsql") && seen.contains("grpc://127.0.0.1:"),
        "{seen}"
    );
    assert!(seen.contains("user=demo&password=iceflight"), "{seen}");
    // Graceful shutdown on SIGTERM.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "demo exited with {status}");
}
