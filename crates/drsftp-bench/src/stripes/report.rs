//! The report of `drsftp-bench stripes`: the CSV of every sample and the Markdown tables (medians, ratios to
//! N × access rate, to the iperf3 ceiling and to Globus; movers' memory and CPU per copy).

use drsftp_lab::Lab;

use super::{Args, Sample, DRSFTP, DRSFTP_BEFORE, DRSFTP_NV};
use crate::record::Md;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub(super) fn csv(samples: &[Sample]) -> String {
    let mut s = String::from(
        "what,stripes,run,bytes,wall_s,data_s,mbps,verified,stripe_bytes,src_rss_peak_kib,src_rss_mean_kib,dst_rss_peak_kib,dst_rss_mean_kib,movers_cpu_s,note\n",
    );
    for x in samples {
        s.push_str(&format!(
            "{},{},{},{},{:.3},{},{:.2},{},{},{},{:.0},{},{:.0},{:.2},\"{}\"\n",
            x.what,
            x.stripes,
            x.run,
            x.bytes,
            x.wall_s,
            x.data_s.map_or(String::new(), |d| format!("{d:.3}")),
            x.mbps(),
            x.verified,
            x.stripe_bytes,
            x.src_peak_kib,
            x.src_mean_kib,
            x.dst_peak_kib,
            x.dst_mean_kib,
            x.cpu_s,
            x.note.replace('"', "'"),
        ));
    }
    s
}

pub(super) fn report(a: &Args, samples: &[Sample], lab: &Lab) -> String {
    let mut md = Md::default();
    let mbit = |b: u64| b as f64 / 1e6;
    md.line(format!(
        "Lab `shared-core`: {} hosts per site, access links {} Mbit/s per host and direction, core {} Mbit/s, \
         RTT {} ms between sites; files on /dev/shm (one directory per cluster, shared by its frontend and movers). \
         Third-party copies from site A's cluster to site B's, client on A's frontend host; `-p {}` streams per \
         stripe; {} run(s) per case, median. Rate = file size × 8 / wall time of the client (logins and set-up \
         included; for drsftp also its SIZE + CKSM check of both ends after the copy, which globus-url-copy does \
         not do; drsftp's data phase alone is in the second table). Load average at start: {}.\n",
        lab.hosts().len() / 2,
        mbit(a.access),
        mbit(a.core),
        a.rtt.as_millis(),
        a.parallel,
        a.runs,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    ));
    md.line("| stripes | N × access | iperf3 ceiling | Globus | Globus / (N × access) | drsftp | drsftp / (N × access) | drsftp / iperf3 | drsftp / Globus | drsftp --no-verify | its / (N × access) | its / iperf3 | its / Globus | drsftp before | drsftp / before | copies byte-identical |");
    md.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let med = |w: &str, n: usize| -> Option<f64> {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.what == w && s.stripes == n && s.verified)
            .map(Sample::mbps)
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let f = |x: Option<f64>| x.map_or("–".to_string(), |v| format!("{v:.1} Mbit/s"));
    let r = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
        _ => "–".into(),
    };
    for &n in &a.stripes {
        let cap_mbit = n as f64 * mbit(a.access);
        let cap = Some(cap_mbit);
        let (ip, d, g) = (med("iperf3", n), med(DRSFTP, n), med("globus", n));
        let (nv, before) = (med(DRSFTP_NV, n), med(DRSFTP_BEFORE, n));
        let bad: Vec<String> = samples
            .iter()
            .filter(|s| s.stripes == n && s.what != "iperf3" && !s.verified)
            .map(|s| format!("{} run {} NO", s.what, s.run))
            .collect();
        let ok = if bad.is_empty() {
            "all".to_string()
        } else {
            bad.join(", ")
        };
        md.line(format!(
            "| {n} | {:.0} Mbit/s | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {ok} |",
            cap_mbit,
            f(ip),
            f(g),
            r(g, cap),
            f(d),
            r(d, cap),
            r(d, ip),
            r(d, g),
            f(nv),
            r(nv, cap),
            r(nv, ip),
            r(nv, g),
            f(before),
            r(d, before),
        ));
    }
    md.line("");
    phases(a, samples, &mut md);
    md.line("Movers' memory (VmRSS of each mover's process tree, sampled every 50 ms: the highest of any one mover, and the mean of the per-mover average) and CPU (user + system of all movers on both sides during the copy):\n");
    md.line("| stripes | implementation | run | rate | data phase (drsftp `seconds`) | source movers RSS peak / mean | destination movers RSS peak / mean | movers CPU s | CPU s per GiB | stripe bytes | note |");
    md.line("|---|---|---|---|---|---|---|---|---|---|---|");
    for s in samples.iter().filter(|s| s.what != "iperf3") {
        let mib = |k: f64| k / 1024.0;
        md.line(format!(
            "| {} | {} | {} | {:.1} Mbit/s | {} | {:.1} / {:.1} MiB | {:.1} / {:.1} MiB | {:.2} | {:.2} | {} | {} |",
            s.stripes,
            s.what,
            s.run,
            s.mbps(),
            s.data_s.map_or("–".into(), |d| format!(
                "{:.1} Mbit/s",
                s.bytes as f64 * 8.0 / d.max(1e-9) / 1e6
            )),
            mib(s.src_peak_kib as f64),
            mib(s.src_mean_kib),
            mib(s.dst_peak_kib as f64),
            mib(s.dst_mean_kib),
            s.cpu_s,
            s.cpu_s / (s.bytes as f64 / (1u64 << 30) as f64).max(1e-9),
            s.stripe_bytes,
            s.note,
        ));
    }
    md.line("");
    for s in samples.iter().filter(|s| s.what == "iperf3") {
        md.line(format!(
            "- iperf3, {} host pairs at once, -P {}: {}",
            s.stripes, a.parallel, s.note
        ));
    }
    md.text().to_string()
}

/// Where drsftp's wall time goes, per row kind and stripe count (medians of the verified runs): the client's
/// `--json` login, set-up (logins' end to the transfer commands), data phase (to the last transfer reply) and
/// verification (after it); `before` (the `--before` binary) against this one.
fn phases(a: &Args, samples: &[Sample], md: &mut Md) {
    let med = |w: &str, n: usize, f: &dyn Fn(&Sample) -> Option<f64>| -> String {
        let v: Vec<f64> = samples
            .iter()
            .filter(|s| s.what == w && s.stripes == n && s.verified)
            .filter_map(f)
            .collect();
        if v.is_empty() {
            "–".into()
        } else {
            format!("{:.2}", median(v))
        }
    };
    md.line("drsftp's wall time (s, medians; `setup`, `data` and `verify` from the client's `--json`: set-up = logins' end to the transfer commands, data = transfer commands to the last transfer reply, verify = after it, not reported by older binaries for third-party copies; `rest` = wall minus those three: process start, logins, QUIT):\n");
    md.line("| stripes | case | wall | rest | setup | data | verify |");
    md.line("|---|---|---|---|---|---|---|");
    for &n in &a.stripes {
        for w in [DRSFTP, DRSFTP_NV, DRSFTP_BEFORE, "globus"] {
            if !samples.iter().any(|s| s.what == w && s.stripes == n) {
                continue;
            }
            md.line(format!(
                "| {n} | {w} | {} | {} | {} | {} | {} |",
                med(w, n, &|s| Some(s.wall_s)),
                med(w, n, &|s| {
                    let (st, d) = (s.setup_s?, s.data_s?);
                    Some(s.wall_s - st - d - s.verify_s.unwrap_or(0.0))
                }),
                med(w, n, &|s| s.setup_s),
                med(w, n, &|s| s.data_s),
                med(w, n, &|s| s.verify_s),
            ));
        }
    }
    md.line("");
}
