//! `drsftp doctor [URL]`: reads this host's TCP settings (buffer limits, window scaling, SACK, timestamps,
//! congestion controls), interface MTUs and the filesystem behind a path; with a URL, measures the RTT to the
//! server (median of TCP handshakes) and takes the path's rate from `--rate` (default 1 Gbit/s) to get the BDP.
//! The decisions (which setting binds first, the exact sysctl lines and `drsftp copy` options) are in
//! [`rules`], pure and unit-tested; this file only gathers facts and prints. Interface offloads (TSO/GRO) are
//! not checked yet (they need ethtool ioctls).

mod rules;

use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rules::{HostFacts, Level, PathFacts};

use super::units_arg;

/// Check this host's TCP settings (and, given a URL, the path to a server) for bulk transfers.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A drsftp/GridFTP server, ftp://host[:port]/: its RTT is measured (TCP handshakes to the control port).
    pub url: Option<String>,
    /// The path's bottleneck rate, for the BDP (rate × RTT), e.g. 10gbit.
    #[arg(long, default_value = "1gbit", value_parser = units_arg::rate)]
    pub rate: u64,
    /// The path's loss rate if known, e.g. 0.1% (makes congestion-control advice firmer).
    #[arg(long, value_parser = drsftp_units::parse_probability)]
    pub loss: Option<f64>,
    /// The directory transfers read or write: its filesystem is reported.
    #[arg(long, default_value = ".")]
    pub path: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn num(p: &str) -> Option<u64> {
    read(p)?.parse().ok()
}

fn triple(p: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = read(p)?
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    (v.len() == 3).then(|| [v[0], v[1], v[2]])
}

fn flag(p: &str) -> Option<bool> {
    num(p).map(|v| v != 0)
}

fn words(p: &str) -> Vec<String> {
    read(p).map_or(vec![], |s| {
        s.split_whitespace().map(str::to_string).collect()
    })
}

/// The filesystem type of the mount holding `path` (longest mount-point prefix in /proc/self/mounts).
fn filesystem(path: &std::path::Path) -> Option<(String, String)> {
    let p = std::fs::canonicalize(path).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_, mnt, ty) = (f.next()?, f.next()?, f.next()?);
            // Mount points escape spaces as \040.
            let mnt = mnt.replace("\\040", " ");
            p.starts_with(&mnt).then(|| (mnt.len(), ty.to_string()))
        })
        .max_by_key(|(n, _)| *n)?;
    Some((p.display().to_string(), best.1))
}

fn host_facts(path: &std::path::Path) -> HostFacts {
    let mut mtus = vec![];
    if let Ok(dir) = std::fs::read_dir("/sys/class/net") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "lo" {
                continue;
            }
            if let Some(m) = num(&format!("/sys/class/net/{name}/mtu")) {
                mtus.push((name, m as u32));
            }
        }
    }
    mtus.sort();
    HostFacts {
        rmem_max: num("/proc/sys/net/core/rmem_max"),
        wmem_max: num("/proc/sys/net/core/wmem_max"),
        tcp_rmem: triple("/proc/sys/net/ipv4/tcp_rmem"),
        tcp_wmem: triple("/proc/sys/net/ipv4/tcp_wmem"),
        window_scaling: flag("/proc/sys/net/ipv4/tcp_window_scaling"),
        sack: flag("/proc/sys/net/ipv4/tcp_sack"),
        timestamps: flag("/proc/sys/net/ipv4/tcp_timestamps"),
        congestion: read("/proc/sys/net/ipv4/tcp_congestion_control"),
        available_congestion: words("/proc/sys/net/ipv4/tcp_available_congestion_control"),
        allowed_congestion: words("/proc/sys/net/ipv4/tcp_allowed_congestion_control"),
        mtus,
        filesystem: filesystem(path),
    }
}

/// Median of 5 TCP handshake times to the URL's control port (one handshake is one RTT plus the server's
/// accept, which is negligible).
fn measure_rtt(url: &str) -> Result<Duration> {
    let u = crate::url::parse_url(url)?;
    let addr = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", u.host))?
        .next()
        .context("no address")?;
    let mut samples = vec![];
    for _ in 0..5 {
        let t0 = Instant::now();
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .with_context(|| format!("connect {addr}"))?;
        samples.push(t0.elapsed());
        drop(s);
    }
    samples.sort();
    Ok(samples[2])
}

/// Run the checks and print them.
pub fn run(args: Args) -> Result<()> {
    let host = host_facts(&args.path);
    let path = match &args.url {
        Some(u) => {
            let rtt = measure_rtt(u)?;
            Some(PathFacts {
                // A loopback RTT of a few µs would make every BDP zero: count at least 100 µs.
                rtt_s: rtt.as_secs_f64().max(1e-4),
                rate_bps: args.rate as f64,
                loss: args.loss,
            })
        }
        None => None,
    };
    let report = rules::diagnose(&host, path);
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    if let (Some(p), Some(b)) = (report.path, report.bdp_bytes) {
        println!(
            "path: RTT {:.2} ms (measured), rate {} (--rate), BDP {}",
            p.rtt_s * 1e3,
            drsftp_units::format_rate(p.rate_bps as u64),
            drsftp_units::format_size(b)
        );
    }
    for f in &report.findings {
        let tag = match f.level {
            Level::Ok => "ok   ",
            Level::Note => "note ",
            Level::Warn => "warn ",
            Level::Limit => "LIMIT",
        };
        println!("{tag} {:<15} {}", f.topic, f.message);
        for fix in &f.fix {
            println!("      {:<15}   {fix}", "");
        }
    }
    println!("(interface offloads are not checked)");
    Ok(())
}
