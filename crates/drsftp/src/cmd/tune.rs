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
    /// Benchmark buffer policies (64K, 212.5K, 16M, kernel, drs) with raw TCP on a 2-host WAN lab of --rtt and
    /// --rate (needs root); prints throughput, buffer memory and ratios. Markdown table on stdout.
    #[arg(long)]
    bench_drs: bool,
    /// Bench: bytes per transfer (a transfer also stops after --bench-secs).
    #[arg(long, default_value = "64M", value_parser = units_arg::size)]
    bench_size: u64,
    /// Bench: time cap per transfer, seconds.
    #[arg(long, default_value_t = 12.0)]
    bench_secs: f64,
    /// Bench: congestion controls to run, comma-separated.
    #[arg(long, default_value = "cubic,bbr")]
    bench_cc: String,
    /// Bench: how DRS imposes its window: clamp (TCP_WINDOW_CLAMP) or rcvbuf (SO_RCVBUF, the seeds' way).
    #[arg(long, default_value = "clamp")]
    bench_knob: String,
    /// Bench: concurrent connections per policy (memory when a server holds many transfers); memory columns
    /// are the sum over connections.
    #[arg(long, default_value_t = 1)]
    bench_conns: usize,
    /// Bench: DRS computes the BDP from the minimum RTT (not the smoothed one).
    #[arg(long)]
    bench_min_rtt: bool,
    /// Bench: DRS gain (buffer = gain x BDP estimate).
    #[arg(long, default_value_t = 2.0)]
    bench_drs_gain: f64,
    /// Bench: time-varying link profile: a built-in name (lanl-ny) or a profile file (drsftp-netem text format).
    /// Use --bench-secs equal to the profile's repeat period so every policy sees a whole cycle.
    #[arg(long)]
    bench_profile: Option<String>,
    /// Calibration sweep (seed 001 Table 2 style) on a lab link of --rtt/--rate with raw TCP: for each buffer in
    /// --sweep-bufs and stream count in --sweep-streams, measure throughput, find the saturation point per buffer
    /// and fit C1', C2. Needs root.
    #[arg(long)]
    sweep: bool,
    #[arg(long, default_value = "64K,128K,256K,512K,1M")]
    sweep_bufs: String,
    #[arg(long, default_value = "1,2,3,4,6,8,12,16")]
    sweep_streams: String,
    /// Sweep: seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    sweep_secs: f64,
    /// Sweep: saturation threshold (a larger stream count must add more than this fraction).
    #[arg(long, default_value_t = 0.05)]
    sweep_gain: f64,
    /// Bench: write each transfer's buffer/RTT/throughput trace as CSV into this directory.
    #[arg(long)]
    bench_trace: Option<std::path::PathBuf>,
    /// Bench: receiver's tcp_rmem (e.g. "4096 131072 262144") to emulate a host whose autotuning cap is below BDP.
    #[arg(long)]
    bench_rmem: Option<String>,
    #[command(flatten)]
    gridftp: super::bench_gridftp::Args,
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
    if args.bench_drs {
        return bench::run(&args);
    }
    if args.gridftp.bench_gridftp {
        return super::bench_gridftp::run(&args.gridftp, args.rtt, args.rate);
    }
    if args.sweep {
        return bench::sweep(&args);
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

/// `--bench-drs`: raw-TCP buffer-policy benchmark on a 2-host lab (host 1 sends to host 2).
mod bench {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    use anyhow::{anyhow, Context};
    use drsftp_io::drs::{
        after_connect, connect_with, drs_max_buf, listen_with, DrsKnob, DrsStream,
    };
    use drsftp_lab::{Lab, LabConfig, TcpSettings};
    use drsftp_sys::{sockopt, tcp_info::tcp_info};
    use drsftp_tune::{format_size, BufferPolicy, DrsConfig};

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

    pub fn run(args: &super::Args) -> anyhow::Result<()> {
        drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
        let rtt = args.rtt.unwrap_or(Duration::from_millis(100));
        let rate = args.rate.unwrap_or(100e6);
        let mut cfg = LabConfig::new(
            &format!("tb{}", std::process::id() % 100_000),
            2,
            rtt,
            rate as u64,
        );
        cfg.tcp = TcpSettings {
            rmem: args.bench_rmem.clone(),
            ..TcpSettings::default()
        };
        if let Some(p) = &args.bench_profile {
            let prof = match drsftp_netem::Profile::builtin(p) {
                Some(b) => b,
                None => drsftp_netem::Profile::parse(
                    &std::fs::read_to_string(p).with_context(|| format!("reading {p}"))?,
                )
                .map_err(|e| anyhow!("{p}: {e}"))?,
            };
            println!("profile:\n```\n{}```", prof.to_text());
            cfg.profile = Some(prof);
        }
        let lab = Lab::up(cfg).context("lab up")?;
        println!(
            "# DRS benchmark: raw TCP, 1 stream, lab RTT {:?}, rate {:.0} Mbit/s",
            rtt,
            rate / 1e6
        );
        println!("receiver host: {}", lab.tcp_report(2));
        println!(
            "size {} per transfer, capped at {} s\n",
            format_size(args.bench_size),
            args.bench_secs
        );
        println!(
            "| cc | buffer | Mbit/s | mean rcvbuf | max rcvbuf | Mbit/s per MB | rwnd-limited |"
        );
        println!("|---|---|---|---|---|---|---|");
        let policies = [
            BufferPolicy::Fixed(64 << 10),
            BufferPolicy::Fixed(217_600),
            BufferPolicy::Fixed(16 << 20),
            BufferPolicy::Kernel,
            BufferPolicy::Drs,
        ];
        let mut rows = vec![];
        for cc in args
            .bench_cc
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            for &p in &policies {
                let knob = if args.bench_knob == "rcvbuf" {
                    DrsKnob::RecvBuf
                } else {
                    DrsKnob::WindowClamp
                };
                let cap = Duration::from_secs_f64(args.bench_secs);
                let n = args.bench_conns.max(1);
                // N concurrent connections (a server holding many transfers): sum throughput and memory.
                let results: Vec<anyhow::Result<Row>> = std::thread::scope(|sc| {
                    let hs: Vec<_> = (0..n)
                        .map(|i| {
                            let lab = &lab;
                            let trace = if i == 0 {
                                args.bench_trace.as_deref()
                            } else {
                                None
                            };
                            sc.spawn(move || {
                                one(
                                    lab,
                                    p,
                                    cc,
                                    args.bench_size,
                                    cap,
                                    trace,
                                    args.bench_drs_gain,
                                    args.bench_min_rtt,
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
                println!(
                    "| {} | {} | {:.2} | {} | {} | {:.2} | {:.0}% |",
                    r.cc,
                    r.policy,
                    r.mbps(),
                    format_size(r.mean_buf as u64),
                    format_size(r.max_buf),
                    r.per_mb(),
                    r.rwnd_frac * 100.0
                );
                rows.push(r);
            }
        }
        println!();
        for cc in args.bench_cc.split(',').map(str::trim) {
            let get = |p: BufferPolicy| rows.iter().find(|r| r.cc == cc && r.policy == p);
            let (Some(d), Some(o), Some(s), Some(k)) = (
                get(BufferPolicy::Drs),
                get(BufferPolicy::Fixed(16 << 20)),
                get(BufferPolicy::Fixed(64 << 10)),
                get(BufferPolicy::Kernel),
            ) else {
                continue;
            };
            println!(
                "{cc}: DRS/16M throughput {:.3}, DRS/16M memory {:.3}, Mbit/s-per-MB DRS/16M {:.1}x, DRS/64K throughput \
                 {:.1}x, kernel/16M throughput {:.3} memory {:.3}",
                d.mbps() / o.mbps(),
                d.mean_buf / o.mean_buf,
                d.per_mb() / o.per_mb(),
                d.mbps() / s.mbps(),
                k.mbps() / o.mbps(),
                k.mean_buf / o.mean_buf
            );
        }
        drop(lab);
        Ok(())
    }

    pub fn sweep(args: &super::Args) -> anyhow::Result<()> {
        use drsftp_tune::{fit, parse_size, saturation_point, FitPoint, Model};
        drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
        let rtt = args.rtt.unwrap_or(Duration::from_millis(20));
        let rate = args.rate.unwrap_or(1e9);
        let bufs: Vec<u64> = args
            .sweep_bufs
            .split(',')
            .map(|b| parse_size(b.trim()))
            .collect::<Result<_, _>>()?;
        let streams: Vec<u32> = args
            .sweep_streams
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
        let secs = Duration::from_secs_f64(args.sweep_secs);
        println!(
            "# Calibration sweep: raw TCP, lab RTT {rtt:?}, rate {:.0} Mbit/s, {} s per point\n",
            rate / 1e6,
            args.sweep_secs
        );
        print!("| B \\ P |");
        for p in &streams {
            print!(" {p} |");
        }
        println!(" P_o measured | P_o model (155, 0.86, scaled) |");
        println!("|---|{}---|---|", "---|".repeat(streams.len()));
        let model = Model::default();
        let mut pts = vec![];
        for &b in &bufs {
            let mut row = vec![];
            print!("| {} |", format_size(b));
            for &p in &streams {
                let mbps = parallel(&lab, b, p, secs)?;
                print!(" {mbps:.0} |");
                std::io::stdout().flush()?;
                row.push((p, mbps));
            }
            let po = saturation_point(&row, args.sweep_gain).unwrap_or(1);
            let pm = model.streams_for(rtt, rate, b);
            println!(" {po} | {pm} |");
            pts.push(FitPoint {
                rtt_ms: rtt.as_secs_f64() * 1e3,
                b_kb: b as f64 / 1024.0,
                p_o: po as f64,
            });
        }
        match fit(&pts) {
            Some(f) => println!(
                "\nfit: P_o = {:.1} * RTT / B^{:.3} (at {:.0} Mbit/s; seed: 155, 0.86 at 1 Gbit/s); R^2 {:.3}, mean error {:.1}%, max {:.1}%",
                f.model.c1, f.model.c2, rate / 1e6, f.r2, f.mean_rel_err * 100.0, f.max_rel_err * 100.0
            ),
            None => println!("\nfit: not enough distinct points"),
        }
        drop(lab);
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
                        .min(sockopt::window_clamp(&s).map_err(e)?)
                        as u64;
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
            let f = std::fs::File::create(dir.join(format!("drs-trace-{cc}-{policy}.csv")))?;
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
}
