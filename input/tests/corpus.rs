//! The fuzz corpora (`fuzz/corpus/<target>/`) replayed through the targets' bodies on the
//! stable toolchain, so every input a fuzzer kept, and every crash input added after a fix,
//! stays a test. The seeds (`seed-*` files) are made here from real requests:
//! `ICEFLIGHT_WRITE_SEEDS=1 cargo test -p iceflight-input --test corpus` writes them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, LargeStringArray, RecordBatch,
    StringArray,
};
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, CommandGetSqlInfo, CommandGetTables,
    CommandPreparedStatementQuery, CommandStatementIngest, CommandStatementQuery, ProstMessageExt,
    TicketStatementQuery,
};
use arrow_flight::utils::batches_to_flight_data;
use arrow_flight::{CancelFlightInfoRequest, FlightEndpoint, FlightInfo, Ticket};
use iceflight_input::fuzzing::{self, ACTION_TYPES};
use iceflight_input::session_options::{SessionOptionValue, SetSessionOptionsRequest};
use prost::Message;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 8] = [
    ("flight_command", fuzzing::flight_command),
    ("flight_action", fuzzing::flight_action),
    ("auth_header", fuzzing::auth_header),
    ("parameters", fuzzing::parameters),
    ("config", fuzzing::config),
    ("sql_rewrites", fuzzing::sql_rewrites),
    ("jwt", fuzzing::jwt),
    ("deletion_vector", fuzzing::deletion_vector),
];

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// Every committed input of every target runs without a panic or a broken promise.
#[test]
fn corpora_replay() {
    for (target, run) in TARGETS {
        let dir = corpus(target);
        let mut files = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            if std::panic::catch_unwind(|| run(&data)).is_err() {
                panic!("{target}: {} fails", path.display());
            }
            files += 1;
        }
        assert!(files >= 3, "{target}: only {files} corpus files");
    }
}

fn action(kind: &str, body: Vec<u8>) -> Vec<u8> {
    let pick = ACTION_TYPES.iter().position(|t| *t == kind).unwrap() as u8;
    [vec![pick], body].concat()
}

fn upload(columns: Vec<(&str, ArrayRef)>) -> Vec<u8> {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    fuzzing::frame(&batches_to_flight_data(&batch.schema(), vec![batch]).unwrap())
}

/// Valid requests of each kind, named.
fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let query = |q: &str| CommandStatementQuery {
        query: q.into(),
        transaction_id: None,
    };
    let info = FlightInfo::new().with_endpoint(
        FlightEndpoint::new().with_ticket(Ticket::new(
            TicketStatementQuery {
                statement_handle: "0b0e3a6c-42a4-4b8e-9c1e-3d1d2a7c9f10".into(),
            }
            .as_any()
            .encode_to_vec(),
        )),
    );
    // One option per request: a map of several encodes in HashMap order, which varies.
    let options = |name: &str, value: &str| SetSessionOptionsRequest {
        session_options: [(name.to_string(), SessionOptionValue::string(value))].into(),
    };
    let config_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config");
    let config_file = |name: &str| std::fs::read(config_dir.join(name)).unwrap();
    vec![
        (
            "flight_command",
            "statement_query",
            query("SELECT * FROM lineitem WHERE l_orderkey = 1")
                .as_any()
                .encode_to_vec(),
        ),
        (
            "flight_command",
            "ticket",
            TicketStatementQuery {
                statement_handle: "0b0e3a6c-42a4-4b8e-9c1e-3d1d2a7c9f10".into(),
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_command",
            "prepared_query",
            CommandPreparedStatementQuery {
                prepared_statement_handle: "h".into(),
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_command",
            "get_tables",
            CommandGetTables {
                catalog: Some("local".into()),
                db_schema_filter_pattern: Some("tp%".into()),
                table_name_filter_pattern: None,
                table_types: vec!["TABLE".into()],
                include_schema: true,
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_command",
            "get_sql_info",
            CommandGetSqlInfo {
                info: vec![0, 1, 500],
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_command",
            "ingest",
            CommandStatementIngest {
                table: "t".into(),
                schema: Some("s".into()),
                ..Default::default()
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_command",
            "create_prepared",
            ActionCreatePreparedStatementRequest {
                query: "SELECT $1".into(),
                transaction_id: None,
            }
            .as_any()
            .encode_to_vec(),
        ),
        (
            "flight_action",
            "set_catalog",
            action(
                "SetSessionOptions",
                options("catalog", "local").encode_to_vec(),
            ),
        ),
        (
            "flight_action",
            "set_schema",
            action(
                "SetSessionOptions",
                options("schema", "tpch").encode_to_vec(),
            ),
        ),
        (
            "flight_action",
            "cancel",
            action(
                "CancelFlightInfo",
                CancelFlightInfoRequest::new(info).encode_to_vec(),
            ),
        ),
        ("flight_action", "close", action("CloseSession", vec![])),
        (
            "flight_action",
            "status",
            action("iceflight.ServerStatus", vec![]),
        ),
        ("auth_header", "basic", b"Basic YWxpY2U6c2VjcmV0".to_vec()),
        ("auth_header", "basic_unpadded", b"basic YWw6eA".to_vec()),
        (
            "auth_header",
            "bearer",
            b"Bearer 4c1f2a9e-77b0-4f0e-8b3e-0d6f1f2b3c4d".to_vec(),
        ),
        (
            "parameters",
            "exact_types",
            upload(vec![
                ("0", Arc::new(Int64Array::from(vec![7])) as ArrayRef),
                ("1", Arc::new(StringArray::from(vec!["x"]))),
                ("2", Arc::new(Float64Array::from(vec![0.5]))),
                ("3", Arc::new(Date32Array::from(vec![9000]))),
            ]),
        ),
        (
            "parameters",
            "casts",
            upload(vec![
                ("0", Arc::new(Int32Array::from(vec![7])) as ArrayRef),
                ("1", Arc::new(LargeStringArray::from(vec!["R"]))),
                ("2", Arc::new(Int32Array::from(vec![1]))),
                ("3", Arc::new(StringArray::from(vec!["1995-03-15"]))),
            ]),
        ),
        (
            "parameters",
            "null",
            upload(vec![
                ("0", Arc::new(Int64Array::from(vec![None])) as ArrayRef),
                ("1", Arc::new(StringArray::from(vec![None::<&str>]))),
                ("2", Arc::new(Float64Array::from(vec![None]))),
                ("3", Arc::new(Date32Array::from(vec![None]))),
            ]),
        ),
        ("config", "documented", config_file("iceflight.toml")),
        ("config", "polaris", config_file("iceflight-polaris.toml")),
        ("config", "size", b"4MiB".to_vec()),
        ("config", "duration", b"1.5s".to_vec()),
        (
            "sql_rewrites",
            "time_travel",
            b"SELECT * FROM tpch.orders FOR VERSION AS OF 42 o JOIN t FOR TIMESTAMP AS OF \
              TIMESTAMP '2026-12-01 10:00:00 UTC' ON true"
                .to_vec(),
        ),
        (
            "sql_rewrites",
            "execute",
            b"ALTER TABLE s.o EXECUTE optimize(file_size_threshold => '1MB') WHERE p = 'a'; \
              ALTER TABLE o SET PROPERTIES format_version = 3"
                .to_vec(),
        ),
        (
            "sql_rewrites",
            "insert_local",
            b"INSERT INTO local.tpch.t SELECT 'FOR VERSION AS OF 1' -- x\nFROM t".to_vec(),
        ),
        (
            "jwt",
            "token",
            [
                b"\0".as_slice(),
                b"eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhbGljZSIsImlzcyI6Imh0dHBzOi8vaWRwLmV4YW1wbGUiLCJhdWQiOiJpY2VmbGlnaHQiLCJleHAiOjQxMDI0NDQ4MDAsImdyb3VwcyI6WyJlbmciXX0.c2lnbmF0dXJl",
            ]
            .concat(),
        ),
        (
            "jwt",
            "jwks",
            [b"\x01".as_slice(), fuzzing::FUZZ_JWKS.as_bytes()].concat(),
        ),
        (
            "jwt",
            "hs256",
            [
                b"\0".as_slice(),
                b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl",
            ]
            .concat(),
        ),
        (
            "deletion_vector",
            "three_positions",
            iceflight_input::deletion_vector::encode(&[0u64, 7, 1 << 33].into_iter().collect()),
        ),
        (
            "deletion_vector",
            "empty",
            iceflight_input::deletion_vector::encode(&roaring::RoaringTreemap::new()),
        ),
        (
            "deletion_vector",
            "dense",
            iceflight_input::deletion_vector::encode(&(0u64..5000).collect()),
        ),
    ]
}

/// The seeds are in the corpus as this file makes them, and each is a valid request: the
/// decoders accept it (a fuzzer starting from garbage would rarely reach past the first check).
#[test]
fn seeds_are_committed_and_valid() {
    let write = std::env::var_os("ICEFLIGHT_WRITE_SEEDS").is_some();
    for (target, name, data) in seeds() {
        let path = corpus(target).join(format!("seed-{name}"));
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &data).unwrap();
        }
        assert_eq!(
            std::fs::read(&path).ok().as_deref(),
            Some(&data[..]),
            "{} is missing or stale: run with ICEFLIGHT_WRITE_SEEDS=1",
            path.display()
        );
        match target {
            "flight_command" => {
                fuzzing::decode_command(&data).unwrap();
            }
            "flight_action" => {
                let kind = ACTION_TYPES[data[0] as usize % ACTION_TYPES.len()];
                iceflight_input::flight::decode_action(kind, &data[1..]).unwrap();
            }
            "auth_header" => {
                let text = std::str::from_utf8(&data).unwrap();
                assert!(
                    iceflight_input::auth_header::parse_basic(text).is_some()
                        || iceflight_input::auth_header::parse_bearer(text).is_some()
                );
            }
            "parameters" => {
                let mut upload = iceflight_input::parameters::ParameterMessages::default();
                for m in fuzzing::unframe(&data) {
                    upload.push(m).unwrap();
                }
                let bound = upload.decode(fuzzing::PARAMETERS).unwrap();
                assert_eq!((bound.columns.len(), bound.rows), (4, 1), "{name}");
            }
            "sql_rewrites" => {
                let text = std::str::from_utf8(&data).unwrap();
                let versioned = |b: &str, v: &iceflight_input::sql_text::time_travel::Version| {
                    format!("{b}@{v:?}")
                };
                let out = iceflight_input::sql_text::rewrite(text, "generic", &versioned).unwrap();
                assert_ne!(out, text, "{name}: a seed has something to rewrite");
            }
            "jwt" => {
                let text = std::str::from_utf8(&data[1..]).unwrap();
                match data[0] {
                    0 => assert!(iceflight_input::jwt::key_id(text).is_some() || name == "hs256"),
                    _ => {
                        iceflight_input::jwt::parse_jwks(text).unwrap();
                    }
                }
            }
            "deletion_vector" => {
                iceflight_input::deletion_vector::decode(&data, name).unwrap();
            }
            "config" => {
                let text = std::str::from_utf8(&data).unwrap();
                let valid = iceflight_input::config::Config::from_toml(text)
                    .is_ok_and(|c| c.validate().is_ok())
                    || iceflight_input::units::parse_size(text).is_ok()
                    || iceflight_input::units::parse_duration(text).is_some();
                assert!(valid, "{name}");
            }
            other => unreachable!("{other}"),
        }
    }
}

/// The inputs that made arrow-ipc panic (`input/UPSTREAM.md`) are answered as decode errors.
#[test]
fn arrow_ipc_panics_are_decode_errors() {
    let mut found = 0;
    for entry in std::fs::read_dir(corpus("parameters")).unwrap() {
        let path = entry.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("arrow-ipc-panic")
        {
            continue;
        }
        let mut upload = iceflight_input::parameters::ParameterMessages::default();
        for m in fuzzing::unframe(&std::fs::read(&path).unwrap()) {
            upload.push(m).unwrap();
        }
        let e = upload.decode(fuzzing::PARAMETERS).unwrap_err();
        assert!(
            matches!(&e, iceflight_input::parameters::ParameterError::Decode(_)),
            "{}: {e}",
            path.display()
        );
        found += 1;
    }
    assert!(found >= 1);
}
