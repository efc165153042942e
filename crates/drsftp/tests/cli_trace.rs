//! `drsftp copy --trace FILE` on loopback against `drsftp serve`: a MODE E download over 2 streams with
//! `--buffer drs` writes a per-stream CSV trace with rows for both streams; an upload with `-p auto` does too and
//! reports the online controller's decisions in `--json`; `drsftp plot trace` draws the download's trace as SVG.
//! The server is killed by PID when the test ends.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(300);

const HEADER: &str =
    "t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh,cwnd_bytes";

/// Stream indices that have rows in a trace CSV (after checking the header and the column count).
fn streams_in(csv: &str) -> std::collections::BTreeSet<u32> {
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(HEADER), "{csv}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 10, "{l}");
            f[1].parse().unwrap()
        })
        .collect()
}

#[test]
fn copy_trace_writes_rows_for_every_stream() {
    let root = open_tempdir();
    let want = random_file(&root.path().join("src.bin"), 48 << 20, 77);
    let srv = drsftp_server(root.path(), &[]);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out.bin");
    let trace = work.path().join("down.csv");
    let (ok, o, e) = run(
        Command::new(bin()).args([
            "copy",
            "-q",
            "-p",
            "2",
            "--buffer",
            "drs",
            "--trace",
            trace.to_str().unwrap(),
            &srv.url("/src.bin"),
            out.to_str().unwrap(),
        ]),
        T,
    );
    assert!(ok, "copy failed: {o} {e}\nserver log:\n{}", srv.log_text());
    assert_eq!(sha256_file(&out), want);
    let csv = std::fs::read_to_string(&trace).unwrap();
    assert_eq!(streams_in(&csv), [0, 1].into(), "{csv}");

    // `drsftp plot trace` draws it (default output: the CSV's name with .svg).
    let (ok, o, e) = run(
        Command::new(bin()).args(["plot", "trace", trace.to_str().unwrap()]),
        T,
    );
    assert!(ok, "plot failed: {o} {e}");
    let svg = std::fs::read_to_string(work.path().join("down.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    for label in [
        "down.csv",
        "time (s)",
        "RTT (ms)",
        "throughput (Mbit/s)",
        "stream 0",
        "stream 1",
    ] {
        assert!(svg.contains(label), "no {label:?} in the plot");
    }
    assert!(svg.matches("<polyline").count() > 2 * 3, "{svg}");
    let (ok, _, e) = run(
        Command::new(bin()).args(["plot", "trace", out.to_str().unwrap()]),
        T,
    );
    assert!(!ok && e.contains("out.bin"), "plotting a non-CSV: {e}");

    // Upload with -p auto: traces of our sending streams, and the controller's actions in --json.
    let trace = work.path().join("up.csv");
    let (ok, o, e) = run(
        Command::new(bin()).args([
            "copy",
            "--json",
            "-p",
            "auto",
            "--trace",
            trace.to_str().unwrap(),
            out.to_str().unwrap(),
            &srv.url("/up.bin"),
        ]),
        T,
    );
    assert!(
        ok,
        "upload failed: {o} {e}\nserver log:\n{}",
        srv.log_text()
    );
    let j: serde_json::Value =
        serde_json::from_str(o.lines().find(|l| l.starts_with('{')).expect("a JSON line")).unwrap();
    assert!(j["auto_actions"].is_array(), "{j}");
    assert_eq!(j["streams_auto"].as_bool(), Some(true), "{j}");
    assert_eq!(sha256_file(&root.path().join("up.bin")), want);
    // Every connection that carried data has rows (one that joined as the data ran out may have none).
    let n = j["streams"].as_u64().unwrap() as u32;
    let up = streams_in(&std::fs::read_to_string(&trace).unwrap());
    assert!(
        up.contains(&0) && up.iter().all(|&i| i < n),
        "{up:?} of {n}"
    );
}
