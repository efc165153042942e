//! `drsftp tune`: recommend a parallel-stream count and per-stream buffer for a path (seed 001's model) with the
//! reasoning, or fit the model's coefficients from measured optima (`--fit points.csv`); `drsftp tune calibrate URL`
//! measures them on a real path (`calibrate.rs`).

use std::time::Duration;

use anyhow::{bail, Context};
use drsftp_tune::{fit, FitPoint, Model, RecommendInput};
use drsftp_units::format_size;

use super::units_arg;

#[derive(clap::Args, Debug)]
#[group(id = "tune")]
pub struct Args {
    /// Round-trip time of the path, e.g. 50ms (a plain number is milliseconds).
    #[arg(long, value_parser = units_arg::duration)]
    rtt: Option<Duration>,
    /// Bottleneck rate, e.g. 1gbit, 100mbit, 622Mbps (bits; an upper-case B is bytes: 100MBps = 800 Mbit/s).
    #[arg(long, value_parser = |s: &str| units_arg::rate(s).map(|r| r as f64))]
    rate: Option<f64>,
    /// Memory budget for all streams' buffers, e.g. 64MB.
    #[arg(long, default_value = "64M", value_parser = units_arg::size)]
    mem: u64,
    /// Most streams to recommend.
    #[arg(long, default_value_t = 32)]
    max_streams: u32,
    /// Largest per-stream buffer; default: this namespace's net.core.rmem_max.
    #[arg(long, value_parser = units_arg::size)]
    max_buf: Option<u64>,
    /// Model coefficient C1' (streams x KB^C2 per ms of RTT, on --ref-rate).
    #[arg(long, default_value_t = 155.0)]
    c1: f64,
    /// Model exponent C2.
    #[arg(long, default_value_t = 0.86)]
    c2: f64,
    /// Rate the coefficients were measured at.
    #[arg(long, default_value = "1gbit", value_parser = |s: &str| units_arg::rate(s).map(|r| r as f64))]
    ref_rate: f64,
    /// Fit C1' and C2 from a CSV of measured optima: rtt_ms,buffer_kb,streams (header line optional).
    #[arg(long)]
    fit: Option<std::path::PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(subcommand)]
    sub: Option<super::calibrate::Sub>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(sub) = &args.sub {
        return super::calibrate::run(sub);
    }
    if let Some(path) = &args.fit {
        return run_fit(path, args.json);
    }
    let (Some(rtt), Some(rate)) = (args.rtt, args.rate) else {
        bail!("--rtt and --rate are required (or --fit FILE)");
    };
    let max_buf = match args.max_buf {
        Some(b) => b,
        None => drsftp_sys::sockopt::buf_limits()
            .map(|l| l.rmem_max as u64)
            .unwrap_or(4 << 20),
    };
    let model = Model {
        c1: args.c1,
        c2: args.c2,
        ref_rate_bps: args.ref_rate,
    };
    let inp = RecommendInput {
        rtt,
        rate_bps: rate,
        mem_budget: args.mem,
        max_streams: args.max_streams,
        max_buf,
    };
    let r = model.recommend(&inp);
    if args.json {
        let v = serde_json::json!({
            "streams": r.streams,
            "buffer_bytes": r.buf,
            "total_bytes": r.total_mem,
            "bdp_bytes": r.bdp,
            "saturates": r.saturates,
            "predicted_fraction": r.predicted_fraction,
            "model": {"c1": model.c1, "c2": model.c2, "ref_rate_bps": model.ref_rate_bps},
            "reasoning": r.reasoning,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "recommendation: -p {} --tcp-bs {} (total {})",
            r.streams,
            format_size(r.buf),
            format_size(r.total_mem)
        );
        for line in &r.reasoning {
            println!("  - {line}");
        }
    }
    Ok(())
}

fn run_fit(path: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut pts = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let nums: Option<Vec<f64>> = f.iter().map(|x| x.parse().ok()).collect();
        match nums {
            Some(n) if n.len() == 3 => pts.push(FitPoint {
                rtt_ms: n[0],
                b_kb: n[1],
                p_o: n[2],
            }),
            _ if i == 0 => continue, // header
            _ => bail!(
                "{}:{}: expected rtt_ms,buffer_kb,streams",
                path.display(),
                i + 1
            ),
        }
    }
    let f = fit(&pts).context("need at least two points with distinct buffer sizes")?;
    if json {
        let v = serde_json::json!({"c1": f.model.c1, "c2": f.model.c2, "points": f.n, "r2": f.r2,
            "mean_rel_err": f.mean_rel_err, "max_rel_err": f.max_rel_err});
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "fit over {} points: P_o = {:.1} * RTT / B^{:.3}  (R^2 {:.4}, mean error {:.1}%, max {:.1}%)",
            f.n,
            f.model.c1,
            f.model.c2,
            f.r2,
            f.mean_rel_err * 100.0,
            f.max_rel_err * 100.0
        );
        for p in &pts {
            println!(
                "  RTT {:>6.1} ms  B {:>7.1} KB  measured P_o {:>5.1}  model {:>5.1}",
                p.rtt_ms,
                p.b_kb,
                p.p_o,
                f.model.p_opt(p.rtt_ms, p.b_kb)
            );
        }
    }
    Ok(())
}
