//! drsftp-bench: the benchmark harnesses of drsftp, kept out of the product binary. One module per subcommand
//! (`drs`, `gridftp`, `sweep`, `blast`, `lab`, `tls`, `doctor`, `loopback`, `stripes`); `record` writes the run
//! folders of `--record` and of the bench/*.sh drivers. Every harness but `record`, `loopback` and `tls` without
//! `--lab` needs root (it builds a WAN lab of network namespaces).

#![forbid(unsafe_code)]

mod blast;
mod blast_aead;
mod doctor;
mod drs;
mod gridftp;
mod lab;
mod loopback;
mod record;
mod scratch;
mod stripes;
mod sweep;
mod tls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use drsftp_tune::{parse_duration, parse_rate};

use record::RunDir;

/// File name of the per-measurement CSV that `drs` and `sweep` write into a run folder.
const RESULTS_CSV: &str = "results.csv";

/// Benchmarks of drsftp on the WAN lab (network namespaces; needs root).
#[derive(Parser, Debug)]
#[command(name = "drsftp-bench", version, about, long_about = None)]
struct Cli {
    /// Record the run in a folder RUNS_DIR/<YYYY-MM-DD>-<shortcommit>-<subcommand>/: command.txt, machine.txt,
    /// the raw CSV files and the report as README.md.
    #[arg(long, global = true)]
    record: bool,
    /// Where --record (and `record`) create run folders.
    #[arg(long, global = true, value_name = "DIR", default_value = record::DEFAULT_RUNS_DIR)]
    runs_dir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Raw-TCP buffer policies (64K, 212.5K, 16M, kernel, drs) on a 2-host lab of --rtt and --rate: throughput,
    /// receive buffer memory and ratios as a Markdown table.
    Drs(drs::Args),
    /// GridFTP-level buffer benchmark: `drsftp serve` in lab host 2, `drsftp copy` downloads in host 1, for every
    /// --cc, --streams, --sizes and --buffers; receive memory sampled with sock_diag.
    Gridftp(gridftp::Args),
    /// Calibration sweep of the stream model (seed 001 Table 2 style) on a lab link with raw TCP: buffers x stream
    /// counts, saturation points and the fitted C1', C2.
    Sweep(sweep::Args),
    /// UDP blast vs TCP (iperf3, drsftp -p N) on lab links: ack frequency, rates, fairness, rate probe, UDT.
    Blast(blast::Args),
    /// TLS (`PROT P`) vs cleartext on loopback (no root) or with --lab in a 2-host lab (root), in the same run:
    /// `drsftp copy` downloads at each -p with `--tls off` and `--tls require`; rates, ratios, client and server
    /// memory.
    Tls(tls::Args),
    /// Issue 21's "done when": `drsftp doctor` on a lab path with small tcp_rmem/tcp_wmem names the limit, and
    /// its sysctl lines, run in both hosts, raise `drsftp copy --buffer kernel` (before/after pairs, lab `ops`).
    Doctor(doctor::Args),
    /// File to file on loopback against iperf3 memory to memory, in one run: drsftp -p 1/-p 4, globus-url-copy
    /// -p 1/-p 4 and iperf3 -P 1/-P 4 interleaved; rates, ratios to iperf3, CPU s/GiB and RSS peak/mean of both ends.
    Loopback(loopback::Args),
    /// Striped third-party copies between two clusters on a shared-core lab (issue 23): drsftp frontend + movers
    /// against Globus frontend + data nodes for each --stripes count, with the lab's iperf3 ceiling; rates,
    /// ratios, movers' memory and CPU.
    Stripes(stripes::Args),
    /// The lab itself: RTT/rate/loss accuracy, forwarder ceiling and the 100 Mbit/s · 100 ms iperf3 baselines.
    Lab(lab::Args),
    /// Write a run folder for a run made elsewhere (the bench/*.sh drivers): command.txt (the command after --),
    /// machine.txt, the --raw files and --report as README.md. Prints the folder's path.
    Record(RecordArgs),
}

/// The lab path of `drs`, `gridftp` and `sweep`.
#[derive(clap::Args, Debug, Clone)]
struct PathArgs {
    /// Round-trip time of the lab link, e.g. 50ms [default: 100ms; sweep: 20ms].
    #[arg(long, value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    rtt: Option<Duration>,
    /// Bottleneck rate of the lab link, e.g. 1gbit, 100mbit [default: 100mbit; sweep: 1gbit].
    #[arg(long, value_parser = |s: &str| parse_rate(s).map_err(|e| e.to_string()))]
    rate: Option<u64>,
}

#[derive(clap::Args, Debug)]
struct RecordArgs {
    /// Run name, the folder name's last part (e.g. auto-bench).
    #[arg(long)]
    name: String,
    /// The report (Markdown or text), copied as README.md.
    #[arg(long)]
    report: PathBuf,
    /// Raw result files (CSV, JSON) copied into the folder under their own names; repeatable.
    #[arg(long)]
    raw: Vec<PathBuf>,
    /// The command line that made the run, one argument per word.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// The `drsftp` binary next to this executable (`target/release/drsftp` beside `target/release/drsftp-bench`).
fn sibling_drsftp() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating drsftp-bench")?;
    Ok(exe
        .parent()
        .map(|d| d.join("drsftp"))
        .unwrap_or_else(|| PathBuf::from("drsftp")))
}

/// `path`, or the sibling `drsftp`; it must exist.
fn drsftp_binary(path: Option<&Path>) -> anyhow::Result<PathBuf> {
    let bin = match path {
        Some(p) => p.to_path_buf(),
        None => sibling_drsftp()?,
    };
    if !bin.exists() {
        bail!(
            "{} not found (build it: cargo build --release -p drsftp, or pass --drsftp PATH)",
            bin.display()
        );
    }
    Ok(bin)
}

/// The drsftp binary a command runs (its `--drsftp`, or the sibling), which names its run folder's commit.
fn binary_of(command: &Command) -> PathBuf {
    let given = match command {
        Command::Blast(a) => a.drsftp.as_deref(),
        Command::Doctor(a) => a.drsftp.as_deref(),
        Command::Loopback(a) => a.drsftp.as_deref(),
        Command::Tls(a) => a.drsftp.as_deref(),
        _ => None,
    };
    given.map_or_else(
        || sibling_drsftp().unwrap_or_else(|_| PathBuf::from("drsftp")),
        Path::to_path_buf,
    )
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let argv: Vec<String> = std::env::args().collect();
    let bin = binary_of(&cli.command);
    let folder = |name: &str| -> anyhow::Result<Option<RunDir>> {
        if cli.record {
            Ok(Some(RunDir::create(&cli.runs_dir, name, &argv, &bin)?))
        } else {
            Ok(None)
        }
    };
    let harness = |name: &str, f: &dyn Fn(Option<&RunDir>) -> anyhow::Result<()>| {
        let run = folder(name)?;
        let res = f(run.as_ref());
        if let (Err(_), Some(run)) = (&res, &run) {
            run.failed();
        }
        res
    };
    match &cli.command {
        Command::Drs(a) => harness("drs", &|r| drs::run(a, r)),
        Command::Gridftp(a) => harness("gridftp", &|r| gridftp::run(a, r)),
        Command::Sweep(a) => harness("sweep", &|r| sweep::run(a, r)),
        Command::Blast(a) => harness(&format!("blast-{}", a.only), &|r| blast::run(a, r)),
        Command::Lab(a) => harness("lab", &|r| lab::run(a, r)),
        Command::Stripes(a) => harness("stripes", &|r| stripes::run(a, r)),
        Command::Doctor(a) => harness("doctor", &|r| doctor::run(a, r)),
        Command::Tls(a) => harness("tls", &|r| tls::run(a, r)),
        Command::Loopback(a) => harness("loopback-eff", &|r| loopback::run(a, r)),
        Command::Record(a) => {
            let report = std::fs::read_to_string(&a.report)
                .with_context(|| format!("reading {}", a.report.display()))?;
            let run = RunDir::create(&cli.runs_dir, &a.name, &a.command, &bin)?;
            for f in &a.raw {
                run.add(f)?;
            }
            run.report(&report)?;
            println!("{}", run.path().display());
            Ok(())
        }
    }
}

fn main() -> std::process::ExitCode {
    match run(Cli::parse()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("drsftp-bench: error: {err:#}");
            std::process::ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value parser whose output type differs from its field's only fails when the flag is given.
    #[test]
    fn path_flags_parse_for_every_lab_subcommand() {
        for sub in ["drs", "gridftp", "sweep"] {
            let cli =
                Cli::try_parse_from(["drsftp-bench", sub, "--rtt", "50ms", "--rate", "1gbit"]);
            assert!(cli.is_ok(), "{sub}: {cli:?}");
        }
    }
}
