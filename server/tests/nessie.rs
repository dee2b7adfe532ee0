//! A second, independent Iceberg REST implementation: Nessie 0.99.0's `/iceberg` endpoint
//! (in-memory version store), its warehouse on SeaweedFS's S3. The jar comes from Maven Central
//! through `scripts/setup-nessie.sh`, which also finds a Java 21+ for it.
//!
//! What pyiceberg commits through Nessie iceflight reads (filtered, at the snapshots Nessie
//! serves: its metadata carries only the current one, history being Nessie's commits); what
//! iceflight commits through Nessie (INSERT, CREATE TABLE AS, DELETE: the last through the REST
//! protocol's own commit request, `catalog/src/rest.rs`) pyiceberg reads back. Nessie's path
//! prefix (`main%7Cwarehouse`, from `/v1/config`) differs from SeaweedFS's (`warehouse`), and
//! it asks for no credentials.

mod common;
mod weed;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{repo_root, statement_ok as ok, statement_sorted as sorted};
use iceflight::config::Config;
use iceflight::session::Engine;
use iceflight_catalog::CatalogConfig;
use weed::{KEY, SECRET, Weed, free_ports, lake};

/// A Nessie server on a free loopback port, its warehouse `s3://s3bucket/nessie/` on `weed`.
struct Nessie {
    child: Child,
    port: u16,
}

impl Nessie {
    fn start(dir: &Path, weed: &Weed) -> Self {
        let out = Command::new(repo_root().join("scripts/setup-nessie.sh"))
            .output()
            .expect("run scripts/setup-nessie.sh");
        assert!(
            out.status.success(),
            "scripts/setup-nessie.sh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let found = String::from_utf8(out.stdout).unwrap();
        let (jar, java) = found.trim().split_once(' ').expect("<jar> <java>");
        let ports = free_ports(2);
        let log = std::fs::File::create(dir.join("nessie.log")).unwrap();
        let s3 = weed.s3_uri();
        let child = Command::new(java)
            .args([
                format!("-Dquarkus.http.port={}", ports[0]),
                "-Dquarkus.http.host=127.0.0.1".into(),
                format!("-Dquarkus.management.port={}", ports[1]),
                "-Dquarkus.management.host=127.0.0.1".into(),
                "-Dquarkus.otel.sdk.disabled=true".into(),
                "-Dnessie.version.store.type=IN_MEMORY".into(),
                "-Dnessie.server.authentication.enabled=false".into(),
                "-Dnessie.catalog.default-warehouse=warehouse".into(),
                "-Dnessie.catalog.warehouses.warehouse.location=s3://s3bucket/nessie/".into(),
                format!("-Dnessie.catalog.service.s3.default-options.endpoint={s3}/"),
                "-Dnessie.catalog.service.s3.default-options.path-style-access=true".into(),
                "-Dnessie.catalog.service.s3.default-options.region=us-east-1".into(),
                "-Dnessie.catalog.service.s3.default-options.access-key=urn:nessie-secret:quarkus:s3-key".into(),
                format!("-Ds3-key.name={KEY}"),
                format!("-Ds3-key.secret={SECRET}"),
                "-jar".into(),
                jar.into(),
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {java}: {e}"));
        let nessie = Self {
            child,
            port: ports[0],
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline {
            let config = format!("http://127.0.0.1:{}/iceberg/v1/config", nessie.port);
            if std::net::TcpStream::connect(("127.0.0.1", nessie.port)).is_ok()
                && Command::new("curl")
                    .args(["-sf", "-o", "/dev/null", &config])
                    .status()
                    .is_ok_and(|s| s.success())
            {
                return nessie;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let log = std::fs::read_to_string(dir.join("nessie.log")).unwrap_or_default();
        panic!("Nessie did not come up:\n{log}");
    }

    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}/iceberg", self.port)
    }
}

impl Drop for Nessie {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `body` in Python with `c`, a pyiceberg `RestCatalog` on Nessie, and `pa` (pyarrow).
fn pyiceberg(nessie: &Nessie, weed: &Weed, body: &str) -> String {
    weed::pyiceberg(weed, &nessie.uri(), "", body)
}

/// The catalog `nessie` of iceflight's configuration: Nessie's REST endpoint, S3 credentials
/// configured (Nessie vends none).
fn nessie_catalog(nessie: &Nessie, weed: &Weed) -> CatalogConfig {
    CatalogConfig {
        name: "nessie".into(),
        uri: nessie.uri(),
        credential: None,
        scope: None,
        ..lake(weed, "")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_commits_through_nessie() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("weed")).unwrap();
    let weed = Weed::start(&dir.path().join("weed"));
    let nessie = Nessie::start(dir.path(), &weed);
    // Two commits: three rows, then a fourth.
    let made = pyiceberg(
        &nessie,
        &weed,
        r#"c.create_namespace("py")
data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
t = c.create_table("py.people", schema=data.schema)
t.append(data)
first = c.load_table("py.people").current_snapshot().snapshot_id
t = c.load_table("py.people")
t.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["d"]}))
print(first)
print(" ".join(sorted(str(s.snapshot_id) for s in c.load_table("py.people").snapshots())))"#,
    );
    let mut lines = made.lines();
    let first = lines.next().unwrap().to_string();
    let mut listed: Vec<String> = lines
        .next()
        .unwrap()
        .split(' ')
        .map(str::to_string)
        .collect();
    listed.sort();

    let mut config = Config {
        data_dir: dir.path().join("local"),
        ..Config::default()
    };
    config.catalogs = vec![nessie_catalog(&nessie, &weed)];
    let engine = Engine::connect(config).await.unwrap();
    let ctx = engine.session(Some("nessie"), Some("py"), &[]).unwrap();

    assert_eq!(
        sorted(&ctx, "SELECT * FROM people").await,
        [["1", "a"], ["2", "b"], ["3", "c"], ["4", "d"]]
    );
    assert_eq!(
        ok(&ctx, "SELECT name FROM people WHERE id = 3").await,
        [["c"]]
    );
    // Nessie keeps a table's history in its own commits: the metadata it serves lists the
    // snapshots pyiceberg sees (the current one), and an older snapshot is not found.
    let ours: Vec<String> = ok(
        &ctx,
        "SELECT snapshot_id FROM \"people$snapshots\" ORDER BY 1",
    )
    .await
    .into_iter()
    .map(|r| r[0].clone())
    .collect();
    let mut ours_sorted = ours.clone();
    ours_sorted.sort();
    assert_eq!(ours_sorted, listed);
    for id in &listed {
        assert_eq!(
            ok(
                &ctx,
                &format!("SELECT count(*) FROM people FOR VERSION AS OF {id}")
            )
            .await,
            [["4"]]
        );
    }
    if !listed.contains(&first) {
        let err = common::statement_rows(
            &ctx,
            &format!("SELECT count(*) FROM people FOR VERSION AS OF {first}"),
        )
        .await
        .unwrap_err();
        let status = iceflight::flight::status::to_status(err);
        assert_eq!(status.code(), tonic::Code::NotFound, "{status}");
        assert!(!status.message().contains('\n'), "{status}");
    }

    // Commits through Nessie, read back by pyiceberg.
    assert_eq!(
        ok(&ctx, "INSERT INTO people VALUES (10, 'j')").await,
        [["1"]]
    );
    ok(
        &ctx,
        "CREATE TABLE copied AS SELECT id * 2 AS id2, name FROM people",
    )
    .await;
    assert_eq!(ok(&ctx, "DELETE FROM copied WHERE id2 > 5").await, [["3"]]);
    pyiceberg(
        &nessie,
        &weed,
        r#"ids = sorted(c.load_table("py.people").scan().to_arrow()["id"].to_pylist())
assert ids == [1, 2, 3, 4, 10], ids
t = c.load_table("py.copied")
copied = sorted(t.scan().to_arrow()["id2"].to_pylist())
assert copied == [2, 4], copied
assert t.current_snapshot().summary.operation.value == "overwrite", t.current_snapshot()"#,
    );
    assert_eq!(
        sorted(&ctx, "SELECT * FROM copied").await,
        [["2", "a"], ["4", "b"]]
    );

    // Nessie 0.99 refuses format version 3 (its upgrade commit fails): one line, no table.
    let err = common::statement_rows(
        &ctx,
        "CREATE TABLE changed (id BIGINT, v BIGINT) WITH (format_version = 3)",
    )
    .await
    .unwrap_err();
    let status = iceflight::flight::status::to_status(err);
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status}");
    assert!(status.message().contains("nothing was created"), "{status}");
    assert!(
        !ok(&ctx, "SHOW TABLES")
            .await
            .iter()
            .any(|r| r[2] == "changed"),
        "a table was left behind"
    );
    // Row-level changes through Nessie on a plain bucket, merge-on-read: position delete
    // files, which pyiceberg reads back.
    ok(
        &ctx,
        "CREATE TABLE changed (id BIGINT, v BIGINT) WITH ( \
         'write.update.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read')",
    )
    .await;
    ok(&ctx, "INSERT INTO changed VALUES (1, 1), (2, 2), (3, 3)").await;
    assert_eq!(
        ok(&ctx, "UPDATE changed SET v = v * 10 WHERE id >= 2").await,
        [["2"]]
    );
    assert_eq!(
        ok(
            &ctx,
            "MERGE INTO changed USING (VALUES (1, 0), (4, 4)) AS s(id, v) ON changed.id = s.id \
             WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)"
        )
        .await,
        [["2"]]
    );
    assert_eq!(
        ok(
            &ctx,
            "SELECT DISTINCT file_format FROM \"changed$files\" WHERE content = 1"
        )
        .await,
        [["PARQUET"]]
    );
    let expected = [["2", "20"], ["3", "30"], ["4", "4"]];
    assert_eq!(sorted(&ctx, "SELECT * FROM changed").await, expected);
    pyiceberg(
        &nessie,
        &weed,
        r#"t = c.load_table("py.changed")
rows = sorted(t.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
assert rows == [{"id": 2, "v": 20}, {"id": 3, "v": 30}, {"id": 4, "v": 4}], rows"#,
    );
}
