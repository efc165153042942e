//! `drsftp tune --bench-gridftp`: the GridFTP-level buffer benchmark of issue 4 (seed 000 figures 13-15, seed 003
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

/// Options of `drsftp tune --bench-gridftp` (flattened into `drsftp tune`'s arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// GridFTP-level buffer benchmark (issue 4): a 2-host lab of --rtt (100ms) and --rate (100mbit) with a 1-BDP
    /// queue; `drsftp serve` in host 2, `drsftp copy` downloads in host 1, for every --cc, --streams, --sizes and
    /// --buffers; receive memory sampled with sock_diag. Prints markdown tables and the issue's target ratios.
    /// Needs root.
    #[arg(long)]
    pub bench_gridftp: bool,
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

/// Removes the scratch directory (server files, downloads) when dropped.
struct WorkDir(PathBuf);

impl WorkDir {
    fn new(need: u64) -> Result<WorkDir> {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() && free_bytes(shm).is_some_and(|f| f > need * 3) {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!("drsftp-gbench-{}", std::process::id()));
        std::fs::create_dir_all(p.join("srv"))?;
        std::fs::create_dir_all(p.join("dst"))?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_bytes(p: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

fn file_name(size: u64) -> String {
    format!("f{}", format_size(size))
}

/// Pseudo-random file content (xorshift), so nothing on the path can compress it.
fn make_file(path: &Path, size: u64) -> Result<()> {
    if path.metadata().is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ size;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for w in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(())
}

/// `drsftp serve` processes in host 2, one per buffer policy; killed (by PID) when dropped.
struct Servers {
    procs: Vec<(Pol, u16, Child)>,
}

impl Servers {
    fn start(lab: &Lab, exe: &Path, work: &Path, policies: &[Pol], cc: &str) -> Result<Servers> {
        let mut s = Servers { procs: vec![] };
        for (i, p) in policies.iter().enumerate() {
            let port = CTL_BASE_PORT + i as u16;
            let log = std::fs::File::create(work.join(format!("serve-{cc}-{i}.log")))?;
            let mut child = lab
                .exec(2, &exe.to_string_lossy())
                .args(["serve", "--anonymous", "--print-addr", "--root"])
                .arg(work.join("srv"))
                .args(["--listen", &format!("{}:{port}", lab.addr(2))])
                .args(["--buffer", &p.policy.to_string(), "--congestion", cc])
                .envs(p.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .spawn()
                .context("spawning drsftp serve in host 2")?;
            let out = child.stdout.take().context("serve stdout")?;
            s.procs.push((p.clone(), port, child));
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(out).read_line(&mut line);
                let _ = tx.send(line);
            });
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(l) if l.starts_with("listening") => {}
                Ok(l) => bail!("drsftp serve --buffer {p}: unexpected first line {l:?}"),
                Err(_) => bail!("drsftp serve --buffer {p} did not start within 20 s"),
            }
        }
        Ok(s)
    }

    fn port(&self, p: &Pol) -> u16 {
        self.procs
            .iter()
            .find(|x| x.0 == *p)
            .map(|x| x.1)
            .expect("a server per policy")
    }
    fn ports(&self) -> Vec<u16> {
        self.procs.iter().map(|x| x.1).collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The sock_diag sampler of one run: receiving sockets in host 1, sending sockets in host 2.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<Sampled>>,
}

#[derive(Default)]
struct Sampled {
    points: Vec<Point>,
    /// Last TCP_INFO seen per sending socket (cookie): busy, rwnd-limited, sndbuf-limited (µs), retransmits, cc.
    senders: Vec<(u64, diag::Sock)>,
    peak_sndbuf_half: u64,
}

impl Sampler {
    fn start(lab: &Lab, ctl_ports: Vec<u16>) -> Result<Sampler> {
        let mut rx_diag = lab.run_in(1, diag::Diag::open)??;
        let mut tx_diag = lab.run_in(2, diag::Diag::open)??;
        let (client, server) = (lab.addr(1), lab.addr(2));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::spawn(move || -> Result<Sampled> {
            let t0 = Instant::now();
            let mut out = Sampled::default();
            let mut next = t0;
            loop {
                let now = Instant::now();
                let mut p = Point {
                    t: now.duration_since(t0).as_secs_f64(),
                    ..Point::default()
                };
                for s in rx_diag.dump()? {
                    if s.dst != server || ctl_ports.contains(&s.dport) {
                        continue;
                    }
                    p.win += s.rcv_wnd as u64;
                    p.ssthresh += s.rcv_ssthresh as u64;
                    p.rb_half += s.rcvbuf as u64 / 2;
                    p.alloc += s.rmem_alloc as u64;
                    p.bytes_rx += s.bytes_received;
                    p.socks += 1;
                }
                let mut snd_half = 0;
                for s in tx_diag.dump()? {
                    if s.dst != client || ctl_ports.contains(&s.sport) {
                        continue;
                    }
                    snd_half += s.sndbuf as u64 / 2;
                    match out.senders.iter_mut().find(|x| x.0 == s.cookie) {
                        Some(x) => x.1 = s,
                        None => out.senders.push((s.cookie, s)),
                    }
                }
                out.peak_sndbuf_half = out.peak_sndbuf_half.max(snd_half);
                if p.socks > 0 {
                    out.points.push(p);
                }
                if stop2.load(Ordering::Relaxed) {
                    return Ok(out);
                }
                next += SAMPLE_EVERY;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
        });
        Ok(Sampler { stop, handle })
    }

    fn finish(self) -> Result<Sampled> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| anyhow!("sampler thread panicked"))?
    }
}

/// Time-weighted mean of `f` over consecutive samples (gaps capped at 5 sample periods).
fn time_mean(pts: &[Point], f: impl Fn(&Point) -> u64) -> f64 {
    if pts.len() < 2 {
        return pts.first().map(|p| f(p) as f64).unwrap_or(0.0);
    }
    let cap = SAMPLE_EVERY.as_secs_f64() * 5.0;
    let (mut area, mut span) = (0.0, 0.0);
    for w in pts.windows(2) {
        let dt = (w[1].t - w[0].t).min(cap);
        area += f(&w[0]) as f64 * dt;
        span += dt;
    }
    if span > 0.0 {
        area / span
    } else {
        f(&pts[0]) as f64
    }
}

struct Ctx<'a> {
    lab: &'a Lab,
    exe: &'a Path,
    work: &'a Path,
    args: &'a Args,
}

#[allow(clippy::too_many_arguments)]
fn one_run(
    cx: &Ctx<'_>,
    servers: &Servers,
    cc: &str,
    policy: &Pol,
    streams: Streams,
    size: u64,
    conns: usize,
    deadline: Duration,
) -> Result<Measured> {
    let port = servers.port(policy);
    let url = format!("ftp://{}:{port}/{}", cx.lab.addr(2), file_name(size));
    let sampler = Sampler::start(cx.lab, servers.ports())?;
    let mut kids = vec![];
    let dsts: Vec<PathBuf> = (0..conns)
        .map(|i| cx.work.join("dst").join(format!("c{i}")))
        .collect();
    let spawn_res: Result<()> = (|| {
        for d in &dsts {
            std::fs::create_dir_all(d)?;
            let mut c = cx.lab.exec(1, &cx.exe.to_string_lossy());
            c.args(["copy", &url])
                .arg(d.join("out.bin"))
                .args(["--json", "--quiet", "--timeout", "120s"])
                .args(["--buffer", &policy.policy.to_string(), "--congestion", cc])
                .envs(policy.env.iter().map(|(k, v)| (k, v)));
            if let Streams::ModeE(n) = streams {
                c.args(["--mode-e", "-p", &n.to_string()]);
            }
            if !cx.args.verify {
                c.arg("--no-verify");
            }
            kids.push(
                c.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("spawning drsftp copy in host 1")?,
            );
        }
        Ok(())
    })();
    // Wait for every client (bounded), then stop sampling.
    let t0 = Instant::now();
    let mut outs: Vec<Option<std::process::Output>> = kids.iter().map(|_| None).collect();
    let mut killed = false;
    while outs.iter().any(Option::is_none) {
        for (i, k) in kids.iter_mut().enumerate() {
            if outs[i].is_some() {
                continue;
            }
            if let Some(st) = k.try_wait()? {
                let mut so = vec![];
                let mut se = vec![];
                if let Some(mut o) = k.stdout.take() {
                    let _ = o.read_to_end(&mut so);
                }
                if let Some(mut e) = k.stderr.take() {
                    let _ = e.read_to_end(&mut se);
                }
                outs[i] = Some(std::process::Output {
                    status: st,
                    stdout: so,
                    stderr: se,
                });
            }
        }
        if t0.elapsed() > deadline && !killed {
            for k in kids.iter_mut() {
                let _ = k.kill();
            }
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let sampled = sampler.finish()?;
    for d in &dsts {
        let _ = std::fs::remove_dir_all(d);
    }
    spawn_res?;
    if killed {
        bail!("killed after {:.0} s", deadline.as_secs_f64());
    }
    let mut m = Measured::default();
    for o in outs.into_iter().flatten() {
        let text = String::from_utf8_lossy(&o.stdout);
        let j: serde_json::Value = serde_json::from_str(text.trim()).map_err(|_| {
            anyhow!(
                "drsftp copy ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )
        })?;
        if let Some(e) = j.get("error") {
            bail!("drsftp copy: {e}");
        }
        let bytes = j["bytes"].as_u64().context("json bytes")?;
        let secs = j["seconds"].as_f64().context("json seconds")?;
        if bytes != size {
            bail!("drsftp copy moved {bytes} bytes, expected {size}");
        }
        m.bytes += bytes;
        m.secs = m.secs.max(secs);
        m.client_mbps
            .push(bytes as f64 * 8.0 / secs.max(1e-9) / 1e6);
        m.gauge_peak += j["buffer_bytes"].as_u64().unwrap_or(0);
    }
    let pts = &sampled.points;
    m.samples = pts.len();
    m.mean_win = time_mean(pts, |p| p.win);
    m.mean_ssthresh = time_mean(pts, |p| p.ssthresh);
    m.mean_rb_half = time_mean(pts, |p| p.rb_half);
    m.peak_win = pts.iter().map(|p| p.win).max().unwrap_or(0);
    m.peak_alloc = pts.iter().map(|p| p.alloc).max().unwrap_or(0);
    let (mut busy, mut rwnd, mut sndbuf) = (0u64, 0u64, 0u64);
    let mut ccs = BTreeSet::new();
    for (_, s) in &sampled.senders {
        busy += s.busy_us;
        rwnd += s.rwnd_limited_us;
        sndbuf += s.sndbuf_limited_us;
        m.retrans += s.total_retrans as u64;
        ccs.insert(s.cong.clone());
    }
    if busy > 0 {
        m.rwnd_frac = rwnd as f64 / busy as f64;
        m.sndbuf_frac = sndbuf as f64 / busy as f64;
    }
    m.sender_cc = ccs.into_iter().collect::<Vec<_>>().join("+");
    m.peak_sndbuf_half = sampled.peak_sndbuf_half;
    if size >= cx.args.series_min {
        let t_first = pts.first().map(|p| p.t).unwrap_or(0.0);
        let mut last = f64::NEG_INFINITY;
        for p in pts {
            if p.t - last >= 0.0999 {
                m.series.push(Point {
                    t: p.t - t_first,
                    ..*p
                });
                last = p.t;
            }
        }
    }
    Ok(m)
}

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

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run the benchmark (see the module docs).
pub fn run(a: &Args, rtt: Option<Duration>, rate: Option<f64>) -> Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let rtt = rtt.unwrap_or(Duration::from_millis(100));
    let rate = rate.unwrap_or(100e6);
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
        let prof = match drsftp_netem::Profile::builtin(p) {
            Some(b) => b,
            None => drsftp_netem::Profile::parse(
                &std::fs::read_to_string(p).with_context(|| format!("reading {p}"))?,
            )
            .map_err(|e| anyhow!("{p}: {e}"))?,
        };
        profile_text = Some(prof.to_text());
        cfg.profile = Some(prof);
    }
    let period = cfg.profile.as_ref().and_then(|p| p.repeat);
    let lab = Lab::up(cfg).context("lab up")?;
    let lab_t0 = Instant::now();
    let exe = std::env::current_exe().context("locating the drsftp binary")?;
    let cx = Ctx {
        lab: &lab,
        exe: &exe,
        work: &work.0,
        args: a,
    };
    let load_start = loadavg();
    let started = Instant::now();

    let mut runs_csv = match &a.out {
        Some(o) => Some(std::io::BufWriter::new(
            std::fs::File::create(with_suffix(o, ".runs.csv"))
                .with_context(|| format!("creating {}", with_suffix(o, ".runs.csv").display()))?,
        )),
        None => None,
    };
    let mut series_csv = match &a.out {
        Some(o) => Some(std::io::BufWriter::new(std::fs::File::create(
            with_suffix(o, ".series.csv"),
        )?)),
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
        load: format!("{load_start} at start, {} at end", loadavg()),
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
    lab.down().map_err(|e| anyhow!("lab down: {e}"))?;
    Ok(())
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let s = p.to_string_lossy();
    let stem = s.strip_suffix(".md").unwrap_or(&s);
    PathBuf::from(format!("{stem}{suffix}"))
}

/// Predicted seconds for `size` from the same policy's time at the largest smaller size already run.
fn predict(runs: &[Run], cc: &str, st: Streams, p: &Pol, size: u64, conns: usize) -> Option<f64> {
    // Small files are dominated by round trips; extrapolate linearly from the largest one of at least 1 MiB
    // (conservative: larger files amortise slow start better).
    let _ = conns;
    let (prev, m) = runs
        .iter()
        .filter(|r| {
            r.cc == cc && r.streams == st && r.policy == *p && r.size < size && r.size >= 1 << 20
        })
        .filter_map(|r| r.done().map(|m| (r.size, m)))
        .max_by_key(|(s, _)| *s)?;
    Some(m.secs * size as f64 / prev as f64)
}

fn describe(r: &Run) -> String {
    let head = format!(
        "{} {} {} {}{}",
        r.cc,
        r.streams.short(),
        format_size(r.size),
        r.policy,
        if r.conns > 1 {
            format!(" x{}", r.conns)
        } else {
            String::new()
        }
    );
    match &r.outcome {
        Outcome::Done(m) => format!(
            "{head}: {:.2} Mbit/s in {:.2} s, window mean {} peak {}, gauge {}, rwnd-limited {:.0}%, sender cc {}, retrans {}",
            m.mbps(),
            m.secs,
            format_size(m.mean_win as u64),
            format_size(m.peak_win),
            format_size(m.gauge_peak),
            m.rwnd_frac * 100.0,
            m.sender_cc,
            m.retrans
        ),
        Outcome::Skipped(why) => format!("{head}: skipped ({why})"),
        Outcome::Failed(e) => format!("{head}: FAILED: {e}"),
    }
}

fn write_run_csv(
    runs: Option<&mut std::io::BufWriter<std::fs::File>>,
    series: Option<&mut std::io::BufWriter<std::fs::File>>,
    r: &Run,
) -> Result<()> {
    let key = format!(
        "{},{},{},{},{}",
        r.id,
        r.cc,
        r.streams.short(),
        r.size,
        r.policy
    );
    if let Some(w) = runs {
        match &r.outcome {
            Outcome::Done(m) => writeln!(
                w,
                "{key},{},{},ok,{},{:.4},{:.3},{:.0},{},{:.0},{:.0},{},{},{},{:.4},{:.4},{},{},{},{},",
                r.rep,
                r.conns,
                m.bytes,
                m.secs,
                m.mbps(),
                m.mean_win,
                m.peak_win,
                m.mean_ssthresh,
                m.mean_rb_half,
                m.peak_alloc,
                m.gauge_peak,
                m.per_mb().map(|v| format!("{v:.3}")).unwrap_or_default(),
                m.rwnd_frac,
                m.sndbuf_frac,
                m.retrans,
                m.sender_cc,
                m.peak_sndbuf_half,
                m.samples
            )?,
            Outcome::Skipped(why) => writeln!(
                w,
                "{key},{},{},skipped,,,,,,,,,,,,,,,,,{}",
                r.rep,
                r.conns,
                why.replace(',', ";")
            )?,
            Outcome::Failed(e) => writeln!(
                w,
                "{key},{},{},failed,,,,,,,,,,,,,,,,,{}",
                r.rep,
                r.conns,
                e.replace([',', '\n'], ";")
            )?,
        }
        w.flush()?;
    }
    if let (Some(w), Some(m)) = (series, r.done()) {
        for p in &m.series {
            writeln!(
                w,
                "{key},{:.3},{},{},{},{},{},{}",
                p.t, p.win, p.ssthresh, p.rb_half, p.alloc, p.bytes_rx, p.socks
            )?;
        }
        w.flush()?;
    }
    Ok(())
}

struct Facts {
    command: String,
    machine: String,
    load: String,
    minutes: f64,
    lab: String,
    hosts: Vec<String>,
    profile: Option<String>,
    tun_drops: Vec<u64>,
    conns: usize,
}

/// Repetitions of one (cc, streams, size, policy) combined: rate = sum of bytes / sum of seconds, memory = mean.
#[derive(Debug, Clone, Copy)]
struct Agg {
    mbps: f64,
    mean_win: f64,
    peak_win: u64,
    rwnd: f64,
    bytes: u64,
    secs: f64,
}

impl Agg {
    fn per_mb(&self) -> f64 {
        self.mbps / (self.mean_win / MIB).max(1e-9)
    }
}

enum Cell {
    Val(Agg),
    Skipped,
    Failed,
    Missing,
}

fn agg(runs: &[Run], cc: &str, st: Streams, size: u64, p: &Pol) -> Cell {
    let sel: Vec<&Run> = runs
        .iter()
        .filter(|r| r.cc == cc && r.streams == st && r.size == size && r.policy == *p)
        .collect();
    if sel.is_empty() {
        return Cell::Missing;
    }
    let done: Vec<&Measured> = sel.iter().filter_map(|r| r.done()).collect();
    if done.is_empty() {
        return if sel.iter().any(|r| matches!(r.outcome, Outcome::Failed(_))) {
            Cell::Failed
        } else {
            Cell::Skipped
        };
    }
    let n = done.len() as f64;
    let bytes: u64 = done.iter().map(|m| m.bytes).sum();
    let secs: f64 = done.iter().map(|m| m.secs).sum();
    Cell::Val(Agg {
        mbps: bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
        mean_win: done.iter().map(|m| m.mean_win).sum::<f64>() / n,
        peak_win: done.iter().map(|m| m.peak_win).max().unwrap_or(0),
        rwnd: done.iter().map(|m| m.rwnd_frac).sum::<f64>() / n,
        bytes,
        secs,
    })
}

fn fmt_cell(c: &Cell, f: impl Fn(&Agg) -> String) -> String {
    match c {
        Cell::Val(a) => f(a),
        Cell::Skipped => "skip".into(),
        Cell::Failed => "FAIL".into(),
        Cell::Missing => "".into(),
    }
}

fn mib(v: f64) -> String {
    format!("{:.2}", v / MIB)
}

fn render(
    f: &Facts,
    runs: &[Run],
    sizes: &[u64],
    streams: &[Streams],
    ccs: &[String],
    pols: &[Pol],
) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "# GridFTP-level buffer benchmark (drsftp serve in h2 -> drsftp copy in h1)\n"
    );
    let _ = writeln!(w, "command: `{}`  ", f.command);
    let _ = writeln!(
        w,
        "machine: {}; load average {}; {:.1} min  ",
        f.machine, f.load, f.minutes
    );
    let _ = writeln!(w, "lab: {}  ", f.lab);
    for h in &f.hosts {
        let _ = writeln!(w, "{h}  ");
    }
    if let Some(p) = &f.profile {
        let _ = writeln!(
            w,
            "profile (every run starts at the period boundary):\n```\n{p}```"
        );
    }
    let _ = writeln!(
        w,
        "TUN ring drops outside the link model (non-zero = forwarder overloaded): {:?}  ",
        f.tun_drops
    );
    if f.conns > 1 {
        let _ = writeln!(
            w,
            "{} concurrent `drsftp copy` clients per run against one server; throughput = sum of bytes / longest \
             transfer time, memory = sum over all their data sockets (per connection = / {}).  ",
            f.conns, f.conns
        );
    }
    let _ = writeln!(
        w,
        "\nMeters: Mbit/s = file bytes x 8 / `seconds` of `drsftp copy --json` (first transfer command to end of \
         data; includes PASV/PORT/RETR round trips). window = sum over the receiver's data sockets of \
         `tcpi_rcv_wnd` (the window last advertised: receive memory promised to the sender; Linux never retracts \
         an advertised edge), read with sock_diag (as `ss -tmi`) every 20 ms; `mean` is its time mean over the \
         transfer, in MiB. Mbit/s per MiB uses the mean window. rwnd-limited = sender's \
         tcpi_rwnd_limited / tcpi_busy_time.\n"
    );
    let hdr = |w: &mut String, first: &str, extra: &[&str]| {
        let _ = write!(w, "| {first} |");
        for p in pols {
            let _ = write!(w, " {p} |");
        }
        for e in extra {
            let _ = write!(w, " {e} |");
        }
        let _ = writeln!(w);
        let _ = writeln!(w, "|---|{}", "---|".repeat(pols.len() + extra.len()));
    };
    let get = |cc: &str, st: Streams, size: u64, p: &Pol| agg(runs, cc, st, size, p);
    let over = pols.iter().find(|p| p.is(BufferPolicy::Fixed(16 << 20)));
    let kern = pols.iter().find(|p| p.is(BufferPolicy::Kernel));
    let drss: Vec<&Pol> = pols
        .iter()
        .filter(|p| p.policy == BufferPolicy::Drs)
        .collect();
    // Ratio columns: (numerator, denominator) pairs that exist in this run.
    let mut thr_pairs: Vec<(&Pol, &Pol)> = vec![];
    let mut mem_pairs: Vec<(&Pol, &Pol)> = vec![];
    if let Some(o) = over {
        if let Some(k) = kern {
            thr_pairs.push((k, o));
            mem_pairs.push((k, o));
        }
        for d in &drss {
            thr_pairs.push((d, o));
            mem_pairs.push((d, o));
        }
    }
    if let Some(k) = kern {
        for d in &drss {
            mem_pairs.push((d, k));
        }
    }
    let names =
        |v: &[(&Pol, &Pol)]| -> Vec<String> { v.iter().map(|(a, b)| format!("{a}/{b}")).collect() };
    for cc in ccs {
        for &st in streams {
            let _ = writeln!(w, "## {cc}, {}\n", st.label());
            let _ = writeln!(w, "Throughput, Mbit/s:\n");
            let cols = names(&thr_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.2}", a.mbps))
                    );
                }
                for (x, y) in &thr_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => format!("{:.3}", a.mbps / b.mbps),
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(
                w,
                "\nReceive window, mean (peak), MiB{}:\n",
                if f.conns > 1 {
                    " — total over all connections"
                } else {
                    ""
                }
            );
            let cols = names(&mem_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!(
                            "{} ({})",
                            mib(a.mean_win),
                            mib(a.peak_win as f64)
                        ))
                    );
                }
                for (x, y) in &mem_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => {
                            format!("{:.3}", a.mean_win / b.mean_win.max(1.0))
                        }
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(w, "\nMbit/s per MiB of mean window:\n");
            let eff_pairs: Vec<(&Pol, &Pol)> = thr_pairs
                .iter()
                .copied()
                .filter(|(a, _)| a.policy == BufferPolicy::Drs)
                .collect();
            let cols = names(&eff_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.1}", a.per_mb()))
                    );
                }
                for (x, y) in &eff_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => format!("{:.1}x", a.per_mb() / b.per_mb()),
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(w, "\nSender rwnd-limited time, % of busy time:\n");
            hdr(w, "size", &[]);
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.0}%", a.rwnd * 100.0))
                    );
                }
                let _ = writeln!(w);
            }
            if let Some(o) = over {
                for d in &drss {
                    targets(w, runs, cc, st, sizes, pols, d, o);
                }
            }
            best_static(w, runs, cc, st, sizes, pols);
            sparklines(w, runs, cc, st, sizes, pols);
        }
    }
    let fails: Vec<&Run> = runs
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .collect();
    if !fails.is_empty() {
        let _ = writeln!(w, "## Failed runs\n");
        for r in fails {
            let _ = writeln!(w, "* {}", describe(r));
        }
        let _ = writeln!(w);
    }
    let wrong_cc: Vec<&Run> = runs
        .iter()
        .filter(|r| {
            r.done()
                .is_some_and(|m| !m.sender_cc.is_empty() && m.sender_cc != r.cc)
        })
        .collect();
    if !wrong_cc.is_empty() {
        let _ = writeln!(
            w,
            "## WARNING: sender congestion control differs from the requested one\n"
        );
        for r in wrong_cc {
            let _ = writeln!(w, "* {}", describe(r));
        }
    }
    o
}

/// Pooled over `sizes` present for both: (rate ratio, mean-window ratio).
fn pooled(
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    a: &Pol,
    b: &Pol,
) -> Option<(f64, f64, usize)> {
    let (mut ab, mut asecs, mut aw, mut bb, mut bsecs, mut bw, mut n) =
        (0u64, 0.0, 0.0, 0u64, 0.0, 0.0, 0usize);
    for &s in sizes {
        if let (Cell::Val(x), Cell::Val(y)) = (agg(runs, cc, st, s, a), agg(runs, cc, st, s, b)) {
            ab += x.bytes;
            asecs += x.secs;
            aw += x.mean_win * x.secs;
            bb += y.bytes;
            bsecs += y.secs;
            bw += y.mean_win * y.secs;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let ra = ab as f64 / asecs;
    let rb = bb as f64 / bsecs;
    Some((ra / rb, (aw / asecs) / (bw / bsecs).max(1.0), n))
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// The issue's targets for DRS variant `drs` against the over-provisioned `over` (16M) and the stock 64K.
#[allow(clippy::too_many_arguments)]
fn targets(
    w: &mut String,
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    pols: &[Pol],
    drs: &Pol,
    over: &Pol,
) {
    let stock = pols.iter().find(|p| p.is(BufferPolicy::Fixed(64 << 10)));
    let kern = pols.iter().find(|p| p.is(BufferPolicy::Kernel));
    let big: Vec<u64> = sizes.iter().copied().filter(|&s| s >= 64 << 20).collect();
    if big.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "\nTargets for `{drs}` (files >= 64 MiB; against the over-provisioned 16M buffer and the stock 64K, this \
         run). `nominal` counts the 16M buffer as 16 MiB per stream, as the seeds did; `window` uses its measured \
         mean window:\n"
    );
    let _ = writeln!(
        w,
        "| size | {drs}/16M Mbit/s (>= 0.97) | {drs}/16M window (<= 0.25) | {drs}/16M nominal (<= 0.25) | Mbit/s per MiB vs 16M (>= 5x) | vs 16M nominal | {drs}/64K Mbit/s (>= 7x) | kernel/16M Mbit/s | kernel/16M window | kernel/{drs} window |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|");
    let nominal = (16u64 << 20) as f64 * st.count() as f64 * conns_of(runs);
    let mut rows: Vec<(String, Vec<u64>)> =
        big.iter().map(|&s| (format_size(s), vec![s])).collect();
    if big.len() > 1 {
        rows.push(("all >= 64M (pooled)".into(), big.clone()));
    }
    for (label, ss) in rows {
        let _ = write!(w, "| {label} |");
        match pooled(runs, cc, st, &ss, drs, over) {
            Some((thr, mem, _)) => {
                let eff = thr / mem;
                let dm = pooled_mem(runs, cc, st, &ss, drs);
                let nom = dm.map(|m| m / nominal);
                let _ = write!(
                    w,
                    " {thr:.3} {} | {mem:.3} {} | {} | {eff:.1}x {} | {} |",
                    verdict(thr >= 0.97),
                    verdict(mem <= 0.25),
                    nom.map(|n| format!("{n:.3} {}", verdict(n <= 0.25)))
                        .unwrap_or_default(),
                    verdict(eff >= 5.0),
                    nom.map(|n| format!("{:.1}x {}", thr / n, verdict(thr / n >= 5.0)))
                        .unwrap_or_default(),
                );
            }
            None => {
                let _ = write!(w, " | | | | |");
            }
        }
        match stock.and_then(|k| pooled(runs, cc, st, &ss, drs, k)) {
            Some((thr, _, n)) => {
                let note = if n < ss.len() {
                    format!(" (64K ran {n} of {} sizes)", ss.len())
                } else {
                    String::new()
                };
                let _ = write!(w, " {thr:.1}x {}{note} |", verdict(thr >= 7.0));
            }
            None => {
                let _ = write!(w, " 64K skipped |");
            }
        }
        match kern.map(|k| {
            (
                pooled(runs, cc, st, &ss, k, over),
                pooled(runs, cc, st, &ss, k, drs),
            )
        }) {
            Some((Some((t, m, _)), Some((_, md, _)))) => {
                let _ = writeln!(w, " {t:.3} | {m:.3} | {md:.3} |");
            }
            _ => {
                let _ = writeln!(w, " | | |");
            }
        }
    }
}

fn conns_of(runs: &[Run]) -> f64 {
    runs.first().map(|r| r.conns as f64).unwrap_or(1.0)
}

fn pooled_mem(runs: &[Run], cc: &str, st: Streams, sizes: &[u64], p: &Pol) -> Option<f64> {
    let (mut a, mut t) = (0.0, 0.0);
    for &s in sizes {
        if let Cell::Val(x) = agg(runs, cc, st, s, p) {
            a += x.mean_win * x.secs;
            t += x.secs;
        }
    }
    (t > 0.0).then(|| a / t)
}

/// DRS and kernel autotuning against the best fixed buffer of this run (by throughput), per size.
fn best_static(w: &mut String, runs: &[Run], cc: &str, st: Streams, sizes: &[u64], pols: &[Pol]) {
    let fixed: Vec<&Pol> = pols
        .iter()
        .filter(|p| p.env.is_empty() && matches!(p.policy, BufferPolicy::Fixed(_)))
        .collect();
    let adaptive: Vec<&Pol> = pols
        .iter()
        .filter(|p| !matches!(p.policy, BufferPolicy::Fixed(_)))
        .collect();
    if fixed.len() < 3 || adaptive.is_empty() {
        return;
    }
    let _ = writeln!(w, "\nAgainst the best single static buffer of this run (highest throughput among the fixed sizes), and the smallest fixed buffer within 3 % of it; ratios are Mbit/s and mean window relative to the best static:\n");
    let _ = write!(
        w,
        "| size | best static | its Mbit/s | its window MiB | smallest within 3 % |"
    );
    for a in &adaptive {
        let _ = write!(w, " {a} Mbit/s | {a} window |");
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "|---|---|---|---|---|{}",
        "---|---|".repeat(adaptive.len())
    );
    for &s in sizes {
        let vals: Vec<(&Pol, Agg)> = fixed
            .iter()
            .filter_map(|p| match agg(runs, cc, st, s, p) {
                Cell::Val(a) => Some((*p, a)),
                _ => None,
            })
            .collect();
        let Some(&(bp, ba)) = vals.iter().max_by(|x, y| x.1.mbps.total_cmp(&y.1.mbps)) else {
            continue;
        };
        let small = vals
            .iter()
            .filter(|(_, a)| a.mbps >= 0.97 * ba.mbps)
            .min_by(|x, y| x.1.mean_win.total_cmp(&y.1.mean_win))
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        let _ = write!(
            w,
            "| {} | {bp} | {:.2} | {} | {small} |",
            format_size(s),
            ba.mbps,
            mib(ba.mean_win),
        );
        for a in &adaptive {
            let _ = match agg(runs, cc, st, s, a) {
                Cell::Val(x) => write!(
                    w,
                    " {:.3} | {:.3} |",
                    x.mbps / ba.mbps,
                    x.mean_win / ba.mean_win.max(1.0)
                ),
                _ => write!(w, " | |"),
            };
        }
        let _ = writeln!(w);
    }
}

/// Receive window over time (seed 000 fig. 14) for the largest size every policy ran, as text sparklines.
fn sparklines(w: &mut String, runs: &[Run], cc: &str, st: Streams, sizes: &[u64], pols: &[Pol]) {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    const WIDTH: usize = 64;
    let Some(&size) = sizes.iter().rev().find(|&&s| {
        runs.iter().any(|r| {
            r.cc == cc
                && r.streams == st
                && r.size == s
                && r.done().is_some_and(|m| !m.series.is_empty())
        })
    }) else {
        return;
    };
    let series: Vec<(&Pol, &Measured)> = pols
        .iter()
        .filter_map(|p| {
            runs.iter()
                .find(|r| {
                    r.cc == cc
                        && r.streams == st
                        && r.size == size
                        && r.policy == *p
                        && r.done().is_some_and(|m| !m.series.is_empty())
                })
                .and_then(|r| r.done().map(|m| (p, m)))
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|(_, m)| m.series.iter().map(|p| p.win))
        .max()
        .unwrap_or(1)
        .max(1);
    let tmax = series
        .iter()
        .map(|(_, m)| m.series.last().map(|p| p.t).unwrap_or(0.0))
        .fold(0.0, f64::max)
        .max(1e-3);
    let _ = writeln!(
        w,
        "\nReceive window over time, {} file (one column = {:.2} s, full height = {} MiB; each line ends when its transfer did):\n\n```",
        format_size(size),
        tmax / WIDTH as f64,
        mib(top as f64)
    );
    for (p, m) in series {
        let mut line = String::new();
        let end = m.series.last().map(|x| x.t).unwrap_or(0.0);
        let mut last = None;
        for c in 0..WIDTH {
            let (a, b) = (
                tmax * c as f64 / WIDTH as f64,
                tmax * (c + 1) as f64 / WIDTH as f64,
            );
            // Max within the column; a column with no sample repeats the previous one until the run ended.
            let v = m
                .series
                .iter()
                .filter(|x| x.t >= a && x.t < b)
                .map(|x| x.win)
                .max();
            let v = match v {
                Some(v) => Some(v),
                None if a <= end => last,
                None => None,
            };
            last = v.or(last);
            line.push(match v {
                Some(v) => BARS[((v as f64 / top as f64) * 8.0).round().clamp(1.0, 8.0) as usize],
                None => ' ',
            });
        }
        let _ = writeln!(
            w,
            "{:>7} |{line}| mean {} MiB, peak {} MiB, {:.1} s",
            p.to_string(),
            mib(m.mean_win),
            mib(m.peak_win as f64),
            m.secs
        );
    }
    let _ = writeln!(w, "```\n");
}

/// sock_diag (NETLINK_SOCK_DIAG) dump of the calling namespace's IPv4 TCP sockets: what `ss -tmi` shows, without
/// a process per sample. The socket is bound to the namespace it was created in.
mod diag {
    use std::io::{self, Read};
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use socket2::{Domain, Protocol, Socket, Type};

    const AF_NETLINK: i32 = 16;
    const NETLINK_SOCK_DIAG: i32 = 4;
    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_DUMP: u16 = 0x300;
    const NLMSG_ERROR: u16 = 2;
    const NLMSG_DONE: u16 = 3;
    const INET_DIAG_INFO: u16 = 2;
    const INET_DIAG_CONG: u16 = 4;
    const INET_DIAG_SKMEMINFO: u16 = 7;
    const TCP_ESTABLISHED: u32 = 1;
    const TCP_CLOSE_WAIT: u32 = 8;

    /// One socket: addresses, skmem and the TCP_INFO fields the benchmark uses.
    #[derive(Debug, Clone)]
    pub struct Sock {
        pub sport: u16,
        pub dst: Ipv4Addr,
        pub dport: u16,
        pub cookie: u64,
        pub rmem_alloc: u32,
        pub rcvbuf: u32,
        pub sndbuf: u32,
        pub cong: String,
        pub rcv_ssthresh: u32,
        pub rcv_space: u32,
        pub rcv_wnd: u32,
        pub bytes_received: u64,
        pub total_retrans: u32,
        pub busy_us: u64,
        pub rwnd_limited_us: u64,
        pub sndbuf_limited_us: u64,
    }

    impl Default for Sock {
        fn default() -> Self {
            Sock {
                sport: 0,
                dst: Ipv4Addr::UNSPECIFIED,
                dport: 0,
                cookie: 0,
                rmem_alloc: 0,
                rcvbuf: 0,
                sndbuf: 0,
                cong: String::new(),
                rcv_ssthresh: 0,
                rcv_space: 0,
                rcv_wnd: 0,
                bytes_received: 0,
                total_retrans: 0,
                busy_us: 0,
                rwnd_limited_us: 0,
                sndbuf_limited_us: 0,
            }
        }
    }

    pub struct Diag {
        sock: Socket,
        seq: u32,
        buf: Vec<u8>,
    }

    fn u16_ne(b: &[u8], o: usize) -> u16 {
        b.get(o..o + 2)
            .map(|x| u16::from_ne_bytes([x[0], x[1]]))
            .unwrap_or(0)
    }
    fn u32_ne(b: &[u8], o: usize) -> u32 {
        b.get(o..o + 4)
            .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
            .unwrap_or(0)
    }
    fn u64_ne(b: &[u8], o: usize) -> u64 {
        b.get(o..o + 8)
            .map(|x| u64::from_ne_bytes(x.try_into().expect("8 bytes")))
            .unwrap_or(0)
    }

    impl Diag {
        pub fn open() -> io::Result<Diag> {
            let sock = Socket::new(
                Domain::from(AF_NETLINK),
                Type::DGRAM,
                Some(Protocol::from(NETLINK_SOCK_DIAG)),
            )?;
            sock.set_read_timeout(Some(Duration::from_secs(2)))?;
            Ok(Diag {
                sock,
                seq: 0,
                buf: vec![0; 1 << 17],
            })
        }

        /// The namespace's connected IPv4 TCP sockets (ESTABLISHED, FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, CLOSING).
        pub fn dump(&mut self) -> io::Result<Vec<Sock>> {
            self.seq = self.seq.wrapping_add(1);
            let mut req = Vec::with_capacity(72);
            req.extend_from_slice(&72u32.to_ne_bytes());
            req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
            req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
            req.extend_from_slice(&self.seq.to_ne_bytes());
            req.extend_from_slice(&0u32.to_ne_bytes());
            // inet_diag_req_v2: family, protocol, ext (bit n-1 asks for attribute n), pad, states, sockid.
            req.push(2);
            req.push(6);
            req.push(
                ((1u16 << (INET_DIAG_INFO - 1))
                    | (1 << (INET_DIAG_CONG - 1))
                    | (1 << (INET_DIAG_SKMEMINFO - 1))) as u8,
            );
            req.push(0);
            // Connected states, including a sender that closed with data still in flight (FIN_WAIT1 etc.).
            let states = [TCP_ESTABLISHED, 4, 5, TCP_CLOSE_WAIT, 9, 11]
                .iter()
                .fold(0u32, |m, s| m | 1 << s);
            req.extend_from_slice(&states.to_ne_bytes());
            req.extend_from_slice(&[0u8; 48]);
            debug_assert_eq!(req.len(), 72);
            self.sock.send(&req)?;
            let mut out = vec![];
            loop {
                let n = (&self.sock).read(&mut self.buf)?;
                if n == 0 {
                    return Err(io::Error::other("sock_diag: empty read"));
                }
                let b = &self.buf[..n];
                let mut off = 0;
                while off + 16 <= n {
                    let len = u32_ne(b, off) as usize;
                    let typ = u16_ne(b, off + 4);
                    let seq = u32_ne(b, off + 8);
                    if len < 16 || off + len > n {
                        return Err(io::Error::other("sock_diag: malformed message"));
                    }
                    if seq == self.seq {
                        match typ {
                            NLMSG_DONE => return Ok(out),
                            NLMSG_ERROR => {
                                let e = u32_ne(b, off + 16) as i32;
                                if e != 0 {
                                    return Err(io::Error::from_raw_os_error(-e));
                                }
                            }
                            _ => {
                                if let Some(s) = parse(&b[off + 16..off + len]) {
                                    out.push(s);
                                }
                            }
                        }
                    }
                    off += (len + 3) & !3;
                }
            }
        }
    }

    /// inet_diag_msg (72 bytes) followed by attributes.
    fn parse(m: &[u8]) -> Option<Sock> {
        if m.len() < 72 || m[0] != 2 {
            return None;
        }
        let mut s = Sock {
            sport: u16::from_be_bytes([m[4], m[5]]),
            dport: u16::from_be_bytes([m[6], m[7]]),
            dst: Ipv4Addr::new(m[24], m[25], m[26], m[27]),
            cookie: u32_ne(m, 44) as u64 | (u32_ne(m, 48) as u64) << 32,
            ..Sock::default()
        };
        let mut off = 72;
        while off + 4 <= m.len() {
            let len = u16_ne(m, off) as usize;
            let typ = u16_ne(m, off + 2) & 0x3fff;
            if len < 4 || off + len > m.len() {
                break;
            }
            let p = &m[off + 4..off + len];
            match typ {
                INET_DIAG_SKMEMINFO => {
                    s.rmem_alloc = u32_ne(p, 0);
                    s.rcvbuf = u32_ne(p, 4);
                    s.sndbuf = u32_ne(p, 12);
                }
                INET_DIAG_CONG => {
                    let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                    s.cong = String::from_utf8_lossy(&p[..end]).into_owned();
                }
                INET_DIAG_INFO => {
                    // Offsets in struct tcp_info (include/uapi/linux/tcp.h); short replies read as zero.
                    s.rcv_ssthresh = u32_ne(p, 64);
                    s.rcv_space = u32_ne(p, 96);
                    s.total_retrans = u32_ne(p, 100);
                    s.bytes_received = u64_ne(p, 128);
                    s.busy_us = u64_ne(p, 168);
                    s.rwnd_limited_us = u64_ne(p, 176);
                    s.sndbuf_limited_us = u64_ne(p, 184);
                    s.rcv_wnd = u32_ne(p, 232);
                }
                _ => {}
            }
            off += (len + 3) & !3;
        }
        Some(s)
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use std::io::Write;
        use std::net::{TcpListener, TcpStream};

        #[test]
        fn dump_sees_a_loopback_connection_with_tcp_info() {
            let mut d = match Diag::open() {
                Ok(d) => d,
                Err(e) => {
                    println!(
                        "SKIPPED dump_sees_a_loopback_connection_with_tcp_info: no sock_diag ({e})"
                    );
                    return;
                }
            };
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            c.write_all(&vec![1u8; 100_000]).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let all = match d.dump() {
                Ok(v) => v,
                Err(e) => {
                    println!("SKIPPED dump_sees_a_loopback_connection_with_tcp_info: sock_diag dump failed ({e})");
                    return;
                }
            };
            let rx = all
                .iter()
                .find(|x| x.sport == port && x.dport == c.local_addr().unwrap().port())
                .expect("receiving socket listed");
            assert_eq!(rx.dst, Ipv4Addr::LOCALHOST);
            assert_eq!(rx.bytes_received, 100_000);
            assert!(rx.rmem_alloc > 0, "data not read yet is queued");
            assert!(rx.rcv_ssthresh > 0 && rx.rcv_space > 0 && rx.rcvbuf > 0);
            assert_eq!(rx.cong, drsftp_sys::sockopt::congestion(&s).unwrap());
            let tx = all
                .iter()
                .find(|x| x.dport == port)
                .expect("sending socket listed");
            assert!(tx.busy_us > 0);
            drop(s);
        }
    }
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
