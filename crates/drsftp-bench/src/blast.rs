//! `drsftp-bench blast` (was the `bench_blast` example of the drsftp crate): the blast (UDP) benchmark on the WAN
//! lab, for docs/bench/blast.md (issue 6). Run as root from the workspace:
//!
//! ```text
//! cargo build --release -p drsftp -p drsftp-bench
//! target/release/drsftp-bench blast --only ackfreq|rates|fair|probe|udt [--rate 500mbit] [--out FILE]
//! ```
//!
//! Every run is a real `drsftp serve` in lab host 1 and `drsftp copy` (download) in host 2 over a 2-host lab
//! (`drsftp_lab::Lab`, torn down on drop, also on panic), files on /dev/shm (sparse, `--no-verify`: the point is
//! the network). TCP baselines are iperf3 (single cubic / BBR stream, host 1 → host 2) and `drsftp copy -p N`
//! over TCP. Blast throughput is the receiver's data-path rate (file bytes / time from the first datagram to the
//! last packet written) and, in brackets, the end-to-end rate including the control-channel set-up.
//!
//! * `ackfreq`: seed 004 figures 1-2: throughput and duplicates vs the receiver's acknowledgement frequency 1/N on
//!   a short-haul (26 ms) and a long-haul (65 ms) 100 Mbit/s link, 40 MB / 20 MB files as in the paper.
//! * `probe`: blast alone at 0 % loss on 100 ms links of increasing rate: the highest rate the lab sustains.
//! * `rates`: at `--rate` with 100 ms RTT and 0 / 0.1 / 1 % loss, and 200 ms with 5 % loss: blast, iperf3 cubic
//!   and BBR, drsftp -p 4 / -p 8 (cubic).
//! * `fair`: two blast downloads over the same link, then one blast download with one iperf3 cubic flow; shares
//!   over the time both run, from the receivers' progress (part-file growth and iperf3 intervals).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use drsftp_lab::{Lab, LabConfig, TcpSettings};
use drsftp_netem::LossModel;
use serde_json::Value;

use crate::record::RunDir;

const MB: u64 = 1_000_000;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Part to run: ackfreq, probe, rates, fair or udt (needs BENCH_UDT), aead (PROT P blast vs cleartext blast
    /// at --rate, --rtt-ms, --loss; `blast_aead.rs`), aead-loopback (the same on 127.0.0.1, no lab: CPU cost), or
    /// diag (one blast download at --rtt-ms/--rate/--loss, its JSON summary).
    #[arg(long, default_value = "rates")]
    pub only: String,
    /// Link rate of `rates`, `fair`, `udt` and `diag`, e.g. 500mbit.
    #[arg(long, default_value = "500mbit", value_parser = |s: &str| drsftp_tune::parse_rate(s).map(|r| r as u64).map_err(|e| e.to_string()))]
    rate: u64,
    /// Also write the report here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The drsftp binary to run in the lab hosts [default: `drsftp` next to drsftp-bench].
    #[arg(long = "drsftp", value_name = "PATH")]
    pub(crate) drsftp: Option<PathBuf>,
    /// Seconds of transfer each file is sized for.
    #[arg(long, default_value_t = 16.0)]
    secs: f64,
    /// Repetitions.
    #[arg(long, default_value_t = 1)]
    reps: u32,
    /// RTT of `diag`, milliseconds.
    #[arg(long = "rtt-ms", default_value_t = 100)]
    rtt_ms: u64,
    /// Loss probability of `diag` (a fraction, e.g. 0.001).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
}

/// [`Args`] with the drsftp binary located.
pub(crate) struct Opts {
    only: String,
    pub(crate) rate: u64,
    pub(crate) bin: PathBuf,
    pub(crate) secs: f64,
    pub(crate) reps: u32,
    rtt: u64,
    loss: f64,
}

impl Opts {
    pub(crate) fn rtt_ms(&self) -> u64 {
        self.rtt
    }
    pub(crate) fn loss(&self) -> f64 {
        self.loss
    }
}

/// A 2-host lab with `drsftp serve` in host 1 serving a directory on /dev/shm.
pub(crate) struct Bench {
    pub(crate) lab: Lab,
    bin: PathBuf,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) server: Child,
    pub(crate) desc: String,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

fn lab_config(name: &str, rtt_ms: u64, rate: u64, loss: f64) -> LabConfig {
    let mut cfg = LabConfig::new(name, 2, Duration::from_millis(rtt_ms), rate);
    if loss > 0.0 {
        cfg.link = cfg.link.with_loss(LossModel::Bernoulli { p: loss });
    }
    cfg.tcp = TcpSettings {
        congestion: None,
        rmem: Some("4096 131072 67108864".into()),
        wmem: Some("4096 65536 67108864".into()),
    };
    cfg
}

impl Bench {
    fn up(bin: &Path, rtt_ms: u64, rate: u64, loss: f64) -> Result<Bench> {
        Self::up_with(bin, rtt_ms, rate, loss, |_| Ok(vec![]))
    }

    /// [`up`](Self::up) with more `serve` arguments, made from the bench's directory (e.g. TLS files there).
    pub(crate) fn up_with(
        bin: &Path,
        rtt_ms: u64,
        rate: u64,
        loss: f64,
        extra: impl FnOnce(&Path) -> Result<Vec<String>>,
    ) -> Result<Bench> {
        let name = format!("bb{}", std::process::id() % 100_000);
        Self::up_named(&name, bin, rtt_ms, rate, loss, extra)
    }

    /// [`up_with`](Self::up_with) in a lab called `name` (another harness's, e.g. `drsftp-bench tls --lab`).
    pub(crate) fn up_named(
        name: &str,
        bin: &Path,
        rtt_ms: u64,
        rate: u64,
        loss: f64,
        extra: impl FnOnce(&Path) -> Result<Vec<String>>,
    ) -> Result<Bench> {
        let lab = Lab::up(lab_config(name, rtt_ms, rate, loss)).context("lab up")?;
        let dir = tempfile::Builder::new()
            .prefix("drsftp-bench-blast-")
            .tempdir_in("/dev/shm")?;
        std::fs::create_dir(dir.path().join("root"))?;
        std::fs::create_dir(dir.path().join("out"))?;
        let log = std::fs::File::create(dir.path().join("serve.log"))?;
        let extra = extra(dir.path())?;
        let server = lab
            .exec(1, bin.to_str().unwrap())
            .args([
                "serve",
                "--anonymous",
                // Uploads too, as before anonymous sessions became read-only.
                "--anonymous-write",
                "--listen",
                "198.18.0.1:2811",
                "--log",
            ])
            .arg(std::env::var("BENCH_SERVE_LOG").unwrap_or_else(|_| "info".into()))
            .arg("--root")
            .arg(dir.path().join("root"))
            .args(&extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while lab
            .run_in(2, || {
                std::net::TcpStream::connect("198.18.0.1:2811").is_err()
            })
            .unwrap_or(true)
        {
            if Instant::now() > deadline {
                bail!("drsftp serve did not come up in host 1");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let desc = format!(
            "{} ms RTT, {:.0} Mbit/s, {} loss, 1-BDP drop-tail queue",
            rtt_ms,
            rate as f64 / 1e6,
            if loss > 0.0 {
                format!("{}%", loss * 100.0)
            } else {
                "no".into()
            }
        );
        Ok(Bench {
            lab,
            bin: bin.to_path_buf(),
            dir,
            server,
            desc,
        })
    }

    /// A sparse file of `bytes` in the served root.
    pub(crate) fn file(&self, name: &str, bytes: u64) -> Result<()> {
        let p = self.dir.path().join("root").join(name);
        if p.metadata().map(|m| m.len()).ok() != Some(bytes) {
            std::fs::File::create(&p)?.set_len(bytes)?;
        }
        Ok(())
    }

    pub(crate) fn copy_cmd(&self, file: &str, dst: &str, extra: &[&str]) -> Command {
        let mut c = self.lab.exec(2, self.bin.to_str().unwrap());
        c.args(["copy", "--json", "--no-verify", "-q"])
            .args(extra)
            .arg(format!("ftp://198.18.0.1:2811/{file}"))
            .arg(self.dir.path().join("out").join(dst));
        c
    }

    /// One download; the JSON summary.
    fn copy(&self, file: &str, extra: &[&str]) -> Result<Value> {
        let mut c = self.copy_cmd(file, "dst.bin", extra);
        if !extra.contains(&"--timeout") {
            c.args(["--timeout", "60s"]);
        }
        let out = c.output()?;
        let _ = std::fs::remove_file(self.dir.path().join("out/dst.bin"));
        let text = String::from_utf8_lossy(&out.stdout);
        let j: Value = text
            .lines()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| {
                anyhow!(
                    "drsftp copy printed no JSON: {text} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
        if let Some(e) = j.get("error") {
            bail!("drsftp copy failed: {e}");
        }
        Ok(j)
    }

    /// iperf3, one stream host 1 → host 2 with congestion control `cc`: Mbit/s received.
    fn iperf(&self, cc: &str, secs: f64) -> Result<f64> {
        let mut srv = self
            .lab
            .exec(2, "iperf3")
            .args(["-s", "-1", "-B", "198.18.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        std::thread::sleep(Duration::from_millis(300));
        let out = self
            .lab
            .exec(1, "iperf3")
            .args(["-c", "198.18.0.2", "-J", "-C", cc, "-t"])
            .arg(format!("{secs}"))
            .output()?;
        let _ = srv.kill();
        let _ = srv.wait();
        let j: Value = serde_json::from_slice(&out.stdout).context("iperf3 JSON")?;
        j["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .map(|b| b / 1e6)
            .ok_or_else(|| anyhow!("iperf3: {}", j["error"]))
    }

    fn tun_drops(&self) -> u64 {
        self.lab.tun_tx_dropped().iter().sum()
    }
}

/// Blast row values from a copy summary: (goodput over the data path, end-to-end goodput, duplicates %).
pub(crate) fn blast_numbers(j: &Value) -> (f64, f64, f64) {
    let bytes = j["bytes"].as_f64().unwrap_or(0.0);
    let data = j["blast"]["data_seconds"].as_f64().unwrap_or(f64::NAN);
    let dups = j["duplicates"].as_f64().unwrap_or(0.0);
    let pk = j["blast"]["packets"].as_f64().unwrap_or(1.0).max(1.0);
    (
        bytes * 8.0 / data / 1e6,
        j["mbps"].as_f64().unwrap_or(0.0),
        dups / pk * 100.0,
    )
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        f64::NAN
    } else if s.len() % 2 == 1 {
        s[s.len() / 2]
    } else {
        (s[s.len() / 2 - 1] + s[s.len() / 2]) / 2.0
    }
}

/// `(min–max)` of several runs, empty for one.
fn range(v: &[f64]) -> String {
    if v.len() < 2 {
        return String::new();
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("({lo:.0}–{hi:.0})")
}

/// Goodput ceiling of a link for blast packets of MTU 1500 (1436 payload bytes per 1500 on the wire).
fn blast_ceiling(rate: u64) -> f64 {
    rate as f64 / 1e6 * 1436.0 / 1500.0
}

pub(crate) use crate::record::load;

pub(crate) fn emit(out: &mut String, s: &str) {
    println!("{s}");
    out.push_str(s);
    out.push('\n');
}

/// Seed 004 figures 1 and 2.
fn ackfreq(a: &Opts, out: &mut String) -> Result<()> {
    let freqs = [50u32, 100, 300, 600, 900, 1200, 1500, 2000, 2500, 3000];
    for (rtt, size, loss) in [(26, 40 * MB, 0.0), (65, 20 * MB, 0.0), (65, 20 * MB, 0.001)] {
        let b = Bench::up(&a.bin, rtt, 100_000_000, loss)?;
        b.file("f", size)?;
        emit(
            out,
            &format!("\n### {} — {} MB file, 100 Mbit/s\n", b.desc, size / MB),
        );
        emit(out, "| ack every N packets | FOBS triggers: goodput Mbit/s | % of ceiling | duplicates | dup % | acks | drsftp triggers (N or 10 ms): goodput Mbit/s | % of ceiling | duplicates | dup % | acks |");
        emit(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for f in freqs {
            for _ in 0..a.reps {
                let n = f.to_string();
                let fobs = b.copy(
                    "f",
                    &[
                        "--transport",
                        "udp",
                        "--ack-every",
                        &n,
                        "--ack-delay",
                        "10s",
                    ],
                )?;
                let ours = b.copy("f", &["--transport", "udp", "--ack-every", &n])?;
                let cell = |j: &Value| {
                    let (g, _, d) = blast_numbers(j);
                    format!(
                        "{g:.1} | {:.1} % | {} | {d:.2} % | {}",
                        g / blast_ceiling(100_000_000) * 100.0,
                        j["duplicates"],
                        j["blast"]["acks"]
                    )
                };
                emit(out, &format!("| {f} | {} | {} |", cell(&fobs), cell(&ours)));
            }
        }
        emit(
            out,
            &format!(
                "\nload average after: {}; tun0 ring drops: {}",
                load(),
                b.tun_drops()
            ),
        );
    }
    Ok(())
}

/// Blast alone on 100 ms links of rising rate.
fn probe(a: &Opts, out: &mut String) -> Result<()> {
    emit(out, "| link | file | goodput Mbit/s (data path) | % of blast ceiling | end-to-end | duplicates % | socket drops | tun0 ring drops | load |");
    emit(out, "|---|---|---|---|---|---|---|---|---|");
    for rate in [300u64, 500, 700, 1000] {
        let rate = rate * MB;
        let b = Bench::up(&a.bin, 100, rate, 0.0)?;
        let size = (rate as f64 / 8.0 * a.secs) as u64;
        b.file("f", size)?;
        let d0 = b.tun_drops();
        let j = b.copy("f", &["--transport", "udp"])?;
        let (g, e2e, d) = blast_numbers(&j);
        emit(
            out,
            &format!(
                "| {} | {} MB | {g:.1} | {:.1} % | {e2e:.1} | {d:.2} % | {} | {} | {} |",
                b.desc,
                size / MB,
                g / blast_ceiling(rate) * 100.0,
                j["blast"]["socket_drops"],
                b.tun_drops() - d0,
                load()
            ),
        );
    }
    Ok(())
}

/// Blast vs TCP at `a.rate`.
fn rates(a: &Opts, out: &mut String) -> Result<()> {
    let link = a.rate as f64 / 1e6;
    emit(out, &format!("\nLink rate {link:.0} Mbit/s (IP level); blast goodput ceiling at MTU 1500: {:.1} Mbit/s; TCP goodput ceiling ≈ {:.1} Mbit/s.\n", blast_ceiling(a.rate), link * 1448.0 / 1500.0));
    emit(out, "| path | blast Mbit/s (data path) [end-to-end] | blast % of link | dup % | iperf3 cubic | iperf3 BBR | blast / BBR | drsftp -p 4 (cubic) | drsftp -p 8 (cubic) | tun0 drops | load |");
    emit(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (rtt, loss) in [(100u64, 0.0), (100, 0.001), (100, 0.01), (200, 0.05)] {
        let b = Bench::up(&a.bin, rtt, a.rate, loss)?;
        let size = (a.rate as f64 / 8.0 * a.secs) as u64;
        b.file("big", size)?;
        let d0 = b.tun_drops();
        // Repetitions interleave blast, cubic and BBR so drifts of the shared machine hit all three alike.
        let (mut gs, mut e2es, mut ds, mut cubics, mut bbrs) =
            (vec![], vec![], vec![], vec![], vec![]);
        for _ in 0..a.reps.max(1) {
            let j = b.copy("big", &["--transport", "udp"])?;
            let (g, e2e, d) = blast_numbers(&j);
            gs.push(g);
            e2es.push(e2e);
            ds.push(d);
            cubics.push(b.iperf("cubic", a.secs)?);
            bbrs.push(b.iperf("bbr", a.secs)?);
        }
        let (g, e2e, d) = (median(&gs), median(&e2es), median(&ds));
        let (cubic, bbr) = (median(&cubics), median(&bbrs));
        // IP-level share: blast packets are 1500 B on the wire for 1436 B of file.
        let pct = g * 1500.0 / 1436.0 / link * 100.0;
        let mut par = vec![];
        for p in ["4", "8"] {
            // Size the file for ~secs at the rate cubic x P would reach (at least 16 MB, at most the blast file).
            let n: f64 = p.parse()?;
            let est = (cubic * n).min(link) * 1e6 / 8.0 * a.secs;
            let sz = (est as u64).clamp(16 * MB, size);
            b.file(&format!("p{p}"), sz)?;
            let r = b.copy(
                &format!("p{p}"),
                &["-p", p, "--congestion", "cubic", "--timeout", "120s"],
            );
            par.push(match r {
                Ok(j) => format!("{:.1}", j["mbps"].as_f64().unwrap_or(0.0)),
                Err(e) => format!("failed ({e})"),
            });
        }
        emit(
            out,
            &format!(
                "| {} | {g:.1} {} [{e2e:.1}] | {pct:.1} % | {d:.2} % | {cubic:.1} | {bbr:.1} {} | {:.2}× | {} | {} | {} | {} |",
                b.desc,
                range(&gs),
                range(&bbrs),
                g / bbr,
                par[0],
                par[1],
                b.tun_drops() - d0,
                load()
            ),
        );
    }
    Ok(())
}

/// UDT (Debian's libudt4, through a small harness given in BENCH_UDT: `udtperf s PORT` / `udtperf c HOST PORT BYTES`)
/// next to blast, paired on the same lab: Mbit/s received, first to last byte.
fn udt(a: &Opts, out: &mut String) -> Result<()> {
    let harness = std::env::var("BENCH_UDT").context("BENCH_UDT=path of the udtperf harness")?;
    emit(
        out,
        "| path | blast Mbit/s (data path) | UDT Mbit/s | blast / UDT | load |",
    );
    emit(out, "|---|---|---|---|---|");
    for (rtt, loss) in [(100u64, 0.0), (100, 0.001), (100, 0.01), (200, 0.05)] {
        let b = Bench::up(&a.bin, rtt, a.rate, loss)?;
        let size = (a.rate as f64 / 8.0 * a.secs) as u64;
        b.file("big", size)?;
        let (mut gs, mut us, mut cuts) = (vec![], vec![], false);
        for _ in 0..a.reps.max(1) {
            gs.push(blast_numbers(&b.copy("big", &["--transport", "udp"])?).0);
            let (u, cut) = udt_once(&b, &harness, size, a.secs)?;
            cuts |= cut;
            us.push(u);
        }
        let (g, udt) = (median(&gs), median(&us));
        emit(
            out,
            &format!(
                "| {} | {g:.1} {} | {udt:.1}{} {} | {:.2}× | {} |",
                b.desc,
                range(&gs),
                if cuts { "*" } else { "" },
                range(&us),
                g / udt,
                load()
            ),
        );
    }
    Ok(())
}

/// One UDT transfer of `size` bytes host 1 -> host 2: Mbit/s received, and whether it was cut off after
/// `4 × secs + 20` s (then the rate so far, from the harness's once-a-second progress lines).
fn udt_once(b: &Bench, harness: &str, size: u64, secs: f64) -> Result<(f64, bool)> {
    let mut srv = b
        .lab
        .exec(2, harness)
        .args(["s", "9000"])
        .stdout(Stdio::piped())
        .spawn()?;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        let out = srv.stdout.take().context("udtperf stdout")?;
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(mut v) = lines.lock() {
                    v.push(l);
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut cli = b
        .lab
        .exec(1, harness)
        .args(["c", "198.18.0.2", "9000", &size.to_string()])
        .stdout(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs_f64(secs * 4.0 + 20.0);
    let mut cut = false;
    while srv.try_wait()?.is_none() {
        if Instant::now() > deadline {
            cut = true;
            let _ = srv.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = srv.wait();
    let _ = cli.kill();
    let _ = cli.wait();
    let _ = reader.join();
    let last = lines
        .lock()
        .ok()
        .and_then(|v| v.iter().rev().find(|l| l.starts_with('{')).cloned());
    let mbps = last
        .and_then(|l| serde_json::from_str::<Value>(&l).ok())
        .and_then(|v| v["mbps"].as_f64())
        .unwrap_or(f64::NAN);
    Ok((mbps, cut))
}

/// Bytes of the part file a running download writes into (the receiver writes mostly in order).
fn part_size(dir: &Path, dst: &str) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.contains(dst) && n.contains("drsftp-part")
        })
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .max()
        .unwrap_or(0)
}

/// Two blast flows, then blast + TCP, on one link.
fn fair(a: &Opts, out: &mut String) -> Result<()> {
    let b = Bench::up(&a.bin, 100, a.rate, 0.0)?;
    let size = (a.rate as f64 / 8.0 * a.secs * 1.5) as u64;
    b.file("a", size)?;
    b.file("b", size)?;
    emit(
        out,
        &format!(
            "\n{} — shares measured over the interval where both flows run (after 3 s).\n",
            b.desc
        ),
    );
    let od = b.dir.path().join("out");
    // Two blast flows started together.
    let mut ca = b
        .copy_cmd("a", "a.bin", &["--transport", "udp"])
        .stdout(Stdio::null())
        .spawn()?;
    let mut cb = b
        .copy_cmd("b", "b.bin", &["--transport", "udp"])
        .stdout(Stdio::null())
        .spawn()?;
    let t0 = Instant::now();
    let mut samples = vec![];
    loop {
        let (sa, sb) = (part_size(&od, "a.bin"), part_size(&od, "b.bin"));
        let t = t0.elapsed().as_secs_f64();
        // A part file that is gone was renamed into place: that flow has finished.
        let gone = samples
            .last()
            .is_some_and(|&(_, pa, pb): &(f64, u64, u64)| {
                (pa > 0 && sa == 0) || (pb > 0 && sb == 0)
            });
        if gone || ca.try_wait()?.is_some() || cb.try_wait()?.is_some() {
            break;
        }
        samples.push((t, sa, sb));
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = ca.wait();
    let _ = cb.wait();
    if samples.len() < 10 {
        bail!("the two flows overlapped for less than a second");
    }
    let start = samples
        .iter()
        .find(|s| s.0 >= 3.0)
        .copied()
        .unwrap_or(samples[0]);
    let end = samples[samples.len() - 1];
    let dt = end.0 - start.0;
    let ra = (end.1 - start.1) as f64 * 8.0 / dt / 1e6;
    let rb = (end.2 - start.2) as f64 * 8.0 / dt / 1e6;
    let half = (ra + rb) / 2.0;
    emit(
        out,
        "| test | flow 1 Mbit/s | flow 2 Mbit/s | sum | flow 1 / half | flow 2 / half | window |",
    );
    emit(out, "|---|---|---|---|---|---|---|");
    emit(
        out,
        &format!(
            "| two blast flows | {ra:.1} | {rb:.1} | {:.1} | {:.2} | {:.2} | {:.1}-{:.1} s |",
            ra + rb,
            ra / half,
            rb / half,
            start.0,
            end.0
        ),
    );
    for f in ["a.bin", "b.bin"] {
        let _ = std::fs::remove_file(od.join(f));
    }
    // Blast + one iperf3 cubic flow starting 3 s later for secs.
    let mut srv = b
        .lab
        .exec(2, "iperf3")
        .args(["-s", "-1", "-B", "198.18.0.2"])
        .stdout(Stdio::null())
        .spawn()?;
    let mut cu = b
        .copy_cmd("a", "a.bin", &["--transport", "udp"])
        .stdout(Stdio::null())
        .spawn()?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let secs = (a.secs * 0.8).max(8.0);
    let tcp = b
        .lab
        .exec(1, "iperf3")
        .args([
            "-c",
            "198.18.0.2",
            "-J",
            "-C",
            "cubic",
            "-t",
            &format!("{secs}"),
        ])
        .stdout(Stdio::piped())
        .spawn()?;
    let s0 = (t0.elapsed().as_secs_f64(), part_size(&od, "a.bin"));
    let tout = tcp.wait_with_output()?;
    let s1 = (t0.elapsed().as_secs_f64(), part_size(&od, "a.bin"));
    let _ = cu.wait();
    let _ = srv.kill();
    let _ = srv.wait();
    let j: Value = serde_json::from_slice(&tout.stdout).context("iperf3 JSON")?;
    let rt = j["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    let ru = (s1.1 - s0.1) as f64 * 8.0 / (s1.0 - s0.0) / 1e6;
    emit(
        out,
        &format!(
            "| blast + TCP cubic | {ru:.1} (blast) | {rt:.1} (TCP) | {:.1} | TCP share {:.0} % | | {:.1}-{:.1} s |",
            ru + rt,
            rt / (ru + rt) * 100.0,
            s0.0,
            s1.0
        ),
    );
    emit(out, &format!("\nload average after: {}", load()));
    Ok(())
}

/// Runs the part of `--only`; the report also goes to `--out` and, with `record`, into the run folder.
pub fn run(args: &Args, record: Option<&RunDir>) -> Result<()> {
    if args.only == "aead-loopback" {
        // No lab: drsftp serve and copy on 127.0.0.1.
        let bin = crate::drsftp_binary(args.drsftp.as_deref())?;
        let out = crate::blast_aead::loopback(&bin, args.secs, args.reps, record)?;
        return finish(args, record, &out);
    }
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let a = Opts {
        only: args.only.clone(),
        rate: args.rate,
        bin: crate::drsftp_binary(args.drsftp.as_deref())?,
        secs: args.secs,
        reps: args.reps,
        rtt: args.rtt_ms,
        loss: args.loss,
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!-- drsftp-bench blast --only {} --rate {} --secs {} ({}) -->",
        a.only,
        a.rate,
        a.secs,
        load()
    );
    match a.only.as_str() {
        "ackfreq" => ackfreq(&a, &mut out)?,
        "probe" => probe(&a, &mut out)?,
        "rates" => rates(&a, &mut out)?,
        "fair" => {
            for _ in 0..a.reps.max(1) {
                fair(&a, &mut out)?;
            }
        }
        "udt" => udt(&a, &mut out)?,
        "aead" => crate::blast_aead::lab(&a, &mut out, record)?,
        "diag" => {
            let b = Bench::up(&a.bin, a.rtt, a.rate, a.loss)?;
            let size = (a.rate as f64 / 8.0 * a.secs) as u64;
            b.file("f", size)?;
            let j = b.copy("f", &["--transport", "udp"])?;
            emit(&mut out, &format!("{j}"));
            std::fs::copy(b.dir.path().join("serve.log"), "/tmp/bb/serve.log")?;
        }
        o => bail!("--only {o}: ackfreq, probe, rates, fair, udt, aead, aead-loopback or diag"),
    }
    finish(args, record, &out)
}

fn finish(args: &Args, record: Option<&RunDir>, out: &str) -> Result<()> {
    if let Some(p) = &args.out {
        std::fs::write(p, out).with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(r) = record {
        r.report(out)?;
    }
    Ok(())
}
