//! Scaling out on datafusion-distributed with real worker processes on loopback
//! (`server/src/distributed/`): the scan's codec and split keep every row, TPC-H's answers
//! through 2 and 3 workers are the single node's, the workers prune on the date-sorted SSB
//! layout (their counters gathered into the coordinator's EXPLAIN ANALYZE), and a worker killed
//! mid-query fails that query with `Unavailable` naming it while the coordinator keeps serving;
//! workers with a secret and mutual TLS admit only their cluster.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestCa, execute, query, repo_root, rows};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use iceflight::config::{ClusterTlsConfig, Config};
use iceflight::distributed::Role;
use iceflight::distributed::security::ClusterCredentials;
use iceflight::session::Engine;
use iceflight_scan::distributed::codec::IcebergScanCodec;

/// A worker process (`iceflight serve --role worker`), killed when dropped.
struct Worker {
    child: Child,
    url: String,
}

impl Worker {
    /// Starts a worker on the embedded catalog in `dir`, listening on `listen`.
    fn start(dir: &Path, listen: &str) -> Self {
        Self::start_with(dir, listen, None)
    }

    /// Starts a worker as [`Self::start`], with `cluster`'s secret and TLS when given (its log
    /// then goes to `cluster.log`, its URL is `https://`).
    fn start_with(dir: &Path, listen: &str, cluster: Option<&ClusterFiles>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_iceflight"));
        command
            .env_remove("ICEFLIGHT_CONFIG")
            .env_remove("ICEFLIGHT_ROLE")
            .env("ICEFLIGHT_LOG", "warn")
            .arg("--data-dir")
            .arg(dir);
        match cluster {
            Some(c) => {
                let log = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&c.log)
                    .unwrap();
                command.arg("--config").arg(&c.config).stderr(log);
            }
            None => {
                command.stderr(Stdio::inherit());
            }
        }
        let mut child = command
            .args(["serve", "--role", "worker", "--listen", listen])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a worker");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .split_whitespace()
            .nth(4)
            .unwrap_or_else(|| panic!("worker start line: {line:?}"));
        let scheme = if cluster.is_some() { "https" } else { "http" };
        Self {
            child,
            url: format!("{scheme}://{addr}"),
        }
    }

    /// `n` workers on free loopback ports.
    fn start_many(dir: &Path, n: usize) -> Vec<Self> {
        (0..n).map(|_| Self::start(dir, "127.0.0.1:0")).collect()
    }

    /// The address it listens on (`127.0.0.1:PORT`).
    fn addr(&self) -> &str {
        self.url.split("://").nth(1).unwrap()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A coordinator engine (in this process) on the embedded catalog in `dir` with `workers`.
async fn coordinator(dir: &Path, workers: &[&Worker]) -> Engine {
    coordinator_with(dir, workers, |_| {}).await
}

/// [`coordinator`] with `distributed` changed by `change`.
async fn coordinator_with(
    dir: &Path,
    workers: &[&Worker],
    change: impl FnOnce(&mut iceflight::config::DistributedConfig),
) -> Engine {
    let mut config = Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    };
    config.query.target_partitions = 2;
    config.distributed.role = Role::Coordinator;
    config.distributed.workers = workers.iter().map(|w| w.url.clone()).collect();
    config.distributed.health_interval = std::time::Duration::from_millis(200);
    change(&mut config.distributed);
    Engine::connect(config).await.expect("coordinator")
}

/// Small tasks (256 KiB per partition), so that even SF 0.1's tables are split among every
/// worker.
fn small_tasks() -> Vec<(String, String)> {
    vec![(
        "distributed.file_scan_config_bytes_per_partition".into(),
        "262144".into(),
    )]
}

fn sql(suite: &str, name: &str) -> String {
    std::fs::read_to_string(repo_root().join(format!("bench/queries/{suite}/{name}.sql"))).unwrap()
}

/// Rows as a sorted list (row order of ties is not part of an answer).
async fn answer(ctx: &SessionContext, sql: &str) -> Vec<Vec<String>> {
    let mut rows = query(ctx, sql).await;
    rows.sort();
    rows
}

/// The physical plan a coordinator runs, with its stages (`EXPLAIN` prints the plan before
/// the distributed planner cuts it into stages).
async fn distributed_plan(ctx: &SessionContext, sql: &str) -> String {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    datafusion_distributed::display_plan_ascii(plan.as_ref(), false)
}

/// Every scan of every fixture table, split for 2 tasks, encoded and decoded (as a worker
/// decodes it: tables loaded by name, tasks and partition tuples from the bytes) reads the
/// rows the planned scan reads: deletes, identity-partition constants, renames and promotions
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codec_and_split_keep_every_row_of_every_fixture() {
    let dir = tempfile::tempdir().unwrap();
    common::make_case_fixtures(dir.path());
    let engine = common::engine(dir.path(), 2).await;
    let ctx = engine.session(None, Some("cases"), &[]).unwrap();
    let codec = IcebergScanCodec::new(
        Arc::new(engine.catalogs().clone()),
        Arc::clone(engine.caches()),
    );
    let tables = common::column(
        &ctx,
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = 'cases' ORDER BY table_name",
    )
    .await;
    assert!(tables.len() >= 5, "{tables:?}");
    for table in &tables {
        let sql = format!("SELECT * FROM {table}");
        let mut expected = query(&ctx, &sql).await;
        expected.sort();
        let mut got = common::rows_through_codec(&ctx, &codec, &sql, 2)
            .await
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        got.sort();
        assert_eq!(got, expected, "{table}");
    }
}

/// The 22 TPC-H queries at SF 0.1 through a coordinator with 2 and with 3 worker processes
/// give the single node's answers; the plans are distributed (their scans split among tasks).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_through_two_and_three_workers_matches_single_node() {
    let dir = tempfile::tempdir().unwrap();
    let single = common::engine(dir.path(), 2).await;
    common::load_tpch_local(&single, 0.1).await;
    let workers = Worker::start_many(dir.path(), 3);
    let two = coordinator(dir.path(), &[&workers[0], &workers[1]]).await;
    let three = coordinator(dir.path(), &[&workers[0], &workers[1], &workers[2]]).await;
    let single = single.session(None, Some("tpch"), &[]).unwrap();
    let two = two.session(None, Some("tpch"), &small_tasks()).unwrap();
    let three = three.session(None, Some("tpch"), &small_tasks()).unwrap();

    let plan = distributed_plan(&three, &sql("tpch", "q01")).await;
    assert!(
        plan.contains("DistributedExec") && plan.contains("tasks=3"),
        "q01 is not spread over 3 tasks:\n{plan}"
    );
    for q in 1..=22 {
        let name = format!("q{q:02}");
        let text = sql("tpch", &name);
        let expected = answer(&single, &text).await;
        assert_eq!(answer(&two, &text).await, expected, "{name}, 2 workers");
        assert_eq!(answer(&three, &text).await, expected, "{name}, 3 workers");
    }
    // Plans with float keys carry the engine's `canonical_float` (case c12), which workers
    // decode by name.
    let floats = "SELECT count(DISTINCT CAST(l_discount AS DOUBLE) * -1.0), \
                  count(*) FILTER (WHERE CAST(l_tax AS DOUBLE) * -1.0 = 0.0) FROM lineitem";
    let plan = distributed_plan(&three, floats).await;
    assert!(
        plan.contains("DistributedExec") && plan.contains("canonical_float"),
        "{plan}"
    );
    assert_eq!(answer(&three, floats).await, answer(&single, floats).await);
}

/// A named counter of `table`'s scans in an `EXPLAIN ANALYZE` text, summed over the tasks'
/// scans: the coordinator prints a scan split among tasks as a `DistributedLeafExec` line with
/// the metrics its workers sent back, followed by one line per task's scan.
fn counter(text: &str, table: &str, name: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    lines
        .windows(2)
        .filter(|w| {
            w[0].contains("DistributedLeafExec")
                && w[1].contains(&format!("IcebergScanExec: table={table},"))
        })
        .filter_map(|w| {
            let line = w[0];
            let at = line.find(&format!(" {name}="))? + name.len() + 2;
            let digits: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse::<usize>().ok()
        })
        .sum()
}

/// The text of `EXPLAIN ANALYZE sql`.
async fn analyzed(ctx: &SessionContext, sql: &str) -> String {
    rows(
        &execute(ctx, &format!("EXPLAIN ANALYZE {sql}"))
            .await
            .unwrap()
            .batches,
    )
    .into_iter()
    .map(|r| r[1].clone())
    .collect::<Vec<_>>()
    .join("\n")
}

/// SSB q1.1 on lineorder sorted by date: the join's dynamic filter reaches the lineorder scan
/// on the workers (relinked there), which prune row groups and files; the counters come back
/// into the coordinator's EXPLAIN ANALYZE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssb_q11_on_sorted_dates_prunes_on_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let single = common::engine(dir.path(), 2).await;
    let catalog = Arc::clone(single.catalogs().get("local").unwrap());
    let options = iceflight_datagen::load::LoadOptions {
        scale: 0.1,
        target_file_size: 2 * 1024 * 1024,
        row_group_rows: 16384,
        progress: false,
        ..Default::default()
    };
    let namespace = iceberg::NamespaceIdent::new("ssb".into());
    iceflight_datagen::load::load_ssb(&catalog, &namespace, &options, true)
        .await
        .unwrap();
    let workers = Worker::start_many(dir.path(), 2);
    let coordinator = coordinator(dir.path(), &[&workers[0], &workers[1]]).await;
    let single = single.session(None, Some("ssb"), &[]).unwrap();
    let ctx = coordinator
        .session(None, Some("ssb"), &small_tasks())
        .unwrap();
    let text = sql("ssb", "q1.1");
    assert_eq!(answer(&ctx, &text).await, answer(&single, &text).await);

    // Files and row groups of lineorder skipped by the join's dynamic filter, on the workers.
    let pruned = |text: &str| {
        counter(text, "ssb.lineorder", "files_pruned_dynamic")
            + counter(text, "ssb.lineorder", "row_groups_pruned")
    };
    let on = analyzed(&ctx, &text).await;
    assert!(on.contains("Stage 2"), "not distributed:\n{on}");
    assert!(
        pruned(&on) > 0 && counter(&on, "ssb.lineorder", "dynamic_rows_dropped") > 0,
        "lineorder pruned nothing on the workers:\n{on}"
    );
    assert_eq!(
        counter(&on, "ssb.lineorder", "dynamic_filters_unlinked"),
        0,
        "{on}"
    );
    // The same plan without dynamic pruning prunes nothing: the pruning above is the filter's.
    let mut settings = small_tasks();
    settings.push((
        "iceflight.scan.dynamic_filter_pruning".into(),
        "false".into(),
    ));
    let off = coordinator.session(None, Some("ssb"), &settings).unwrap();
    let off = analyzed(&off, &text).await;
    assert!(off.contains("Stage 2"), "not distributed:\n{off}");
    assert_eq!(pruned(&off), 0, "{off}");
    assert!(
        counter(&off, "ssb.lineorder", "rows_decoded")
            > counter(&on, "ssb.lineorder", "rows_decoded"),
        "{on}\n{off}"
    );
}

/// A worker killed while a query streams from it fails that query with `Unavailable` naming
/// the worker, within seconds; the coordinator answers the next query (with one worker left,
/// on its own: a stage needs two tasks to be worth a network boundary), and sends tasks to the
/// restarted worker again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_worker_fails_its_query_and_the_next_one_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let single = common::engine(dir.path(), 2).await;
    common::load_tpch_local(&single, 0.1).await;
    let mut first = Worker::start(dir.path(), "127.0.0.1:0");
    let second = Worker::start(dir.path(), "127.0.0.1:0");
    let engine = coordinator(dir.path(), &[&first, &second]).await;
    let ctx = engine.session(None, Some("tpch"), &small_tasks()).unwrap();
    let count = "SELECT count(*) FROM lineitem";
    let expected = query(&single.session(None, Some("tpch"), &[]).unwrap(), count).await;

    // A worker killed while its rows stream fails the query, naming it.
    let elapsed = fails_naming(&ctx, &mut first).await;
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");

    // The coordinator keeps serving.
    assert_eq!(query(&ctx, count).await, expected);

    // Restarted on the same address, the worker gets tasks again (killing it fails a query).
    let mut restarted = Worker::start(dir.path(), first.addr());
    assert_eq!(restarted.url, first.url);
    let workers = engine.cluster().unwrap().workers().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(10);
    while workers.live().len() < 2 {
        assert!(Instant::now() < deadline, "live: {:?}", workers.live());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(query(&ctx, count).await, expected);
    fails_naming(&ctx, &mut restarted).await;
    drop(second);
}

/// Streams all of lineitem through `ctx`, kills `worker` after the first batch and reads on:
/// the query must fail with `Unavailable` naming the worker. Returns how long the failure took
/// after the kill.
async fn fails_naming(ctx: &SessionContext, worker: &mut Worker) -> Duration {
    let mut stream = ctx
        .sql("SELECT * FROM lineitem")
        .await
        .unwrap()
        .execute_stream()
        .await
        .unwrap();
    stream.next().await.expect("a first batch").unwrap();
    let killed_at = Instant::now();
    worker.kill();
    let error = loop {
        match stream.next().await {
            Some(Ok(_)) => continue,
            Some(Err(e)) => break e,
            None => panic!(
                "the query finished without the killed worker {}",
                worker.url
            ),
        }
    };
    let elapsed = killed_at.elapsed();
    let status = iceflight::flight::status::to_status(error);
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains(&worker.url),
        "{}",
        status.message()
    );
    elapsed
}

/// What is lost across stages: a partitioned join's dynamic filter is produced in the join's
/// stage and consumed by a probe-side scan in another; datafusion-distributed 3.0 carries no
/// filter between stages, so the workers' scans drop it (`dynamic_filters_unlinked`, once per
/// task) and read what the single node prunes. A broadcast join's filter stays in its stage
/// (`ssb_q11_on_sorted_dates_prunes_on_the_workers`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_from_another_stage_is_counted_and_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let single = common::engine(dir.path(), 2).await;
    common::load_tpch_local(&single, 0.1).await;
    let workers = Worker::start_many(dir.path(), 2);
    let coordinator = coordinator(dir.path(), &[&workers[0], &workers[1]]).await;
    let partitioned: Vec<(String, String)> = ["threshold", "threshold_rows"]
        .iter()
        .map(|key| {
            (
                format!("datafusion.optimizer.hash_join_single_partition_{key}"),
                "0".to_string(),
            )
        })
        .collect();
    let settings = [small_tasks(), partitioned.clone()].concat();
    let ctx = coordinator.session(None, Some("tpch"), &settings).unwrap();
    let single = single.session(None, Some("tpch"), &partitioned).unwrap();
    let text = "SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey \
                WHERE o_orderdate < DATE '1993-01-01'";
    assert_eq!(answer(&ctx, text).await, answer(&single, text).await);
    let plan = analyzed(&ctx, text).await;
    assert!(
        plan.contains("HashJoinExec: mode=Partitioned"),
        "not a partitioned join:\n{plan}"
    );
    assert_eq!(
        counter(&plan, "tpch.lineitem", "dynamic_filters_unlinked"),
        2,
        "one filter per task of 2:\n{plan}"
    );
    assert_eq!(counter(&plan, "tpch.lineitem", "files_pruned_dynamic"), 0);
    assert_eq!(counter(&plan, "tpch.lineitem", "row_groups_pruned"), 0);
}

/// A secured cluster's files in one directory: a CA, one certificate for every member (named
/// `127.0.0.1`), the secret, the workers' configuration and their log.
struct ClusterFiles {
    dir: std::path::PathBuf,
    config: std::path::PathBuf,
    secret: std::path::PathBuf,
    tls: ClusterTlsConfig,
    log: std::path::PathBuf,
}

impl ClusterFiles {
    fn new(dir: &Path) -> Self {
        let dir = dir.join("cluster");
        std::fs::create_dir_all(&dir).unwrap();
        let ca = TestCa::new("cluster CA");
        let (cert, key) = ca.sign(&["127.0.0.1", "localhost"]);
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let tls = ClusterTlsConfig {
            cert: write("member.pem", &cert),
            key: write("member.key", &key),
            ca: write("ca.pem", &ca.pem),
        };
        let secret = write("secret", &format!("{}\n", "c0ffee42".repeat(8)));
        let config = write(
            "worker.toml",
            &format!(
                "[distributed]\nsecret_file = {:?}\n[distributed.tls]\ncert = {:?}\nkey = {:?}\nca = {:?}\n",
                secret, tls.cert, tls.key, tls.ca
            ),
        );
        let log = dir.join("workers.log");
        Self {
            dir,
            config,
            secret,
            tls,
            log,
        }
    }

    /// The credentials of a caller with `secret` (none: no file) and TLS as `tls` (none:
    /// plaintext).
    fn caller(&self, secret: Option<&str>, tls: Option<ClusterTlsConfig>) -> ClusterCredentials {
        let secret_file = secret.map(|s| {
            let path = self.dir.join(format!("caller-secret-{}", s.len()));
            std::fs::write(&path, s).unwrap();
            path
        });
        let config = iceflight::config::DistributedConfig {
            secret_file,
            tls,
            ..Default::default()
        };
        ClusterCredentials::from_config(&config).unwrap()
    }
}

/// What a worker answers a client that sends it a plan (`plan` as the encoded plan's bytes)
/// over `credentials`: the gRPC status of the refusal, if any.
async fn send_plan(
    credentials: &ClusterCredentials,
    worker: &Worker,
    plan: &[u8],
) -> tonic::Status {
    use datafusion_distributed::{CoordinatorToWorkerMsg, SetPlanRequest, TaskKey};
    let url = match credentials.uses_tls() {
        true => url::Url::parse(&worker.url).unwrap(),
        false => url::Url::parse(&format!("http://{}", worker.addr())).unwrap(),
    };
    let channel = credentials
        .endpoint(&url)
        .unwrap()
        .connect_timeout(Duration::from_secs(2))
        .connect_lazy();
    let mut client = credentials.client(channel);
    let request = SetPlanRequest {
        task_key: TaskKey {
            query_id: uuid::Uuid::new_v4(),
            stage_id: 1,
            task_number: 0,
        },
        task_count: 1,
        plan_proto: plan.to_vec(),
        work_unit_feed_declarations: vec![],
        target_worker_url: url.clone(),
        query_start_time_ns: 0,
    };
    let messages = futures::stream::iter([CoordinatorToWorkerMsg::SetPlanRequest(request)])
        .chain(futures::stream::pending())
        .boxed();
    let called = tokio::time::timeout(
        Duration::from_secs(10),
        client.coordinator_channel(http::HeaderMap::new(), messages),
    )
    .await
    .expect("the worker answers within 10 s");
    let error = match called {
        Err(e) => e,
        Ok(mut answers) => match tokio::time::timeout(Duration::from_secs(10), answers.next())
            .await
            .expect("the worker answers within 10 s")
        {
            Some(Err(e)) => e,
            other => panic!("the worker took the plan: {:?}", other.map(|r| r.is_ok())),
        },
    };
    status_in(&error).unwrap_or_else(|| tonic::Status::unknown(error.to_string()))
}

/// The gRPC status inside `e`, looking through context and shared wrappers.
fn status_in(e: &datafusion::error::DataFusionError) -> Option<tonic::Status> {
    use datafusion::error::DataFusionError as E;
    match e {
        E::External(inner) => inner.downcast_ref::<tonic::Status>().cloned(),
        E::Context(_, inner) => status_in(inner),
        E::Shared(inner) => status_in(inner),
        _ => None,
    }
}

/// Workers with `[distributed] secret_file` and `[distributed.tls]` admit only their cluster:
/// the coordinator presenting both answers as the single node does, through both workers; a
/// client sending a plan with no secret or a wrong one (a stolen certificate) gets
/// `Unauthenticated`, logged by the worker with the caller's address, before the plan is read
/// (the right secret gets as far as decoding the forged bytes); a certificate of another CA or
/// plaintext gets no TLS session. A worker beyond loopback with neither setting, or with a
/// short secret, refuses to start with one line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_admit_only_their_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let single = common::engine(dir.path(), 2).await;
    common::load_tpch_local(&single, 0.01).await;
    let files = ClusterFiles::new(dir.path());
    let workers = [
        Worker::start_with(dir.path(), "127.0.0.1:0", Some(&files)),
        Worker::start_with(dir.path(), "127.0.0.1:0", Some(&files)),
    ];
    let engine = coordinator_with(dir.path(), &[&workers[0], &workers[1]], |d| {
        d.secret_file = Some(files.secret.clone());
        d.tls = Some(files.tls.clone());
    })
    .await;
    let list = engine.cluster().unwrap().workers().unwrap().clone();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        list.live().len(),
        2,
        "both workers answer the coordinator's probes"
    );
    let ctx = engine
        .session(
            None,
            Some("tpch"),
            &[(
                "distributed.file_scan_config_bytes_per_partition".into(),
                "32768".into(),
            )],
        )
        .unwrap();
    let text = "SELECT l_returnflag, count(*), sum(l_quantity) FROM lineitem GROUP BY l_returnflag";
    assert!(
        distributed_plan(&ctx, text).await.contains("Stage 2"),
        "not distributed"
    );
    let local = single.session(None, Some("tpch"), &[]).unwrap();
    assert_eq!(answer(&ctx, text).await, answer(&local, text).await);

    // Forged plans.
    let secret = std::fs::read_to_string(&files.secret).unwrap();
    let stolen_cert = Some(files.tls.clone());
    let unauthenticated = [
        ("no secret", files.caller(None, stolen_cert.clone())),
        (
            "a wrong secret",
            files.caller(Some(&"0".repeat(64)), stolen_cert.clone()),
        ),
    ];
    for (what, caller) in &unauthenticated {
        let status = send_plan(caller, &workers[0], b"forged plan").await;
        assert_eq!(
            status.code(),
            tonic::Code::Unauthenticated,
            "{what}: {status:?}"
        );
        assert!(
            status.message().contains("secret_file"),
            "{what}: {status:?}"
        );
    }
    let member = files.caller(Some(secret.trim_end()), stolen_cert.clone());
    let status = send_plan(&member, &workers[0], b"forged plan").await;
    assert_ne!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    let log = std::fs::read_to_string(&files.log).unwrap();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("refused a call to the worker service"))
        .collect();
    assert_eq!(refusals.len(), 2, "{log}");
    assert!(refusals.iter().all(|l| l.contains("127.0.0.1:")), "{log}");

    let other = TestCa::new("another CA");
    let (cert, key) = other.sign(&["127.0.0.1"]);
    std::fs::write(files.dir.join("other.pem"), cert).unwrap();
    std::fs::write(files.dir.join("other.key"), key).unwrap();
    let outsiders = [
        (
            "another CA's certificate",
            files.caller(
                Some(secret.trim_end()),
                Some(ClusterTlsConfig {
                    cert: files.dir.join("other.pem"),
                    key: files.dir.join("other.key"),
                    ca: files.tls.ca.clone(),
                }),
            ),
        ),
        ("plaintext", files.caller(Some(secret.trim_end()), None)),
    ];
    for (what, caller) in &outsiders {
        let status = send_plan(caller, &workers[0], b"forged plan").await;
        assert!(
            matches!(
                status.code(),
                tonic::Code::Unavailable
                    | tonic::Code::Unknown
                    | tonic::Code::Internal
                    | tonic::Code::Cancelled
            ),
            "{what}: {status:?}"
        );
    }
    // Both were refused at the handshake, as the worker's log says.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(&files.log).unwrap();
        if log.matches("TLS handshake failed").count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{log}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer(&ctx, text).await, answer(&local, text).await);

    // A worker that would admit anyone, or with a short secret, does not start.
    let refused = |config: Option<&Path>, listen: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_iceflight"));
        command
            .env_remove("ICEFLIGHT_CONFIG")
            .env_remove("ICEFLIGHT_ROLE")
            .arg("--data-dir")
            .arg(dir.path());
        if let Some(c) = config {
            command.arg("--config").arg(c);
        }
        let out = command
            .args(["serve", "--role", "worker", "--listen", listen])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        stderr
    };
    let open = refused(None, "0.0.0.0:0");
    assert!(
        open.contains("secret_file") && open.contains("allow_unauthenticated"),
        "{open}"
    );
    let short = files.dir.join("short.toml");
    std::fs::write(
        &short,
        format!(
            "[distributed]\nsecret_file = {:?}\n",
            files.dir.join("caller-secret-5")
        ),
    )
    .unwrap();
    std::fs::write(files.dir.join("caller-secret-5"), "short").unwrap();
    let short = refused(Some(&short), "127.0.0.1:0");
    assert!(short.contains("at least 32"), "{short}");
}
