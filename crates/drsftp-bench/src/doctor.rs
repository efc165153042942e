//! `drsftp-bench doctor`: issue 21's "done when" on a lab. A 2-host lab whose namespaces cap TCP autotuning
//! (`tcp_rmem`/`tcp_wmem` max 256 KiB by default) on a 1 Gbit/s · 50 ms path; `drsftp serve --buffer kernel`
//! in host 1, `drsftp doctor URL --json` in host 2, then per rep: the small limits in both hosts, a
//! `drsftp copy --buffer kernel` download (before), exactly the `sysctl -w` lines of the doctor's Limit findings
//! run in both hosts, the same copy again (after). Before and after alternate in every rep, so machine noise
//! hits both. The lab comes down on every exit (Lab's Drop; the server is killed by PID first).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use drsftp_lab::{Lab, LabConfig, TcpSettings};
use drsftp_tune::{parse_duration, parse_rate};

use crate::record::{Md, RunDir};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Round-trip time of the lab link.
    #[arg(long, default_value = "50ms", value_parser = |s: &str| parse_duration(s).map_err(|e| e.to_string()))]
    rtt: Duration,
    /// Bottleneck rate of the lab link.
    #[arg(long, default_value = "1gbit", value_parser = |s: &str| parse_rate(s).map_err(|e| e.to_string()))]
    rate: u64,
    /// The deliberately small net.ipv4.tcp_rmem and tcp_wmem in both hosts ("min default max").
    #[arg(long, default_value = "4096 131072 262144")]
    limit: String,
    /// Size of the file each copy downloads, MiB.
    #[arg(long, default_value_t = 64)]
    size_mib: u64,
    /// Before/after pairs.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// The drsftp binary [default: next to drsftp-bench].
    #[arg(long)]
    pub(crate) drsftp: Option<PathBuf>,
}

/// The lab name of this harness (the ops engineer's lab).
const LAB: &str = "ops";
const PORT: u16 = 2811;

/// `drsftp serve` in a lab host, killed by PID on drop (before the lab comes down).
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sh(lab: &Lab, k: usize, line: &str) -> Result<String> {
    let out = lab
        .exec(k, "sh")
        .args(["-c", line])
        .output()
        .with_context(|| format!("host {k}: {line}"))?;
    if !out.status.success() {
        bail!(
            "host {k}: `{line}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One `drsftp copy --buffer kernel -p 1` download in host 2: Mbit/s.
fn copy(lab: &Lab, exe: &Path, work: &Path, url: &str) -> Result<f64> {
    let dst = work.join("got.bin");
    let out = lab
        .exec(2, &exe.to_string_lossy())
        .args(["copy", url])
        .arg(&dst)
        .args(["--buffer", "kernel", "-p", "1", "--no-verify", "--json"])
        .env("HOME", "/nonexistent")
        .output()
        .context("drsftp copy")?;
    let _ = std::fs::remove_file(&dst);
    if !out.status.success() {
        bail!("drsftp copy: {}", String::from_utf8_lossy(&out.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("copy JSON {:?}", String::from_utf8_lossy(&out.stdout)))?;
    v["mbps"].as_f64().context("no mbps in the copy JSON")
}

fn set_limits(lab: &Lab, limit: &str) -> Result<()> {
    for k in [1, 2] {
        sh(
            lab,
            k,
            &format!("sysctl -q -w net.ipv4.tcp_rmem=\"{limit}\" net.ipv4.tcp_wmem=\"{limit}\""),
        )?;
    }
    Ok(())
}

pub fn run(a: &Args, record: Option<&RunDir>) -> Result<()> {
    drsftp_lab::check_prerequisites().map_err(|e| anyhow!("lab unavailable: {e}"))?;
    let exe = crate::drsftp_binary(a.drsftp.as_deref())?;
    let work = std::env::temp_dir().join(format!("drsftp-bench-doctor-{}", std::process::id()));
    std::fs::create_dir_all(work.join("srv"))?;
    let res = (|| -> Result<String> {
        // Content does not matter (no compression on the wire); a sparse file costs no disk.
        std::fs::File::create(work.join("srv/data.bin"))?.set_len(a.size_mib << 20)?;
        let mut cfg = LabConfig::new(LAB, 2, a.rtt, a.rate);
        cfg.tcp = TcpSettings {
            congestion: None,
            rmem: Some(a.limit.clone()),
            wmem: Some(a.limit.clone()),
        };
        let lab = Lab::up(cfg).map_err(|e| anyhow!("lab up: {e}"))?;
        let r = measure(a, &lab, &exe, &work);
        drop(lab);
        r
    })();
    let _ = std::fs::remove_dir_all(&work);
    let md = res?;
    print!("{md}");
    if let Some(r) = record {
        r.report(&md)?;
    }
    Ok(())
}

fn measure(a: &Args, lab: &Lab, exe: &Path, work: &Path) -> Result<String> {
    let addr = lab.addr(1);
    let mut child = lab
        .exec(1, &exe.to_string_lossy())
        .args(["serve", "--anonymous", "--anonymous-write", "--print-addr"])
        .args(["--buffer", "kernel", "--root"])
        .arg(work.join("srv"))
        .args(["--listen", &format!("{addr}:{PORT}")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("drsftp serve in host 1")?;
    let out = child.stdout.take().context("serve stdout")?;
    let _server = Server(child);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line)?;
    if !line.starts_with("listening") {
        bail!("drsftp serve printed {line:?}");
    }
    let dir_url = format!("ftp://{addr}:{PORT}/");
    let url = format!("{dir_url}data.bin");

    // The doctor, in the client host, with the small limits in force.
    let out = lab
        .exec(2, &exe.to_string_lossy())
        .args(["doctor", &dir_url, "--json", "--path"])
        .arg(work)
        .env("HOME", "/nonexistent")
        .output()
        .context("drsftp doctor")?;
    if !out.status.success() {
        bail!("drsftp doctor: {}", String::from_utf8_lossy(&out.stderr));
    }
    let doctor: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let binding = doctor["binding"].as_str().unwrap_or("none").to_string();
    let commands: Vec<String> = doctor["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["level"] == "limit")
        .flat_map(|f| f["fix"].as_array().cloned().unwrap_or_default())
        .filter_map(|l| l.as_str().map(str::to_string))
        .filter(|l| l.starts_with("sysctl -w "))
        .collect();
    if commands.is_empty() {
        bail!("the doctor printed no sysctl command; binding {binding}:\n{doctor:#}");
    }

    let mut rows = vec![];
    for rep in 1..=a.reps {
        set_limits(lab, &a.limit)?;
        let before = copy(lab, exe, work, &url)?;
        for c in &commands {
            for k in [1, 2] {
                sh(lab, k, c)?;
            }
        }
        let after = copy(lab, exe, work, &url)?;
        eprintln!(
            "rep {rep}: before {before:.1} Mbit/s, after {after:.1} Mbit/s (load {})",
            crate::record::load()
        );
        rows.push((rep, before, after, crate::record::load()));
    }

    let mut md = Md::default();
    md.line("# drsftp doctor on a buffer-limited lab path\n");
    md.line(format!(
        "Lab `{LAB}`: 2 hosts, {} Mbit/s, RTT {} ms, net.ipv4.tcp_rmem = tcp_wmem = \"{}\" in both namespaces \
         (global net.core.rmem_max {}). `drsftp serve --buffer kernel` in host 1; in host 2 \
         `drsftp copy --buffer kernel -p 1 --no-verify` of a {} MiB file.\n",
        a.rate as f64 / 1e6,
        a.rtt.as_secs_f64() * 1e3,
        a.limit,
        std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .unwrap_or_default()
            .trim(),
        a.size_mib
    ));
    md.line(format!(
        "`drsftp doctor {dir_url} --json` in host 2: binding limit **{binding}**; path {}; probe {}.\n",
        doctor["path"], doctor["probe"]
    ));
    md.line("Commands of its Limit findings, run in both hosts after each \"before\" copy:\n");
    md.line("```");
    for c in &commands {
        md.line(c);
    }
    md.line("```\n");
    md.line("| rep | before (Mbit/s) | after (Mbit/s) | ratio | load after |");
    md.line("|---|---|---|---|---|");
    for (rep, b, a2, l) in &rows {
        md.line(format!(
            "| {rep} | {b:.1} | {a2:.1} | {:.2} | {l} |",
            a2 / b
        ));
    }
    let n = rows.len() as f64;
    let mb = rows.iter().map(|r| r.1).sum::<f64>() / n;
    let ma = rows.iter().map(|r| r.2).sum::<f64>() / n;
    md.line(format!(
        "| mean | {mb:.1} | {ma:.1} | **{:.2}** | |\n",
        ma / mb
    ));
    md.line("Full doctor report (JSON):\n");
    md.line("```json");
    md.line(serde_json::to_string_pretty(&doctor)?);
    md.line("```");
    Ok(md.text().to_string())
}
