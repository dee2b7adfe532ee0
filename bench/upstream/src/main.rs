//! Upstream iceberg-datafusion 0.10.1 as an `iceflight-bench run` engine: DataFusion 53.1 over
//! `IcebergStaticTableProvider`s, one warm session, driven over stdin/stdout with the protocol of
//! `bench/scripts/duckdb_worker.py`, one JSON object per line:
//!
//! ```text
//!   in:  {"tables": {"lineitem": "s3://…/00001-….metadata.json", …},
//!         "s3": {"endpoint": E, "key_id": K, "secret": S, "region": R} | null,
//!         "partitions": N}
//!   out: {"ready": true, "version": "iceberg-datafusion 0.10.1, DataFusion 53.1.0"}
//!   in:  {"sql": "..."}
//!   out: {"ms": 12.3, "rows": [["1", "2.5", null], ...]}   or   {"error": "..."}
//! ```
//!
//! Cells are Arrow's default display strings (NULL as null), as the bench formats every Rust
//! engine's batches; the time covers planning, execution and collecting, inside this process.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::prelude::{SessionConfig, SessionContext};
use iceberg::io::FileIOBuilder;
use iceberg::table::StaticTable;
use iceberg::{NamespaceIdent, TableIdent};
use iceberg_datafusion::IcebergStaticTableProvider;
use iceberg_storage_opendal::OpenDalResolvingStorageFactory;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

type Error = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    let Some(first) = lines.next_line().await? else {
        return Ok(());
    };
    let ctx = match session(&serde_json::from_str(&first)?).await {
        Ok(ctx) => ctx,
        Err(e) => {
            reply(&mut out, json!({ "error": one_line(&e.to_string()) })).await?;
            return Err(e);
        }
    };
    reply(
        &mut out,
        json!({ "ready": true, "version": "iceberg-datafusion 0.10.1, DataFusion 53.1.0" }),
    )
    .await?;
    while let Some(line) = lines.next_line().await? {
        let request: Value = serde_json::from_str(&line)?;
        let sql = request["sql"].as_str().unwrap_or_default();
        let start = Instant::now();
        let answer = match run(&ctx, sql).await {
            Ok(batches) => {
                let ms = start.elapsed().as_secs_f64() * 1e3;
                match rows(&batches) {
                    Ok(rows) => json!({ "ms": ms, "rows": rows }),
                    Err(e) => json!({ "error": one_line(&e.to_string()) }),
                }
            }
            Err(e) => json!({ "error": one_line(&e.to_string()) }),
        };
        reply(&mut out, answer).await?;
    }
    Ok(())
}

/// A session with one `IcebergStaticTableProvider` per table, each loaded from its metadata file
/// through a FileIO with the given S3 settings.
async fn session(setup: &Value) -> Result<SessionContext, Error> {
    let mut props = HashMap::new();
    if let Some(s3) = setup["s3"].as_object() {
        let get = |k: &str| s3.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        props.insert("s3.endpoint".to_string(), get("endpoint"));
        props.insert("s3.access-key-id".to_string(), get("key_id"));
        props.insert("s3.secret-access-key".to_string(), get("secret"));
        props.insert("s3.region".to_string(), get("region"));
        props.insert("s3.path-style-access".to_string(), "true".to_string());
    }
    let file_io = FileIOBuilder::new(Arc::new(OpenDalResolvingStorageFactory::new()))
        .with_props(props)
        .build();
    let partitions = setup["partitions"].as_u64().unwrap_or(1).max(1) as usize;
    let ctx =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(partitions));
    let tables = setup["tables"].as_object().ok_or("no tables given")?;
    for (name, location) in tables {
        let location = location.as_str().ok_or("a metadata location must be a string")?;
        let ident = TableIdent::new(NamespaceIdent::new("bench".into()), name.clone());
        let table = StaticTable::from_metadata_file(location, ident, file_io.clone())
            .await?
            .into_table();
        let provider = IcebergStaticTableProvider::try_new_from_table(table).await?;
        ctx.register_table(name.as_str(), Arc::new(provider))?;
    }
    Ok(ctx)
}

async fn run(ctx: &SessionContext, sql: &str) -> datafusion::error::Result<Vec<RecordBatch>> {
    ctx.sql(sql).await?.collect().await
}

/// Every cell as its display string, NULL as `null`.
fn rows(batches: &[RecordBatch]) -> Result<Vec<Vec<Value>>, Error> {
    let options = FormatOptions::default();
    let mut out = vec![];
    for b in batches {
        let formatters = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(c, f)| {
                        if c.is_null(i) {
                            Value::Null
                        } else {
                            Value::String(f.value(i).to_string())
                        }
                    })
                    .collect(),
            );
        }
    }
    Ok(out)
}

async fn reply(out: &mut tokio::io::Stdout, v: Value) -> Result<(), Error> {
    out.write_all(format!("{v}\n").as_bytes()).await?;
    out.flush().await?;
    Ok(())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
