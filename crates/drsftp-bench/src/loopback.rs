//! `drsftp-bench loopback`: file-to-file copies on loopback against iperf3 memory to memory (issue 22's loopback
//! and CPU efficiency), in one run. Cases, interleaved over `--rounds` with the order rotated each round so drift
//! on a shared machine hits every case:
//! - `I1`/`I4`: iperf3 memory to memory, 1 and 4 streams (the ceiling of the machine's loopback TCP);
//! - `D1`/`D4`: `drsftp copy` ← `drsftp serve`, file to file, `-p 1` (stream mode) and `-p 4` (MODE E), CRC32C
//!   verified as users run it;
//! - `G1`/`G4`: globus-url-copy ← globus-gridftp-server, `-p 1` and `-p 4`, file to file;
//! - with `--placement`, `I1` and `D1` again with both ends pinned to one core (`-same`) and to two (`-split`):
//!   where the run-to-run spread comes from (docs/bench/loopback.md).
//!
//! Each run reports wall time (process start to exit), the tool's own rate where it gives one (iperf3's
//! receiver, drsftp's `--json`), CPU seconds of the client and of the server during the run (reaped children
//! included: Globus forks a process per session), and resident memory of both (VmRSS every 20 ms, the server's
//! summed over its process tree), peak and mean. No root needed.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::record::{Md, RunDir};
use crate::scratch::{make_file, watch_until_exit, Scratch, Server};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bytes per run, e.g. 2GiB.
    #[arg(long, default_value = "2GiB", value_parser = |s: &str| drsftp_tune::parse_size(s).map_err(|e| e.to_string()))]
    size: u64,
    /// Rounds; every case runs once per round and the report takes medians.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Also run I1 and D1 with both ends pinned to one core and to two cores.
    #[arg(long)]
    placement: bool,
    /// Scratch directory for the source and the copies (two times --size; tmpfs keeps disks out of it).
    #[arg(long, default_value = "/dev/shm")]
    work: PathBuf,
    /// The drsftp binary [default: next to drsftp-bench].
    #[arg(long = "drsftp", value_name = "PATH")]
    pub(crate) drsftp: Option<PathBuf>,
}

/// Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

/// How the client of a case is run, against which server process.
#[derive(Debug, Clone)]
struct Case {
    key: String,
    name: String,
    server: u32,
    argv: Vec<String>,
    /// Whether the case copies a file (then the copy is compared with the source and removed).
    file: bool,
    /// CPU lists for the server and the client under `--placement`.
    pins: Option<(&'static str, &'static str)>,
}

/// One run's measurements.
#[derive(Debug, Clone)]
struct Row {
    round: usize,
    key: String,
    wall: f64,
    tool_mbps: Option<f64>,
    client_cpu: f64,
    server_cpu: f64,
    client_peak: u64,
    client_mean: u64,
    server_peak: u64,
    server_mean: u64,
}

/// CPU seconds of `pid` including its reaped children (utime + stime + cutime + cstime).
fn cpu_with_children(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = s[s.rfind(')')? + 2..].split_whitespace().collect();
    let mut ticks = 0.0;
    for i in 11..=14 {
        ticks += f.get(i)?.parse::<f64>().ok()?;
    }
    Some(ticks / TICKS)
}

/// `pid` and every descendant, from /proc/<pid>/task/*/children.
fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", out[i])) {
            for t in tasks.flatten() {
                let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                out.extend(
                    kids.split_whitespace()
                        .filter_map(|k| k.parse::<u32>().ok()),
                );
            }
        }
        i += 1;
    }
    out
}

/// Sum of VmRSS over `pids`, KiB (processes that are gone count 0).
fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| {
            let s = std::fs::read_to_string(format!("/proc/{p}/status")).ok()?;
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .sum()
}

/// A port free on 127.0.0.1 right now.
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// Waits until something listens on 127.0.0.1:`port`, from /proc/net/tcp: a probe connection would count as a
/// client (iperf3 answers the real one after it with "the server is busy").
fn wait_listening(port: u16, server: &mut Server, what: &str) -> Result<()> {
    let want = format!("0100007F:{port:04X}");
    for _ in 0..200 {
        if let Some(st) = server.0.try_wait()? {
            bail!("{what} exited at start: {st}");
        }
        let tcp = std::fs::read_to_string("/proc/net/tcp")?;
        let listening = tcp.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A")
        });
        if listening {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("{what} did not listen on {port}")
}

fn spawn_server(argv: &[&str], what: &str) -> Result<Server> {
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what} (scripts/setup.sh installs it)"))?;
    Ok(Server(child))
}

/// Pins every thread of `pid`'s process tree to `cpus`.
fn pin_tree(pid: u32, cpus: &str) {
    for p in tree(pid) {
        let _ = Command::new("taskset")
            .args(["-a", "-p", "-c", cpus, &p.to_string()])
            .stdout(Stdio::null())
            .status();
    }
}

/// Whether two files hold the same bytes.
fn same_file(a: &Path, b: &Path) -> Result<bool> {
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut x, mut y) = (vec![0u8; 8 << 20], vec![0u8; 8 << 20]);
    loop {
        let n = read_full(&mut fa, &mut x)?;
        let m = read_full(&mut fb, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Runs one case once, sampling both ends' memory every 20 ms until the client exits.
fn measure(case: &Case, round: usize) -> Result<(Row, String)> {
    if let Some((server_cpus, _)) = case.pins {
        pin_tree(case.server, server_cpus);
    }
    let mut argv = case.argv.clone();
    if let Some((_, client_cpus)) = case.pins {
        argv.splice(0..0, ["taskset".into(), "-c".into(), client_cpus.into()]);
    }
    let s0 = cpu_with_children(case.server).unwrap_or(0.0);
    let t = Instant::now();
    let mut c = Command::new(&argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {}", argv[0]))?;
    let pid = c.id();
    // The client's output is read on threads so a full pipe never stalls it.
    let mut out_pipe = c.stdout.take().context("client stdout")?;
    let mut err_pipe = c.stderr.take().context("client stderr")?;
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out_pipe.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let w = watch_until_exit(
        pid,
        || Some(rss_kib(&[pid])),
        || Some(rss_kib(&tree(case.server))),
    );
    let (cs, ss, client_cpu) = (w.client_rss, w.server_rss, w.client_cpu);
    let status = c.wait()?;
    let wall = t.elapsed().as_secs_f64();
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    if !status.success() {
        bail!("{} failed ({status}): {stderr}", argv.join(" "));
    }
    // globus-gridftp-server reaps its session child shortly after the transfer; wait so its CPU is counted.
    std::thread::sleep(Duration::from_millis(300));
    let server_cpu = cpu_with_children(case.server).unwrap_or(0.0) - s0;
    if case.pins.is_some() {
        pin_tree(case.server, &format!("0-{}", num_cpus().saturating_sub(1)));
    }
    let peak = |v: &[u64]| v.iter().copied().max().unwrap_or(0);
    let mean = |v: &[u64]| v.iter().sum::<u64>() / v.len().max(1) as u64;
    let row = Row {
        round,
        key: case.key.clone(),
        wall,
        tool_mbps: tool_rate(&case.key, &stdout)?,
        client_cpu,
        server_cpu,
        client_peak: peak(&cs),
        client_mean: mean(&cs),
        server_peak: peak(&ss),
        server_mean: mean(&ss),
    };
    Ok((row, stdout))
}

/// The rate the tool itself reports: iperf3's receiver (`-J`), drsftp's `--json` summary; Globus prints none.
fn tool_rate(key: &str, stdout: &str) -> Result<Option<f64>> {
    let json = |s: &str| -> Result<serde_json::Value> {
        serde_json::from_str(s).with_context(|| format!("{key}: parsing the tool's JSON"))
    };
    Ok(match key.as_bytes().first() {
        Some(b'I') => json(stdout)?["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .map(|b| b / 1e6),
        Some(b'D') => json(stdout.lines().last().unwrap_or_default())?["mbps"].as_f64(),
        _ => None,
    })
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn load1() -> f64 {
    crate::record::load()
        .split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0.0)
}

pub fn run(a: &Args, rec: Option<&RunDir>) -> Result<()> {
    for tool in [
        "iperf3",
        "globus-url-copy",
        "globus-gridftp-server",
        "taskset",
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()?
            .success();
        if !found {
            bail!("needs {tool} (run scripts/setup.sh)");
        }
    }
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
    let work = Scratch(
        tempfile::Builder::new()
            .prefix("drsftp-loopeff.")
            .tempdir_in(&a.work)?
            .keep(),
    );
    let root = work.0.join("root");
    std::fs::create_dir(&root)?;
    let src = root.join("big");
    make_file(&src, a.size)?;
    // globus-gridftp-server runs the session as `nobody`: it must read the source and write the copy.
    for (p, mode) in [(&work.0, 0o777), (&root, 0o777), (&src, 0o644)] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode))?;
    }
    let out = work.0.join("out");
    let (pd, pg, pi) = (free_port()?, free_port()?, free_port()?);
    let (pd_s, pg_s, pi_s) = (pd.to_string(), pg.to_string(), pi.to_string());
    let listen = format!("127.0.0.1:{pd}");
    let glog = work.0.join("gftp.log");
    let mut d = spawn_server(
        &[
            exe.to_str().context("drsftp path")?,
            "serve",
            "--listen",
            &listen,
            "--root",
            root.to_str().context("root path")?,
            "--anonymous",
        ],
        "drsftp serve",
    )?;
    let mut g = spawn_server(
        &[
            "globus-gridftp-server",
            "-aa",
            "-anonymous-user",
            "nobody",
            "-p",
            &pg_s,
            "-control-interface",
            "127.0.0.1",
            "-data-interface",
            "127.0.0.1",
            "-home-dir",
            "/",
            "-l",
            glog.to_str().context("log path")?,
        ],
        "globus-gridftp-server",
    )?;
    let mut i = spawn_server(
        &["iperf3", "-s", "-B", "127.0.0.1", "-p", &pi_s],
        "iperf3 -s",
    )?;
    wait_listening(pd, &mut d, "drsftp serve")?;
    wait_listening(pg, &mut g, "globus-gridftp-server")?;
    wait_listening(pi, &mut i, "iperf3 -s")?;
    let cases = cases(
        a,
        &exe,
        &out,
        &src,
        [(d.0.id(), &pd_s), (g.0.id(), &pg_s), (i.0.id(), &pi_s)],
    );

    let mut md = Md::default();
    let csv_path = rec.map_or_else(|| work.0.join("results.csv"), |r| r.join("results.csv"));
    let mut csv = std::io::BufWriter::new(std::fs::File::create(&csv_path)?);
    writeln!(
        csv,
        "round,case,wall_s,mbps_wall,mbps_tool,client_cpu_s,server_cpu_s,client_rss_peak_kib,client_rss_mean_kib,server_rss_peak_kib,server_rss_mean_kib"
    )?;
    let mut rows = vec![];
    let mut loads = vec![];
    for round in 1..=a.rounds {
        for j in 0..cases.len() {
            let case = &cases[(j + round - 1) % cases.len()];
            let _ = std::fs::remove_file(&out);
            let (row, _) = measure(case, round)?;
            if case.file {
                if !same_file(&out, &src)? {
                    bail!("{}: the copy differs from the source", case.key);
                }
                std::fs::remove_file(&out)?;
            }
            let mbps_wall = a.size as f64 * 8.0 / row.wall / 1e6;
            writeln!(
                csv,
                "{},{},{:.4},{:.1},{},{:.3},{:.3},{},{},{},{}",
                row.round,
                row.key,
                row.wall,
                mbps_wall,
                row.tool_mbps.map_or(String::new(), |m| format!("{m:.1}")),
                row.client_cpu,
                row.server_cpu,
                row.client_peak,
                row.client_mean,
                row.server_peak,
                row.server_mean
            )?;
            csv.flush()?;
            eprintln!(
                "loopback: round {round} {}: {:.2} s, tool {:.0} Mbit/s, CPU client {:.2} s server {:.2} s",
                row.key,
                row.wall,
                row.tool_mbps.unwrap_or(0.0),
                row.client_cpu,
                row.server_cpu
            );
            rows.push(row);
        }
        loads.push(load1());
    }
    report(&mut md, a, &cases, &rows, &loads);
    if let Some(r) = rec {
        r.report(md.text())?;
    }
    Ok(())
}

/// The cases in their first-round order; servers are (pid, port) of drsftp, Globus and iperf3.
fn cases(a: &Args, exe: &Path, out: &Path, src: &Path, servers: [(u32, &String); 3]) -> Vec<Case> {
    let [(d, pd), (g, pg), (i, pi)] = servers;
    let s = |x: &str| x.to_string();
    let size = a.size.to_string();
    let iperf = |n: u32| {
        vec![
            s("iperf3"),
            s("-c"),
            s("127.0.0.1"),
            s("-p"),
            pi.clone(),
            s("-n"),
            size.clone(),
            s("-P"),
            n.to_string(),
            s("-J"),
        ]
    };
    let drsftp = |n: u32| {
        vec![
            exe.display().to_string(),
            s("copy"),
            s("--json"),
            s("-p"),
            n.to_string(),
            format!("ftp://127.0.0.1:{pd}/big"),
            out.display().to_string(),
        ]
    };
    let guc = |n: u32| {
        vec![
            s("globus-url-copy"),
            s("-p"),
            n.to_string(),
            format!("ftp://127.0.0.1:{pg}{}", src.display()),
            format!("file://{}", out.display()),
        ]
    };
    let case = |key: &str, name: &str, server: u32, argv: Vec<String>, file: bool| Case {
        key: key.into(),
        name: name.into(),
        server,
        argv,
        file,
        pins: None,
    };
    let mut v = vec![
        case("I1", "iperf3 -P 1, memory to memory", i, iperf(1), false),
        case("I4", "iperf3 -P 4, memory to memory", i, iperf(4), false),
        case("D1", "drsftp copy -p 1 <- drsftp serve", d, drsftp(1), true),
        case("D4", "drsftp copy -p 4 <- drsftp serve", d, drsftp(4), true),
        case(
            "G1",
            "globus-url-copy -p 1 <- globus-gridftp-server",
            g,
            guc(1),
            true,
        ),
        case(
            "G4",
            "globus-url-copy -p 4 <- globus-gridftp-server",
            g,
            guc(4),
            true,
        ),
    ];
    if a.placement {
        for base in 0..v.len() {
            if !matches!(v[base].key.as_str(), "I1" | "D1") {
                continue;
            }
            for (how, pins, what) in [
                ("same", ("0", "0"), "both ends on CPU 0"),
                ("split", ("0", "1"), "server CPU 0, client CPU 1"),
            ] {
                let b = &v[base];
                let pinned = Case {
                    key: format!("{}-{how}", b.key),
                    name: format!("{}, {what}", b.name),
                    pins: Some(pins),
                    ..b.clone()
                };
                v.push(pinned);
            }
        }
    }
    v
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn report(md: &mut Md, a: &Args, cases: &[Case], rows: &[Row], loads: &[f64]) {
    let gib = a.size as f64 / (1u64 << 30) as f64;
    fn of<'a>(rows: &'a [Row], k: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        rows.iter().filter(move |r| r.key == k)
    }
    let med =
        |k: &str, f: &dyn Fn(&Row) -> Option<f64>| median(of(rows, k).filter_map(f).collect());
    let wall_rate = |r: &Row| Some(a.size as f64 * 8.0 / r.wall / 1e6);
    md.line("# Loopback efficiency: file to file vs iperf3 memory to memory\n");
    md.line(format!(
        "{} MiB per run, files in {}, {} round(s), cases interleaved (order rotated each round); medians. {} CPUs; \
         1-min load average after each round: {} (wall-time rates move with the machine's load; CPU per GiB is \
         steadier).\n",
        a.size >> 20,
        a.work.display(),
        a.rounds,
        num_cpus(),
        loads.iter().map(|l| format!("{l:.1}")).collect::<Vec<_>>().join(", ")
    ));
    md.line(
        "| case | wall s | Mbit/s (wall) | Mbit/s (tool) | vs iperf3 (wall) | vs iperf3 (tool) | client CPU s/GiB \
         | server CPU s/GiB | client RSS peak / mean MiB | server RSS peak / mean MiB |",
    );
    md.line("|---|---:|---:|---:|---:|---:|---:|---:|---|---|");
    for c in cases {
        let k = c.key.as_str();
        let base = if k.as_bytes().get(1) == Some(&b'4') {
            "I4"
        } else {
            "I1"
        };
        let (mw, mt) = (med(k, &wall_rate), med(k, &|r: &Row| r.tool_mbps));
        let (bw, bt) = (med(base, &wall_rate), med(base, &|r: &Row| r.tool_mbps));
        let ratio = |x: Option<f64>, b: Option<f64>| match (x, b) {
            (Some(x), Some(b)) if b > 0.0 => format!("{:.2}×", x / b),
            _ => String::new(),
        };
        let mib = |kib: f64| kib / 1024.0;
        let peak = |f: &dyn Fn(&Row) -> u64| of(rows, k).map(f).max().unwrap_or(0) as f64;
        md.line(format!(
            "| {k} {} | {:.2} | {:.0} | {} | {} | {} | {:.2} | {:.2} | {:.0} / {:.0} | {:.0} / {:.0} |",
            c.name,
            med(k, &|r: &Row| Some(r.wall)).unwrap_or(0.0),
            mw.unwrap_or(0.0),
            mt.map_or("–".into(), |m| format!("{m:.0}")),
            ratio(mw, bw),
            ratio(mt, bt),
            med(k, &|r: &Row| Some(r.client_cpu)).unwrap_or(0.0) / gib,
            med(k, &|r: &Row| Some(r.server_cpu)).unwrap_or(0.0) / gib,
            mib(peak(&|r: &Row| r.client_peak)),
            mib(med(k, &|r: &Row| Some(r.client_mean as f64)).unwrap_or(0.0)),
            mib(peak(&|r: &Row| r.server_peak)),
            mib(med(k, &|r: &Row| Some(r.server_mean as f64)).unwrap_or(0.0)),
        ));
    }
    md.line(
        "\nWall time runs from process start to exit (login, transfer, and drsftp's end-to-end CRC32C check); \
         'tool' is the tool's own rate (iperf3's receiver, drsftp's --json data-path rate). CPU is user + system of \
         the client process and of the server over the run (reaped children included); RSS is VmRSS sampled every \
         20 ms (the server's summed over its process tree). Raw rows: results.csv.",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_come_from_each_tools_own_report() {
        let iperf = r#"{"end":{"sum_received":{"bits_per_second":2.5e10}}}"#;
        assert_eq!(tool_rate("I1", iperf).unwrap(), Some(25_000.0));
        let drsftp = "progress line\n{\"mbps\": 8123.5, \"bytes\": 1}";
        assert_eq!(tool_rate("D4", drsftp).unwrap(), Some(8123.5));
        assert_eq!(tool_rate("G1", "").unwrap(), None);
        assert!(tool_rate("I4", "not json").is_err());
    }

    #[test]
    fn process_tree_and_cpu_of_this_process() {
        let me = std::process::id();
        assert_eq!(tree(me)[0], me);
        assert!(cpu_with_children(me).is_some());
        assert!(rss_kib(&[me]) > 0);
        assert_eq!(rss_kib(&[u32::MAX]), 0, "a process that is gone counts 0");
    }

    #[test]
    fn files_compare_by_content() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        std::fs::write(&a, vec![7u8; 10 << 20]).unwrap();
        std::fs::write(&b, vec![7u8; 10 << 20]).unwrap();
        let mut other = vec![7u8; 10 << 20];
        other[9 << 20] = 8;
        std::fs::write(&c, other).unwrap();
        assert!(same_file(&a, &b).unwrap());
        assert!(!same_file(&a, &c).unwrap());
    }
}
