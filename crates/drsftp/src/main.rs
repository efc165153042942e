//! drsftp command-line entry point: parses arguments and dispatches to one module per subcommand in `cmd/`.
//!
//! Exit codes: 0 success, 1 transfer or protocol failure, 2 usage error (clap).

#![forbid(unsafe_code)]

mod cmd;
mod credentials;
mod url;

use clap::{Parser, Subcommand};

/// GridFTP-compatible bulk data transfer with Dynamic Right-Sizing.
#[derive(Parser, Debug)]
#[command(
    name = "drsftp",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("DRSFTP_COMMIT"), ")"),
    about,
    long_about = None
)]
struct Cli {
    /// Log verbosity (error, warn, info, debug, trace); also honours RUST_LOG.
    #[arg(long, global = true, default_value = "warn")]
    log: String,
    #[command(subcommand)]
    command: Command,
}

// Each subcommand lives in one file under cmd/; adding one touches this enum and cmd/mod.rs.
// Parsed once per process, so the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Copy a file or a tree (-r, --files-from) to, from or between GridFTP/FTP servers.
    Copy(cmd::copy::Args),
    /// List a directory on a GridFTP/FTP server (MLSD, falling back to LIST/NLST).
    Ls(cmd::ls::Args),
    /// Run a real loopback transfer in-process (server + generated file + parallel MODE E download) and report.
    Demo(cmd::demo::Args),
    /// Serve a directory over GridFTP (MODE E, parallel streams, ERET/ESTO, CKSM, SBUF).
    Serve(cmd::serve::Args),
    /// Add or update a user in a users file for `serve --users` (password from stdin or a prompt).
    Passwd(cmd::passwd::Args),
    /// Recommend parallel streams and buffer size for a path (seed 001 model), or fit the model.
    Tune(cmd::tune::Args),
    /// WAN lab: emulated hosts in network namespaces joined by a user-space link emulator.
    Lab(cmd::lab::Args),
    /// SVG plots of a `copy --trace` CSV or of a GridFTP buffer-policy run's CSVs.
    Plot(cmd::plot::Args),
    /// Check this host's TCP settings (and the path to a server) for bulk transfers; prints sysctl fixes.
    Doctor(cmd::doctor::Args),
}

fn main() -> std::process::ExitCode {
    // Parsed in two steps so `serve --config` can ask which flags the command line itself set.
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&cli.log));
    // Colour codes only on a terminal: logs written to files (the audit log) stay plain key=value text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let result: anyhow::Result<()> = match cli.command {
        // Defaults and host aliases from ~/.config/drsftp/config.toml (cmd/client_config.rs).
        Command::Copy(args) => match matches.subcommand_matches("copy") {
            Some(m) => cmd::client_config::apply(args, m).and_then(cmd::copy::run),
            None => cmd::copy::run(args),
        },
        Command::Ls(args) => cmd::ls::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Serve(args) => match matches.subcommand_matches("serve") {
            Some(m) => cmd::serve::run(args, m),
            None => unreachable!("the serve subcommand was parsed"),
        },
        Command::Passwd(args) => cmd::passwd::run(args),
        Command::Tune(args) => cmd::tune::run(args),
        Command::Lab(args) => cmd::lab::run(args),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("drsftp: error: {err:#}");
            std::process::ExitCode::from(1)
        }
    }
}
