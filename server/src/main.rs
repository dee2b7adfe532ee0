//! `iceflight` binary: parses the command line, resolves the configuration, starts logging, runs
//! the command, and turns any failure into one line on stderr and its exit status (`cli.rs`).

use clap::Parser;
use iceflight::cli::{Cli, CliError, resolve_config, run};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print as clap formats them, to stdout, with status 0.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => fail(CliError::usage(&e, &std::env::args().collect::<Vec<_>>())),
    };
    let config = resolve_config(&cli.global).unwrap_or_else(|e| fail(e));
    init_logging(&config.log);
    for warning in &config.deprecated_keys {
        tracing::warn!("{warning}");
    }
    // 8 MiB stacks (tokio's default is 2 MiB): planning recurses once per level of an
    // expression, and a statement's expressions may chain or nest about 2 000 operators
    // (`input/src/sql_text/depth.rs`).
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(8 << 20)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(CliError::Failed(format!(
            "cannot start the async runtime: {e}"
        ))),
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = runtime.block_on(run(cli, config, &mut stdout)) {
        fail(e);
    }
}

/// Prints `e` as one `error:` line (nothing when stdout's reader went away) and exits with its
/// status.
fn fail(e: CliError) -> ! {
    if !matches!(e, CliError::OutputClosed) {
        eprintln!("error: {}", iceflight::message::one_line(&e.to_string()));
    }
    std::process::exit(e.exit_code());
}

/// Logs to stderr under `ICEFLIGHT_LOG`, else the config's `log` filter.
fn init_logging(configured: &str) {
    let (source, text) = match std::env::var("ICEFLIGHT_LOG") {
        Ok(v) => ("ICEFLIGHT_LOG", v),
        Err(_) => ("log", configured.to_string()),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&text).unwrap_or_else(|e| {
        eprintln!("warning: invalid log filter {source} = {text:?} ({e}); using warn");
        tracing_subscriber::EnvFilter::new("warn")
    });
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(quiet_secret_loggers(filter))
        .init();
}

/// Caps the crates that log credentials at debug level (`reqsign` prints S3 secret keys, HTTP
/// internals can print bearer tokens), whatever `ICEFLIGHT_LOG` asks for: secrets are never
/// logged. Also quiets opendal's warning for a data file writer dropped before it was closed:
/// that is how a failed or interrupted load abandons its file (iceberg's writers have no abort),
/// and the load then deletes the file.
fn quiet_secret_loggers(filter: tracing_subscriber::EnvFilter) -> tracing_subscriber::EnvFilter {
    [
        "reqsign=warn",
        "reqsign_core=warn",
        "hyper=info",
        "hyper_util=info",
        "h2=info",
        "opendal_core::layers::complete=error",
    ]
    .into_iter()
    .fold(filter, |f, d| {
        f.add_directive(d.parse().expect("valid directive"))
    })
}
