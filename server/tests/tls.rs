//! TLS on the Flight SQL listener (`[server.tls]`, `server/src/flight/tls.rs`), against the
//! `iceflight serve` binary with certificates made here (rcgen): a client trusting the CA logs in
//! and queries; a plaintext client, a client trusting another CA, and (with `client_ca`) a client
//! without a certificate are refused; SIGHUP swaps the certificate for new connections. The real
//! clients: ADBC over `grpc+tls` with the CA as its root, and the JDBC driver with
//! `useEncryption=true` and the CA in a Java trust store.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arrow_flight::sql::client::FlightSqlServiceClient;
use common::TestCa;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// An `iceflight serve` process with `[server.tls]` (user `alice:secret`), killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(dir: &Path, tls: &str) -> Self {
        // An empty embedded catalog (serve refuses a data directory without one).
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::write(dir.join("data/catalog.db"), "").unwrap();
        let config = dir.join("iceflight.toml");
        std::fs::write(
            &config,
            format!(
                "data_dir = {:?}\n[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\n{tls}",
                dir.join("data").display().to_string()
            ),
        )
        .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_iceflight"))
            .args(["--config", config.to_str().unwrap()])
            .args(["serve", "--user", "alice:secret"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("serving Flight SQL on ") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "serve ended early");
        }
        assert!(
            line.trim_end().ends_with("; TLS") || line.trim_end().ends_with("client certificates"),
            "{line}"
        );
        let port = line
            .split("serving Flight SQL on 127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
            .unwrap()
            .parse()
            .unwrap();
        Self { child, port }
    }

    fn hangup(&self) {
        let ok = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -HUP");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Logs in as alice over TLS trusting `ca` (presenting `identity` when given) and runs
/// `SELECT 1`; the error text when any step fails.
async fn query(port: u16, ca: &str, identity: Option<&(String, String)>) -> Result<(), String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca))
        .domain_name("localhost");
    if let Some((cert, key)) = identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    let channel = Channel::from_shared(format!("https://localhost:{port}"))
        .unwrap()
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut client = FlightSqlServiceClient::new(channel);
    client
        .handshake("alice", "secret")
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    client
        .execute("SELECT 1".into(), None)
        .await
        .map_err(|e| format!("query: {e}"))?;
    Ok(())
}

/// Logs in over plaintext gRPC.
async fn plaintext(port: u16) -> Result<(), String> {
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    FlightSqlServiceClient::new(channel)
        .handshake("alice", "secret")
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listener_refuses_what_it_must_and_reloads_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, other) = (TestCa::new("iceflight test CA"), TestCa::new("another CA"));
    let (cert, key) = ca.sign(&["localhost", "127.0.0.1"]);
    let cert_path = write(d, "server.pem", &cert);
    let key_path = write(d, "server.key", &key);
    let server = Server::start(d, &format!("cert = {cert_path:?}\nkey = {key_path:?}\n"));

    query(server.port, &ca.pem, None).await.unwrap();
    let refused = plaintext(server.port).await.unwrap_err();
    assert!(!refused.is_empty());
    assert!(query(server.port, &other.pem, None).await.is_err());

    // The real clients.
    adbc_over_tls(d, server.port, &ca.pem);
    jdbc_over_tls(d, server.port, &ca.pem);

    // A certificate from the other CA, loaded on SIGHUP: new connections get it.
    let (cert2, key2) = other.sign(&["localhost"]);
    std::fs::write(&cert_path, cert2).unwrap();
    std::fs::write(&key_path, key2).unwrap();
    server.hangup();
    let mut reloaded = false;
    for _ in 0..50 {
        if query(server.port, &other.pem, None).await.is_ok() {
            reloaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reloaded, "the new certificate was not served after SIGHUP");
    assert!(query(server.port, &ca.pem, None).await.is_err());
    // A broken pair on SIGHUP keeps the current one.
    std::fs::write(&key_path, "not a key").unwrap();
    server.hangup();
    tokio::time::sleep(Duration::from_millis(300)).await;
    query(server.port, &other.pem, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_requires_a_client_certificate_from_the_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (ca, other) = (TestCa::new("iceflight test CA"), TestCa::new("another CA"));
    let (cert, key) = ca.sign(&["localhost"]);
    let server = Server::start(
        d,
        &format!(
            "cert = {:?}\nkey = {:?}\nclient_ca = {:?}\n",
            write(d, "server.pem", &cert),
            write(d, "server.key", &key),
            write(d, "clients.pem", &ca.pem)
        ),
    );
    let client = ca.sign(&["client"]);
    let stranger = other.sign(&["client"]);
    query(server.port, &ca.pem, Some(&client)).await.unwrap();
    assert!(query(server.port, &ca.pem, None).await.is_err());
    assert!(query(server.port, &ca.pem, Some(&stranger)).await.is_err());
}

#[test]
fn a_bad_tls_file_stops_serve_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("catalog.db"), "").unwrap();
    let config = write(
        d,
        "iceflight.toml",
        &format!(
            "data_dir = {:?}\n[server]\nlisten = \"127.0.0.1:0\"\n[server.tls]\ncert = {:?}\nkey = {:?}\n",
            d.display().to_string(),
            d.join("missing.pem"),
            d.join("missing.key")
        ),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_iceflight"))
        .args(["--config", config.to_str().unwrap()])
        .args(["serve", "--user", "alice:secret"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("TLS certificate") && errors[0].contains("missing.pem"),
        "{err}"
    );
}

/// ADBC's Flight SQL driver over `grpc+tls`, the CA given as its root certificates.
fn adbc_over_tls(dir: &Path, port: u16, ca: &str) {
    let python = adbc_python();
    let ca_path = write(dir, "ca.pem", ca);
    let script = format!(
        r#"
import adbc_driver_flightsql.dbapi as flight_sql
root = open({ca_path:?}).read()
with flight_sql.connect("grpc+tls://localhost:{port}", db_kwargs={{
        "username": "alice", "password": "secret",
        "adbc.flight.sql.client_option.tls_root_certs": root}}) as conn:
    with conn.cursor() as cur:
        cur.execute("SELECT 41 + 1")
        assert cur.fetchone()[0] == 42
"#
    );
    let out = Command::new(python).arg("-c").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "ADBC over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Flight SQL JDBC driver with `useEncryption=true` and the CA in a PKCS#12 trust store
/// made with the JDK's keytool.
fn jdbc_over_tls(dir: &Path, port: u16, ca: &str) {
    let ca_path = write(dir, "ca-jdbc.pem", ca);
    let store = dir.join("truststore.p12");
    let keytool = Command::new("keytool")
        .args(["-importcert", "-noprompt", "-alias", "iceflight-ca"])
        .arg("-file")
        .arg(&ca_path)
        .arg("-keystore")
        .arg(&store)
        .args(["-storetype", "PKCS12", "-storepass", "changeit"])
        .output()
        .expect("keytool (the JDK's)");
    assert!(
        keytool.status.success(),
        "{}",
        String::from_utf8_lossy(&keytool.stderr)
    );
    let url = format!(
        "jdbc:arrow-flight-sql://localhost:{port}/?useEncryption=true&user=alice&password=secret\
         &useSystemTrustStore=false&trustStore={}&trustStorePassword=changeit",
        store.display()
    );
    let jdbc = Command::new("bash")
        .arg(common::repo_root().join("tests/flight/jdbc/run.sh"))
        .arg("ConnectUrl.java")
        .env("ICEFLIGHT_JDBC_URL", &url)
        .env("ICEFLIGHT_JDBC_QUERY", "SELECT 41 + 1")
        .env("ICEFLIGHT_JDBC_TIMEOUT", "120")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&jdbc.stdout);
    assert!(
        jdbc.status.success() && said.contains("value: 42"),
        "JDBC with {url}: {said}\n{}",
        String::from_utf8_lossy(&jdbc.stderr)
    );
}

/// The Python of the ADBC client venv, made as `tests/flight/run_clients.sh` makes it
/// (reinstalled only when `tests/flight/requirements.txt` changed), in case this test runs first.
fn adbc_python() -> PathBuf {
    let venv_dir = std::env::var("ICEFLIGHT_VENV_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
    let venv = venv_dir.join("iceflight-adbc-venv");
    let python = venv.join("bin/python");
    let requirements = common::repo_root().join("tests/flight/requirements.txt");
    let stamp = venv.join(".iceflight-requirements");
    if !python.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success(), "python3 -m venv {}", venv.display());
    }
    let wanted = std::fs::read(&requirements).unwrap();
    if std::fs::read(&stamp).ok().as_ref() != Some(&wanted) {
        let installed = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements)
            .status()
            .unwrap();
        assert!(
            installed.success(),
            "pip install -r {}",
            requirements.display()
        );
        std::fs::write(&stamp, wanted).unwrap();
    }
    python
}
