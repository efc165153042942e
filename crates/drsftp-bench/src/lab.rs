//! `drsftp-bench lab` (was `drsftp lab bench` and drsftp-lab's `lab_bench` example): measures the lab's accuracy
//! and speed through real labs (RTT vs setting, TCP rate vs set rate, loss vs setting, forwarder ceiling) and the
//! 100 Mbit/s · 100 ms iperf3 baseline table; prints Markdown. The probes themselves (UDP ping, iperf3) are
//! drsftp-lab's `measure` module.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context};
use drsftp_lab::measure::{iperf3, udp_ping};
use drsftp_lab::{Lab, LabConfig, TcpSettings};
use drsftp_netem::{LossModel, QueueLimit};

use crate::record::{Md, RunDir};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// iperf3 seconds per run.
    #[arg(long, default_value_t = 10)]
    secs: u32,
    /// Comma list of parts: rtt,rate,loss,ceiling,baseline,perpacket (default all).
    #[arg(long, default_value = "rtt,rate,loss,ceiling,baseline,perpacket")]
    only: String,
    /// Also write the Markdown report here.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs the parts of `--only`; the report also goes to `--out` and, with `record`, into the run folder.
pub fn run(a: &Args, record: Option<&RunDir>) -> anyhow::Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let has = |p: &str| a.only.split(',').any(|x| x.trim() == p);
    let opts = BenchOptions {
        prefix: format!("b{}x", std::process::id() % 100_000),
        secs: a.secs,
        rtt: has("rtt"),
        rate: has("rate"),
        loss: has("loss"),
        ceiling: has("ceiling"),
        baseline: has("baseline"),
        perpacket: has("perpacket"),
    };
    let md = measure(&opts);
    if let Some(p) = &a.out {
        std::fs::write(p, &md).with_context(|| format!("write {}", p.display()))?;
    }
    if let Some(r) = record {
        r.report(&md)?;
    }
    Ok(())
}

/// What to run.
#[derive(Debug, Clone)]
struct BenchOptions {
    /// Lab name prefix (labs are `<prefix>0`, `<prefix>1`, ...).
    pub prefix: String,
    /// iperf3 duration per run (seconds).
    pub secs: u32,
    pub rtt: bool,
    pub rate: bool,
    pub loss: bool,
    pub ceiling: bool,
    pub baseline: bool,
    /// TCP through per-packet (no-GSO) labs: 1 Gbit/s · 100 ms rate, and per-segment Bernoulli loss under TCP.
    pub perpacket: bool,
}

/// Large per-host autotuning limits so TCP is never buffer-limited in accuracy runs.
fn big_tcp(cc: &str) -> TcpSettings {
    TcpSettings {
        congestion: Some(cc.into()),
        rmem: Some("4096 131072 67108864".into()),
        wmem: Some("4096 65536 67108864".into()),
    }
}

fn mbit(b: f64) -> String {
    format!("{:.2}", b / 1e6)
}

/// Run the selected measurements; every line is also printed as it is produced. Returns the Markdown report.
fn measure(opts: &BenchOptions) -> String {
    let mut md = Md::default();
    let mut n = 0usize;
    let mut out = |s: String| md.line(s);
    let mut next_name = || {
        n += 1;
        format!("{}{}", opts.prefix, n)
    };
    let t = opts.secs.to_string();
    let globals = format!(
        "global net.core.rmem_max={} wmem_max={} (cannot be set per namespace)",
        std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap_or_default()
            .trim(),
        std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .unwrap_or_default()
            .trim()
    );
    out(format!(
        "Host: {} cores; {globals}\n",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    ));

    if opts.rtt {
        out("## RTT vs setting (UDP echo, 100 probes, 64 B)\n".into());
        out("| set RTT | rate | mean | min | max | error of mean |".into());
        out("|---|---|---|---|---|---|".into());
        for (rtt_ms, rate) in [
            (20u64, 100_000_000u64),
            (100, 100_000_000),
            (100, 1_000_000_000),
            (300, 10_000_000),
        ] {
            let cfg = LabConfig::new(&next_name(), 2, Duration::from_millis(rtt_ms), rate);
            match Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                udp_ping(&lab, 1, 2, 100, Duration::from_millis(5)).map_err(|e| e.to_string())
            }) {
                Ok(p) => {
                    let m = p.mean().as_secs_f64() * 1e3;
                    out(format!(
                        "| {rtt_ms} ms | {} Mbit/s | {m:.3} ms | {:.3} ms | {:.3} ms | {:+.2} % |",
                        rate / 1_000_000,
                        p.min().as_secs_f64() * 1e3,
                        p.max().as_secs_f64() * 1e3,
                        (m / rtt_ms as f64 - 1.0) * 100.0
                    ));
                }
                Err(e) => out(format!("| {rtt_ms} ms | {rate} | error: {e} | | | |")),
            }
        }
        out(String::new());
    }

    if opts.rate {
        out(format!("## Sustained rate vs set rate (iperf3 -t {t} -O 3, 1 stream, MTU 1500, queue 1 BDP, tcp_rmem/wmem max 64 MB)\n"));
        out("TCP goodput excludes IP+TCP headers (52 B per 1500 B packet with timestamps), so ideal TCP goodput is 96.53 % of the IP-level rate the link enforces; `IP-level` = goodput × 1500/1448. UDP rows send 1472 B datagrams (1500 B IP packets) at 1.2× the set rate and report the received rate × 1500/1472 — a direct measure of the emulated serialisation rate.\n".into());
        out("| set rate | RTT | traffic | goodput Mbit/s | IP-level Mbit/s | error | retransmits / UDP lost | TCP settings (h1) |".into());
        out("|---|---|---|---|---|---|---|---|".into());
        for (rate, rtt_ms) in [
            (10_000_000u64, 100u64),
            (100_000_000, 100),
            (1_000_000_000, 100),
            (1_000_000_000, 20),
        ] {
            let bw = format!("{}", rate * 12 / 10);
            let variants: [(&str, Vec<&str>); 3] = [
                ("TCP cubic", vec!["-t", &t, "-O", "3", "-C", "cubic"]),
                ("TCP bbr", vec!["-t", &t, "-O", "3", "-C", "bbr"]),
                ("UDP 1.2x", vec!["-u", "-b", &bw, "-l", "1472", "-t", &t]),
            ];
            for (label, args) in variants {
                let mut cfg = LabConfig::new(&next_name(), 2, Duration::from_millis(rtt_ms), rate);
                cfg.tcp = big_tcp("bbr");
                let r = Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                    let r = iperf3(&lab, 1, 2, 5201, &args).map_err(|e| e.to_string());
                    r.map(|r| (r, lab.tcp_report(1).to_string()))
                });
                match r {
                    Ok((r, tcp)) => {
                        let udp = label.starts_with("UDP");
                        let ip = r.bits_per_second
                            * if udp {
                                1500.0 / 1472.0
                            } else {
                                1500.0 / 1448.0
                            };
                        let cc = if udp {
                            "-".to_string()
                        } else {
                            format!("socket cc={}; ns {tcp}", r.sender_cc)
                        };
                        out(format!(
                            "| {} Mbit/s | {rtt_ms} ms | {label} | {} | {} | {:+.2} % | {} | {cc} |",
                            rate / 1_000_000,
                            mbit(r.bits_per_second),
                            mbit(ip),
                            (ip / rate as f64 - 1.0) * 100.0,
                            if udp { r.udp_lost } else { r.retransmits },
                        ));
                    }
                    Err(e) => out(format!(
                        "| {rate} | {rtt_ms} | {label} | error: {e} | | | | |"
                    )),
                }
            }
        }
        out(String::new());
    }

    if opts.loss {
        out(format!("## Loss vs setting (iperf3 UDP 80 Mbit/s, 1000 B datagrams, -t {}, link 100 Mbit/s · 20 ms)\n", opts.secs + 2));
        out("| model | expected | packets | lost (iperf3) | measured | 3σ band | within 3σ | forwarder loss drops |".into());
        out("|---|---|---|---|---|---|---|---|".into());
        let models = [
            ("Bernoulli 1 %", LossModel::Bernoulli { p: 0.01 }),
            ("Bernoulli 0.1 %", LossModel::Bernoulli { p: 0.001 }),
            (
                "Gilbert-Elliott p_gb=0.2% p_bg=20% bad=50%",
                LossModel::GilbertElliott {
                    p_gb: 0.002,
                    p_bg: 0.2,
                    loss_good: 0.0,
                    loss_bad: 0.5,
                },
            ),
        ];
        for (label, model) in models {
            let mut cfg = LabConfig::new(&next_name(), 2, Duration::from_millis(20), 100_000_000);
            cfg.link.loss = model;
            cfg.link.seed = 1;
            let secs = (opts.secs + 2).to_string();
            let r = Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                let r = iperf3(
                    &lab,
                    1,
                    2,
                    5202,
                    &["-u", "-b", "80M", "-l", "1000", "-t", &secs],
                )
                .map_err(|e| e.to_string());
                std::thread::sleep(Duration::from_millis(400));
                r.map(|r| (r, lab.stats().links[0][1]))
            });
            match r {
                Ok((r, ls)) => {
                    let p = model.mean_loss();
                    let n = r.udp_packets.max(1) as f64;
                    let f = r.udp_lost as f64 / n;
                    // Bursty loss: variance inflated by the mean burst length (1/p_bg) for Gilbert-Elliott.
                    let infl = match model {
                        LossModel::GilbertElliott { p_bg, .. } => 1.0 / p_bg,
                        _ => 1.0,
                    };
                    let s3 = 3.0 * (p * (1.0 - p) * infl / n).sqrt();
                    out(format!(
                        "| {label} | {:.4} % | {} | {} | {:.4} % | ±{:.4} % | {} | {} of {} |",
                        p * 100.0,
                        r.udp_packets,
                        r.udp_lost,
                        f * 100.0,
                        s3 * 100.0,
                        if (f - p).abs() <= s3 { "yes" } else { "NO" },
                        ls.dropped_loss_pkts,
                        ls.sent_pkts
                    ));
                }
                Err(e) => out(format!("| {label} | error: {e} | | | | | | |")),
            }
        }
        out(String::new());
    }

    if opts.ceiling {
        out(format!("## Forwarder ceiling (unlimited rate, 0 delay, iperf3 TCP -t {t}, BBR, 64 MB autotuning limits)\n"));
        out(
            "| MTU | GSO (vnet hdr + TSO) | streams | goodput | GSO super-packets / packets read |"
                .into(),
        );
        out("|---|---|---|---|---|".into());
        for (mtu, gso, p) in [
            (1500u32, true, 1u32),
            (1500, false, 1),
            (9000, false, 1),
            (9000, true, 1),
            (1500, true, 4),
        ] {
            let mut cfg = LabConfig::new(&next_name(), 2, Duration::ZERO, 0);
            cfg.mtu = mtu;
            cfg.gso = gso;
            cfg.link.queue = QueueLimit::Unlimited;
            cfg.tcp = big_tcp("bbr");
            let ps = p.to_string();
            let r = Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                let r = iperf3(&lab, 1, 2, 5203, &["-t", &t, "-O", "2", "-P", &ps])
                    .map_err(|e| e.to_string());
                std::thread::sleep(Duration::from_millis(400));
                r.map(|r| (r, lab.stats()))
            });
            match r {
                Ok((r, st)) => out(format!(
                    "| {mtu} | {} | {p} | {} Gbit/s | {} / {} |",
                    if gso { "on" } else { "off" },
                    format_args!("{:.2}", r.bits_per_second / 1e9),
                    st.gso_pkts,
                    st.read_pkts
                )),
                Err(e) => out(format!("| {mtu} | {gso} | {p} | error: {e} | |")),
            }
        }
        out(String::new());
    }

    if opts.perpacket {
        out(format!("## Per-packet forwarding (no GSO, as used automatically for loss/reorder/duplicate): TCP cubic, iperf3 -t {t} -O 3\n"));
        out("| link | loss setting | goodput Mbit/s | IP-level Mbit/s | error vs set rate | packets through the link | lost by the model | measured loss | 3σ band | within 3σ | retransmits | drops in tun0 before the link | TCP settings (h1) |".into());
        out("|---|---|---|---|---|---|---|---|---|---|---|---|---|".into());
        for (rate, p) in [(1_000_000_000u64, 0.0f64), (100_000_000, 0.001)] {
            let mut cfg = LabConfig::new(&next_name(), 2, Duration::from_millis(100), rate);
            cfg.gso = false;
            cfg.tcp = big_tcp("bbr");
            if p > 0.0 {
                cfg.link.loss = LossModel::Bernoulli { p };
            }
            let r = Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                let r = iperf3(&lab, 1, 2, 5205, &["-t", &t, "-O", "3", "-C", "cubic"])
                    .map_err(|e| e.to_string());
                std::thread::sleep(Duration::from_millis(400));
                r.map(|r| {
                    let d: u64 = lab.tun_tx_dropped().iter().sum();
                    (r, lab.stats().links[0][1], lab.tcp_report(1).to_string(), d)
                })
            });
            match r {
                Ok((r, ls, tcp, drops)) => {
                    let ip = r.bits_per_second * 1500.0 / 1448.0;
                    let n = ls.sent_pkts.max(1) as f64;
                    let f = ls.dropped_loss_pkts as f64 / n;
                    let s3 = 3.0 * (p * (1.0 - p) / n).sqrt();
                    out(format!(
                        "| {} Mbit/s · 100 ms | {} % | {} | {} | {} | {} | {} | {:.4} % | ±{:.4} % | {} | {} | {drops} | socket cc={}; ns {tcp} |",
                        rate / 1_000_000,
                        p * 100.0,
                        mbit(r.bits_per_second),
                        mbit(ip),
                        if p > 0.0 {
                            "n/a (loss-limited)".to_string()
                        } else {
                            format!("{:+.2} %", (ip / rate as f64 - 1.0) * 100.0)
                        },
                        ls.sent_pkts,
                        ls.dropped_loss_pkts,
                        f * 100.0,
                        s3 * 100.0,
                        if (f - p).abs() <= s3 { "yes" } else { "NO" },
                        r.retransmits,
                        r.sender_cc,
                    ));
                }
                Err(e) => out(format!("| {rate} | {p} | error: {e} | | | | | | | | | | |")),
            }
        }
        out(String::new());
    }

    if opts.baseline {
        out(format!("## Baseline: 100 Mbit/s · 100 ms RTT (BDP 1.25 MB), queue 1 BDP, iperf3 -t {t} (no omit), MTU 1500\n"));
        out("| cc (sender/receiver socket) | case | iperf3 args (+ -C cc) | goodput | retransmits | TCP settings (both hosts) |".into());
        out("|---|---|---|---|---|---|".into());
        for cc in ["cubic", "bbr"] {
            // `-w 16M` cannot work here: SO_RCVBUF/SO_SNDBUF are capped by the global rmem_max/wmem_max (4 MB on this
            // machine) and iperf3 aborts. Two stand-ins: the largest -w allowed, and a 16 MB buffer from the
            // per-namespace tcp_rmem/tcp_wmem defaults (not capped by rmem_max).
            let sixteen = TcpSettings {
                congestion: None,
                rmem: Some("4096 16777216 16777216".into()),
                wmem: Some("4096 16777216 16777216".into()),
            };
            for (case, args, tcp) in [
                ("fixed 64 KB window", vec!["-w", "64K"], None),
                ("kernel autotuning", vec![], None),
                ("16 MB window (-w 16M)", vec!["-w", "16M"], None),
                (
                    "4 MB window (largest -w under rmem_max)",
                    vec!["-w", "4M"],
                    None,
                ),
                (
                    "16 MB buffers via tcp_rmem/tcp_wmem default",
                    vec![],
                    Some(sixteen.clone()),
                ),
                ("4 streams × 64 KB", vec!["-P", "4", "-w", "64K"], None),
            ] {
                let mut cfg =
                    LabConfig::new(&next_name(), 2, Duration::from_millis(100), 100_000_000);
                if let Some(tcp) = tcp {
                    cfg.tcp = tcp;
                }
                // Per socket (iperf3 -C): cubic is not in this machine's tcp_allowed_congestion_control, so a
                // namespace cannot default to it.
                let mut a: Vec<&str> = vec!["-t", &t, "-C", cc];
                a.extend(args.iter());
                let r = Lab::up(cfg).map_err(|e| e.to_string()).and_then(|lab| {
                    let r = iperf3(&lab, 1, 2, 5204, &a).map_err(|e| e.to_string());
                    r.map(|r| (r, lab.tcp_report(1).to_string()))
                });
                match r {
                    Ok((r, tcp)) => out(format!(
                        "| {}/{} | {case} | `{}` | {} Mbit/s | {} | {tcp} |",
                        r.sender_cc,
                        r.receiver_cc,
                        args.join(" "),
                        mbit(r.bits_per_second),
                        r.retransmits,
                        tcp = tcp.replace("cc=bbr", "ns default cc=bbr"),
                    )),
                    Err(e) => out(format!("| {cc} | {case} | | error: {e} | | |")),
                }
            }
        }
        out(String::new());
    }
    md.text().to_string()
}
