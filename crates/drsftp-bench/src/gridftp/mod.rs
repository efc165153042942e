//! `drsftp-bench gridftp` (was `drsftp tune --bench-gridftp`): the GridFTP-level buffer benchmark of issue 4 (seed 000 figures 13-15, seed 003
//! figures 7-10) with real transfers: `drsftp serve` in lab host 2, `drsftp copy` downloads in host 1, over an
//! emulated link (default 100 Mbit/s, 100 ms, 1-BDP drop-tail queue).
//!
//! For every congestion control, stream setting (stream mode, MODE E with P streams), file size and buffer policy it
//! runs one download (per repetition) and measures:
//! * throughput: file bytes / transfer seconds as reported by `drsftp copy --json`;
//! * receive memory, from outside drsftp: the receiving namespace's data sockets are read with sock_diag (the
//!   netlink interface `ss -tmi` uses) every 20 ms. The memory meter is the **advertised receive window**, the
//!   sum over data sockets of `tcpi_rcv_wnd`: what the receiver has promised the sender it may still send, i.e.
//!   the receive memory it has committed to. Linux never retracts an advertised window edge, so this includes a
//!   large window offered at connection set-up that a later TCP_WINDOW_CLAMP cannot take back; it means the same
//!   for every policy. Its time-mean over the transfer is "mean window". `rcv_ssthresh` (the largest window the
//!   receiver would advertise now), the kernel's sk_rcvbuf/2 (`skmem rb`) and the bytes really queued
//!   (`skmem r`) are recorded too;
//! * on the sending side (host 2, also sock_diag): congestion control in use, rwnd-limited and sndbuf-limited time.
//!
//! Servers are started once per (congestion control, policy) and runs interleave the policies for each
//! (streams, size), so slow drifts of the shared machine hit all policies alike. A run whose predicted duration
//! (from the same policy's rate at the previous size) exceeds `--max-secs` is skipped and marked so.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use drsftp_lab::{Lab, LabConfig, TcpSettings};
use drsftp_tune::{format_size, parse_size, BufferPolicy};

use crate::record::RunDir;

/// Options of `drsftp-bench gridftp`: a 2-host lab of --rtt (100ms) and --rate (100mbit) with a 1-BDP queue;
/// `drsftp serve` in host 2, `drsftp copy` downloads in host 1, for every --cc, --streams, --sizes and --buffers;
/// receive memory sampled with sock_diag. Prints markdown tables and the issue's target ratios. Needs root.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub path: crate::PathArgs,
    /// The drsftp binary to run in the lab hosts [default: `drsftp` next to drsftp-bench].
    #[arg(long = "drsftp", value_name = "PATH")]
    pub drsftp: Option<PathBuf>,
    /// GridFTP bench: file sizes, comma-separated.
    #[arg(long, default_value = "8K,64K,512K,4M,32M,64M,128M,512M")]
    pub sizes: String,
    /// GridFTP bench: `stream` (stream mode, one connection) and/or MODE E parallel stream counts, e.g.
    /// stream,1,2,4.
    #[arg(long, default_value = "stream,1,2,4")]
    pub streams: String,
    /// GridFTP bench: congestion controls (set per data socket with `--congestion` on serve and copy).
    #[arg(long, default_value = "cubic,bbr")]
    pub cc: String,
    /// GridFTP bench: buffer policies (`--buffer` on both serve and copy): sizes, kernel, drs.
    #[arg(long, default_value = "64K,212.5K,16M,kernel,drs")]
    pub buffers: String,
    /// GridFTP bench: time-varying link profile (built-in name or drsftp-netem profile file). With a `repeat`
    /// period every run starts at the same phase (the run waits for the next period boundary).
    #[arg(long)]
    pub profile: Option<String>,
    /// GridFTP bench: tcp_rmem of both hosts, e.g. "4096 131072 1048576" (autotuning cap below the BDP).
    #[arg(long)]
    pub rmem: Option<String>,
    /// GridFTP bench: concurrent `drsftp copy` clients per run against the one server (memory per connection
    /// when a server holds many transfers); throughput and memory are summed over them.
    #[arg(long, default_value_t = 1)]
    pub concurrent: usize,
    /// GridFTP bench: repetitions of every run.
    #[arg(long, default_value_t = 1)]
    pub reps: u32,
    /// GridFTP bench: skip a run whose predicted duration exceeds this many seconds.
    #[arg(long, default_value_t = 120.0)]
    pub max_secs: f64,
    /// GridFTP bench: largest file for MODE E runs with more than one stream.
    #[arg(long, default_value = "128M", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    pub parallel_max_size: u64,
    /// GridFTP bench: write the markdown report here, and FILE.runs.csv / FILE.series.csv next to it.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// GridFTP bench: smallest file whose memory time series goes into the series CSV.
    #[arg(long, default_value = "64M", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    pub series_min: u64,
    /// GridFTP bench: let drsftp copy verify checksums (CKSM); off by default (sizes are still checked).
    #[arg(long)]
    pub verify: bool,
}

const CTL_BASE_PORT: u16 = 2811;
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
const MIB: f64 = (1u64 << 20) as f64;

/// Stream mode (one connection) or MODE E with `n` streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Streams {
    Stream,
    ModeE(u32),
}

impl Streams {
    fn parse(s: &str) -> Result<Streams> {
        let t = s.trim().to_ascii_lowercase();
        if t == "stream" || t == "s" {
            return Ok(Streams::Stream);
        }
        let n: u32 = t
            .trim_start_matches('e')
            .parse()
            .with_context(|| format!("--streams: {s:?} is neither `stream` nor a number"))?;
        if !(1..=64).contains(&n) {
            bail!("--streams: {n} out of 1..=64");
        }
        Ok(Streams::ModeE(n))
    }
    fn count(self) -> u32 {
        match self {
            Streams::Stream => 1,
            Streams::ModeE(n) => n,
        }
    }
    fn label(self) -> String {
        match self {
            Streams::Stream => "stream mode".into(),
            Streams::ModeE(n) => format!("MODE E, {n} stream{}", if n == 1 { "" } else { "s" }),
        }
    }
    fn short(self) -> String {
        match self {
            Streams::Stream => "stream".into(),
            Streams::ModeE(n) => format!("E{n}"),
        }
    }
}

/// A buffer policy as benchmarked: the `--buffer` value given to both `drsftp serve` and `drsftp copy`, plus
/// optional environment variables for both processes (to A/B an engine patch kept behind an environment switch)
/// and the column label. Syntax: `POLICY[@VAR=VALUE[+VAR=VALUE...]][#LABEL]`, e.g. `drs@MY_PATCH=1#drs-patched`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pol {
    policy: BufferPolicy,
    env: Vec<(String, String)>,
    label: String,
}

impl Pol {
    fn parse(tok: &str) -> Result<Pol> {
        let (body, label) = match tok.split_once('#') {
            Some((b, l)) => (b, Some(l.trim().to_string())),
            None => (tok, None),
        };
        let (pol, env) = match body.split_once('@') {
            Some((p, e)) => (p, e),
            None => (body, ""),
        };
        let policy: BufferPolicy = pol.parse().map_err(|e| anyhow!("--buffers {tok:?}: {e}"))?;
        let env = env
            .split('+')
            .filter(|x| !x.trim().is_empty())
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .with_context(|| format!("--buffers {tok:?}: expected VAR=VALUE after '@'"))
            })
            .collect::<Result<Vec<_>>>()?;
        let label = label.unwrap_or_else(|| {
            if env.is_empty() {
                policy.to_string()
            } else {
                body.trim().to_string()
            }
        });
        Ok(Pol { policy, env, label })
    }
    fn is(&self, p: BufferPolicy) -> bool {
        self.env.is_empty() && self.policy == p
    }
}

impl std::fmt::Display for Pol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
struct Measured {
    /// Sum over clients.
    bytes: u64,
    /// Longest client transfer time.
    secs: f64,
    client_mbps: Vec<f64>,
    /// Engine gauge (`buffer_bytes` of --json), summed over clients.
    gauge_peak: u64,
    mean_win: f64,
    peak_win: u64,
    mean_ssthresh: f64,
    mean_rb_half: f64,
    peak_alloc: u64,
    samples: usize,
    rwnd_frac: f64,
    sndbuf_frac: f64,
    retrans: u64,
    sender_cc: String,
    peak_sndbuf_half: u64,
    series: Vec<Point>,
}

impl Measured {
    fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs.max(1e-9) / 1e6
    }
    fn per_mb(&self) -> Option<f64> {
        (self.samples > 0 && self.mean_win > 0.0).then(|| self.mbps() / (self.mean_win / MIB))
    }
}

#[derive(Debug, Clone)]
enum Outcome {
    Done(Box<Measured>),
    Skipped(String),
    Failed(String),
}

#[derive(Debug, Clone)]
struct Run {
    id: usize,
    cc: String,
    streams: Streams,
    size: u64,
    policy: Pol,
    rep: u32,
    conns: usize,
    outcome: Outcome,
}

impl Run {
    fn done(&self) -> Option<&Measured> {
        match &self.outcome {
            Outcome::Done(m) => Some(m),
            _ => None,
        }
    }
}

/// One sample of the receiving side, summed over data sockets.
#[derive(Debug, Clone, Copy, Default)]
struct Point {
    t: f64,
    /// Sum of tcpi_rcv_wnd: the window last advertised (the receiver's outstanding commitment).
    win: u64,
    /// Sum of rcv_ssthresh: the largest window the receiver would advertise now.
    ssthresh: u64,
    rb_half: u64,
    alloc: u64,
    bytes_rx: u64,
    socks: u32,
}

mod diag;
mod report;
mod runner;

use report::*;
use runner::*;

fn split_list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

fn machine_facts() -> String {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = read("/proc/meminfo")
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .nth(1)
        .and_then(|k| k.parse::<u64>().ok())
        .map(|k| format!("{:.1} GiB", k as f64 / (1 << 20) as f64))
        .unwrap_or_default();
    format!(
        "{cores} cores ({cpu}), {mem} RAM, kernel {}",
        read("/proc/sys/kernel/osrelease").trim()
    )
}

/// Run the benchmark (see the module docs).
///
/// With `record`, the report goes into the run folder as README.md and the run and series CSVs as runs.csv and
/// series.csv (written there directly, or copied there from next to `--out`).
pub fn run(a: &Args, record: Option<&RunDir>) -> Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
    let rtt = a.path.rtt.unwrap_or(Duration::from_millis(100));
    let rate = a.path.rate.map_or(100e6, |r| r as f64);
    let sizes: Vec<u64> = split_list(&a.sizes)
        .map(|s| parse_size(s).map_err(|e| anyhow!("--sizes: {e}")))
        .collect::<Result<_>>()?;
    let streams: Vec<Streams> = split_list(&a.streams)
        .map(Streams::parse)
        .collect::<Result<_>>()?;
    let ccs: Vec<String> = split_list(&a.cc).map(str::to_string).collect();
    let policies: Vec<Pol> = split_list(&a.buffers)
        .map(Pol::parse)
        .collect::<Result<_>>()?;
    if sizes.is_empty() || streams.is_empty() || ccs.is_empty() || policies.is_empty() {
        bail!("--sizes, --streams, --cc and --buffers must each name at least one item");
    }
    let conns = a.concurrent.max(1);
    let need: u64 =
        sizes.iter().sum::<u64>() + sizes.iter().max().copied().unwrap_or(0) * conns as u64;
    let work = WorkDir::new(need)?;
    eprintln!("gridftp bench: generating files in {}", work.0.display());
    for &s in &sizes {
        make_file(&work.0.join("srv").join(file_name(s)), s)?;
    }

    let mut cfg = LabConfig::new(
        &format!("gb{}", std::process::id() % 100_000),
        2,
        rtt,
        rate as u64,
    );
    cfg.tcp = TcpSettings {
        rmem: a.rmem.clone(),
        ..TcpSettings::default()
    };
    let mut profile_text = None;
    if let Some(p) = &a.profile {
        let prof = drsftp_lab::load_profile(p)?;
        profile_text = Some(prof.to_text());
        cfg.profile = Some(prof);
    }
    let period = cfg.profile.as_ref().and_then(|p| p.repeat);
    let lab = Lab::up(cfg).context("lab up")?;
    let lab_t0 = Instant::now();
    let cx = Ctx {
        lab: &lab,
        exe: &exe,
        work: &work.0,
        args: a,
    };
    let load_start = crate::record::load();
    let started = Instant::now();

    // Next to --out, else (with --record) straight into the run folder.
    let csv_paths = match (&a.out, record) {
        (Some(o), _) => Some((with_suffix(o, ".runs.csv"), with_suffix(o, ".series.csv"))),
        (None, Some(r)) => Some((r.join("runs.csv"), r.join("series.csv"))),
        (None, None) => None,
    };
    let create = |p: &Path| -> Result<_> {
        Ok(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ))
    };
    let mut runs_csv = match &csv_paths {
        Some((r, _)) => Some(create(r)?),
        None => None,
    };
    let mut series_csv = match &csv_paths {
        Some((_, s)) => Some(create(s)?),
        None => None,
    };
    if let Some(w) = runs_csv.as_mut() {
        writeln!(w, "run,cc,streams,size,buffer,rep,conns,status,bytes,seconds,mbps,mean_window,peak_window,mean_rcv_ssthresh,mean_rcvbuf_half,peak_rmem_alloc,gauge_peak,mbps_per_mib,rwnd_limited,sndbuf_limited,retrans,sender_cc,peak_sndbuf_half,samples,note")?;
    }
    if let Some(w) = series_csv.as_mut() {
        writeln!(w, "run,cc,streams,size,buffer,t_s,window,rcv_ssthresh,rcvbuf_half,rmem_alloc,bytes_received,sockets")?;
    }

    let mut runs: Vec<Run> = vec![];
    let deadline = Duration::from_secs_f64(a.max_secs * 3.0 + 120.0);
    for cc in &ccs {
        let servers = Servers::start(&lab, &exe, &work.0, &policies, cc)?;
        // Warm-up (not recorded): every server answers, ARP/neighbour entries exist.
        for p in &policies {
            if let Err(e) = one_run(&cx, &servers, cc, p, Streams::Stream, sizes[0], 1, deadline) {
                bail!("warm-up transfer with --buffer {p} --congestion {cc} failed: {e:#}");
            }
        }
        for &st in &streams {
            for &size in &sizes {
                for rep in 0..a.reps {
                    for p in &policies {
                        let id = runs.len() + 1;
                        let mut run = Run {
                            id,
                            cc: cc.clone(),
                            streams: st,
                            size,
                            policy: p.clone(),
                            rep,
                            conns,
                            outcome: Outcome::Skipped(String::new()),
                        };
                        let predicted = predict(&runs, cc, st, p, size, conns);
                        run.outcome = if st.count() > 1 && size > a.parallel_max_size {
                            Outcome::Skipped(format!(
                                "parallel runs only up to {}",
                                format_size(a.parallel_max_size)
                            ))
                        } else if predicted.is_some_and(|t| t > a.max_secs) {
                            Outcome::Skipped(format!(
                                "predicted {:.0} s > --max-secs {}",
                                predicted.unwrap_or(0.0),
                                a.max_secs
                            ))
                        } else {
                            if let Some(per) = period {
                                let el = lab_t0.elapsed().as_secs_f64() % per.as_secs_f64();
                                if el > 0.05 {
                                    std::thread::sleep(Duration::from_secs_f64(
                                        per.as_secs_f64() - el,
                                    ));
                                }
                            }
                            match one_run(&cx, &servers, cc, p, st, size, conns, deadline) {
                                Ok(m) => Outcome::Done(Box::new(m)),
                                Err(e) => Outcome::Failed(format!("{e:#}")),
                            }
                        };
                        if !lab.forwarder_alive() {
                            bail!("the lab forwarder stopped");
                        }
                        eprintln!(
                            "[{:>5.0}s] {}",
                            started.elapsed().as_secs_f64(),
                            describe(&run)
                        );
                        write_run_csv(runs_csv.as_mut(), series_csv.as_mut(), &run)?;
                        runs.push(run);
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            }
        }
        drop(servers);
    }
    if let Some(w) = runs_csv.as_mut() {
        w.flush()?;
    }
    if let Some(w) = series_csv.as_mut() {
        w.flush()?;
    }

    let facts = Facts {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: machine_facts(),
        load: format!("{load_start} at start, {} at end", crate::record::load()),
        minutes: started.elapsed().as_secs_f64() / 60.0,
        lab: format!(
            "2 hosts, RTT {rtt:?}, rate {:.0} Mbit/s, drop-tail queue 1 x BDP ({}), GSO forwarding",
            rate / 1e6,
            format_size((rate / 8.0 * rtt.as_secs_f64()) as u64)
        ),
        hosts: vec![
            format!(
                "h1 {} (drsftp copy, receiver): {}",
                lab.addr(1),
                lab.tcp_report(1)
            ),
            format!(
                "h2 {} (drsftp serve, sender): {}",
                lab.addr(2),
                lab.tcp_report(2)
            ),
        ],
        profile: profile_text,
        tun_drops: lab.tun_tx_dropped(),
        conns,
    };
    let report = render(&facts, &runs, &sizes, &streams, &ccs, &policies);
    print!("{report}");
    if let Some(o) = &a.out {
        std::fs::write(o, &report).with_context(|| format!("writing {}", o.display()))?;
        eprintln!(
            "gridftp bench: wrote {}, {}, {}",
            o.display(),
            with_suffix(o, ".runs.csv").display(),
            with_suffix(o, ".series.csv").display()
        );
    }
    if let Some(r) = record {
        if let Some(o) = &a.out {
            std::fs::copy(with_suffix(o, ".runs.csv"), r.join("runs.csv"))?;
            std::fs::copy(with_suffix(o, ".series.csv"), r.join("series.csv"))?;
        }
        r.report(&report)?;
    }
    lab.down().map_err(|e| anyhow!("lab down: {e}"))?;
    Ok(())
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let s = p.to_string_lossy();
    let stem = s.strip_suffix(".md").unwrap_or(&s);
    PathBuf::from(format!("{stem}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_parse() {
        assert_eq!(Streams::parse("stream").unwrap(), Streams::Stream);
        assert_eq!(Streams::parse(" 4 ").unwrap(), Streams::ModeE(4));
        assert_eq!(Streams::parse("E2").unwrap(), Streams::ModeE(2));
        assert!(Streams::parse("0").is_err() && Streams::parse("x").is_err());
    }

    #[test]
    fn policy_specs_parse() {
        let p = Pol::parse("212.5K").unwrap();
        assert_eq!(p.policy, BufferPolicy::Fixed(217_600));
        assert!(p.env.is_empty() && p.label == "212.5K" && p.is(BufferPolicy::Fixed(217_600)));
        let d = Pol::parse("drs@A=1+B=x#drs-ab").unwrap();
        assert_eq!(d.policy, BufferPolicy::Drs);
        assert_eq!(
            d.env,
            vec![("A".into(), "1".into()), ("B".into(), "x".into())]
        );
        assert_eq!(d.label, "drs-ab");
        assert!(!d.is(BufferPolicy::Drs));
        assert_eq!(Pol::parse("drs@A=1").unwrap().label, "drs@A=1");
        assert!(Pol::parse("drs@A").is_err() && Pol::parse("huge").is_err());
    }

    #[test]
    fn time_mean_weights_by_time() {
        let p = |t: f64, win: u64| Point {
            t,
            win,
            ..Point::default()
        };
        let pts = [p(0.0, 10), p(0.02, 30), p(0.04, 30)];
        assert!((time_mean(&pts, |x| x.win) - 20.0).abs() < 1e-9);
        assert_eq!(time_mean(&[p(0.0, 7)], |x| x.win), 7.0);
        assert_eq!(time_mean(&[], |x| x.win), 0.0);
    }

    #[test]
    fn out_suffixes() {
        assert_eq!(
            with_suffix(Path::new("a/r.md"), ".runs.csv"),
            PathBuf::from("a/r.runs.csv")
        );
        assert_eq!(
            with_suffix(Path::new("r"), ".series.csv"),
            PathBuf::from("r.series.csv")
        );
    }
}
