//! `drsftp tune calibrate URL`: seed 001's calibration on the user's own path with real GridFTP transfers. For every
//! buffer size x stream count it downloads (MODE E, fixed buffers on both ends via SITE RETRBUFSIZE, no checksum)
//! sections of the server file for about `--secs`, finds per buffer the saturation point (the stream count beyond
//! which throughput stops rising), fits C1' and C2 by least squares, prints the fit's error against the measured
//! points, measures the path's random loss with a paced blast probe (`calibrate_loss`) and stores the path profile
//! that `drsftp copy -p auto` and `--transport auto` read (`drsftp_io::client::profile`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use drsftp_io::client::{Client, ClientOptions, Partial};
use drsftp_io::data::Progress;
use drsftp_tune::{fit, saturation_point, BufferPolicy, FitPoint};
use drsftp_units::format_size;
use serde_json::json;

use crate::url::{parse_url, FtpUrl};
use drsftp_io::client::profile::{now_unix, PathProfile, ProfileStore};

/// `drsftp tune` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum Sub {
    /// Calibrate the stream model on a real path: measure every buffer size x stream count with downloads from
    /// the server, find the saturation points, fit C1' and C2, and store a path profile for `drsftp copy -p auto`.
    #[command(
        after_help = "Examples:\n  drsftp tune calibrate ftp://host:2811/data/big.bin\n  \
drsftp tune calibrate ftp://host:2811/incoming/ --size 256M --streams 1,2,4,8 --buffers 256K,1M --secs 2"
    )]
    Calibrate(Args),
}

#[derive(clap::Args, Debug, Clone)]
#[group(id = "calibrate")]
pub struct Args {
    /// A file on the server to download (ftp://[user[:pass]@]host[:port]/path), or a directory URL ending in '/'
    /// into which a --size file is uploaded first (and deleted afterwards).
    url: String,
    /// Stream counts to try, comma-separated.
    #[arg(long, default_value = "1,2,4,8,16")]
    streams: String,
    /// Per-stream TCP buffer sizes to try (both ends, fixed), comma-separated.
    #[arg(long, default_value = "64K,256K,1M,4M")]
    buffers: String,
    /// Seconds of transfer per (buffer, streams) point (repeated section downloads).
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Size of the file uploaded for a directory URL; also the most bytes one download moves.
    #[arg(long, default_value = "64M", value_parser = super::units_arg::size)]
    size: u64,
    /// Saturation threshold: a larger stream count must add more than this fraction of throughput.
    #[arg(long, default_value_t = 0.05)]
    gain: f64,
    /// Directory of paths.json (default: $XDG_CONFIG_HOME/drsftp or ~/.config/drsftp).
    #[arg(long, value_name = "DIR")]
    profile_dir: Option<PathBuf>,
    /// Seconds of the loss probe: blast downloads paced at half the best TCP rate, counting the datagrams lost
    /// (stored as the profile's `loss`; 0 skips it). Needs the server's BLAST.
    #[arg(long, default_value_t = 3.0)]
    loss_secs: f64,
    /// Measure and print, but do not store the profile.
    #[arg(long)]
    no_save: bool,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    json: bool,
    /// Timeout for connecting, each reply and a transfer making no progress.
    #[arg(long, default_value = "60s", value_parser = super::units_arg::duration)]
    timeout: Duration,
}

pub fn run(sub: &Sub) -> Result<()> {
    let Sub::Calibrate(args) = sub;
    let mut url = parse_url(&args.url)?;
    crate::credentials::fill(&mut url)?;
    let bufs: Vec<u64> = split(&args.buffers)
        .map(|b| super::units_arg::size(b).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()
        .context("--buffers")?;
    let mut streams: Vec<u32> = split(&args.streams)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("--streams")?;
    streams.sort_unstable();
    streams.dedup();
    if bufs.is_empty() || streams.is_empty() || streams[0] == 0 || args.secs <= 0.0 {
        bail!("need at least one buffer, stream counts >= 1 and --secs > 0");
    }
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async {
        tokio::select! {
            r = calibrate(args, &url, &bufs, &streams) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    })
}

fn split(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

/// One measured cell.
struct Cell {
    buf: u64,
    streams: u32,
    mbps: f64,
}

async fn calibrate(args: &Args, url: &FtpUrl, bufs: &[u64], streams: &[u32]) -> Result<()> {
    let mut client = Client::connect(&url.authority(), &url.user, &url.pass, args.timeout)
        .await
        .with_context(|| format!("logging in to {}", url.authority()))?;
    let rtt = client.control_rtt(5).await.context("NOOP (RTT probe)")?;
    let scratch_dir = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let local = scratch_dir.join(format!(".drsftp-calibrate-{}.bin", std::process::id()));
    let mut uploaded = None;
    let r = async {
        let (remote, size) = if url.is_dir_like() {
            let remote = url.join(&format!(".drsftp-calibrate-{}.bin", std::process::id()));
            write_scratch(&local, args.size)?;
            let opts = ClientOptions {
                streams: 4,
                verify: false,
                timeout: args.timeout,
                ..ClientOptions::default()
            };
            uploaded = Some(remote.path.clone());
            if !args.json {
                eprintln!(
                    "uploading a {} test file to {remote}",
                    format_size(args.size)
                );
            }
            client
                .upload(&local, &remote.path, &opts, Arc::new(Progress::new()))
                .await
                .with_context(|| format!("uploading the test file to {remote}"))?;
            (remote.path.clone(), args.size)
        } else {
            let size = client
                .size(&url.path)
                .await
                .with_context(|| format!("SIZE {}", url.path))?;
            (url.path.clone(), size)
        };
        if size == 0 {
            bail!("{} is empty", url);
        }
        sweep(
            args,
            &mut client,
            &remote,
            &local,
            size.min(args.size.max(1 << 20)),
            rtt,
            bufs,
            streams,
        )
        .await
    }
    .await;
    if let Some(p) = uploaded {
        if let Err(e) = client.command(&format!("DELE {p}")).await {
            eprintln!("drsftp: note: could not delete the test file {p}: {e}");
        }
    }
    let _ = std::fs::remove_file(&local);
    let _ = client.quit().await;
    r
}

/// A scratch file of `size` bytes (a repeating non-constant pattern) to upload.
fn write_scratch(path: &Path, size: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    let block: Vec<u8> = (0..1u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut left = size;
    while left > 0 {
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn sweep(
    args: &Args,
    client: &mut Client,
    remote: &str,
    local: &Path,
    max_len: u64,
    rtt: Duration,
    bufs: &[u64],
    streams: &[u32],
) -> Result<()> {
    let rtt_ms = rtt.as_secs_f64() * 1e3;
    let key = client_key(args)?;
    if !args.json {
        println!(
            "# Calibration of {key}: control RTT {rtt_ms:.2} ms (median of 5 NOOPs), downloads of {remote}, {} s per \
             point\n",
            args.secs
        );
        let heads: String = streams.iter().map(|p| format!(" {p} |")).collect();
        println!("| B \\ P |{heads} P_o measured |");
        println!("|---|{}---|", "---|".repeat(streams.len()));
    }
    let mut cells = vec![];
    let mut pts = vec![];
    let mut sat = vec![];
    for &b in bufs {
        let mut row = vec![];
        if !args.json {
            print!("| {} |", format_size(b));
        }
        for &p in streams {
            let mbps = measure(args, client, remote, local, max_len, p, b).await?;
            if !args.json {
                use std::io::Write;
                print!(" {mbps:.0} |");
                let _ = std::io::stdout().flush();
            }
            row.push((p, mbps));
            cells.push(Cell {
                buf: b,
                streams: p,
                mbps,
            });
        }
        let po = saturation_point(&row, args.gain).unwrap_or(streams[0]);
        // Still rising at the largest count tried: the optimum lies beyond the sweep (censored), not in the fit.
        let censored = streams.len() > 1 && po == *streams.last().expect("nonempty");
        if !args.json {
            println!(" {po}{} |", if censored { " (censored)" } else { "" });
        }
        sat.push(json!({"buffer_bytes": b, "p_o": po, "censored": censored}));
        if !censored {
            pts.push(FitPoint {
                rtt_ms,
                b_kb: b as f64 / 1024.0,
                p_o: po as f64,
            });
        }
    }
    let best = cells.iter().map(|c| c.mbps).fold(0.0, f64::max);
    let loss =
        super::calibrate_loss::probe(client, remote, local, max_len, best * 1e6, args.loss_secs)
            .await;
    let f = fit(&pts);
    // A fit where P_o grows with B (C2 < 0) is noise, not a path property: keep the rate, not the coefficients.
    let usable = f
        .as_ref()
        .filter(|f| f.model.c2 > -1e-9 && f.model.c1.is_finite());
    let profile = PathProfile {
        loss: loss.loss,
        host_port: key.clone(),
        rtt_ms,
        rate_bps: best * 1e6,
        c1: usable.map(|f| f.model.c1),
        c2: usable.map(|f| f.model.c2.max(0.0)),
        fit_mean_rel_err: usable.map(|f| f.mean_rel_err),
        fit_max_rel_err: usable.map(|f| f.max_rel_err),
        points: usable.map_or(0, |f| f.n),
        timestamp: now_unix(),
    };
    let store = if args.no_save {
        None
    } else {
        let s = ProfileStore::open(args.profile_dir.as_deref())
            .context("no profile directory: set XDG_CONFIG_HOME or HOME, or give --profile-dir")?;
        s.put(&profile)?;
        Some(s)
    };
    if args.json {
        let j = json!({
            "host_port": key,
            "rtt_ms": rtt_ms,
            "rate_bps": profile.rate_bps,
            "points": cells.iter().map(|c| json!({"buffer_bytes": c.buf, "streams": c.streams, "mbps": c.mbps}))
                .collect::<Vec<_>>(),
            "saturation": sat,
            "loss_probe": loss.to_json(),
            "fit": f.as_ref().map(|f| json!({"c1": f.model.c1, "c2": f.model.c2, "r2": f.r2, "n": f.n,
                "mean_rel_err": f.mean_rel_err, "max_rel_err": f.max_rel_err, "stored": usable.is_some()})),
            "profile": profile,
            "profile_path": store.as_ref().map(|s| s.path().display().to_string()),
        });
        println!("{j}");
        return Ok(());
    }
    println!("\nrate estimate (best throughput seen): {best:.0} Mbit/s");
    println!("{}", loss.line());
    match &f {
        Some(f) => {
            println!(
                "fit over {} points: P_o = {:.2} * RTT / B^{:.3} (RTT ms, B KB, at {best:.0} Mbit/s); R^2 {:.3}, mean \
                 error {:.1}%, max {:.1}%{}",
                f.n,
                f.model.c1,
                f.model.c2,
                f.r2,
                f.mean_rel_err * 100.0,
                f.max_rel_err * 100.0,
                if usable.is_some() { "" } else { " (C2 < 0: not stored)" }
            );
            for p in &pts {
                println!(
                    "  B {:>7.1} KB  measured P_o {:>4.1}  model {:>5.2}",
                    p.b_kb,
                    p.p_o,
                    f.model.p_opt(p.rtt_ms, p.b_kb)
                );
            }
        }
        None => println!(
            "fit: not enough uncensored saturation points with distinct buffers (need 2); only the rate is stored"
        ),
    }
    match store {
        Some(s) => println!("profile for {key} stored in {}", s.path().display()),
        None => println!("profile not stored (--no-save)"),
    }
    Ok(())
}

fn client_key(args: &Args) -> Result<String> {
    Ok(parse_url(&args.url)?.authority())
}

/// Aggregate Mbit/s of `p` streams with fixed buffers `b`: section downloads (ERET) for about `--secs`, sized from
/// the rate seen so far; seconds are the engine's (first transfer command to end of data).
async fn measure(
    args: &Args,
    client: &mut Client,
    remote: &str,
    local: &Path,
    max_len: u64,
    p: u32,
    b: u64,
) -> Result<f64> {
    let budget = Duration::from_secs_f64(args.secs);
    let t0 = Instant::now();
    let (mut bytes, mut secs) = (0u64, 0f64);
    let mut len = max_len.min(4 << 20);
    loop {
        let opts = ClientOptions {
            streams: p,
            mode_e: true,
            tcp_buffer: Some(b),
            buffer: BufferPolicy::Fixed(b),
            partial: Some(Partial {
                offset: 0,
                length: len,
            }),
            verify: false,
            timeout: args.timeout,
            ..ClientOptions::default()
        };
        let s = client
            .download(remote, local, &opts, Arc::new(Progress::new()))
            .await
            .with_context(|| format!("download with -p {p}, buffer {}", format_size(b)))?;
        bytes += s.bytes;
        secs += s.seconds;
        let left = budget.saturating_sub(t0.elapsed()).as_secs_f64();
        if left <= 0.0 {
            break;
        }
        let rate = s.bytes as f64 / s.seconds.max(1e-6);
        len = ((rate * left) as u64).clamp(1 << 20, max_len);
    }
    Ok(bytes as f64 * 8.0 / secs.max(1e-9) / 1e6)
}
