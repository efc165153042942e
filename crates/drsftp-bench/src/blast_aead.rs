//! `drsftp-bench blast --only aead` and `--only aead-loopback`: UDP blast with AEAD-sealed datagrams (`PROT P`,
//! keys from the TLS exporter) against cleartext blast (CRC32C), in the same run against the same `drsftp serve`,
//! alternating which goes first in each repetition so drift in the shared host does not favour one.
//!
//! * `aead`: the WAN lab at `--rate`, `--rtt-ms`, `--loss` (the case: 500mbit, 100 ms, 0.01), files sized
//!   for `--secs` of transfer, downloads into /dev/shm.
//! * `aead-loopback`: first the sans-IO core alone in this process (a `drsftp_blast` sender and receiver joined
//!   in memory, 256 MiB, no loss): seconds of one core per GB moved, sealing and opening included; then
//!   `drsftp serve` and `drsftp copy` on 127.0.0.1 without the lab and without a rate cap, a 1 GiB file.
//!
//! Per copy: the receiver's data-path goodput and the end-to-end rate (from `--json`), the client's and the
//! server's CPU seconds (utime + stime from /proc: the client's read from its zombie entry, so complete; the
//! server's as the difference over the copy) and their resident memory, sampled every 50 ms (peak: the client's
//! `VmHWM`, the server's highest `VmRSS` sample during the copy; mean: of the `VmRSS` samples). The server is
//! TLS-enabled for both variants (anonymous login; the cleartext runs use `--tls off`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};

use crate::blast::{blast_numbers, emit, load, median, Bench, Opts};
use crate::record::RunDir;

/// Kernel clock ticks per second of /proc/<pid>/stat (100 on every Linux this runs on).
const TICKS: f64 = 100.0;
const SAMPLE: Duration = Duration::from_millis(50);

/// A self-signed certificate for `names`, written as `cert.pem`/`key.pem` into `dir`; returns the `serve`
/// arguments and the certificate's SHA-256 fingerprint for `drsftp copy --tls-fingerprint`.
pub(crate) fn certificate(dir: &Path, names: &[&str]) -> Result<(Vec<String>, String)> {
    let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let ck = rcgen::generate_simple_self_signed(names).context("certificate")?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.key_pair.serialize_pem())?;
    let fp = drsftp_io::tls::fingerprint(ck.cert.der());
    let hex: String = fp.iter().map(|b| format!("{b:02x}")).collect();
    let args = vec![
        "--tls-cert".into(),
        cert.display().to_string(),
        "--tls-key".into(),
        key.display().to_string(),
    ];
    Ok((args, hex))
}

/// CPU seconds (utime + stime) and state of a process, from /proc/<pid>/stat.
pub(crate) fn cpu(pid: u32) -> Option<(f64, char)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = f.first()?.chars().next()?;
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some((ticks / TICKS, state))
}

/// `VmRSS` and `VmHWM` of a process, KiB.
fn rss(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// CPU and memory of one process over one copy.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    cpu_s: f64,
    peak_kib: u64,
    mean_kib: f64,
}

/// One measured copy.
struct Sample {
    aead: bool,
    json: Value,
    client: Usage,
    server: Usage,
}

/// Runs `cmd` (a `drsftp copy --json`, stdout and stderr to files in `dir`) while sampling it and `server`.
fn measured(mut cmd: Command, dir: &Path, server: u32, aead: bool) -> Result<Sample> {
    let (so, se) = (dir.join("copy.out"), dir.join("copy.err"));
    cmd.stdout(std::fs::File::create(&so)?)
        .stderr(std::fs::File::create(&se)?);
    let s0 = cpu(server).map_or(0.0, |c| c.0);
    let mut child: Child = cmd.spawn().context("drsftp copy")?;
    let pid = child.id();
    let (mut c_rss, mut s_rss) = (Vec::new(), Vec::new());
    let (mut c_hwm, mut c_cpu) = (0u64, 0.0);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match cpu(pid) {
            // Exited: a zombie keeps its final CPU times until it is reaped.
            Some((t, 'Z')) | Some((t, 'X')) => {
                c_cpu = t;
                break;
            }
            Some((t, _)) => c_cpu = t,
            None => break,
        }
        if let Some((r, h)) = rss(pid) {
            c_rss.push(r);
            c_hwm = c_hwm.max(h);
        }
        if let Some((r, _)) = rss(server) {
            s_rss.push(r);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(SAMPLE);
    }
    let status = child.wait()?;
    let s1 = cpu(server).map_or(0.0, |c| c.0);
    let text = std::fs::read_to_string(&so).unwrap_or_default();
    let json: Value = text
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            anyhow!(
                "drsftp copy ({status}) printed no JSON: {text} {}",
                std::fs::read_to_string(&se).unwrap_or_default()
            )
        })?;
    if let Some(e) = json.get("error") {
        bail!("drsftp copy failed: {e}");
    }
    if json["blast"]["aead"].as_bool() != Some(aead) {
        bail!("expected blast.aead = {aead}: {json}");
    }
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    Ok(Sample {
        aead,
        client: Usage {
            cpu_s: c_cpu,
            peak_kib: c_hwm,
            mean_kib: mean(&c_rss),
        },
        server: Usage {
            cpu_s: s1 - s0,
            peak_kib: s_rss.iter().copied().max().unwrap_or(0),
            mean_kib: mean(&s_rss),
        },
        json,
    })
}

fn mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// One number of a sample.
type Metric = dyn Fn(&Sample) -> f64;

/// The table of every copy, the medians per variant and their ratios; raw rows go to `aead.jsonl`.
fn report(samples: &[Sample], out: &mut String, record: Option<&RunDir>) -> Result<()> {
    emit(out, "| # | blast | data-path goodput Mbit/s | end-to-end Mbit/s | dup % | rejected | client CPU s | server CPU s | client RSS peak / mean MiB | server RSS peak / mean MiB |");
    emit(out, "|---|---|---|---|---|---|---|---|---|---|");
    let mut raw = String::new();
    for (i, s) in samples.iter().enumerate() {
        let (g, e, d) = blast_numbers(&s.json);
        emit(
            out,
            &format!(
                "| {} | {} | {g:.1} | {e:.1} | {d:.2} | {} | {:.2} | {:.2} | {:.1} / {:.1} | {:.1} / {:.1} |",
                i + 1,
                if s.aead { "AEAD" } else { "cleartext" },
                s.json["rejected"],
                s.client.cpu_s,
                s.server.cpu_s,
                mib(s.client.peak_kib as f64),
                mib(s.client.mean_kib),
                mib(s.server.peak_kib as f64),
                mib(s.server.mean_kib),
            ),
        );
        let row = json!({
            "aead": s.aead,
            "copy": s.json,
            "client": {"cpu_s": s.client.cpu_s, "rss_peak_kib": s.client.peak_kib, "rss_mean_kib": s.client.mean_kib},
            "server": {"cpu_s": s.server.cpu_s, "rss_peak_kib": s.server.peak_kib, "rss_mean_kib": s.server.mean_kib},
        });
        let _ = writeln!(raw, "{row}");
    }
    if let Some(r) = record {
        r.write("aead.jsonl", &raw)?;
    }
    let pick = |aead: bool, f: &dyn Fn(&Sample) -> f64| {
        let v: Vec<f64> = samples.iter().filter(|s| s.aead == aead).map(f).collect();
        median(&v)
    };
    let metrics: [(&str, &Metric); 8] = [
        ("data-path goodput, Mbit/s", &|s| blast_numbers(&s.json).0),
        ("end-to-end rate, Mbit/s", &|s| blast_numbers(&s.json).1),
        ("client CPU, s", &|s| s.client.cpu_s),
        ("server CPU, s", &|s| s.server.cpu_s),
        ("client RSS peak, MiB", &|s| mib(s.client.peak_kib as f64)),
        ("client RSS mean, MiB", &|s| mib(s.client.mean_kib)),
        ("server RSS peak, MiB", &|s| mib(s.server.peak_kib as f64)),
        ("server RSS mean, MiB", &|s| mib(s.server.mean_kib)),
    ];
    emit(out, "\n| median | cleartext | AEAD | AEAD / cleartext |");
    emit(out, "|---|---|---|---|");
    for (name, f) in metrics {
        let (c, a) = (pick(false, f), pick(true, f));
        emit(out, &format!("| {name} | {c:.2} | {a:.2} | {:.3} |", a / c));
    }
    Ok(())
}

/// Which variant goes first in repetition `rep`: they alternate.
fn order(rep: u32) -> [bool; 2] {
    if rep.is_multiple_of(2) {
        [false, true]
    } else {
        [true, false]
    }
}

/// The `drsftp copy` arguments of a variant.
fn tls_args(aead: bool, fp: &str) -> Vec<String> {
    if aead {
        vec![
            "--tls".into(),
            "require".into(),
            "--tls-fingerprint".into(),
            fp.into(),
        ]
    } else {
        vec!["--tls".into(), "off".into()]
    }
}

/// `--only aead`: the WAN lab.
pub(crate) fn lab(a: &Opts, out: &mut String, record: Option<&RunDir>) -> Result<()> {
    let mut fp = String::new();
    let b = Bench::up_with(&a.bin, a.rtt_ms(), a.rate, a.loss(), |dir| {
        let (args, f) = certificate(dir, &["198.18.0.1"])?;
        fp = f;
        Ok(args)
    })?;
    let size = (a.rate as f64 / 8.0 * a.secs) as u64;
    b.file("f", size)?;
    emit(
        out,
        &format!(
            "\n### Blast download with AEAD (PROT P) vs cleartext — {}, {} MB file, {} repetitions\n",
            b.desc,
            size / 1_000_000,
            a.reps
        ),
    );
    let mut samples = Vec::new();
    for rep in 0..a.reps.max(1) {
        for aead in order(rep) {
            let extra = tls_args(aead, &fp);
            let mut args: Vec<&str> = vec!["--transport", "udp", "--timeout", "60s"];
            args.extend(extra.iter().map(String::as_str));
            let cmd = b.copy_cmd("f", "dst.bin", &args);
            let s = measured(cmd, b.dir.path(), b.server.id(), aead);
            let _ = std::fs::remove_file(b.dir.path().join("out/dst.bin"));
            samples.push(s?);
        }
    }
    report(&samples, out, record)?;
    emit(out, &format!("\nload average after: {}", load()));
    Ok(())
}

/// `drsftp serve` on 127.0.0.1 (no lab) with TLS, anonymous, on a free port; killed on drop.
struct Local {
    server: Child,
    port: u16,
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// The sans-IO core alone: a sender and a receiver joined in memory move `bytes` (no loss, the clock advancing
/// 1 ms per batch). Returns the seconds taken (one thread, so one core's time).
fn core_seconds(bytes: usize, protection: &drsftp_blast::Protection) -> Result<f64> {
    use drsftp_blast::*;
    let file = vec![0x5au8; bytes];
    let t0 = Instant::now();
    let p = TransferParams::for_mtu_with(7, bytes as u64, 1500, *protection != Protection::None)?;
    let scfg = SenderConfig {
        protection: protection.clone(),
        ..SenderConfig::default()
    };
    let rcfg = ReceiverConfig {
        protection: protection.clone(),
        ..ReceiverConfig::default()
    };
    let mut tx = Sender::new(p, scfg, t0)?;
    let mut rx = Receiver::new(p, rcfg, t0)?;
    let mut out = vec![0u8; bytes];
    let mut batch = Batch::new();
    let mut now = t0;
    let start = Instant::now();
    while !(tx.is_done() && rx.is_complete()) {
        now += Duration::from_millis(1);
        batch.clear();
        tx.poll_transmit(now, 64, &file[..], &mut batch)?;
        for d in batch.iter() {
            if let Ok(RxEvent::Data { offset, data, .. }) = rx.handle_datagram(now, d) {
                out[offset as usize..][..data.len()].copy_from_slice(data);
            }
        }
        if rx.poll_timeout().is_some_and(|t| t <= now) {
            rx.handle_timeout(now);
        }
        while let Some(a) = rx.poll_transmit() {
            let _ = tx.handle_input(now, &a);
        }
        if now > t0 + Duration::from_secs(3600) {
            bail!("the in-memory transfer did not finish");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if out != file {
        bail!("the in-memory transfer is not byte-identical");
    }
    Ok(secs)
}

/// `--only aead-loopback`: the CPU cost of sealing on 127.0.0.1 with no rate cap, a 1 GiB sparse file.
pub(crate) fn loopback(
    bin: &Path,
    _secs: f64,
    reps: u32,
    record: Option<&RunDir>,
) -> Result<String> {
    let dir = tempfile::Builder::new()
        .prefix("drsftp-bench-aead-")
        .tempdir_in("/dev/shm")?;
    let root = dir.path().join("root");
    std::fs::create_dir(&root)?;
    std::fs::create_dir(dir.path().join("out"))?;
    let (tls, fp) = certificate(dir.path(), &["127.0.0.1"])?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = std::fs::File::create(dir.path().join("serve.log"))?;
    let server = Command::new(bin)
        .args(["serve", "--anonymous", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--root")
        .arg(&root)
        .args(&tls)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let l = Local { server, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", l.port)).is_err() {
        if Instant::now() > deadline {
            bail!("drsftp serve did not come up");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let size: u64 = 1 << 30;
    std::fs::File::create(root.join("f"))?.set_len(size)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- drsftp-bench blast --only aead-loopback --reps {reps} ({}) -->",
        load()
    );
    let core_bytes = 256 << 20;
    emit(
        &mut out,
        "\n### The sans-IO core alone, in memory (256 MiB, one thread, no loss)\n",
    );
    emit(
        &mut out,
        "| rep | cleartext s | AEAD s | cleartext GB/s | AEAD GB/s | AEAD / cleartext time |",
    );
    emit(&mut out, "|---|---|---|---|---|---|");
    let key = drsftp_blast::Protection::Aead(drsftp_blast::KeyMaterial::new([0x42; 32]));
    let (mut cs, mut ks) = (vec![], vec![]);
    for rep in 0..reps.max(1) {
        let mut t = [0.0; 2];
        for aead in order(rep) {
            let p = if aead {
                &key
            } else {
                &drsftp_blast::Protection::None
            };
            t[aead as usize] = core_seconds(core_bytes, p)?;
        }
        let gb = core_bytes as f64 / 1e9;
        emit(
            &mut out,
            &format!(
                "| {} | {:.3} | {:.3} | {:.2} | {:.2} | {:.3} |",
                rep + 1,
                t[0],
                t[1],
                gb / t[0],
                gb / t[1],
                t[1] / t[0]
            ),
        );
        cs.push(t[0]);
        ks.push(t[1]);
    }
    let (c, k) = (median(&cs), median(&ks));
    emit(
        &mut out,
        &format!(
            "\nMedian: cleartext {:.2} s of one core per GB, AEAD {:.2} s per GB (+{:.2} s per GB for sealing and opening).",
            c / (core_bytes as f64 / 1e9),
            k / (core_bytes as f64 / 1e9),
            (k - c) / (core_bytes as f64 / 1e9)
        ),
    );
    emit(
        &mut out,
        &format!(
            "\n### Blast download on loopback, no rate cap, AEAD (PROT P) vs cleartext — 1 GiB file, {} cores, {reps} repetitions\n",
            std::thread::available_parallelism().map_or(0, |n| n.get())
        ),
    );
    let dst: PathBuf = dir.path().join("out/dst.bin");
    let mut samples = Vec::new();
    for rep in 0..reps.max(1) {
        for aead in order(rep) {
            let mut cmd = Command::new(bin);
            cmd.args(["copy", "--json", "--no-verify", "-q", "--transport", "udp"])
                .args(tls_args(aead, &fp))
                .arg(format!("ftp://127.0.0.1:{}/f", l.port))
                .arg(&dst);
            let s = measured(cmd, dir.path(), l.server.id(), aead);
            let _ = std::fs::remove_file(&dst);
            samples.push(s?);
        }
    }
    report(&samples, &mut out, record)?;
    emit(&mut out, &format!("\nload average after: {}", load()));
    Ok(out)
}
