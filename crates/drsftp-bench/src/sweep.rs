//! `drsftp-bench sweep` (was `drsftp tune --sweep`): seed 001's calibration sweep (Table 2 style) on a 2-host lab
//! link with raw TCP: throughput for every buffer x stream count, the saturation point per buffer, and C1', C2
//! fitted from them.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use drsftp_io::drs::{connect_with, listen_with};
use drsftp_lab::{Lab, LabConfig};
use drsftp_sys::sockopt;
use drsftp_tune::{fit, format_size, parse_size, saturation_point, BufferPolicy, FitPoint, Model};

use crate::record::{Md, RunDir};
use crate::{PathArgs, RESULTS_CSV};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    path: PathArgs,
    /// Per-stream buffer sizes to measure, comma-separated.
    #[arg(long, default_value = "64K,128K,256K,512K,1M")]
    bufs: String,
    /// Stream counts to measure, comma-separated.
    #[arg(long, default_value = "1,2,3,4,6,8,12,16")]
    streams: String,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Saturation threshold (a larger stream count must add more than this fraction).
    #[arg(long, default_value_t = 0.05)]
    gain: f64,
}

/// Runs the sweep; with `record`, the report and every measurement as CSV go into the run folder.
pub fn run(args: &Args, record: Option<&RunDir>) -> anyhow::Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let rtt = args.path.rtt.unwrap_or(Duration::from_millis(20));
    let rate = args.path.rate.map_or(1e9, |r| r as f64);
    let bufs: Vec<u64> = args
        .bufs
        .split(',')
        .map(|b| parse_size(b.trim()))
        .collect::<Result<_, _>>()?;
    let streams: Vec<u32> = args
        .streams
        .split(',')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()?;
    let cfg = LabConfig::new(
        &format!("ts{}", std::process::id() % 100_000),
        2,
        rtt,
        rate as u64,
    );
    let lab = Lab::up(cfg).context("lab up")?;
    let mut md = Md::default();
    let mut csv = String::from("buffer_bytes,streams,mbps\n");
    let secs = Duration::from_secs_f64(args.secs);
    md.line(format!(
        "# Calibration sweep: raw TCP, lab RTT {rtt:?}, rate {:.0} Mbit/s, {} s per point\n",
        rate / 1e6,
        args.secs
    ));
    md.push("| B \\ P |");
    for p in &streams {
        md.push(format!(" {p} |"));
    }
    md.line(" P_o measured | P_o model (155, 0.86, scaled) |");
    md.line(format!("|---|{}---|---|", "---|".repeat(streams.len())));
    let model = Model::default();
    let mut pts = vec![];
    for &b in &bufs {
        let mut row = vec![];
        md.push(format!("| {} |", format_size(b)));
        for &p in &streams {
            let mbps = parallel(&lab, b, p, secs)?;
            md.push(format!(" {mbps:.0} |"));
            let _ = writeln!(csv, "{b},{p},{mbps:.3}");
            row.push((p, mbps));
        }
        let po = saturation_point(&row, args.gain).unwrap_or(1);
        let pm = model.streams_for(rtt, rate, b);
        md.line(format!(" {po} | {pm} |"));
        pts.push(FitPoint {
            rtt_ms: rtt.as_secs_f64() * 1e3,
            b_kb: b as f64 / 1024.0,
            p_o: po as f64,
        });
    }
    match fit(&pts) {
        Some(f) => md.line(format!(
            "\nfit: P_o = {:.1} * RTT / B^{:.3} (at {:.0} Mbit/s; seed: 155, 0.86 at 1 Gbit/s); R^2 {:.3}, mean error {:.1}%, max {:.1}%",
            f.model.c1, f.model.c2, rate / 1e6, f.r2, f.mean_rel_err * 100.0, f.max_rel_err * 100.0
        )),
        None => md.line("\nfit: not enough distinct points"),
    }
    drop(lab);
    if let Some(run) = record {
        run.write(RESULTS_CSV, &csv)?;
        run.report(md.text())?;
    }
    Ok(())
}

/// `p` streams with fixed buffers `b` from host 1 to host 2 for `dur`; aggregate Mbit/s.
fn parallel(lab: &Lab, b: u64, p: u32, dur: Duration) -> anyhow::Result<f64> {
    let a2 = lab.addr(2);
    let policy = BufferPolicy::Fixed(b);
    let limits = lab.run_in(2, sockopt::buf_limits)?.context("limits")?;
    let listener = lab.run_in(2, move || {
        listen_with(SocketAddr::from((a2, 0)), policy, &limits, b)
    })??;
    let port = listener.local_addr()?.port();
    let rx = std::thread::spawn(move || -> std::io::Result<u64> {
        let mut hs = vec![];
        for _ in 0..p {
            let (mut s, _) = listener.accept()?;
            hs.push(std::thread::spawn(move || -> std::io::Result<u64> {
                let mut buf = vec![0u8; 1 << 17];
                let mut got = 0u64;
                loop {
                    let n = s.read(&mut buf)?;
                    if n == 0 {
                        return Ok(got);
                    }
                    got += n as u64;
                }
            }));
        }
        let mut total = 0;
        for h in hs {
            total += h
                .join()
                .map_err(|_| std::io::Error::other("rx panicked"))??;
        }
        Ok(total)
    });
    let mut senders = vec![];
    for _ in 0..p {
        let l1 = lab.run_in(1, sockopt::buf_limits)?.context("limits")?;
        let c = lab.run_in(1, move || {
            connect_with(SocketAddr::from((a2, port)), policy, &l1, b, None)
        })??;
        senders.push(c);
    }
    let t0 = Instant::now();
    let hs: Vec<_> = senders
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || -> std::io::Result<()> {
                let chunk = vec![7u8; 1 << 17];
                while t0.elapsed() < dur {
                    c.write_all(&chunk)?;
                }
                c.shutdown(std::net::Shutdown::Write)
            })
        })
        .collect();
    for h in hs {
        h.join().map_err(|_| anyhow!("sender panicked"))??;
    }
    let bytes = rx.join().map_err(|_| anyhow!("receiver panicked"))??;
    Ok(bytes as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6)
}
