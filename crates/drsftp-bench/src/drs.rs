//! `drsftp-bench drs` (was `drsftp tune --bench-drs`): raw-TCP buffer-policy benchmark on a 2-host lab (host 1
//! sends to host 2): 64K, 212.5K, 16M, kernel autotuning and DRS, per congestion control; throughput, receive
//! buffer memory and their ratios as a Markdown table.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use drsftp_io::drs::{after_connect, connect_with, drs_max_buf, listen_with, DrsKnob, DrsStream};
use drsftp_lab::{Lab, LabConfig, TcpSettings};
use drsftp_sys::{sockopt, tcp_info::tcp_info};
use drsftp_tune::{format_size, parse_size, BufferPolicy, DrsConfig};

use crate::record::{Md, RunDir};
use crate::{PathArgs, RESULTS_CSV};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    path: PathArgs,
    /// Bytes per transfer (a transfer also stops after --secs).
    #[arg(long, default_value = "64M", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    size: u64,
    /// Time cap per transfer, seconds.
    #[arg(long, default_value_t = 12.0)]
    secs: f64,
    /// Congestion controls to run, comma-separated.
    #[arg(long, default_value = "cubic,bbr")]
    cc: String,
    /// How DRS imposes its window: clamp (TCP_WINDOW_CLAMP) or rcvbuf (SO_RCVBUF, the seeds' way).
    #[arg(long, default_value = "clamp")]
    knob: String,
    /// Concurrent connections per policy (memory when a server holds many transfers); memory columns are the sum
    /// over connections.
    #[arg(long, default_value_t = 1)]
    conns: usize,
    /// DRS computes the BDP from the minimum RTT (not the smoothed one).
    #[arg(long)]
    min_rtt: bool,
    /// DRS gain (buffer = gain x BDP estimate).
    #[arg(long, default_value_t = 2.0)]
    drs_gain: f64,
    /// Time-varying link profile: a built-in name (lanl-ny) or a profile file (drsftp-netem text format).
    /// Use --secs equal to the profile's repeat period so every policy sees a whole cycle.
    #[arg(long)]
    profile: Option<String>,
    /// Write each transfer's buffer/RTT/throughput trace as CSV into this directory.
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Receiver's tcp_rmem (e.g. "4096 131072 262144") to emulate a host whose autotuning cap is below BDP.
    #[arg(long)]
    rmem: Option<String>,
}

struct Row {
    policy: BufferPolicy,
    cc: String,
    bytes: u64,
    secs: f64,
    mean_buf: f64,
    max_buf: u64,
    rwnd_frac: f64,
}

impl Row {
    fn mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.secs / 1e6
    }
    fn per_mb(&self) -> f64 {
        self.mbps() / (self.mean_buf / (1 << 20) as f64).max(1e-9)
    }
}

/// Runs the benchmark; with `record`, the report, the rows as CSV and the traces (--trace) go into the run folder.
pub fn run(args: &Args, record: Option<&RunDir>) -> anyhow::Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let rtt = args.path.rtt.unwrap_or(Duration::from_millis(100));
    let rate = args.path.rate.map_or(100e6, |r| r as f64);
    let mut md = Md::default();
    let mut cfg = LabConfig::new(
        &format!("tb{}", std::process::id() % 100_000),
        2,
        rtt,
        rate as u64,
    );
    cfg.tcp = TcpSettings {
        rmem: args.rmem.clone(),
        ..TcpSettings::default()
    };
    if let Some(p) = &args.profile {
        let prof = drsftp_lab::load_profile(p)?;
        md.line(format!("profile:\n```\n{}```", prof.to_text()));
        cfg.profile = Some(prof);
    }
    let lab = Lab::up(cfg).context("lab up")?;
    md.line(format!(
        "# DRS benchmark: raw TCP, 1 stream, lab RTT {:?}, rate {:.0} Mbit/s",
        rtt,
        rate / 1e6
    ));
    md.line(format!("receiver host: {}", lab.tcp_report(2)));
    md.line(format!(
        "size {} per transfer, capped at {} s\n",
        format_size(args.size),
        args.secs
    ));
    md.line("| cc | buffer | Mbit/s | mean rcvbuf | max rcvbuf | Mbit/s per MB | rwnd-limited |");
    md.line("|---|---|---|---|---|---|---|");
    let policies = [
        BufferPolicy::Fixed(64 << 10),
        BufferPolicy::Fixed(217_600),
        BufferPolicy::Fixed(16 << 20),
        BufferPolicy::Kernel,
        BufferPolicy::Drs,
    ];
    let mut rows = vec![];
    for cc in args.cc.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        for &p in &policies {
            let knob = if args.knob == "rcvbuf" {
                DrsKnob::RecvBuf
            } else {
                DrsKnob::WindowClamp
            };
            let cap = Duration::from_secs_f64(args.secs);
            let n = args.conns.max(1);
            // N concurrent connections (a server holding many transfers): sum throughput and memory.
            let results: Vec<anyhow::Result<Row>> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..n)
                    .map(|i| {
                        let lab = &lab;
                        let trace = if i == 0 { args.trace.as_deref() } else { None };
                        sc.spawn(move || {
                            one(
                                lab,
                                p,
                                cc,
                                args.size,
                                cap,
                                trace,
                                args.drs_gain,
                                args.min_rtt,
                                knob,
                            )
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow!("bench thread panicked")))
                    })
                    .collect()
            });
            let mut r: Option<Row> = None;
            for x in results {
                let x = x?;
                r = Some(match r {
                    None => x,
                    Some(acc) => Row {
                        bytes: acc.bytes + x.bytes,
                        secs: acc.secs.max(x.secs),
                        mean_buf: acc.mean_buf + x.mean_buf,
                        max_buf: acc.max_buf + x.max_buf,
                        rwnd_frac: acc.rwnd_frac + x.rwnd_frac,
                        ..acc
                    },
                });
            }
            let mut r = r.expect("at least one connection");
            r.rwnd_frac /= n as f64;
            md.line(format!(
                "| {} | {} | {:.2} | {} | {} | {:.2} | {:.0}% |",
                r.cc,
                r.policy,
                r.mbps(),
                format_size(r.mean_buf as u64),
                format_size(r.max_buf),
                r.per_mb(),
                r.rwnd_frac * 100.0
            ));
            rows.push(r);
        }
    }
    md.line("");
    for cc in args.cc.split(',').map(str::trim) {
        let get = |p: BufferPolicy| rows.iter().find(|r| r.cc == cc && r.policy == p);
        let (Some(d), Some(o), Some(s), Some(k)) = (
            get(BufferPolicy::Drs),
            get(BufferPolicy::Fixed(16 << 20)),
            get(BufferPolicy::Fixed(64 << 10)),
            get(BufferPolicy::Kernel),
        ) else {
            continue;
        };
        md.line(format!(
            "{cc}: DRS/16M throughput {:.3}, DRS/16M memory {:.3}, Mbit/s-per-MB DRS/16M {:.1}x, DRS/64K throughput \
             {:.1}x, kernel/16M throughput {:.3} memory {:.3}",
            d.mbps() / o.mbps(),
            d.mean_buf / o.mean_buf,
            d.per_mb() / o.per_mb(),
            d.mbps() / s.mbps(),
            k.mbps() / o.mbps(),
            k.mean_buf / o.mean_buf
        ));
    }
    drop(lab);
    if let Some(run) = record {
        let mut csv = String::from(
            "cc,buffer,bytes,seconds,mbps,mean_rcvbuf,max_rcvbuf,mbps_per_mb,rwnd_limited\n",
        );
        for r in &rows {
            let _ = writeln!(
                csv,
                "{},{},{},{:.3},{:.3},{:.0},{},{:.3},{:.4}",
                r.cc,
                r.policy,
                r.bytes,
                r.secs,
                r.mbps(),
                r.mean_buf,
                r.max_buf,
                r.per_mb(),
                r.rwnd_frac
            );
        }
        run.write(RESULTS_CSV, &csv)?;
        if let Some(dir) = &args.trace {
            for r in &rows {
                run.add(&dir.join(trace_name(&r.cc, r.policy)))?;
            }
        }
        run.report(md.text())?;
    }
    Ok(())
}

fn trace_name(cc: &str, policy: BufferPolicy) -> String {
    format!("drs-trace-{cc}-{policy}.csv")
}

#[allow(clippy::too_many_arguments)]
fn one(
    lab: &Lab,
    policy: BufferPolicy,
    cc: &str,
    size: u64,
    cap: Duration,
    trace: Option<&std::path::Path>,
    gain: f64,
    min_rtt: bool,
    knob: DrsKnob,
) -> anyhow::Result<Row> {
    let a2 = lab.addr(2);
    let limits = lab.run_in(2, sockopt::buf_limits)?.context("limits")?;
    let max = drs_max_buf(&limits, 16 << 20, true);
    let listener: TcpListener = lab
        .run_in(2, move || {
            listen_with(SocketAddr::from((a2, 0)), policy, &limits, max)
        })?
        .context("listen")?;
    let port = listener.local_addr()?.port();
    let rx = std::thread::spawn(
        move || -> std::io::Result<(u64, f64, f64, u64, Vec<drsftp_io::drs::TraceRow>)> {
            let (mut s, _) = listener.accept()?;
            let initial = 64 << 10;
            // Under Drs: the buffer is raised now (late), to a ceiling the window scale allows.
            let ceiling = after_connect(&s, policy, &limits, max, initial, knob)?;
            let dcfg = DrsConfig {
                initial_buf: initial,
                max_buf: if ceiling > 0 {
                    ceiling.max(initial)
                } else {
                    max
                },
                probes: false,
                gain,
                bdp_min_rtt: min_rtt,
                ..DrsConfig::default()
            };
            let t0 = Instant::now();
            let mut drs = DrsStream::new(t0, policy, dcfg, limits).with_knob(knob);
            let mut buf = vec![0u8; 1 << 18];
            let (mut got, mut area, mut maxb) = (0u64, 0.0f64, 0u64);
            let mut last = t0;
            loop {
                let n = s.read(&mut buf)?;
                let now = Instant::now();
                // Receive memory bound: the smaller of the buffer (halved: the kernel doubles it) and the
                // window clamp (what DRS moves in clamp mode).
                let e = std::io::Error::other;
                let cur = (sockopt::recv_buf(&s).map_err(e)? / 2)
                    .min(sockopt::window_clamp(&s).map_err(e)?) as u64;
                area += cur as f64 * now.duration_since(last).as_secs_f64();
                maxb = maxb.max(cur);
                last = now;
                if n == 0 {
                    break;
                }
                got += n as u64;
                drs.on_read(&s, now, n as u64)?;
            }
            let secs = last.duration_since(t0).as_secs_f64().max(1e-6);
            Ok((got, secs, area / secs, maxb, drs.trace().to_vec()))
        },
    );
    let cc2 = cc.to_string();
    let sender: TcpStream = lab
        .run_in(1, move || -> std::io::Result<TcpStream> {
            // Only a fixed policy touches the sender's buffers; otherwise send-side autotuning stays on.
            let p = if let BufferPolicy::Fixed(_) = policy {
                policy
            } else {
                BufferPolicy::Kernel
            };
            let l1 = sockopt::buf_limits().map_err(std::io::Error::other)?;
            connect_with(SocketAddr::from((a2, port)), p, &l1, max, Some(&cc2))
        })?
        .context("connect")?;
    let mut c = sender;
    let chunk = vec![0x5au8; 1 << 18];
    let t0 = Instant::now();
    let mut sent = 0u64;
    let before = tcp_info(&c)?;
    while sent < size && t0.elapsed() < cap {
        let n = (size - sent).min(chunk.len() as u64) as usize;
        c.write_all(&chunk[..n])?;
        sent += n as u64;
    }
    let after = tcp_info(&c)?;
    c.shutdown(std::net::Shutdown::Write)?;
    let (bytes, secs, mean_buf, max_buf, rows) =
        rx.join().map_err(|_| anyhow!("receiver panicked"))??;
    if let Some(dir) = trace {
        let f = std::fs::File::create(dir.join(trace_name(cc, policy)))?;
        drsftp_io::drs::write_trace_csv(std::io::BufWriter::new(f), &rows)?;
    }
    let busy = after
        .busy_time
        .saturating_sub(before.busy_time)
        .as_secs_f64();
    let rwnd = after
        .rwnd_limited
        .saturating_sub(before.rwnd_limited)
        .as_secs_f64();
    Ok(Row {
        policy,
        cc: cc.to_string(),
        bytes,
        secs,
        mean_buf,
        max_buf,
        rwnd_frac: if busy > 0.0 { rwnd / busy } else { 0.0 },
    })
}
