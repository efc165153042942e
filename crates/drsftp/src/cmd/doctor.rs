//! `drsftp doctor [URL]`: reads this host's TCP settings (buffer limits, window scaling, SACK, timestamps,
//! congestion controls), interface MTUs and the filesystem behind a path; with a URL, measures the RTT to the
//! server (median of TCP handshakes), runs a short data probe ([`probe`]: rate, and loss on an upload) and
//! reads the MTU and offloads of the interface that routes there. The path's rate for the BDP is `--rate`, else
//! the probe's when a window did not hold it, else 1 Gbit/s (said so). The decisions (which setting binds
//! first, the exact sysctl lines and `drsftp copy` options) are in [`rules`], pure and unit-tested; this file
//! only gathers facts and prints.

mod probe;
mod rules;

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rules::{HostFacts, Level, PathFacts, RouteFacts};
use serde::Serialize;

use super::units_arg;

/// Check this host's TCP settings (and, given a URL, the path to a server) for bulk transfers.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// A drsftp/GridFTP server: ftp://[user@]host[:port]/dir/ probes by uploading a scratch file there (then
    /// deleted; measures rate and loss), ftp://host/file by downloading that file (rate only). The RTT comes
    /// from TCP handshakes to the control port.
    pub url: Option<String>,
    /// The path's bottleneck rate, for the BDP (rate × RTT), e.g. 10gbit [default: the probe's rate when no
    /// window held it, else 1gbit].
    #[arg(long, value_parser = units_arg::rate)]
    pub rate: Option<u64>,
    /// Seconds of data for the probe (0: no probe).
    #[arg(long, default_value_t = 3.0)]
    pub probe_secs: f64,
    /// Most bytes the probe moves.
    #[arg(long, default_value = "1G", value_parser = units_arg::size)]
    pub probe_bytes: u64,
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
        // Mode 0444 inside a non-initial network namespace (the value is global there).
        core_mem_settable: std::fs::metadata("/proc/sys/net/core/rmem_max")
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o200 != 0),
        route: None,
    }
}

fn resolve(url: &crate::url::FtpUrl) -> Result<SocketAddr> {
    (url.host.as_str(), url.port)
        .to_socket_addrs()
        .with_context(|| format!("resolve {}", url.host))?
        .next()
        .context("no address")
}

/// The interface towards `peer`: name, MTU (sysfs) and offloads (ethtool ioctls).
fn route_facts(peer: std::net::IpAddr) -> Option<RouteFacts> {
    let local = probe::local_addr_towards(peer)?;
    let interface = drsftp_sys::ethtool::interface_of(local)?;
    let o = drsftp_sys::ethtool::offloads(&interface).unwrap_or_default();
    Some(RouteFacts {
        local_addr: local.to_string(),
        mtu: num(&format!("/sys/class/net/{interface}/mtu")).map(|m| m as u32),
        interface,
        tso: o.tso,
        gso: o.gso,
        gro: o.gro,
    })
}

/// The report with the probe's measurements.
#[derive(Serialize)]
struct Full {
    #[serde(flatten)]
    report: rules::Report,
    /// The data probe (absent with --probe-secs 0 or without a URL).
    probe: Option<probe::Probe>,
    /// Why there is no probe, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    probe_error: Option<String>,
}

/// Median of 5 TCP handshake times to the URL's control port (one handshake is one RTT plus the server's
/// accept, which is negligible).
fn measure_rtt(addr: SocketAddr) -> Result<Duration> {
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
    let mut host = host_facts(&args.path);
    let (mut probe, mut probe_error) = (None, None);
    let path = match &args.url {
        Some(u) => {
            let mut url = crate::url::parse_url(u)?;
            let addr = resolve(&url)?;
            let rtt = measure_rtt(addr)?;
            host.route = route_facts(addr.ip());
            if args.probe_secs > 0.0 {
                crate::credentials::fill(&mut url)?;
                match probe::run(&url, args.probe_secs, args.probe_bytes) {
                    Ok(p) => probe = Some(p),
                    Err(e) => probe_error = Some(format!("{e:#}")),
                }
            }
            let (rate_bps, rate_source) = match (args.rate, &probe) {
                (Some(r), _) => (r as f64, "flag"),
                (None, Some(p)) if !p.window_limited => (p.rate_bps, "probe"),
                _ => (1e9, "assumed"),
            };
            Some(PathFacts {
                // A loopback RTT of a few µs would make every BDP zero: count at least 100 µs.
                rtt_s: rtt.as_secs_f64().max(1e-4),
                rate_bps,
                rate_source,
                loss: args.loss.or(probe.as_ref().and_then(|p| p.loss)),
            })
        }
        None => None,
    };
    let report = rules::diagnose(&host, path);
    if args.json {
        let full = Full {
            report,
            probe,
            probe_error,
        };
        println!("{}", serde_json::to_string(&full)?);
        return Ok(());
    }
    if let (Some(p), Some(b)) = (report.path, report.bdp_bytes) {
        println!(
            "path: RTT {:.2} ms (measured), rate {} ({}), BDP {}",
            p.rtt_s * 1e3,
            drsftp_units::format_rate(p.rate_bps as u64),
            match p.rate_source {
                "flag" => "--rate",
                "probe" => "measured",
                _ => "assumed; give --rate",
            },
            drsftp_units::format_size(b)
        );
    }
    if let Some(p) = &probe {
        println!(
            "probe: {} of {} in {:.1} s = {}{}{}",
            p.direction,
            drsftp_units::format_size(p.bytes),
            p.seconds,
            drsftp_units::format_rate(p.rate_bps as u64),
            match p.loss {
                Some(l) => format!(", loss {:.3}%", l * 100.0),
                None => ", loss not observable on a download".into(),
            },
            if p.window_limited {
                ", held by a window or buffer (a lower bound on the path's rate)"
            } else {
                ""
            }
        );
    }
    if let Some(e) = &probe_error {
        println!("probe failed: {e}");
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
    Ok(())
}
