//! `drsftp demo`: the main job on a built-in default, in one process. Makes a scratch directory (in RAM on
//! /dev/shm when there is room, so the disk is not what is measured), generates a file, starts the GridFTP server
//! on 127.0.0.1 (an ephemeral port) serving that directory, downloads the file with the client driver over N
//! parallel MODE E streams, verifies it end to end (CKSM SHA-256 from the server against a local hash), prints a
//! summary, shuts the server down and removes the directory (also on Ctrl-C / SIGTERM).

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use drsftp_io::client::{Client, ClientOptions, TransferMode, TransferSummary};
use drsftp_io::data::{DataOpts, Progress};
use drsftp_io::server::{self, ServerParams};
use drsftp_proto::server::ServerConfig;
use drsftp_storage::FsStorage;
use drsftp_tune::BufferPolicy;
use serde_json::json;

use super::copy::{human_bytes, Bar};

/// Run a real loopback transfer: an in-process drsftp server on 127.0.0.1, a generated file, a download over
/// parallel MODE E streams verified with SHA-256 (CKSM), and a summary of speed and buffer use.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Everything happens in this one process and on loopback only: a scratch directory is made (on /dev/shm, i.e. in \
RAM, when it has room for two copies of the file, otherwise in the system temp directory, which then measures the \
disk too; the summary says which), a file of --size pseudo-random bytes is generated, a drsftp server is started \
on 127.0.0.1 with an ephemeral port, and the file is downloaded with the same client `drsftp copy` uses. The \
server computes CKSM (CRC32C) while the client hashes its copy; the two must agree. The directory is removed at the \
end, also on Ctrl-C.

Examples:
  drsftp demo                              # 1 GiB, 4 MODE E streams, kernel buffer autotuning
  drsftp demo --size 2G --streams 8 --buffer drs
  drsftp demo --size 256M --streams 1      # plain stream mode, one connection
  drsftp demo --json                       # one JSON object on stdout")]
pub struct Args {
    /// Size of the generated file: bytes, or with a binary suffix K/M/G (1G = 1 GiB).
    #[arg(long, default_value = "1G", value_name = "SIZE", value_parser = super::units_arg::size)]
    size: u64,
    /// Parallel TCP streams. More than 1 uses MODE E (extended block mode) like `drsftp copy -p N`; 1 uses plain
    /// stream mode.
    #[arg(short = 'p', long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=128))]
    streams: u32,
    /// Buffer policy for the client's data sockets: `kernel` (Linux autotuning), `drs` (user-space Dynamic
    /// Right-Sizing) or a fixed size such as 4M. Default: what `drsftp copy` uses (kernel). The server side keeps
    /// kernel autotuning.
    #[arg(long, value_name = "drs|kernel|SIZE", value_parser = policy_arg)]
    buffer: Option<BufferPolicy>,
    /// Make the scratch directory under DIR instead of /dev/shm or the system temp directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Seed of the file's pseudo-random content.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the CKSM comparison (sizes are still checked), like `drsftp copy --no-verify`.
    #[arg(long)]
    no_verify: bool,
    /// Print exactly one JSON object with the result (or the error) on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar and no step messages; the summary (or JSON) is still printed.
    #[arg(short, long)]
    quiet: bool,
}

fn policy_arg(s: &str) -> Result<BufferPolicy, String> {
    s.parse::<BufferPolicy>().map_err(|e| e.to_string())
}

/// Where the scratch directory lives, and whether that is RAM.
#[derive(Debug)]
struct Scratch {
    path: PathBuf,
    in_ram: bool,
}

impl Scratch {
    /// Picks the place (/dev/shm when it has room for the source and the download plus slack) and creates a
    /// fresh directory there.
    fn create(args: &Args) -> Result<Scratch> {
        let need = args.size.saturating_mul(2).saturating_add(64 << 20);
        let (base, in_ram) = match &args.dir {
            Some(d) => (d.clone(), is_tmpfs(d)),
            None => {
                let shm = Path::new("/dev/shm");
                if shm.is_dir() && free_bytes(shm).is_some_and(|f| f >= need) {
                    (shm.to_path_buf(), true)
                } else {
                    let t = std::env::temp_dir();
                    let ram = is_tmpfs(&t);
                    (t, ram)
                }
            }
        };
        if let Some(free) = free_bytes(&base) {
            if free < need {
                bail!(
                    "{} has {} free; the demo needs about {} (the file and its download). Use a smaller --size \
                     or --dir elsewhere",
                    base.display(),
                    human_bytes(free),
                    human_bytes(need)
                );
            }
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let path = base.join(format!("drsftp-demo.{}.{stamp:08x}", std::process::id()));
        std::fs::create_dir(&path)
            .with_context(|| format!("creating the scratch directory {}", path.display()))?;
        Ok(Scratch { path, in_ram })
    }

    fn describe(&self) -> String {
        if self.in_ram {
            format!(
                "{} (tmpfs, in RAM: the disk is not measured)",
                self.path.display()
            )
        } else {
            format!(
                "{} (not tmpfs: disk writes are part of the measurement)",
                self.path.display()
            )
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("drsftp demo: could not remove {}: {e}", self.path.display());
            }
        }
    }
}

/// Available bytes on the filesystem holding `p` (`df`, so no extra dependency); `None` if unknown.
fn free_bytes(p: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["-P", "-B1"])
        .arg(p)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().nth(1)?.split_whitespace().nth(3)?.parse().ok()
}

/// True if `p` is on a tmpfs (from /proc/self/mountinfo: the longest mount point containing `p`).
fn is_tmpfs(p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let mut best: Option<(usize, bool)> = None;
    for line in info.lines() {
        // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
        let mut halves = line.splitn(2, " - ");
        let (Some(left), Some(right)) = (halves.next(), halves.next()) else {
            continue;
        };
        let Some(mount) = left.split_whitespace().nth(4) else {
            continue;
        };
        let fstype = right.split_whitespace().next().unwrap_or("");
        let longer = match best {
            None => true,
            Some((len, _)) => mount.len() >= len,
        };
        if p.starts_with(mount) && longer {
            best = Some((mount.len(), fstype == "tmpfs"));
        }
    }
    best.is_some_and(|(_, t)| t)
}

/// Writes `size` pseudo-random bytes (xorshift64*, seeded) to `path` in 1 MiB buffers. Stops early with an error
/// when `cancel` is set.
fn generate(path: &Path, size: u64, seed: u64, cancel: &AtomicBool) -> Result<()> {
    let mut f =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        if cancel.load(Ordering::Relaxed) {
            bail!("interrupted");
        }
        let n = left.min(buf.len() as u64) as usize;
        for chunk in buf[..n].chunks_mut(8) {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        f.write_all(&buf[..n])
            .with_context(|| format!("writing {}", path.display()))?;
        left -= n as u64;
    }
    Ok(())
}

/// What the demo measured.
#[derive(Debug)]
struct Outcome {
    summary: TransferSummary,
    server: SocketAddr,
    generate_seconds: f64,
    /// From the download call to its return: transfer, verification and fsync.
    total_seconds: f64,
}

fn say(args: &Args, msg: impl AsRef<str>) {
    if !args.quiet && !args.json {
        eprintln!("drsftp demo: {}", msg.as_ref());
    }
}

pub fn run(args: Args) -> Result<()> {
    let buffer = args.buffer.unwrap_or(ClientOptions::default().buffer);
    let result = Scratch::create(&args).and_then(|scratch| {
        let r = run_in(&args, buffer, &scratch);
        // `scratch` is dropped (the directory removed) before the summary is printed.
        r.map(|o| (o, scratch.path.clone(), scratch.describe(), scratch.in_ram))
    });
    match result {
        Ok((o, dir, place, in_ram)) => {
            report(&args, buffer, &o, &dir, &place, in_ram);
            Ok(())
        }
        Err(e) => {
            if args.json {
                println!("{}", json!({"error": format!("{e:#}")}));
            }
            Err(e)
        }
    }
}

fn run_in(args: &Args, buffer: BufferPolicy, scratch: &Scratch) -> Result<Outcome> {
    say(args, format!("scratch directory {}", scratch.describe()));
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let cancel = Arc::new(AtomicBool::new(false));
    let result = rt.block_on(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            r = demo(args, buffer, &scratch.path, cancel.clone()) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
            _ = term.recv() => Err(anyhow::anyhow!("terminated")),
        }
    });
    // On interruption the demo future was dropped: its server Shutdown handle with it (the accept loop and the
    // sessions stop) and the client's part file. Stop the generator too, then let the runtime wind down.
    cancel.store(true, Ordering::Relaxed);
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn demo(
    args: &Args,
    buffer: BufferPolicy,
    work: &Path,
    cancel: Arc<AtomicBool>,
) -> Result<Outcome> {
    let root = work.join("root");
    std::fs::create_dir(&root).with_context(|| format!("creating {}", root.display()))?;
    let src = root.join("demo.bin");
    let dst = work.join("download.bin");

    say(
        args,
        format!(
            "generating {} of pseudo-random data",
            human_bytes(args.size)
        ),
    );
    let t0 = Instant::now();
    {
        let (src, size, seed, cancel) = (src.clone(), args.size, args.seed, cancel.clone());
        tokio::task::spawn_blocking(move || generate(&src, size, seed, &cancel))
            .await
            .context("generator task")??;
    }
    let generate_seconds = t0.elapsed().as_secs_f64();

    let storage = FsStorage::new(&root).with_context(|| format!("serving {}", root.display()))?;
    let session = ServerConfig {
        anonymous: true,
        ..ServerConfig::default()
    };
    let params = ServerParams::new(session, DataOpts::default(), Arc::new(storage));
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("literal address");
    let (addr, shutdown, task) = server::spawn(listen, params)
        .await
        .context("starting the server on 127.0.0.1")?;
    let opts = ClientOptions {
        streams: args.streams,
        buffer,
        verify: !args.no_verify,
        ..ClientOptions::default()
    };
    say(
        args,
        format!(
            "server on ftp://{addr}/ (in this process); downloading with {} ({}), buffers {buffer}",
            streams_text(args.streams as usize),
            mode_text(opts.mode())
        ),
    );
    let r = download(args, addr, &dst, &opts).await;
    shutdown.trigger();
    match tokio::time::timeout(Duration::from_secs(5), task).await {
        Ok(Ok(Err(e))) => tracing::warn!("server: {e}"),
        Ok(Err(e)) => tracing::warn!("server task: {e}"),
        Err(_) => tracing::warn!("server did not stop within 5 s"),
        Ok(Ok(Ok(()))) => {}
    }
    let (summary, total_seconds) = r?;
    Ok(Outcome {
        summary,
        server: addr,
        generate_seconds,
        total_seconds,
    })
}

async fn download(
    args: &Args,
    addr: SocketAddr,
    dst: &Path,
    opts: &ClientOptions,
) -> Result<(TransferSummary, f64)> {
    let mut client = Client::connect(&addr.to_string(), "anonymous", "demo@drsftp", opts.timeout)
        .await
        .with_context(|| format!("logging in to {addr}"))?;
    let progress = Arc::new(Progress::new());
    let bar = Bar::start(args.quiet || args.json, Some(args.size), progress.clone());
    let t0 = Instant::now();
    let r = client.download("/demo.bin", dst, opts, progress).await;
    let total = t0.elapsed().as_secs_f64();
    bar.finish();
    let s = r.with_context(|| format!("downloading ftp://{addr}/demo.bin"))?;
    if let Err(e) = client.quit().await {
        tracing::debug!("QUIT: {e}");
    }
    if s.bytes != args.size {
        bail!("moved {} bytes, expected {}", s.bytes, args.size);
    }
    if !args.no_verify && !s.verified {
        bail!("the download was not verified: {}", s.notices.join("; "));
    }
    Ok((s, total))
}

fn mode_text(m: TransferMode) -> &'static str {
    match m {
        TransferMode::Extended => "MODE E",
        TransferMode::Stream => "stream mode",
    }
}

fn streams_text(n: usize) -> String {
    if n == 1 {
        "1 stream".into()
    } else {
        format!("{n} streams")
    }
}

fn policy_text(p: BufferPolicy) -> String {
    match p {
        BufferPolicy::Kernel => "kernel (Linux autotuning)".into(),
        BufferPolicy::Drs => "drs (user-space Dynamic Right-Sizing)".into(),
        BufferPolicy::Fixed(_) => format!("fixed {p} per stream"),
    }
}

fn report(args: &Args, buffer: BufferPolicy, o: &Outcome, dir: &Path, place: &str, in_ram: bool) {
    let s = &o.summary;
    let gbps = s.mbps() / 1000.0;
    if args.json {
        let j = json!({
            "bytes": s.bytes,
            "seconds": s.seconds,
            "total_seconds": o.total_seconds,
            "generate_seconds": o.generate_seconds,
            "gbps": gbps,
            "mbps": s.mbps(),
            "streams": s.streams,
            "mode": s.mode.letter().to_string(),
            "buffer_policy": buffer.to_string(),
            "peak_buffer_bytes": s.peak_buffer,
            "peak_window_bytes": s.peak_window,
            "verified": s.verified,
            "checksum": s.checksum.as_ref().map(|(a, h)| format!("{}:{h}", a.to_ascii_lowercase())),
            "server": format!("ftp://{}/", o.server),
            "scratch_dir": dir.display().to_string(),
            "tmpfs": in_ram,
            "notices": s.notices,
        });
        println!("{j}");
        return;
    }
    for n in &s.notices {
        eprintln!("drsftp demo: note: {n}");
    }
    let verified = match (&s.checksum, s.verified) {
        (Some((alg, h)), true) => format!("yes, {alg} via CKSM (server) = local hash: {h}"),
        _ if args.no_verify => "no (--no-verify; sizes checked)".into(),
        _ => "NO".into(),
    };
    let peak = if s.peak_buffer > 0 {
        format!(
            "{} ({} bytes) across streams",
            human_bytes(s.peak_buffer),
            s.peak_buffer
        )
    } else {
        "not reported".into()
    };
    let lines = [
        (
            "size",
            format!("{} ({} bytes)", human_bytes(s.bytes), s.bytes),
        ),
        (
            "seconds",
            format!(
                "{:.3} transfer ({:.3} including verification and fsync)",
                s.seconds, o.total_seconds
            ),
        ),
        (
            "throughput",
            format!("{gbps:.2} Gbit/s ({:.0} MB/s)", s.mbps() / 8.0),
        ),
        ("streams", streams_text(s.streams)),
        ("mode", mode_text(s.mode).to_string()),
        ("buffer policy", policy_text(buffer)),
        ("peak buffer", peak),
        ("verified", verified),
        ("files", format!("{place}, removed")),
    ];
    println!("drsftp demo: loopback download from an in-process drsftp server (127.0.0.1)");
    for (k, v) in lines {
        println!("  {k:<14}{v}");
    }
}
