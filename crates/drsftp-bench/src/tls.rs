//! `drsftp-bench tls`: the cost of `PROT P`. One `drsftp serve` with a throwaway certificate (rcgen); `drsftp
//! copy` downloads the same file with `--tls off` and `--tls require` (fingerprint-pinned), at each `-p`,
//! interleaved in the same run so both see the same machine. Reports throughput, the TLS/cleartext ratio, and the
//! resident memory (VmRSS from /proc, sampled every 20 ms) of the client and the server during each copy: peak
//! and mean; and the CPU seconds both spent per GiB (utime + stime from /proc: the client's from its zombie
//! entry, the server's as the difference over the copy).
//!
//! On loopback (the default; no root) the file is random and the copy checks CRC32C. With `--lab` (root) the
//! server runs in host 1 and the client in host 2 of a 2-host lab called `tls` at `--lab-rate` · `--lab-rtt`
//! (the lab and server of `blast --only aead`, [`crate::blast::Bench`]), the file is sparse and the copy skips
//! the checksum: there the path, not the CPU, should set the rate.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::blast_aead::cpu;
use crate::record::{Md, RunDir};
use crate::scratch::{make_file, watch_until_exit, Scratch, Server};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// File size to download, e.g. 2GiB.
    #[arg(long, default_value = "2GiB", value_parser = |s: &str| drsftp_tune::parse_size(s).map_err(|e| e.to_string()))]
    size: u64,
    /// Stream counts (`-p`), comma-separated.
    #[arg(long, default_value = "1,4", value_delimiter = ',')]
    streams: Vec<u32>,
    /// Runs of each (mode, -p); the report uses the median rate.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Scratch directory for the file and the copies (two times --size on disk).
    #[arg(long, default_value = "/var/tmp")]
    work: PathBuf,
    /// The drsftp binary [default: next to drsftp-bench].
    #[arg(long = "drsftp", value_name = "PATH")]
    pub(crate) drsftp: Option<PathBuf>,
    /// In a 2-host lab named `tls` (needs root) instead of on loopback.
    #[arg(long)]
    lab: bool,
    /// Bottleneck rate of the `--lab` link.
    #[arg(long, default_value = "1gbit", value_parser = |s: &str| drsftp_tune::parse_rate(s).map(|r| r as u64).map_err(|e| e.to_string()))]
    lab_rate: u64,
    /// Round-trip time of the `--lab` link.
    #[arg(long, default_value = "50ms", value_parser = |s: &str| drsftp_tune::parse_duration(s).map_err(|e| e.to_string()))]
    lab_rtt: Duration,
}

/// The lab `--lab` brings up (and down, also on failure: [`drsftp_lab::Lab`] on drop, its watchdog if we die).
const LAB_NAME: &str = "tls";

/// One copy's measurements.
#[derive(Debug, Clone)]
struct Sample {
    tls: bool,
    streams: u32,
    run: usize,
    seconds: f64,
    client_peak: u64,
    client_mean: u64,
    server_peak: u64,
    server_mean: u64,
    /// CPU seconds (user + system) of the copy process, and of the server during the copy.
    client_cpu: f64,
    server_cpu: f64,
}

impl Sample {
    fn mbps(&self, size: u64) -> f64 {
        size as f64 * 8.0 / self.seconds / 1e6
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn run(a: &Args, rec: Option<&RunDir>) -> Result<()> {
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
    let (samples, place) = if a.lab {
        lab(a, &exe)?
    } else {
        (loopback(a, &exe)?, "127.0.0.1 (loopback)".to_string())
    };
    let report = report(a, &place, &samples);
    println!("{report}");
    if let Some(r) = rec {
        let mut csv = String::from(
            "tls,streams,run,seconds,mbps,client_rss_peak_kib,client_rss_mean_kib,server_rss_peak_kib,server_rss_mean_kib,client_cpu_s,server_cpu_s\n",
        );
        for s in &samples {
            csv += &format!(
                "{},{},{},{:.3},{:.1},{},{},{},{},{:.2},{:.2}\n",
                s.tls,
                s.streams,
                s.run,
                s.seconds,
                s.mbps(a.size),
                s.client_peak,
                s.client_mean,
                s.server_peak,
                s.server_mean,
                s.client_cpu,
                s.server_cpu
            );
        }
        r.write(crate::RESULTS_CSV, &csv)?;
        r.report(&report)?;
    }
    Ok(())
}

/// `drsftp serve` and `drsftp copy` on 127.0.0.1, a random file in `--work`.
fn loopback(a: &Args, exe: &Path) -> Result<Vec<Sample>> {
    let dir = Scratch(
        tempfile::Builder::new()
            .prefix("drsftp-bench-tls-")
            .tempdir_in(&a.work)
            .with_context(|| format!("scratch directory in {}", a.work.display()))?
            .keep(),
    );
    let root = dir.0.join("srv");
    std::fs::create_dir_all(&root)?;
    eprintln!("tls: writing a {} byte file", a.size);
    make_file(&root.join("src.bin"), a.size)?;
    let (tls_args, fp) = crate::blast_aead::certificate(&dir.0, &["127.0.0.1"])?;
    let mut child = Command::new(exe)
        .args(["serve", "--print-addr", "--listen", "127.0.0.1:0", "--root"])
        .arg(&root)
        .args(["--user", "bench:bench-pw"])
        .args(&tls_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("spawning drsftp serve")?;
    let out = child.stdout.take().context("serve stdout")?;
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .with_context(|| format!("drsftp serve said {line:?}"))?
        .to_string();
    let url = format!("ftp://bench:bench-pw@{addr}/src.bin");
    let dst = dir.0.join("dl.bin");
    let copy = |p: u32, tls: bool| {
        let mut cmd = Command::new(exe);
        cmd.args(["copy", "--quiet", "-p", &p.to_string()])
            .args(mode_args(tls, &fp))
            .arg(&url)
            .arg(&dst);
        cmd
    };
    rounds(a, server.0.id(), &dst, copy)
}

/// `drsftp serve` in lab host 1, `drsftp copy` in host 2, a sparse file on /dev/shm.
fn lab(a: &Args, exe: &Path) -> Result<(Vec<Sample>, String)> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow::anyhow!("lab unavailable: {e}"))?;
    let rtt_ms = a.lab_rtt.as_millis() as u64;
    let mut fp = String::new();
    let b = crate::blast::Bench::up_named(LAB_NAME, exe, rtt_ms, a.lab_rate, 0.0, |dir| {
        let (args, f) = crate::blast_aead::certificate(dir, &["198.18.0.1"])?;
        fp = f;
        Ok(args)
    })?;
    b.file("src.bin", a.size)?;
    let dst = b.dir.path().join("out/dl.bin");
    let copy = |p: u32, tls: bool| {
        let p = p.to_string();
        let mut args = vec!["-p", &p, "--timeout", "120s"];
        let extra = mode_args(tls, &fp);
        args.extend(extra.iter().map(String::as_str));
        b.copy_cmd("src.bin", "dl.bin", &args)
    };
    let samples = rounds(a, b.server.id(), &dst, copy)?;
    let place = format!("lab `{LAB_NAME}` host 1 → host 2, {}", b.desc);
    Ok((samples, place))
}

/// The `drsftp copy` arguments of a mode.
fn mode_args(tls: bool, fp: &str) -> Vec<String> {
    let v: &[&str] = if tls {
        &["--tls", "require", "--tls-fingerprint", fp]
    } else {
        &["--tls", "off"]
    };
    v.iter().map(|s| s.to_string()).collect()
}

/// `--repeat` rounds over `--streams`, cleartext then TLS at each step (interleaved, so drift on the shared machine
/// hits both alike); `copy(p, tls)` makes the command that downloads into `dst`.
fn rounds(
    a: &Args,
    server: u32,
    dst: &Path,
    copy: impl Fn(u32, bool) -> Command,
) -> Result<Vec<Sample>> {
    let mut samples = vec![];
    for run in 0..a.repeat {
        for &p in &a.streams {
            for tls in [false, true] {
                let _ = std::fs::remove_file(dst);
                let mut cmd = copy(p, tls);
                cmd.stdin(Stdio::null()).stdout(Stdio::null());
                let s = measure(cmd, server, tls, p, run)?;
                let len = std::fs::metadata(dst).map(|m| m.len()).ok();
                let _ = std::fs::remove_file(dst);
                if len != Some(a.size) {
                    bail!(
                        "-p {p} tls={tls}: the copy is {len:?} bytes, not {}",
                        a.size
                    );
                }
                eprintln!(
                    "tls: run {run} -p {p} {}: {:.1} Mbit/s, client peak {} MiB, server peak {} MiB (load {})",
                    if tls { "TLS" } else { "cleartext" },
                    s.mbps(a.size),
                    s.client_peak >> 10,
                    s.server_peak >> 10,
                    crate::blast::load()
                );
                samples.push(s);
            }
        }
    }
    Ok(samples)
}

/// Runs one copy, sampling both processes' RSS every 20 ms until it exits.
fn measure(mut cmd: Command, server: u32, tls: bool, streams: u32, run: usize) -> Result<Sample> {
    let s0 = cpu(server).map_or(0.0, |c| c.0);
    let t = Instant::now();
    let mut c = cmd
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning drsftp copy")?;
    let pid = c.id();
    let w = watch_until_exit(pid, || rss_kib(pid), || rss_kib(server));
    let (cs, ss, client_cpu) = (w.client_rss, w.server_rss, w.client_cpu);
    let status = c.wait()?;
    let server_cpu = cpu(server).map_or(0.0, |c| c.0) - s0;
    let seconds = t.elapsed().as_secs_f64();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = c.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        bail!("drsftp copy -p {streams} (tls={tls}) failed: {err}");
    }
    let peak = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    let mean = |v: &[u64]| v.iter().sum::<u64>() / v.len().max(1) as u64;
    Ok(Sample {
        tls,
        streams,
        run,
        seconds,
        client_peak: peak(&cs),
        client_mean: mean(&cs),
        server_peak: peak(&ss),
        server_mean: mean(&ss),
        client_cpu,
        server_cpu,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n => v[n / 2],
    }
}

fn report(a: &Args, place: &str, samples: &[Sample]) -> String {
    let mut md = Md::default();
    md.line("# TLS (PROT P) vs cleartext download");
    md.line("");
    md.line(format!(
        "`drsftp copy` of a {:.2} GiB file from `drsftp serve`, {place}, `--tls off` and `--tls require` \
         (pinned fingerprint) interleaved, {} run(s) each; median rate; memory is VmRSS sampled every 20 ms \
         during each copy (peak over runs, mean of the runs' means). Load average at the end: {}.",
        a.size as f64 / (1u64 << 30) as f64,
        a.repeat,
        crate::blast::load()
    ));
    md.line("");
    md.line("| -p | cleartext Mbit/s | TLS Mbit/s | TLS/clear | client RSS peak / mean MiB (clear → TLS) | server RSS peak / mean MiB (clear → TLS) |");
    md.line("|---:|---:|---:|---:|---|---|");
    for &p in &a.streams {
        let of = |tls: bool| -> Vec<&Sample> {
            samples
                .iter()
                .filter(|s| s.streams == p && s.tls == tls)
                .collect()
        };
        let (c, t) = (of(false), of(true));
        let rate = |v: &[&Sample]| median(v.iter().map(|s| s.mbps(a.size)).collect());
        let mem = |v: &[&Sample], peak: fn(&Sample) -> u64, mean: fn(&Sample) -> u64| {
            let pk = v.iter().map(|s| peak(s)).max().unwrap_or(0) >> 10;
            let mn = (v.iter().map(|s| mean(s)).sum::<u64>() / v.len().max(1) as u64) >> 10;
            format!("{pk} / {mn}")
        };
        let (rc, rt) = (rate(&c), rate(&t));
        md.line(format!(
            "| {p} | {rc:.0} | {rt:.0} | {:.2}× | {} → {} | {} → {} |",
            if rc > 0.0 { rt / rc } else { 0.0 },
            mem(&c, |s| s.client_peak, |s| s.client_mean),
            mem(&t, |s| s.client_peak, |s| s.client_mean),
            mem(&c, |s| s.server_peak, |s| s.server_mean),
            mem(&t, |s| s.server_peak, |s| s.server_mean),
        ));
    }
    // On a box whose cores both ends (and other work) share, the rate follows the CPU a byte costs; CPU seconds
    // move less with the load than wall time does.
    md.line("");
    md.line("CPU (user + system, both ends' processes) per GiB moved, median over runs:");
    md.line("");
    md.line("| -p | client CPU s/GiB (clear → TLS) | server CPU s/GiB (clear → TLS) | total (clear → TLS) | clear / TLS CPU |");
    md.line("|---:|---|---|---|---:|");
    let gib = a.size as f64 / (1u64 << 30) as f64;
    for &p in &a.streams {
        let per = |tls: bool, f: fn(&Sample) -> f64| {
            median(
                samples
                    .iter()
                    .filter(|s| s.streams == p && s.tls == tls)
                    .map(|s| f(s) / gib)
                    .collect(),
            )
        };
        let (cc, ct) = (per(false, |s| s.client_cpu), per(true, |s| s.client_cpu));
        let (sc, st) = (per(false, |s| s.server_cpu), per(true, |s| s.server_cpu));
        let (tc, tt) = (
            per(false, |s| s.client_cpu + s.server_cpu),
            per(true, |s| s.client_cpu + s.server_cpu),
        );
        md.line(format!(
            "| {p} | {cc:.2} → {ct:.2} | {sc:.2} → {st:.2} | {tc:.2} → {tt:.2} | {:.2}× |",
            if tt > 0.0 { tc / tt } else { 0.0 }
        ));
    }
    md.text().to_string()
}
