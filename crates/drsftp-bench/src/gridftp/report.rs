//! The reporting half of `drsftp-bench gridftp`: per-run lines and CSV files, the markdown tables, the issue's target
//! ratios, the best-static comparison and the receive-window sparklines.

use super::*;

pub(super) fn describe(r: &Run) -> String {
    let head = format!(
        "{} {} {} {}{}",
        r.cc,
        r.streams.short(),
        format_size(r.size),
        r.policy,
        if r.conns > 1 {
            format!(" x{}", r.conns)
        } else {
            String::new()
        }
    );
    match &r.outcome {
        Outcome::Done(m) => format!(
            "{head}: {:.2} Mbit/s in {:.2} s, window mean {} peak {}, gauge {}, rwnd-limited {:.0}%, sender cc {}, retrans {}",
            m.mbps(),
            m.secs,
            format_size(m.mean_win as u64),
            format_size(m.peak_win),
            format_size(m.gauge_peak),
            m.rwnd_frac * 100.0,
            m.sender_cc,
            m.retrans
        ),
        Outcome::Skipped(why) => format!("{head}: skipped ({why})"),
        Outcome::Failed(e) => format!("{head}: FAILED: {e}"),
    }
}

pub(super) fn write_run_csv(
    runs: Option<&mut std::io::BufWriter<std::fs::File>>,
    series: Option<&mut std::io::BufWriter<std::fs::File>>,
    r: &Run,
) -> Result<()> {
    let key = format!(
        "{},{},{},{},{}",
        r.id,
        r.cc,
        r.streams.short(),
        r.size,
        r.policy
    );
    if let Some(w) = runs {
        match &r.outcome {
            Outcome::Done(m) => writeln!(
                w,
                "{key},{},{},ok,{},{:.4},{:.3},{:.0},{},{:.0},{:.0},{},{},{},{:.4},{:.4},{},{},{},{},",
                r.rep,
                r.conns,
                m.bytes,
                m.secs,
                m.mbps(),
                m.mean_win,
                m.peak_win,
                m.mean_ssthresh,
                m.mean_rb_half,
                m.peak_alloc,
                m.gauge_peak,
                m.per_mb().map(|v| format!("{v:.3}")).unwrap_or_default(),
                m.rwnd_frac,
                m.sndbuf_frac,
                m.retrans,
                m.sender_cc,
                m.peak_sndbuf_half,
                m.samples
            )?,
            Outcome::Skipped(why) => writeln!(
                w,
                "{key},{},{},skipped,,,,,,,,,,,,,,,,,{}",
                r.rep,
                r.conns,
                why.replace(',', ";")
            )?,
            Outcome::Failed(e) => writeln!(
                w,
                "{key},{},{},failed,,,,,,,,,,,,,,,,,{}",
                r.rep,
                r.conns,
                e.replace([',', '\n'], ";")
            )?,
        }
        w.flush()?;
    }
    if let (Some(w), Some(m)) = (series, r.done()) {
        for p in &m.series {
            writeln!(
                w,
                "{key},{:.3},{},{},{},{},{},{}",
                p.t, p.win, p.ssthresh, p.rb_half, p.alloc, p.bytes_rx, p.socks
            )?;
        }
        w.flush()?;
    }
    Ok(())
}

pub(super) struct Facts {
    pub(super) command: String,
    pub(super) machine: String,
    pub(super) load: String,
    pub(super) minutes: f64,
    pub(super) lab: String,
    pub(super) hosts: Vec<String>,
    pub(super) profile: Option<String>,
    pub(super) tun_drops: Vec<u64>,
    pub(super) conns: usize,
}

/// Repetitions of one (cc, streams, size, policy) combined: rate = sum of bytes / sum of seconds, memory = mean.
#[derive(Debug, Clone, Copy)]
pub(super) struct Agg {
    pub(super) mbps: f64,
    pub(super) mean_win: f64,
    pub(super) peak_win: u64,
    pub(super) rwnd: f64,
    pub(super) bytes: u64,
    pub(super) secs: f64,
}

impl Agg {
    pub(super) fn per_mb(&self) -> f64 {
        self.mbps / (self.mean_win / MIB).max(1e-9)
    }
}

pub(super) enum Cell {
    Val(Agg),
    Skipped,
    Failed,
    Missing,
}

pub(super) fn agg(runs: &[Run], cc: &str, st: Streams, size: u64, p: &Pol) -> Cell {
    let sel: Vec<&Run> = runs
        .iter()
        .filter(|r| r.cc == cc && r.streams == st && r.size == size && r.policy == *p)
        .collect();
    if sel.is_empty() {
        return Cell::Missing;
    }
    let done: Vec<&Measured> = sel.iter().filter_map(|r| r.done()).collect();
    if done.is_empty() {
        return if sel.iter().any(|r| matches!(r.outcome, Outcome::Failed(_))) {
            Cell::Failed
        } else {
            Cell::Skipped
        };
    }
    let n = done.len() as f64;
    let bytes: u64 = done.iter().map(|m| m.bytes).sum();
    let secs: f64 = done.iter().map(|m| m.secs).sum();
    Cell::Val(Agg {
        mbps: bytes as f64 * 8.0 / secs.max(1e-9) / 1e6,
        mean_win: done.iter().map(|m| m.mean_win).sum::<f64>() / n,
        peak_win: done.iter().map(|m| m.peak_win).max().unwrap_or(0),
        rwnd: done.iter().map(|m| m.rwnd_frac).sum::<f64>() / n,
        bytes,
        secs,
    })
}

pub(super) fn fmt_cell(c: &Cell, f: impl Fn(&Agg) -> String) -> String {
    match c {
        Cell::Val(a) => f(a),
        Cell::Skipped => "skip".into(),
        Cell::Failed => "FAIL".into(),
        Cell::Missing => "".into(),
    }
}

pub(super) fn mib(v: f64) -> String {
    format!("{:.2}", v / MIB)
}

pub(super) fn render(
    f: &Facts,
    runs: &[Run],
    sizes: &[u64],
    streams: &[Streams],
    ccs: &[String],
    pols: &[Pol],
) -> String {
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(
        w,
        "# GridFTP-level buffer benchmark (drsftp serve in h2 -> drsftp copy in h1)\n"
    );
    let _ = writeln!(w, "command: `{}`  ", f.command);
    let _ = writeln!(
        w,
        "machine: {}; load average {}; {:.1} min  ",
        f.machine, f.load, f.minutes
    );
    let _ = writeln!(w, "lab: {}  ", f.lab);
    for h in &f.hosts {
        let _ = writeln!(w, "{h}  ");
    }
    if let Some(p) = &f.profile {
        let _ = writeln!(
            w,
            "profile (every run starts at the period boundary):\n```\n{p}```"
        );
    }
    let _ = writeln!(
        w,
        "TUN ring drops outside the link model (non-zero = forwarder overloaded): {:?}  ",
        f.tun_drops
    );
    if f.conns > 1 {
        let _ = writeln!(
            w,
            "{} concurrent `drsftp copy` clients per run against one server; throughput = sum of bytes / longest \
             transfer time, memory = sum over all their data sockets (per connection = / {}).  ",
            f.conns, f.conns
        );
    }
    let _ = writeln!(
        w,
        "\nMeters: Mbit/s = file bytes x 8 / `seconds` of `drsftp copy --json` (first transfer command to end of \
         data; includes PASV/PORT/RETR round trips). window = sum over the receiver's data sockets of \
         `tcpi_rcv_wnd` (the window last advertised: receive memory promised to the sender; Linux never retracts \
         an advertised edge), read with sock_diag (as `ss -tmi`) every 20 ms; `mean` is its time mean over the \
         transfer, in MiB. Mbit/s per MiB uses the mean window. rwnd-limited = sender's \
         tcpi_rwnd_limited / tcpi_busy_time.\n"
    );
    let hdr = |w: &mut String, first: &str, extra: &[&str]| {
        let _ = write!(w, "| {first} |");
        for p in pols {
            let _ = write!(w, " {p} |");
        }
        for e in extra {
            let _ = write!(w, " {e} |");
        }
        let _ = writeln!(w);
        let _ = writeln!(w, "|---|{}", "---|".repeat(pols.len() + extra.len()));
    };
    let get = |cc: &str, st: Streams, size: u64, p: &Pol| agg(runs, cc, st, size, p);
    let over = pols.iter().find(|p| p.is(BufferPolicy::Fixed(16 << 20)));
    let kern = pols.iter().find(|p| p.is(BufferPolicy::Kernel));
    let drss: Vec<&Pol> = pols
        .iter()
        .filter(|p| p.policy == BufferPolicy::Drs)
        .collect();
    // Ratio columns: (numerator, denominator) pairs that exist in this run.
    let mut thr_pairs: Vec<(&Pol, &Pol)> = vec![];
    let mut mem_pairs: Vec<(&Pol, &Pol)> = vec![];
    if let Some(o) = over {
        if let Some(k) = kern {
            thr_pairs.push((k, o));
            mem_pairs.push((k, o));
        }
        for d in &drss {
            thr_pairs.push((d, o));
            mem_pairs.push((d, o));
        }
    }
    if let Some(k) = kern {
        for d in &drss {
            mem_pairs.push((d, k));
        }
    }
    let names =
        |v: &[(&Pol, &Pol)]| -> Vec<String> { v.iter().map(|(a, b)| format!("{a}/{b}")).collect() };
    for cc in ccs {
        for &st in streams {
            let _ = writeln!(w, "## {cc}, {}\n", st.label());
            let _ = writeln!(w, "Throughput, Mbit/s:\n");
            let cols = names(&thr_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.2}", a.mbps))
                    );
                }
                for (x, y) in &thr_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => format!("{:.3}", a.mbps / b.mbps),
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(
                w,
                "\nReceive window, mean (peak), MiB{}:\n",
                if f.conns > 1 {
                    " — total over all connections"
                } else {
                    ""
                }
            );
            let cols = names(&mem_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!(
                            "{} ({})",
                            mib(a.mean_win),
                            mib(a.peak_win as f64)
                        ))
                    );
                }
                for (x, y) in &mem_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => {
                            format!("{:.3}", a.mean_win / b.mean_win.max(1.0))
                        }
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(w, "\nMbit/s per MiB of mean window:\n");
            let eff_pairs: Vec<(&Pol, &Pol)> = thr_pairs
                .iter()
                .copied()
                .filter(|(a, _)| a.policy == BufferPolicy::Drs)
                .collect();
            let cols = names(&eff_pairs);
            hdr(
                w,
                "size",
                &cols.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.1}", a.per_mb()))
                    );
                }
                for (x, y) in &eff_pairs {
                    let r = match (get(cc, st, s, x), get(cc, st, s, y)) {
                        (Cell::Val(a), Cell::Val(b)) => format!("{:.1}x", a.per_mb() / b.per_mb()),
                        _ => String::new(),
                    };
                    let _ = write!(w, " {r} |");
                }
                let _ = writeln!(w);
            }
            let _ = writeln!(w, "\nSender rwnd-limited time, % of busy time:\n");
            hdr(w, "size", &[]);
            for &s in sizes {
                let _ = write!(w, "| {} |", format_size(s));
                for p in pols {
                    let _ = write!(
                        w,
                        " {} |",
                        fmt_cell(&get(cc, st, s, p), |a| format!("{:.0}%", a.rwnd * 100.0))
                    );
                }
                let _ = writeln!(w);
            }
            if let Some(o) = over {
                for d in &drss {
                    targets(w, runs, cc, st, sizes, pols, d, o);
                }
            }
            best_static(w, runs, cc, st, sizes, pols);
            sparklines(w, runs, cc, st, sizes, pols);
        }
    }
    let fails: Vec<&Run> = runs
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
        .collect();
    if !fails.is_empty() {
        let _ = writeln!(w, "## Failed runs\n");
        for r in fails {
            let _ = writeln!(w, "* {}", describe(r));
        }
        let _ = writeln!(w);
    }
    let wrong_cc: Vec<&Run> = runs
        .iter()
        .filter(|r| {
            r.done()
                .is_some_and(|m| !m.sender_cc.is_empty() && m.sender_cc != r.cc)
        })
        .collect();
    if !wrong_cc.is_empty() {
        let _ = writeln!(
            w,
            "## WARNING: sender congestion control differs from the requested one\n"
        );
        for r in wrong_cc {
            let _ = writeln!(w, "* {}", describe(r));
        }
    }
    o
}

/// Pooled over `sizes` present for both: (rate ratio, mean-window ratio).
pub(super) fn pooled(
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    a: &Pol,
    b: &Pol,
) -> Option<(f64, f64, usize)> {
    let (mut ab, mut asecs, mut aw, mut bb, mut bsecs, mut bw, mut n) =
        (0u64, 0.0, 0.0, 0u64, 0.0, 0.0, 0usize);
    for &s in sizes {
        if let (Cell::Val(x), Cell::Val(y)) = (agg(runs, cc, st, s, a), agg(runs, cc, st, s, b)) {
            ab += x.bytes;
            asecs += x.secs;
            aw += x.mean_win * x.secs;
            bb += y.bytes;
            bsecs += y.secs;
            bw += y.mean_win * y.secs;
            n += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let ra = ab as f64 / asecs;
    let rb = bb as f64 / bsecs;
    Some((ra / rb, (aw / asecs) / (bw / bsecs).max(1.0), n))
}

pub(super) fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**not met**"
    }
}

/// The issue's targets for DRS variant `drs` against the over-provisioned `over` (16M) and the stock 64K.
#[allow(clippy::too_many_arguments)]
pub(super) fn targets(
    w: &mut String,
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    pols: &[Pol],
    drs: &Pol,
    over: &Pol,
) {
    let stock = pols.iter().find(|p| p.is(BufferPolicy::Fixed(64 << 10)));
    let kern = pols.iter().find(|p| p.is(BufferPolicy::Kernel));
    let big: Vec<u64> = sizes.iter().copied().filter(|&s| s >= 64 << 20).collect();
    if big.is_empty() {
        return;
    }
    let _ = writeln!(
        w,
        "\nTargets for `{drs}` (files >= 64 MiB; against the over-provisioned 16M buffer and the stock 64K, this \
         run). `nominal` counts the 16M buffer as 16 MiB per stream, as the seeds did; `window` uses its measured \
         mean window:\n"
    );
    let _ = writeln!(
        w,
        "| size | {drs}/16M Mbit/s (>= 0.97) | {drs}/16M window (<= 0.25) | {drs}/16M nominal (<= 0.25) | Mbit/s per MiB vs 16M (>= 5x) | vs 16M nominal | {drs}/64K Mbit/s (>= 7x) | kernel/16M Mbit/s | kernel/16M window | kernel/{drs} window |"
    );
    let _ = writeln!(w, "|---|---|---|---|---|---|---|---|---|---|");
    let nominal = (16u64 << 20) as f64 * st.count() as f64 * conns_of(runs);
    let mut rows: Vec<(String, Vec<u64>)> =
        big.iter().map(|&s| (format_size(s), vec![s])).collect();
    if big.len() > 1 {
        rows.push(("all >= 64M (pooled)".into(), big.clone()));
    }
    for (label, ss) in rows {
        let _ = write!(w, "| {label} |");
        match pooled(runs, cc, st, &ss, drs, over) {
            Some((thr, mem, _)) => {
                let eff = thr / mem;
                let dm = pooled_mem(runs, cc, st, &ss, drs);
                let nom = dm.map(|m| m / nominal);
                let _ = write!(
                    w,
                    " {thr:.3} {} | {mem:.3} {} | {} | {eff:.1}x {} | {} |",
                    verdict(thr >= 0.97),
                    verdict(mem <= 0.25),
                    nom.map(|n| format!("{n:.3} {}", verdict(n <= 0.25)))
                        .unwrap_or_default(),
                    verdict(eff >= 5.0),
                    nom.map(|n| format!("{:.1}x {}", thr / n, verdict(thr / n >= 5.0)))
                        .unwrap_or_default(),
                );
            }
            None => {
                let _ = write!(w, " | | | | |");
            }
        }
        match stock.and_then(|k| pooled(runs, cc, st, &ss, drs, k)) {
            Some((thr, _, n)) => {
                let note = if n < ss.len() {
                    format!(" (64K ran {n} of {} sizes)", ss.len())
                } else {
                    String::new()
                };
                let _ = write!(w, " {thr:.1}x {}{note} |", verdict(thr >= 7.0));
            }
            None => {
                let _ = write!(w, " 64K skipped |");
            }
        }
        match kern.map(|k| {
            (
                pooled(runs, cc, st, &ss, k, over),
                pooled(runs, cc, st, &ss, k, drs),
            )
        }) {
            Some((Some((t, m, _)), Some((_, md, _)))) => {
                let _ = writeln!(w, " {t:.3} | {m:.3} | {md:.3} |");
            }
            _ => {
                let _ = writeln!(w, " | | |");
            }
        }
    }
}

pub(super) fn conns_of(runs: &[Run]) -> f64 {
    runs.first().map(|r| r.conns as f64).unwrap_or(1.0)
}

pub(super) fn pooled_mem(
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    p: &Pol,
) -> Option<f64> {
    let (mut a, mut t) = (0.0, 0.0);
    for &s in sizes {
        if let Cell::Val(x) = agg(runs, cc, st, s, p) {
            a += x.mean_win * x.secs;
            t += x.secs;
        }
    }
    (t > 0.0).then(|| a / t)
}

/// DRS and kernel autotuning against the best fixed buffer of this run (by throughput), per size.
pub(super) fn best_static(
    w: &mut String,
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    pols: &[Pol],
) {
    let fixed: Vec<&Pol> = pols
        .iter()
        .filter(|p| p.env.is_empty() && matches!(p.policy, BufferPolicy::Fixed(_)))
        .collect();
    let adaptive: Vec<&Pol> = pols
        .iter()
        .filter(|p| !matches!(p.policy, BufferPolicy::Fixed(_)))
        .collect();
    if fixed.len() < 3 || adaptive.is_empty() {
        return;
    }
    let _ = writeln!(w, "\nAgainst the best single static buffer of this run (highest throughput among the fixed sizes), and the smallest fixed buffer within 3 % of it; ratios are Mbit/s and mean window relative to the best static:\n");
    let _ = write!(
        w,
        "| size | best static | its Mbit/s | its window MiB | smallest within 3 % |"
    );
    for a in &adaptive {
        let _ = write!(w, " {a} Mbit/s | {a} window |");
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "|---|---|---|---|---|{}",
        "---|---|".repeat(adaptive.len())
    );
    for &s in sizes {
        let vals: Vec<(&Pol, Agg)> = fixed
            .iter()
            .filter_map(|p| match agg(runs, cc, st, s, p) {
                Cell::Val(a) => Some((*p, a)),
                _ => None,
            })
            .collect();
        let Some(&(bp, ba)) = vals.iter().max_by(|x, y| x.1.mbps.total_cmp(&y.1.mbps)) else {
            continue;
        };
        let small = vals
            .iter()
            .filter(|(_, a)| a.mbps >= 0.97 * ba.mbps)
            .min_by(|x, y| x.1.mean_win.total_cmp(&y.1.mean_win))
            .map(|(p, _)| p.to_string())
            .unwrap_or_default();
        let _ = write!(
            w,
            "| {} | {bp} | {:.2} | {} | {small} |",
            format_size(s),
            ba.mbps,
            mib(ba.mean_win),
        );
        for a in &adaptive {
            let _ = match agg(runs, cc, st, s, a) {
                Cell::Val(x) => write!(
                    w,
                    " {:.3} | {:.3} |",
                    x.mbps / ba.mbps,
                    x.mean_win / ba.mean_win.max(1.0)
                ),
                _ => write!(w, " | |"),
            };
        }
        let _ = writeln!(w);
    }
}

/// Receive window over time (seed 000 fig. 14) for the largest size every policy ran, as text sparklines.
pub(super) fn sparklines(
    w: &mut String,
    runs: &[Run],
    cc: &str,
    st: Streams,
    sizes: &[u64],
    pols: &[Pol],
) {
    const BARS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    const WIDTH: usize = 64;
    let Some(&size) = sizes.iter().rev().find(|&&s| {
        runs.iter().any(|r| {
            r.cc == cc
                && r.streams == st
                && r.size == s
                && r.done().is_some_and(|m| !m.series.is_empty())
        })
    }) else {
        return;
    };
    let series: Vec<(&Pol, &Measured)> = pols
        .iter()
        .filter_map(|p| {
            runs.iter()
                .find(|r| {
                    r.cc == cc
                        && r.streams == st
                        && r.size == size
                        && r.policy == *p
                        && r.done().is_some_and(|m| !m.series.is_empty())
                })
                .and_then(|r| r.done().map(|m| (p, m)))
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|(_, m)| m.series.iter().map(|p| p.win))
        .max()
        .unwrap_or(1)
        .max(1);
    let tmax = series
        .iter()
        .map(|(_, m)| m.series.last().map(|p| p.t).unwrap_or(0.0))
        .fold(0.0, f64::max)
        .max(1e-3);
    let _ = writeln!(
        w,
        "\nReceive window over time, {} file (one column = {:.2} s, full height = {} MiB; each line ends when its transfer did):\n\n```",
        format_size(size),
        tmax / WIDTH as f64,
        mib(top as f64)
    );
    for (p, m) in series {
        let mut line = String::new();
        let end = m.series.last().map(|x| x.t).unwrap_or(0.0);
        let mut last = None;
        for c in 0..WIDTH {
            let (a, b) = (
                tmax * c as f64 / WIDTH as f64,
                tmax * (c + 1) as f64 / WIDTH as f64,
            );
            // Max within the column; a column with no sample repeats the previous one until the run ended.
            let v = m
                .series
                .iter()
                .filter(|x| x.t >= a && x.t < b)
                .map(|x| x.win)
                .max();
            let v = match v {
                Some(v) => Some(v),
                None if a <= end => last,
                None => None,
            };
            last = v.or(last);
            line.push(match v {
                Some(v) => BARS[((v as f64 / top as f64) * 8.0).round().clamp(1.0, 8.0) as usize],
                None => ' ',
            });
        }
        let _ = writeln!(
            w,
            "{:>7} |{line}| mean {} MiB, peak {} MiB, {:.1} s",
            p.to_string(),
            mib(m.mean_win),
            mib(m.peak_win as f64),
            m.secs
        );
    }
    let _ = writeln!(w, "```\n");
}
