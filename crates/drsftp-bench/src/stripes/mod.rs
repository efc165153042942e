//! `drsftp-bench stripes` (issue 23): striped third-party copies between two clusters on a `shared-core` lab,
//! drsftp (a `serve --movers` frontend with `serve --mover` movers) against Globus (`globus-gridftp-server -r`
//! frontend with `-dn` data nodes) on the same hosts, for each stripe count, with the lab's own ceiling (iperf3
//! between the same host pairs) measured in the same run. Site A (hosts 1..=1+M) holds the source cluster, site
//! B the destination; the client runs on A's frontend host and moves no data (third-party), because a client's
//! own host is held to one access link. Movers' memory (VmRSS of each process tree) and CPU are sampled.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use drsftp_lab::measure::iperf3;
use drsftp_lab::{Lab, LabConfig, Topology};
use drsftp_tune::{parse_duration, parse_rate};

use crate::record::RunDir;

mod report;
use report::{csv, report};

const DRSFTP_PORT: u16 = 2811;
const GLOBUS_PORT: u16 = 2812;
const MOVER_USER: &str = "mover";
const MOVER_PASS: &str = "stripebench";
const TICKS: f64 = 100.0;
/// The drsftp rows: as shipped (SIZE + CKSM of both ends after the copy), and with `--no-verify` (sizes only),
/// which is what globus-url-copy checks.
const DRSFTP: &str = "drsftp";
const DRSFTP_NV: &str = "drsftp --no-verify";
/// `--before`: the same verified copy with an older drsftp binary (servers and client), in the same run.
const DRSFTP_BEFORE: &str = "drsftp before";

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Stripe counts (movers / data nodes per cluster).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    stripes: Vec<usize>,
    /// Access link rate of every host, each direction.
    #[arg(long, default_value = "200mbit", value_parser = |s: &str| parse_rate(s).map_err(|e| e.to_string()))]
    access: u64,
    /// Core link rate between the sites, each direction.
    #[arg(long, default_value = "1gbit", value_parser = |s: &str| parse_rate(s).map_err(|e| e.to_string()))]
    core: u64,
    /// Round-trip time between the sites (the core's delay; access links add none).
    #[arg(long, default_value = "50ms", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    rtt: Duration,
    /// Seconds each copy should last at N × access rate (sets the file size).
    #[arg(long, default_value_t = 12)]
    secs: u64,
    /// TCP streams per stripe (`drsftp copy -p`, `globus-url-copy -p`, `iperf3 -P`).
    #[arg(long, short = 'p', default_value_t = 2)]
    parallel: u32,
    /// Runs of each case (interleaved drsftp, Globus); the report takes the median.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Comma list of parts: iperf,drsftp,globus.
    #[arg(long, default_value = "iperf,drsftp,globus")]
    only: String,
    /// Lab name (lab names of this harness start with `sb`).
    #[arg(long, default_value = "sb")]
    lab: String,
    /// The drsftp binary [default: next to drsftp-bench].
    #[arg(long)]
    drsftp: Option<PathBuf>,
    /// An older drsftp binary to compare in the same run (rows `drsftp before`, verified, interleaved with the
    /// others).
    #[arg(long)]
    before: Option<PathBuf>,
}

/// One measured copy (or iperf3 run) of one case.
#[derive(Debug, Clone, Default)]
struct Sample {
    what: &'static str,
    stripes: usize,
    run: usize,
    bytes: u64,
    /// Wall time of the client process (logins and set-up included), seconds.
    wall_s: f64,
    /// drsftp's own `seconds` from `--json` (data phase), when there is one.
    data_s: Option<f64>,
    /// drsftp's `--json` phases: set-up and verification (after the data), seconds.
    setup_s: Option<f64>,
    verify_s: Option<f64>,
    verified: bool,
    /// Bytes each stripe carried (drsftp `stripe_bytes`).
    stripe_bytes: String,
    /// Movers (source and destination): highest VmRSS of any one mover's process tree, and the mean over
    /// samples of the per-mover average, KiB.
    src_peak_kib: u64,
    src_mean_kib: f64,
    dst_peak_kib: u64,
    dst_mean_kib: f64,
    /// CPU seconds of all movers (both sides) during the copy.
    cpu_s: f64,
    note: String,
    /// iperf3's measured goodput (its rows have no file), bit/s.
    iperf_bps: Option<f64>,
    /// The client's output (its log, with `RUST_LOG` set), kept in the logs folder for a phase breakdown.
    client_log: Option<String>,
}

impl Sample {
    fn mbps(&self) -> f64 {
        if let Some(b) = self.iperf_bps {
            b / 1e6
        } else if self.wall_s > 0.0 && self.note.is_empty() {
            self.bytes as f64 * 8.0 / self.wall_s / 1e6
        } else {
            0.0
        }
    }
}

/// Child processes killed (by PID) and reaped when dropped.
#[derive(Default)]
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Removes the shared storage directory when dropped.
struct Shared(PathBuf);

impl Drop for Shared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Host numbers: site A is 1 (frontend, client) and 2..=1+max (movers); site B is 2+max (frontend) and after.
struct Hosts {
    max: usize,
}

impl Hosts {
    fn front(&self, site: usize) -> usize {
        1 + site * (self.max + 1)
    }
    fn mover(&self, site: usize, i: usize) -> usize {
        self.front(site) + 1 + i
    }
}

pub fn run(a: &Args, record: Option<&RunDir>) -> Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
    let max = *a.stripes.iter().max().context("--stripes is empty")?;
    if max == 0 || max > 8 {
        bail!("--stripes must be 1..=8");
    }
    let has = |p: &str| a.only.split(',').any(|x| x.trim() == p);
    if has("globus") {
        for t in ["globus-gridftp-server", "globus-url-copy"] {
            if find_tool(t).is_none() {
                bail!("{t} is not installed (scripts/setup.sh), or leave out `globus` from --only");
            }
        }
    }
    let hosts = Hosts { max };
    let mut cfg = LabConfig::new(&a.lab, 2 * (max + 1), a.rtt, a.core);
    cfg.topology = Topology::SharedCore {
        access_bps: a.access,
        site_a: max + 1,
    };
    let lab = Lab::up(cfg).context("lab up")?;
    let shared = Shared(PathBuf::from(format!(
        "/dev/shm/drsftp-sb-{}",
        std::process::id()
    )));
    // Server logs outlive the run (the failure of a case is read there).
    let logs = std::env::temp_dir().join(format!("drsftp-sb-{}-logs", std::process::id()));
    std::fs::create_dir_all(&logs)?;
    chmod_open(&logs)?;
    eprintln!("server logs in {}", logs.display());
    for d in ["a", "b"] {
        std::fs::create_dir_all(shared.0.join(d))?;
        chmod_open(&shared.0.join(d))?;
    }
    let names: String = lab
        .hosts()
        .iter()
        .map(|x| format!("{} h{}\n", x.addr, x.index))
        .collect();
    let me = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    std::fs::write(
        shared.0.join("hosts"),
        format!("127.0.0.1 localhost {}\n{names}", me.trim()),
    )?;
    let login = shared.0.join("movers.login");
    std::fs::write(&login, format!("{MOVER_USER}:{MOVER_PASS}\n"))?;
    std::fs::set_permissions(&login, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;

    let mut samples = Vec::new();
    for &n in &a.stripes {
        let size = n as u64 * a.access / 8 * a.secs;
        let src = shared.0.join("a").join(format!("src{n}"));
        eprintln!("stripes {n}: writing {size} bytes to {}", src.display());
        make_file(&src, size)?;
        if has("iperf") {
            samples.push(ceiling(&lab, &hosts, n, a)?);
        }
        for run in 0..a.runs {
            if has("drsftp") {
                let mut cases = vec![(DRSFTP, true, exe.as_path()), (DRSFTP_NV, false, &exe)];
                if let Some(b) = &a.before {
                    cases.push((DRSFTP_BEFORE, true, b.as_path()));
                }
                for (what, verify, bin) in cases {
                    let case = (what, verify, n, run);
                    let r = drsftp_case(&lab, &hosts, bin, &shared.0, &logs, &login, case, a);
                    samples.push(or_failed(r, what, n, run));
                }
            }
            if has("globus") {
                let r = globus_case(&lab, &hosts, &shared.0, &logs, n, run, a);
                samples.push(or_failed(r, "globus", n, run));
            }
        }
        let _ = std::fs::remove_file(&src);
    }
    let md = report(a, &samples, &lab);
    if let Some(r) = record {
        r.write("results.csv", &csv(&samples))?;
        r.report(&md)?;
    }
    Ok(())
}

/// A case that could not run is reported as failed (with why) and the run goes on.
fn or_failed(r: Result<Sample>, what: &'static str, stripes: usize, run: usize) -> Sample {
    r.unwrap_or_else(|e| {
        eprintln!("{what} {stripes} stripes run {run}: {e:#}");
        Sample {
            what,
            stripes,
            run,
            note: format!("did not run: {e:#}"),
            ..Sample::default()
        }
    })
}

/// The first `tool` on PATH or in /usr/sbin (where Debian puts the Globus server).
fn find_tool(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

fn chmod_open(p: &Path) -> Result<()> {
    std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o777))?;
    Ok(())
}

/// Writes `size` bytes of xorshift noise (incompressible) to `path`, readable by all (Globus serves as nobody).
fn make_file(path: &Path, size: u64) -> Result<()> {
    crate::scratch::make_file(path, size)?;
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    Ok(())
}

/// Whether two files hold the same bytes.
fn same_file(a: &Path, b: &Path) -> Result<bool> {
    let (fa, fb) = (std::fs::File::open(a)?, std::fs::File::open(b));
    let Ok(fb) = fb else { return Ok(false) };
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ra, mut rb) = (BufReader::new(fa), BufReader::new(fb));
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let k = ra.read(&mut ba)?;
        if k == 0 {
            return Ok(true);
        }
        rb.read_exact(&mut bb[..k])?;
        if ba[..k] != bb[..k] {
            return Ok(false);
        }
    }
}

/// The lab's ceiling for N stripes: iperf3 from each of site A's first N mover hosts to its partner on site B,
/// all at once, `-P parallel` each; the sum of the receivers' goodput.
fn ceiling(lab: &Lab, h: &Hosts, n: usize, a: &Args) -> Result<Sample> {
    let t = a.secs.min(10).to_string();
    let p = a.parallel.to_string();
    let rates = std::thread::scope(|sc| {
        let runs: Vec<_> = (0..n)
            .map(|i| {
                let (c, s) = (h.mover(0, i), h.mover(1, i));
                let args = ["-t", t.as_str(), "-O", "2", "-P", p.as_str()];
                sc.spawn(move || iperf3(lab, c, s, 5301 + i as u16, &args))
            })
            .collect();
        runs.into_iter()
            .map(|r| r.join().map_err(|_| anyhow!("iperf3 thread panicked")))
            .collect::<Result<Vec<_>>>()
    })?;
    let mut bps = 0.0;
    let mut note = Vec::new();
    for r in rates {
        let r = r.map_err(|e| anyhow!("{e}"))?;
        bps += r.bits_per_second;
        note.push(format!("{:.1}", r.bits_per_second / 1e6));
    }
    Ok(Sample {
        what: "iperf3",
        stripes: n,
        iperf_bps: Some(bps),
        verified: true,
        note: format!("per pair Mbit/s: {}", note.join(" + ")),
        ..Sample::default()
    })
}

/// Spawns `cmd` (a `drsftp serve --print-addr`) and waits for its `listening` line.
fn spawn_serve(mut cmd: Command, log: &Path, what: &str) -> Result<Child> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .with_context(|| format!("spawning {what}"))?;
    let out = child.stdout.take().context("serve stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = String::new();
        let _ = r.read_line(&mut line);
        let _ = tx.send(line);
        // Keep reading so the server never writes into a closed pipe.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(l) if l.starts_with("listening") => Ok(child),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} did not start ({other:?}); log {}", log.display())
        }
    }
}

/// Waits until `addr` accepts a TCP connection from inside host `k`.
fn wait_port(lab: &Lab, k: usize, addr: SocketAddr) -> Result<()> {
    let ok = lab.run_in(k, move || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(15) {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    })?;
    if !ok {
        bail!("nothing listens on {addr} after 15 s");
    }
    Ok(())
}

/// A drsftp cluster on `site` with `n` movers serving `root`: the frontend's address and the processes.
#[allow(clippy::too_many_arguments)]
fn drsftp_cluster(
    lab: &Lab,
    h: &Hosts,
    exe: &Path,
    root: &Path,
    logs: &Path,
    login: &Path,
    site: usize,
    n: usize,
) -> Result<(SocketAddr, Procs, Vec<u32>)> {
    let exe_s = exe.to_string_lossy();
    let front_ip = lab.addr(h.front(site));
    let mut procs = Procs::default();
    let mut addrs = Vec::new();
    for i in 0..n {
        let k = h.mover(site, i);
        let addr = SocketAddr::from((lab.addr(k), DRSFTP_PORT));
        let mut cmd = lab.exec(k, &exe_s);
        cmd.args(["serve", "--print-addr", "--listen", &addr.to_string()])
            .arg("--root")
            .arg(root)
            .args(["--mover", &front_ip.to_string()])
            .args(["--user", &format!("{MOVER_USER}:{MOVER_PASS}")]);
        let log = logs.join(format!("drsftp-s{site}-n{n}-mover{i}.log"));
        procs.0.push(spawn_serve(cmd, &log, "drsftp mover")?);
        addrs.push(addr.to_string());
    }
    let pids = procs.0.iter().map(|c| c.id()).collect();
    let front = SocketAddr::from((front_ip, DRSFTP_PORT));
    let mut cmd = lab.exec(h.front(site), &exe_s);
    cmd.args(["serve", "--print-addr", "--listen", &front.to_string()])
        .arg("--root")
        .arg(root)
        .args([
            "--anonymous",
            "--anonymous-write",
            "--movers",
            &addrs.join(","),
        ])
        .arg("--movers-login")
        .arg(login)
        // A striped third-party copy's senders are the other cluster's movers, not the host the client names.
        .args(["--third-party", "all"]);
    let log = logs.join(format!("drsftp-s{site}-n{n}-frontend.log"));
    procs.0.push(spawn_serve(cmd, &log, "drsftp frontend")?);
    Ok((front, procs, pids))
}

/// `program` in host `k` with `hosts` bind-mounted on /etc/hosts in a mount namespace of its own: Globus looks
/// its addresses up by name, and a lab host has no resolver. `unshare` and `sh` exec, so the PID is the program's.
fn globus_cmd(lab: &Lab, k: usize, hosts: &Path, program: &str) -> Command {
    let mut c = lab.exec(k, "unshare");
    c.args(["-m", "sh", "-c"])
        .arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#)
        .arg(hosts)
        .arg(program);
    c
}

/// A Globus cluster on `site`: `n` data nodes (`-dn`) and a frontend (`-r`), anonymous, home `/`.
fn globus_cluster(
    lab: &Lab,
    h: &Hosts,
    hosts: &Path,
    logs: &Path,
    site: usize,
    n: usize,
) -> Result<(SocketAddr, Procs, Vec<u32>)> {
    let bin = find_tool("globus-gridftp-server").context("globus-gridftp-server")?;
    let bin = bin.to_string_lossy();
    let mut procs = Procs::default();
    let start = |k: usize, name: String, extra: &[&str]| -> Result<(Child, SocketAddr)> {
        let ip = lab.addr(k).to_string();
        let addr = SocketAddr::from((lab.addr(k), GLOBUS_PORT));
        let child = globus_cmd(lab, k, hosts, &bin)
            .args(["-aa", "-anonymous-user", "nobody", "-p"])
            .arg(GLOBUS_PORT.to_string())
            .args([
                "-control-interface",
                &ip,
                "-data-interface",
                &ip,
                "-home-dir",
                "/",
            ])
            .args(extra)
            .arg("-l")
            .arg(logs.join(format!("globus-s{site}-n{n}-{name}.log")))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawning globus-gridftp-server")?;
        Ok((child, addr))
    };
    let mut nodes = Vec::new();
    for i in 0..n {
        let k = h.mover(site, i);
        let (c, addr) = start(k, format!("node{i}"), &["-dn"])?;
        procs.0.push(c);
        wait_port(lab, k, addr)?;
        nodes.push(addr.to_string());
    }
    let pids = procs.0.iter().map(|c| c.id()).collect();
    let k = h.front(site);
    let (c, front) = start(k, "frontend".into(), &["-r", &nodes.join(",")])?;
    procs.0.push(c);
    wait_port(lab, k, front)?;
    Ok((front, procs, pids))
}

/// VmRSS (KiB) of `pid` and all its descendants (a Globus server forks one process per session).
fn tree_rss_kib(pid: u32) -> u64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    own + children(pid).into_iter().map(tree_rss_kib).sum::<u64>()
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .collect()
}

/// CPU seconds of `pid` (user + system), its reaped children's, and its live descendants'.
fn tree_cpu_s(pid: u32) -> f64 {
    let own = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = s[s.rfind(')')? + 2..].to_string();
            let f: Vec<f64> = rest
                .split_whitespace()
                .skip(11)
                .take(4)
                .filter_map(|x| x.parse().ok())
                .collect();
            Some(f.iter().sum::<f64>() / TICKS)
        })
        .unwrap_or(0.0);
    own + children(pid).into_iter().map(tree_cpu_s).sum::<f64>()
}

/// Samples the movers' process trees every 50 ms until stopped.
struct MemSampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<(Vec<u64>, Vec<u64>, Vec<f64>)>,
}

impl MemSampler {
    fn start(src: Vec<u32>, dst: Vec<u32>) -> MemSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            let (mut sp, mut dp, mut means) = (Vec::new(), Vec::new(), Vec::new());
            while !s2.load(Ordering::Relaxed) {
                let s: Vec<u64> = src.iter().map(|p| tree_rss_kib(*p)).collect();
                let d: Vec<u64> = dst.iter().map(|p| tree_rss_kib(*p)).collect();
                sp.push(s.iter().copied().max().unwrap_or(0));
                dp.push(d.iter().copied().max().unwrap_or(0));
                let avg = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
                means.push(avg(&s));
                means.push(avg(&d));
                std::thread::sleep(Duration::from_millis(50));
            }
            (sp, dp, means)
        });
        MemSampler { stop, handle }
    }

    /// (source peak, source mean, destination peak, destination mean) in KiB.
    fn finish(self) -> (u64, f64, u64, f64) {
        self.stop.store(true, Ordering::Relaxed);
        let (sp, dp, m) = self.handle.join().unwrap_or_default();
        let mean = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let (sm, dm): (Vec<f64>, Vec<f64>) = (
            m.iter().step_by(2).copied().collect(),
            m.iter().skip(1).step_by(2).copied().collect(),
        );
        (
            sp.into_iter().max().unwrap_or(0),
            mean(sm),
            dp.into_iter().max().unwrap_or(0),
            mean(dm),
        )
    }
}

/// Runs the client `cmd` while sampling the movers `pids` (source, destination); fills memory, CPU and wall time.
fn measured(cmd: &mut Command, src: &[u32], dst: &[u32], s: &mut Sample) -> Result<String> {
    let all: Vec<u32> = src.iter().chain(dst).copied().collect();
    let cpu0: f64 = all.iter().map(|p| tree_cpu_s(*p)).sum();
    let mem = MemSampler::start(src.to_vec(), dst.to_vec());
    let t0 = Instant::now();
    let out = cmd.stdin(Stdio::null()).output().context("client")?;
    s.wall_s = t0.elapsed().as_secs_f64();
    // A Globus session process exits after the copy; its CPU then shows in the parent's reaped-children time.
    std::thread::sleep(Duration::from_millis(500));
    (
        s.src_peak_kib,
        s.src_mean_kib,
        s.dst_peak_kib,
        s.dst_mean_kib,
    ) = mem.finish();
    s.cpu_s = all.iter().map(|p| tree_cpu_s(*p)).sum::<f64>() - cpu0;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        s.note = format!("client failed: {}", last_lines(&text, 6));
    }
    s.client_log = Some(text);
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn last_lines(t: &str, n: usize) -> String {
    let v: Vec<&str> = t.lines().collect();
    v[v.len().saturating_sub(n)..].join(" / ")
}

#[allow(clippy::too_many_arguments)]
fn drsftp_case(
    lab: &Lab,
    h: &Hosts,
    exe: &Path,
    shared: &Path,
    logs: &Path,
    login: &Path,
    (what, verify, n, run): (&'static str, bool, usize, usize),
    a: &Args,
) -> Result<Sample> {
    let (fa, _pa, src_pids) = drsftp_cluster(lab, h, exe, &shared.join("a"), logs, login, 0, n)?;
    let (fb, _pb, dst_pids) = drsftp_cluster(lab, h, exe, &shared.join("b"), logs, login, 1, n)?;
    let src = shared.join("a").join(format!("src{n}"));
    let dst = shared.join("b").join(format!("drsftp{n}"));
    let mut s = Sample {
        what,
        stripes: n,
        run,
        bytes: std::fs::metadata(&src)?.len(),
        ..Sample::default()
    };
    let mut cmd = lab.exec(h.front(0), &exe.to_string_lossy());
    cmd.args(["copy", "--json", "-q", "-p", &a.parallel.to_string()])
        .args((!verify).then_some("--no-verify"))
        .arg(format!("ftp://{fa}/src{n}"))
        .arg(format!("ftp://{fb}/drsftp{n}"));
    let out = measured(&mut cmd, &src_pids, &dst_pids, &mut s)?;
    if let Some(t) = &s.client_log {
        let name = format!(
            "drsftp-client-n{n}-r{run}{}.log",
            match what {
                DRSFTP_NV => "-nv",
                DRSFTP_BEFORE => "-before",
                _ => "",
            }
        );
        std::fs::write(logs.join(name), t)?;
    }
    if let Some(j) = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        s.data_s = j["seconds"].as_f64();
        s.setup_s = j["setup_seconds"].as_f64();
        s.verify_s = j["phases"]["verify"].as_f64();
        s.stripe_bytes = j["stripe_bytes"]
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .unwrap_or_default();
    }
    s.verified = s.note.is_empty() && same_file(&src, &dst)?;
    let _ = std::fs::remove_file(&dst);
    eprintln!(
        "{} {n} stripes run {run}: {:.1} Mbit/s {}",
        s.what,
        s.mbps(),
        s.note
    );
    Ok(s)
}

fn globus_case(
    lab: &Lab,
    h: &Hosts,
    shared: &Path,
    logs: &Path,
    n: usize,
    run: usize,
    a: &Args,
) -> Result<Sample> {
    let (fa, _pa, src_pids) = globus_cluster(lab, h, &shared.join("hosts"), logs, 0, n)?;
    let (fb, _pb, dst_pids) = globus_cluster(lab, h, &shared.join("hosts"), logs, 1, n)?;
    let src = shared.join("a").join(format!("src{n}"));
    let dst = shared.join("b").join(format!("globus{n}"));
    let mut s = Sample {
        what: "globus",
        stripes: n,
        run,
        bytes: std::fs::metadata(&src)?.len(),
        ..Sample::default()
    };
    let mut cmd = globus_cmd(lab, h.front(0), &shared.join("hosts"), "globus-url-copy");
    cmd.args(["-stripe", "-p", &a.parallel.to_string()])
        .arg(format!("ftp://{fa}{}", src.display()))
        .arg(format!("ftp://{fb}{}", dst.display()));
    measured(&mut cmd, &src_pids, &dst_pids, &mut s)?;
    s.verified = s.note.is_empty() && same_file(&src, &dst)?;
    let _ = std::fs::remove_file(&dst);
    eprintln!(
        "globus  {n} stripes run {run}: {:.1} Mbit/s {}",
        s.mbps(),
        s.note
    );
    Ok(s)
}
