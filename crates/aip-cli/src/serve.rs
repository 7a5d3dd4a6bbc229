//! `aip serve`: run the durable AIP runtime over native HTTP on the embedded SQLite store or a
//! PostgreSQL database shared by several nodes.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `aip serve`; each overrides the config file and `AIP_*` environment.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML configuration file (docs/configuration.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Listen address [default: 127.0.0.1:7700].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Data directory holding the SQLite database and admin.token [default: ./aip-data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Store location: `postgres://user@host/db` (shared by several nodes) or a SQLite path
    /// [default: DATA_DIR/aip.sqlite].
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
    /// Serve the native NATS binding on this server URL (spec 20.4; `[nats]` in the config file).
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// Serve the web console at /console/ (on by default without --config on a loopback address).
    #[arg(long)]
    pub console: bool,
    /// Allow development settings that let requests in without credentials (`[mcp]
    /// dev_principal`); a warning is logged at every start. Never in production.
    #[arg(long)]
    pub insecure_dev: bool,
}

/// Load configuration, then serve until SIGINT/SIGTERM.
pub fn run(args: ServeArgs) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut config = match aip_server::config::Config::load(args.config.as_deref()) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("aip serve: {err}");
            return ExitCode::from(2);
        }
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    if let Some(database) = args.database {
        config.database = Some(database);
    }
    if let Some(nats) = args.nats {
        config.nats.url = Some(nats);
    }
    // The no-config demo on loopback gets the console; a config file decides for itself.
    let demo =
        config.console.is_none() && args.config.is_none() && config.listen.ip().is_loopback();
    if args.console || demo {
        config.console = Some(true);
    }
    config.insecure_dev = args.insecure_dev || (args.config.is_none() && demo);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("aip serve: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(aip_server::app::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("aip serve: {err}");
            ExitCode::FAILURE
        }
    }
}
