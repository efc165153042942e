//! `drsftp-bench tls`: the cost of `PROT P` on loopback. One `drsftp serve` with a throwaway certificate
//! (rcgen); `drsftp copy` downloads the same file with `--tls off` and `--tls require` (fingerprint-pinned), at
//! each `-p`, interleaved in the same run so both see the same machine. Reports throughput, the TLS/cleartext
//! ratio, and the resident memory (VmRSS from /proc, sampled every 20 ms) of the client and the server during
//! each copy: peak and mean. No root needed.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::record::{Md, RunDir};

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
    drsftp: Option<PathBuf>,
}

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
}

impl Sample {
    fn mbps(&self, size: u64) -> f64 {
        size as f64 * 8.0 / self.seconds / 1e6
    }
}

/// The server process; killed (by its pid) when dropped, also on failure.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scratch directory removed when dropped (holds two copies of a multi-GiB file).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Writes `size` bytes of xorshift noise (incompressible, fast) to `path`.
fn make_file(path: &Path, size: u64) -> Result<()> {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for c in buf.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(())
}

pub fn run(a: &Args, rec: Option<&RunDir>) -> Result<()> {
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
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
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])?;
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.key_pair.serialize_pem())?;
    let fp: String = drsftp_io::tls::fingerprint(ck.cert.der())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut child = Command::new(&exe)
        .args(["serve", "--print-addr", "--listen", "127.0.0.1:0", "--root"])
        .arg(&root)
        .args(["--user", "bench:bench-pw", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
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
    let mut samples = vec![];
    for run in 0..a.repeat {
        for &p in &a.streams {
            // Interleaved: cleartext then TLS at each step, so drift on the shared machine hits both alike.
            for tls in [false, true] {
                let _ = std::fs::remove_file(&dst);
                let mut cmd = Command::new(&exe);
                cmd.args(["copy", "--quiet", "-p", &p.to_string()]);
                if tls {
                    cmd.args(["--tls", "require", "--tls-fingerprint", &fp]);
                } else {
                    cmd.args(["--tls", "off"]);
                }
                cmd.arg(&url)
                    .arg(&dst)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null());
                let s = measure(cmd, server.0.id(), tls, p, run)?;
                if std::fs::metadata(&dst).map(|m| m.len()).ok() != Some(a.size) {
                    bail!("-p {p} tls={tls}: the copy is not {} bytes", a.size);
                }
                eprintln!(
                    "tls: run {run} -p {p} {}: {:.1} Mbit/s, client peak {} MiB, server peak {} MiB",
                    if tls { "TLS" } else { "cleartext" },
                    s.mbps(a.size),
                    s.client_peak >> 10,
                    s.server_peak >> 10
                );
                samples.push(s);
            }
        }
    }
    let _ = std::fs::remove_file(&dst);
    drop(server);
    let report = report(a, &samples);
    println!("{report}");
    if let Some(r) = rec {
        let mut csv = String::from(
            "tls,streams,run,seconds,mbps,client_rss_peak_kib,client_rss_mean_kib,server_rss_peak_kib,server_rss_mean_kib\n",
        );
        for s in &samples {
            csv += &format!(
                "{},{},{},{:.3},{:.1},{},{},{},{}\n",
                s.tls,
                s.streams,
                s.run,
                s.seconds,
                s.mbps(a.size),
                s.client_peak,
                s.client_mean,
                s.server_peak,
                s.server_mean
            );
        }
        r.write(crate::RESULTS_CSV, &csv)?;
        r.report(&report)?;
    }
    Ok(())
}

/// Runs one copy, sampling both processes' RSS every 20 ms until it exits.
fn measure(mut cmd: Command, server: u32, tls: bool, streams: u32, run: usize) -> Result<Sample> {
    let t = Instant::now();
    let mut c = cmd
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning drsftp copy")?;
    let pid = c.id();
    let (mut cs, mut ss) = (vec![], vec![]);
    let status = loop {
        if let Some(st) = c.try_wait()? {
            break st;
        }
        if let Some(v) = rss_kib(pid) {
            cs.push(v);
        }
        if let Some(v) = rss_kib(server) {
            ss.push(v);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
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
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n => v[n / 2],
    }
}

fn report(a: &Args, samples: &[Sample]) -> String {
    let mut md = Md::default();
    md.line("# TLS (PROT P) vs cleartext, loopback download");
    md.line("");
    md.line(format!(
        "`drsftp copy` of a {:.2} GiB file from `drsftp serve` on 127.0.0.1, `--tls off` and `--tls require` \
         (pinned fingerprint) interleaved, {} run(s) each; median rate; memory is VmRSS sampled every 20 ms \
         during each copy (peak over runs, mean of the runs' means).",
        a.size as f64 / (1u64 << 30) as f64,
        a.repeat
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
    md.text().to_string()
}
