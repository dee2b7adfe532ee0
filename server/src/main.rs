//! `iceflight` binary: parses the command line, runs it, and turns any failure into one line on
//! stderr and exit code 1.

use clap::Parser;
use iceflight::cli::{Cli, run};

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(quiet_secret_loggers(
            tracing_subscriber::EnvFilter::try_from_env("ICEFLIGHT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        ))
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = runtime.block_on(run(cli, &mut stdout)) {
        let line = e.to_string().replace('\n', " ");
        eprintln!("error: {line}");
        std::process::exit(1);
    }
}

/// Caps the crates that log credentials at debug level (`reqsign` prints S3 secret keys, HTTP
/// internals can print bearer tokens), whatever `ICEFLIGHT_LOG` asks for: secrets are never
/// logged.
fn quiet_secret_loggers(filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    [
        "reqsign=warn",
        "reqsign_core=warn",
        "hyper=info",
        "hyper_util=info",
        "h2=info",
    ]
    .into_iter()
    .fold(filter, |f, d| {
        f.add_directive(d.parse().expect("valid directive"))
    })
}
