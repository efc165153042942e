//! `drsftp copy SRC DST`: one file between a local path and a GridFTP/FTP server, either way, in stream mode or MODE
//! E with parallel streams or over the UDP blast channel (`--transport udp`, TCP if the server lacks it), optionally a
//! section (`--off/--len`), verified with CKSM afterwards. Shows a progress bar
//! on a terminal and ends with a one-line summary (stderr) or one JSON object (stdout, `--json`). Two ftp:// URLs
//! make a third-party (server-to-server) copy ([`third_party`]). `-r`, `--files-from` and `--sync` make a
//! multi-file job instead ([`job`]).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use drsftp_io::blast::BlastOpts;
use drsftp_io::client::job::plan::SyncMode;
use drsftp_io::client::profile::ProfileStore;
use drsftp_io::client::{
    AutoChoice, AutoTransport, Client, ClientOptions, Partial, TransferMode, TransferSummary,
};
use drsftp_io::data::{Progress, ZeroCopy};
use drsftp_tune::BufferPolicy;
use indicatif::{ProgressBar, ProgressStyle};

use self::json::Timing;
use super::units_arg;
use crate::url::{parse_endpoint, Endpoint, FtpUrl};

mod job;
mod json;
mod memory;
mod third_party;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  drsftp copy ftp://127.0.0.1:2811/data/big.bin /tmp/ -p 4\n  \
drsftp copy ./big.bin ftp://user:pass@host:2811/incoming/ --tcp-bs 4M\n  \
drsftp copy ftp://host/f part.bin --off 1000 --len 5000000 --json\n  \
drsftp copy --transport udp ftp://host/big.bin /tmp/ --max-rate 500mbit\n  \
drsftp copy -p 4 ftp://hostA:2811/data/big.bin ftp://hostB:2811/incoming/   (third-party, server to server)\n  \
drsftp copy -r ftp://host:2811/run42/ ./run42/            (a tree; rerun to finish an interrupted job)\n  \
drsftp copy -r ./results/ ftp://host:2811/in/results/ --concurrency 4 --sync checksum\n  \
drsftp copy --files-from list.txt --retries 5 --json      (lines: SOURCE DESTINATION)"
)]
pub struct Args {
    /// Source: a local file, or ftp://[user[:pass]@]host[:port]/path (user defaults to anonymous). With an ftp://
    /// destination too, the copy is third-party: the data goes straight from one server to the other (stream mode
    /// unless -p N > 1 or --mode-e; --transport udp needs `BLAST BPRT` on the destination).
    /// With -r, a directory whose contents are copied (symlinks are followed only to files inside the tree).
    #[arg(required_unless_present = "files_from")]
    src: Option<String>,
    /// Destination: a local file or directory (a directory gets the source's file name), or an ftp:// URL (a URL
    /// ending in '/' gets the local file name). With -r, the directory that receives what SRC holds (created if
    /// missing, like globus-url-copy -r and `rsync SRC/ DST/`).
    #[arg(required_unless_present = "files_from")]
    dst: Option<String>,
    /// Copy a directory tree: every file and directory below SRC (empty ones too), many files at once
    /// (--concurrency), each verified, skipping what DST already holds (--sync), modification times kept where the
    /// destination allows (local files; servers that list MFMT). Rerun the same command to finish an
    /// interrupted job.
    #[arg(short = 'r', long)]
    recursive: bool,
    /// Copy the pairs listed in FILE instead of SRC DST: one `SOURCE DESTINATION` per line (like
    /// globus-url-copy -f), "double" or 'single' quotes around names with spaces, # comments. All pairs go the
    /// same way between the same servers; destination directories must exist on a server.
    #[arg(long, value_name = "FILE", conflicts_with = "recursive")]
    files_from: Option<PathBuf>,
    /// Skip files the destination already holds: `none`, `exists`, `size` (same size), `mtime` (same size and
    /// the destination not older), `checksum` (same size and CKSM). Default: mtime with -r and --files-from, none
    /// for one file.
    #[arg(long, value_name = "MODE", value_parser = sync_arg)]
    sync: Option<SyncMode>,
    /// -r and --files-from: files moving at once, each over its own control session (a pair for third-party
    /// copies). `auto`: one per file, at most 8 (4 when files average 256 MiB or more, which already use parallel
    /// streams).
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = job::concurrency_arg)]
    concurrency: job::Concurrency,
    /// -r and --files-from: times a file is tried again after a transient failure (connection lost or refused,
    /// timeout, 4xx reply, size or checksum mismatch), after waits of 0.5 s, 1 s, 2 s, ... (at most 30 s). A file
    /// that still fails is listed at the end and the exit status is non-zero; the other files go on.
    #[arg(long, value_name = "N", default_value_t = 3)]
    retries: u32,
    /// Parallel TCP streams. More than 1 uses MODE E (extended block mode) with that many streams, like
    /// globus-url-copy -p; 1 uses plain stream mode unless --mode-e is given. `auto` (the default when none of -p,
    /// --tcp-bs, --buffer is given) picks the count from the control-channel RTT, the path profile of
    /// `drsftp tune calibrate` and seed 001's model; with --tcp-bs or --buffer alone the default is 1.
    #[arg(short = 'p', long = "parallel", value_name = "N|auto", value_parser = super::auto::parallel_arg)]
    parallel: Option<super::auto::Parallel>,
    /// TCP buffer size to request from the server (SITE RETRBUFSIZE / SITE STORBUFSIZE, falling back to SBUF),
    /// e.g. 4M. Our own sockets use it too (fixed size) unless --buffer says otherwise.
    #[arg(long = "tcp-bs", value_name = "SIZE", value_parser = units_arg::size)]
    tcp_bs: Option<u64>,
    /// Buffer policy for our data sockets: `kernel` (Linux autotuning), `drs` (user-space Dynamic Right-Sizing), or
    /// a fixed size such as 4M. Default: the --tcp-bs size if given, else drs (it matches autotuning's throughput
    /// with a fraction of its receive memory, and keeps working where tcp_rmem[2] is below the BDP).
    // Measured in docs/bench/drs-gridftp.md.
    #[arg(long, value_name = "drs|kernel|SIZE", value_parser = policy_arg)]
    buffer: Option<BufferPolicy>,
    /// TCP congestion control for our data sockets (TCP_CONGESTION), e.g. `cubic` or `bbr`. Only the sending
    /// side's choice matters for the transfer; set it on the server (`drsftp serve --congestion`) for downloads.
    /// Default: the host's.
    #[arg(long, value_name = "NAME")]
    congestion: Option<String>,
    /// Use MODE E even with a single stream.
    #[arg(long)]
    mode_e: bool,
    /// Data channel: `auto` (default: TCP, moving the rest of a download to UDP blast when the path shows random
    /// loss, or blast from the start when the path profile or memory says it is lossy; a first download of 64 MiB
    /// or more over 20 ms or more starts on blast and moves the rest to TCP if blast finds the path clean or
    /// shared; docs/auto-transport.md), `tcp`
    /// (stream mode / MODE E) or `udp`, the rate-controlled UDP blast channel (docs/blast.md), used when the
    /// server lists BLAST in FEAT; with any other server the copy falls back to TCP and says so.
    #[arg(long, value_name = "auto|tcp|udp", default_value = "auto", value_parser = ["auto", "tcp", "udp"])]
    transport: String,
    /// UDP: cap on the sending rate (whichever side sends), e.g. 500mbit, 622Mbps, 1gbit (bits; an upper-case B
    /// is bytes: 100MBps = 800 Mbit/s). Default: no cap beyond the server's.
    #[arg(long, value_name = "RATE", value_parser = units_arg::rate)]
    max_rate: Option<u64>,
    /// UDP: path MTU in bytes; packets carry MTU - 64 payload bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 1500,
          value_parser = clap::value_parser!(u32).range(576..=65535))]
    mtu: u32,
    /// UDP: the receiver acknowledges every N new packets (seed 004's acknowledgement frequency 1/N).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    ack_every: Option<u32>,
    /// UDP: longest the receiver holds an acknowledgement (default 10ms); a long value such as 10s leaves
    /// --ack-every as the only regular trigger, as in FOBS (seed 004).
    #[arg(long, value_name = "DURATION", value_parser = units_arg::duration)]
    ack_delay: Option<Duration>,
    /// UDP: bind our UDP socket to this port (e.g. for a firewall); default any.
    #[arg(long, value_name = "PORT")]
    udp_port: Option<u16>,
    /// Partial transfer: first byte of the section (ERET/ESTO, like globus-url-copy -off). The bytes land at the
    /// same offset in the destination, which is written in place. Without --len: to the end of the file.
    #[arg(long, value_name = "N")]
    off: Option<u64>,
    /// Partial transfer: number of bytes of the section (like globus-url-copy -len). Without --off: from byte 0.
    #[arg(long, value_name = "N")]
    len: Option<u64>,
    /// Do not compare checksums (CKSM) after the transfer. Sizes are still checked.
    #[arg(long)]
    no_verify: bool,
    /// Downloads: do not resume from the part file and checkpoint an interrupted download of the same source
    /// left next to the destination; discard them and start afresh (docs/resume.md).
    #[arg(long)]
    no_resume: bool,
    /// `--transport auto`: neither read nor record the path memory (what an earlier default copy to the same
    /// host:port learned about the path's random loss, kept beside the path profiles in paths.json for 6 hours;
    /// docs/auto-transport.md). Also DRSFTP_NO_PATH_MEMORY=1.
    #[arg(long, env = "DRSFTP_NO_PATH_MEMORY", value_parser = clap::builder::BoolishValueParser::new())]
    no_path_memory: bool,
    /// MODE E: never stripe. By default a transfer with a server whose SPAS names several data movers (a
    /// striped endpoint: a Globus frontend with data nodes, a drsftp frontend with movers) moves its data over
    /// all of them, and a third-party copy between two striped endpoints goes mover to mover (docs/striping.md).
    #[arg(long)]
    no_stripes: bool,
    /// Print exactly one JSON object with the result (or the error) on stdout. For -r and --files-from: the job's
    /// counts (files, copied, skipped, failed, bytes, seconds, mbps) and a record per file in `records`.
    #[arg(long)]
    json: bool,
    /// No progress bar and no summary line.
    #[arg(short, long)]
    quiet: bool,
    /// Timeout for connecting, for each server reply, and for a transfer making no progress, e.g. 60s, 500ms.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = units_arg::duration)]
    timeout: Duration,
    #[command(flatten)]
    tls: super::tls_arg::TlsArgs,
    /// Write a per-stream trace of our data connections to FILE as CSV (t_s, stream, buffer_bytes, rtt_ms,
    /// bdp_bytes, bytes, mbps, rcv_wnd, rcv_ssthresh, cwnd_bytes): TCP_INFO every 50 ms or more, bounded in size.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// Most streams `-p auto`'s online refinement may grow an upload to (as its start choice's cap).
const AUTO_MAX_STREAMS: u32 = 64;

fn sync_arg(s: &str) -> Result<SyncMode, String> {
    s.parse()
}

fn policy_arg(s: &str) -> Result<BufferPolicy, String> {
    s.parse::<BufferPolicy>().map_err(|e| e.to_string())
}

/// A resolved copy: which way, and the two ends.
#[derive(Debug)]
enum Plan {
    Download { remote: FtpUrl, local: PathBuf },
    Upload { local: PathBuf, remote: FtpUrl },
    ThirdParty { src: FtpUrl, dst: FtpUrl },
}

impl Plan {
    fn source(&self) -> String {
        match self {
            Plan::Download { remote, .. } => remote.to_string(),
            Plan::Upload { local, .. } => local.display().to_string(),
            Plan::ThirdParty { src, .. } => src.to_string(),
        }
    }
    fn destination(&self) -> String {
        match self {
            Plan::Download { local, .. } => local.display().to_string(),
            Plan::Upload { remote, .. } => remote.to_string(),
            Plan::ThirdParty { dst, .. } => dst.to_string(),
        }
    }
    fn remote(&self) -> &FtpUrl {
        match self {
            Plan::Download { remote, .. } | Plan::Upload { remote, .. } => remote,
            Plan::ThirdParty { src, .. } => src,
        }
    }
}

impl Plan {
    /// Every server URL of the plan, to complete their logins.
    fn remotes_mut(&mut self) -> Vec<&mut FtpUrl> {
        match self {
            Plan::Download { remote, .. } | Plan::Upload { remote, .. } => vec![remote],
            Plan::ThirdParty { src, dst } => vec![src, dst],
        }
    }
}

/// The file name a remote source gives its destination; an error if `url` names a directory.
fn file_name(url: &FtpUrl) -> Result<String> {
    let name = url
        .file_name()
        .filter(|_| !url.is_dir_like())
        .with_context(|| format!("{url} names a directory; give a file URL, or -r for a tree"))?;
    Ok(name.to_string())
}

fn plan(src: &str, dst: &str) -> Result<Plan> {
    match (parse_endpoint(src)?, parse_endpoint(dst)?) {
        (Endpoint::Remote(remote), Endpoint::Local(mut local)) => {
            let name = file_name(&remote)?;
            if local.is_dir() || dst.ends_with('/') {
                local.push(name);
            }
            Ok(Plan::Download { remote, local })
        }
        (Endpoint::Local(local), Endpoint::Remote(mut remote)) => {
            if local.is_dir() {
                bail!("{} is a directory; copy a tree with -r", local.display());
            }
            if remote.is_dir_like() {
                let name = local
                    .file_name()
                    .with_context(|| format!("{} has no file name", local.display()))?;
                remote = remote.join(&name.to_string_lossy());
            }
            Ok(Plan::Upload { local, remote })
        }
        (Endpoint::Remote(src), Endpoint::Remote(mut dst)) => {
            let name = file_name(&src)?;
            if dst.is_dir_like() {
                dst = dst.join(&name);
            }
            Ok(Plan::ThirdParty { src, dst })
        }
        (Endpoint::Local(_), Endpoint::Local(_)) => {
            bail!("both endpoints are local; one must be an ftp:// URL")
        }
    }
}

fn options(args: &Args) -> ClientOptions {
    ClientOptions {
        streams: match args.parallel {
            Some(super::auto::Parallel::Fixed(n)) => n,
            _ => 1, // -p auto sets it after login
        },
        mode_e: args.mode_e,
        tcp_buffer: args.tcp_bs,
        buffer: args
            .buffer
            .or(args.tcp_bs.map(BufferPolicy::Fixed))
            .unwrap_or(BufferPolicy::Drs),
        partial: None,
        verify: !args.no_verify,
        timeout: args.timeout,
        congestion: args.congestion.clone(),
        blast: (args.transport == "udp").then(|| blast_opts(args)),
        trace: args.trace.is_some(),
        auto_streams: None, // -p auto sets it after login
        resume: !args.no_resume,
        stripes: !args.no_stripes,
        auto_transport: None, // --transport auto: set after login, from the path profile
        zero_copy: ZeroCopy::from_env(),
    }
}

/// The blast settings from the UDP options.
fn blast_opts(args: &Args) -> BlastOpts {
    BlastOpts {
        mtu: args.mtu,
        max_rate: args.max_rate.unwrap_or(0),
        ack_every: args.ack_every,
        max_ack_delay: args.ack_delay,
        port: args.udp_port,
        idle_timeout: args.timeout,
        resume: !args.no_resume,
        ..BlastOpts::default()
    }
}

/// The path profile of `url`'s server (`drsftp tune calibrate`), if there is one.
fn path_profile(url: &FtpUrl) -> Option<drsftp_io::client::profile::PathProfile> {
    ProfileStore::open(None).and_then(|s| match s.get(&url.authority()) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!("no path profile: {e}");
            None
        }
    })
}

/// Blast's start rate from the path profile: 90 % of the rate it measured, so a short transfer does not spend
/// its first round trips ramping up from 10 Mbit/s (the sender still backs off if the path carries less).
fn blast_start(url: &FtpUrl, opts: &mut ClientOptions) {
    if let Some(b) = opts.blast.as_mut() {
        if let Some(p) = path_profile(url).filter(|p| p.rate_bps > 0.0) {
            b.start_rate = (p.rate_bps * 0.9) as u64;
        }
    }
}

/// `--transport auto`: what the path profile of `url`'s server knows (loss, rate), and with `memory` what an
/// earlier default copy learned about the path (which, fresh and newer, comes before the profile's loss).
fn auto_transport(url: &FtpUrl, memory: bool) -> AutoTransport {
    let profile = path_profile(url);
    let learned = memory
        .then(|| memory::load(url, profile.as_ref()))
        .flatten();
    AutoTransport {
        profile_loss: profile.as_ref().and_then(|p| p.loss),
        link_bps: profile.map(|p| p.rate_bps).filter(|r| *r > 0.0),
        carried: None,
        learned,
    }
}

pub fn run(args: Args) -> Result<()> {
    if job::wanted(&args) {
        return job::run(args);
    }
    let (src, dst) = (
        args.src.clone().unwrap_or_default(),
        args.dst.clone().unwrap_or_default(),
    );
    let planned = plan(&src, &dst).and_then(|mut p| {
        for u in p.remotes_mut() {
            crate::credentials::fill(u)?;
        }
        Ok(p)
    });
    let plan = match planned {
        Ok(p) => p,
        Err(e) => {
            if args.json {
                println!("{}", json::error(&e, &src, &dst));
            }
            return Err(e);
        }
    };
    let opts = options(&args);
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let mut auto = None;
    let mut timing = Timing::default();
    let result = rt.block_on(async {
        if let Plan::ThirdParty { src, dst } = &plan {
            // Ctrl-C is handled inside: both servers get ABOR and the destination is deleted.
            return third_party::copy(src, dst, &args, &opts).await;
        }
        tokio::select! {
            r = copy(&plan, &args, opts.clone(), &mut auto, &mut timing) => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    match result {
        Ok(s) => {
            if args.transport == "auto" && !args.no_path_memory {
                match &plan {
                    Plan::Download { remote, .. } => memory::record(remote, &s, false),
                    Plan::Upload { remote, .. } => memory::record(remote, &s, true),
                    Plan::ThirdParty { .. } => {}
                }
            }
            report(&plan, &args, &opts, &s, auto.as_ref(), &timing);
            Ok(())
        }
        Err(e) => {
            if args.json {
                println!("{}", json::error(&e, &plan.source(), &plan.destination()));
            }
            Err(e)
        }
    }
}

/// The section to move, with a missing --len meaning "to the end" (`total` = the source's size).
fn section(args: &Args, total: Option<u64>) -> Result<Option<Partial>> {
    if args.off.is_none() && args.len.is_none() {
        return Ok(None);
    }
    let offset = args.off.unwrap_or(0);
    let length = match (args.len, total) {
        (Some(l), _) => l,
        (None, Some(t)) if t >= offset => t - offset,
        (None, Some(t)) => bail!("--off {offset} is past the end of the source ({t} bytes)"),
        (None, None) => {
            bail!("--off without --len needs the source size, which the server did not give")
        }
    };
    Ok(Some(Partial { offset, length }))
}

async fn copy(
    plan: &Plan,
    args: &Args,
    mut opts: ClientOptions,
    auto: &mut Option<AutoChoice>,
    timing: &mut Timing,
) -> Result<TransferSummary> {
    let url = plan.remote();
    let tls = args.tls.settings()?;
    let t0 = std::time::Instant::now();
    let (host, user, pass) = (&url.authority(), &url.user, &url.pass);
    let login = match plan {
        // The download's SIZE and MDTM ride behind the login (a drsftp server).
        Plan::Download { remote, .. } => {
            Client::connect_to_fetch(host, user, pass, opts.timeout, &tls, &remote.path).await
        }
        _ => Client::connect_tls(host, user, pass, opts.timeout, &tls).await,
    };
    let mut client = login.with_context(|| format!("logging in to {}", url.authority()))?;
    timing.login = Some(t0.elapsed().as_secs_f64());
    let (p, udp) = (args.parallel, args.transport == "udp");
    if args.transport == "auto" {
        // One download or upload: the client may choose blast (-r jobs and third-party copies stay on TCP).
        opts.auto_transport = Some(auto_transport(url, !args.no_path_memory));
        opts.blast = Some(blast_opts(args));
    }
    blast_start(url, &mut opts);
    if super::auto::wants_auto(p, args.tcp_bs.is_some(), args.buffer.is_some(), udp) {
        *auto = Some(super::auto::choose(&mut client, url, &mut opts, None).await?);
        // Online refinement from that start (uploads: we are the MODE E sender; downloads from a drsftp server:
        // OPTS RETR Parallelism=<start>,1,<max>; and the server refines). It needs MODE E, which a plain FTP
        // server lacks: the start choice then said one stream, and stream mode it stays.
        opts.auto_streams = client.features().parallel().then(|| {
            drsftp_io::data::AutoSender::new(drsftp_tune::AutoConfig {
                max_streams: AUTO_MAX_STREAMS.max(opts.streams),
                ..drsftp_tune::AutoConfig::default()
            })
        });
    }
    let progress = Arc::new(Progress::new());
    let summary = match plan {
        Plan::ThirdParty { .. } => bail!("third-party copies are run by copy::third_party"),
        Plan::Download { remote, local } => {
            // Best effort: the size is for the progress bar and --off without --len; the download itself
            // reports a missing file.
            let total = client.size(&remote.path).await.ok();
            opts.partial = section(args, total)?;
            let bar_total = opts.partial.map(|p| p.length).or(total);
            let bar = Bar::start(args.quiet, bar_total, progress.clone());
            timing.prepare = timing.login.map(|l| t0.elapsed().as_secs_f64() - l);
            let r = client
                .download(&remote.path, local, &opts, progress.clone())
                .await;
            bar.finish();
            r.with_context(|| format!("downloading {remote} to {}", local.display()))?
        }
        Plan::Upload { local, remote } => {
            let total = std::fs::metadata(local)
                .with_context(|| format!("{}", local.display()))?
                .len();
            opts.partial = section(args, Some(total))?;
            let bar_total = opts.partial.map(|p| p.length).unwrap_or(total);
            let bar = Bar::start(args.quiet, Some(bar_total), progress.clone());
            timing.prepare = timing.login.map(|l| t0.elapsed().as_secs_f64() - l);
            let r = client
                .upload(local, &remote.path, &opts, progress.clone())
                .await;
            bar.finish();
            r.with_context(|| format!("uploading {} to {remote}", local.display()))?
        }
    };
    timing.total = Some(t0.elapsed().as_secs_f64());
    if let Err(e) = client.quit().await {
        tracing::debug!("QUIT: {e}");
    }
    if let Some(path) = &args.trace {
        let f = std::fs::File::create(path)
            .with_context(|| format!("writing the trace to {}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        drsftp_io::drs::write_stream_traces_csv(&mut w, &summary.traces)
            .and_then(|()| std::io::Write::flush(&mut w))
            .with_context(|| format!("writing the trace to {}", path.display()))?;
    }
    Ok(summary)
}

/// The terminal progress bar, fed from the engine's counters (also used by `drsftp demo`).
pub(crate) struct Bar {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Bar {
    /// A bar on stderr if `quiet` is false and stderr is a terminal; otherwise nothing is drawn.
    pub(crate) fn start(quiet: bool, total: Option<u64>, progress: Arc<Progress>) -> Bar {
        let new = || match total {
            Some(t) => {
                let b = ProgressBar::new(t);
                b.set_style(
                    ProgressStyle::with_template(
                        "{bar:32.cyan/blue} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                b
            }
            None => {
                let b = ProgressBar::new_spinner();
                b.set_style(
                    ProgressStyle::with_template(
                        "{spinner} {bytes} {binary_bytes_per_sec} {elapsed} {msg}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b
            }
        };
        Bar::draw(quiet, new, move |b| {
            b.set_position(progress.bytes());
            let streams = progress.streams();
            if total.is_some_and(|t| progress.bytes() >= t) {
                b.set_message("verifying");
            } else if streams > 1 {
                b.set_message(format!("{streams} streams"));
            }
            b.tick();
        })
    }

    /// The bar `new` makes, drawn on stderr and brought up to date by `update` every 200 ms until
    /// [`finish`](Self::finish); nothing (and `new` is not called) if `quiet` or stderr is not a terminal.
    fn draw(
        quiet: bool,
        new: impl FnOnce() -> ProgressBar,
        mut update: impl FnMut(&ProgressBar) + Send + 'static,
    ) -> Bar {
        if quiet || !std::io::stderr().is_terminal() {
            return Bar {
                bar: None,
                ticker: None,
            };
        }
        let bar = new();
        let b = bar.clone();
        let ticker = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                update(&b);
            }
        });
        Bar {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    pub(crate) fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}

/// A byte count for the summary ("1.5 GiB").
pub(crate) fn human_bytes(b: u64) -> String {
    drsftp_units::format_bytes(b)
}

/// A rate given in Mbit/s, in the units grammar's format ("622 Mbit/s", "1.5 Gbit/s").
pub(crate) fn human_rate(mbps: f64) -> String {
    drsftp_units::format_rate((mbps * 1e6).round() as u64)
}

/// The one-line human summary.
fn summary_line(s: &TransferSummary) -> String {
    let mode = match (s.transport, s.mode) {
        ("udp", _) => format!(
            "UDP blast, {} duplicates, {} rejected",
            s.duplicates, s.rejected
        ),
        (_, TransferMode::Extended) => "MODE E".to_string(),
        (_, TransferMode::Stream) => "stream mode".to_string(),
    };
    let streams = if s.streams == 1 {
        "1 stream".to_string()
    } else {
        format!("{} streams", s.streams)
    };
    let verified = match (&s.checksum, s.verified) {
        (Some((alg, _)), true) => format!("{alg} verified"),
        _ => "checksum not verified".to_string(),
    };
    let buffers = if s.peak_buffer > 0 {
        format!(", buffers peak {}", human_bytes(s.peak_buffer))
    } else {
        String::new()
    };
    let took = if s.seconds < 1.0 {
        format!("{:.0} ms", s.seconds * 1000.0)
    } else {
        format!("{:.1} s", s.seconds)
    };
    format!(
        "copied {} in {took}: {}, {streams} ({mode}){buffers}, {verified}",
        human_bytes(s.bytes),
        human_rate(s.mbps()),
    )
}

fn report(
    plan: &Plan,
    args: &Args,
    opts: &ClientOptions,
    s: &TransferSummary,
    auto: Option<&AutoChoice>,
    timing: &Timing,
) {
    if args.json {
        println!("{}", json::summary(plan, opts, s, auto, timing));
    }
    if !args.quiet {
        for n in &s.notices {
            eprintln!("drsftp: note: {n}");
        }
        if !args.json {
            match plan {
                Plan::ThirdParty { .. } => eprintln!("{} [third-party]", summary_line(s)),
                _ => eprintln!("{}", summary_line(s)),
            }
            if let Some(a) = auto {
                eprintln!("  {}", a.start.reason);
            }
            if let Some(c) = &s.transport_choice {
                let memory = c.learned_age.map_or(String::new(), |a| {
                    format!(" [started from path memory learned {a} s ago]")
                });
                eprintln!("  transport {}: {}{memory}", c.chosen, c.reason);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_resolve_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        match plan("ftp://h:2811/a/b.bin", d).unwrap() {
            Plan::Download { local, remote } => {
                assert_eq!(local, dir.path().join("b.bin"));
                assert_eq!(remote.path, "/a/b.bin");
            }
            p => panic!("{p:?}"),
        }
        match plan("ftp://h:2811/a/b.bin", &format!("{d}/new.bin")).unwrap() {
            Plan::Download { local, .. } => assert_eq!(local, dir.path().join("new.bin")),
            p => panic!("{p:?}"),
        }
        let f = dir.path().join("up.dat");
        std::fs::write(&f, b"x").unwrap();
        match plan(f.to_str().unwrap(), "ftp://h:2811/in/").unwrap() {
            Plan::Upload { remote, .. } => assert_eq!(remote.path, "/in/up.dat"),
            p => panic!("{p:?}"),
        }
        match plan(f.to_str().unwrap(), "ftp://h:2811/in/x").unwrap() {
            Plan::Upload { remote, .. } => assert_eq!(remote.path, "/in/x"),
            p => panic!("{p:?}"),
        }
        match plan("ftp://a/x", "ftp://b/in/").unwrap() {
            Plan::ThirdParty { src, dst } => {
                assert_eq!((src.host.as_str(), src.path.as_str()), ("a", "/x"));
                assert_eq!((dst.host.as_str(), dst.path.as_str()), ("b", "/in/x"));
            }
            p => panic!("{p:?}"),
        }
        match plan("ftp://a/x", "ftp://b/y").unwrap() {
            Plan::ThirdParty { dst, .. } => assert_eq!(dst.path, "/y"),
            p => panic!("{p:?}"),
        }
        assert!(plan("ftp://a/dir/", "ftp://b/y").is_err());
        assert!(plan("/a", "/b").is_err());
        assert!(plan("ftp://h/dir/", d).is_err());
        assert!(plan(d, "ftp://h/x").is_err());
    }

    #[test]
    fn summary_formats() {
        let s = TransferSummary {
            peak_buffer: 16 << 20,
            checksum: Some(("SHA256".into(), "ab".into())),
            verified: true,
            ..TransferSummary::tcp(TransferMode::Extended, 2 << 30, 3.2, 4)
        };
        assert_eq!(
            summary_line(&s),
            "copied 2 GiB in 3.2 s: 5.4 Gbit/s, 4 streams (MODE E), buffers peak 16 MiB, SHA256 verified"
        );
        let u = TransferSummary {
            transport: "udp",
            duplicates: 3,
            streams: 1,
            mode: TransferMode::Stream,
            peak_buffer: 0,
            ..s
        };
        assert_eq!(
            summary_line(&u),
            "copied 2 GiB in 3.2 s: 5.4 Gbit/s, 1 stream (UDP blast, 3 duplicates, 0 rejected), SHA256 verified"
        );
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_rate(0.5), "500 kbit/s");
    }
}
