//! `drsftp copy -r SRC DST`, `--files-from FILE` and `--sync`: turns the arguments into a
//! `drsftp_io::client::job::Job` (walking trees, reading the list), runs it over a pool of sessions with one
//! progress bar for the whole job, and reports one summary line (or one JSON object with a record per file). Exits
//! non-zero, listing them, if any file failed.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use drsftp_io::client::job::plan::{self, SyncMode};
use drsftp_io::client::job::{
    FileRecord, FileStatus, Job, JobOptions, JobProgress, JobReport, Loc, Server,
};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use super::{human_bytes, human_rate, options, plan as resolve, Args, Bar, Plan};
use crate::url::{parse_endpoint, Endpoint, FtpUrl};

/// `--concurrency N|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    Auto,
    Fixed(usize),
}

/// clap parser for `--concurrency`: `auto` or 1..=64.
pub fn concurrency_arg(s: &str) -> Result<Concurrency, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(Concurrency::Auto);
    }
    match s.parse::<usize>() {
        Ok(n @ 1..=64) => Ok(Concurrency::Fixed(n)),
        _ => Err(format!("{s:?}: expected a session count 1-64 or `auto`")),
    }
}

/// Whether these arguments make a multi-file job rather than the single-file copy.
pub(super) fn wanted(args: &Args) -> bool {
    args.recursive || args.files_from.is_some() || args.sync.is_some()
}

fn server_of(u: &FtpUrl) -> Server {
    Server {
        authority: u.authority(),
        user: u.user.clone(),
        pass: u.pass.clone(),
    }
}

/// Fills in `u`'s password (environment, ~/.netrc, a prompt) once per server and user: later URLs of the same
/// login reuse the first one's.
fn login(u: &mut FtpUrl, seen: &mut Vec<FtpUrl>) -> Result<()> {
    if let Some(s) = seen
        .iter()
        .find(|s| s.authority() == u.authority() && s.user == u.user)
    {
        u.pass = s.pass.clone();
        return Ok(());
    }
    crate::credentials::fill(u)?;
    seen.push(u.clone());
    Ok(())
}

/// Sets the job's server for one side, refusing a second, different one: a job runs between two endpoints.
fn same_server(slot: &mut Option<Server>, s: Server, line: usize) -> Result<()> {
    match slot {
        Some(old) if *old != s => bail!(
            "--files-from line {line}: {} is another server than {} (a job runs between one source and one \
             destination; split the list)",
            s.authority,
            old.authority
        ),
        _ => *slot = Some(s),
    }
    Ok(())
}

/// Adds one resolved single-file copy to `job`.
fn add_file(job: &mut Job, p: Plan, line: usize) -> Result<()> {
    let (src, dst) = match p {
        Plan::Download { remote, local } => {
            same_server(&mut job.src_server, server_of(&remote), line)?;
            (Loc::Remote(remote.path), Loc::Local(local))
        }
        Plan::Upload { local, remote } => {
            same_server(&mut job.dst_server, server_of(&remote), line)?;
            (Loc::Local(local), Loc::Remote(remote.path))
        }
        Plan::ThirdParty { src, dst } => {
            same_server(&mut job.src_server, server_of(&src), line)?;
            same_server(&mut job.dst_server, server_of(&dst), line)?;
            (Loc::Remote(src.path), Loc::Remote(dst.path))
        }
    };
    // Mixed directions cannot share a pool of sessions.
    let dir = |l: &Loc| matches!(l, Loc::Remote(_));
    if let Some(first) = job.files.first() {
        if (dir(&first.src), dir(&first.dst)) != (dir(&src), dir(&dst)) {
            bail!("--files-from line {line}: every pair must go the same way (download, upload or third-party)");
        }
    }
    job.files.push(drsftp_io::client::job::FileTask {
        src,
        dst,
        size: None,
        mtime: None,
    });
    Ok(())
}

/// A resolved endpoint of `-r`: its location and, for a URL, its server.
fn endpoint(s: &str, seen: &mut Vec<FtpUrl>) -> Result<(Loc, Option<Server>)> {
    Ok(match parse_endpoint(s)? {
        Endpoint::Local(p) => (Loc::Local(p), None),
        Endpoint::Remote(mut u) => {
            login(&mut u, seen)?;
            let path = if u.path.is_empty() {
                "/".to_string()
            } else {
                u.path.clone()
            };
            (Loc::Remote(path), Some(server_of(&u)))
        }
    })
}

/// Builds the job the arguments describe (walking a remote tree needs the runtime: `rt`).
async fn build(args: &Args, opts: &JobOptions) -> Result<Job> {
    let mut seen = Vec::new();
    let mut job = Job::default();
    if let Some(list) = &args.files_from {
        if args.src.is_some() || args.dst.is_some() {
            bail!("--files-from replaces SRC and DST; give one or the other");
        }
        let text = std::fs::read_to_string(list)
            .with_context(|| format!("reading --files-from {}", list.display()))?;
        let pairs = plan::parse_files_from(&text)
            .with_context(|| format!("--files-from {}", list.display()))?;
        for (line, s, d) in pairs {
            let mut p = resolve(&s, &d)
                .with_context(|| format!("--files-from {} line {line}", list.display()))?;
            for u in p.remotes_mut() {
                login(u, &mut seen)?;
            }
            add_file(&mut job, p, line)?;
        }
        return Ok(job);
    }
    let (Some(src), Some(dst)) = (&args.src, &args.dst) else {
        bail!("give SRC and DST (or --files-from FILE)");
    };
    if !args.recursive {
        // --sync on one file: the single-file copy's names.
        let mut p = resolve(src, dst)?;
        for u in p.remotes_mut() {
            login(u, &mut seen)?;
        }
        add_file(&mut job, p, 1)?;
        return Ok(job);
    }
    let (s, ss) = endpoint(src, &mut seen)?;
    let (d, ds) = endpoint(dst, &mut seen)?;
    if ss.is_none() && ds.is_none() {
        bail!("both endpoints are local; one must be an ftp:// URL");
    }
    job.src_server = ss;
    job.dst_server = ds;
    drsftp_io::client::job::plan_tree(job, s, d, opts)
        .await
        .with_context(|| format!("listing {src}"))
}

/// `--transport auto` for a job with one server (downloads, uploads): its files of at least
/// `AUTO_BLAST_MIN` follow the single-file rule, from the server's path profile and what earlier files of the job
/// found (`drsftp_io::client::job`'s `auto`). Third-party jobs stay on TCP.
fn auto_transport(
    args: &Args,
    mut opts: JobOptions,
    job: &drsftp_io::client::job::Job,
) -> JobOptions {
    let server = match (&job.src_server, &job.dst_server) {
        (Some(s), None) | (None, Some(s)) => s,
        _ => return opts,
    };
    if args.transport == "auto" {
        if let Ok(url) = crate::url::parse_url(&format!("ftp://{}/", server.authority)) {
            opts.transfer.auto_transport = Some(super::auto_transport(&url, !args.no_path_memory));
            opts.transfer.blast = Some(super::blast_opts(args));
        }
    }
    opts
}

/// Runs the job; `Err` if it could not start or if any file failed (after printing the report).
pub(super) fn run(args: Args) -> Result<()> {
    if args.off.is_some() || args.len.is_some() {
        bail!("--off/--len move part of one file; they do not combine with -r, --files-from or --sync");
    }
    if args.trace.is_some() {
        bail!("--trace records one transfer; it does not combine with -r, --files-from or --sync");
    }
    let mut transfer = options(&args);
    let udp = args.transport == "udp";
    let auto = super::super::auto::wants_auto(
        args.parallel,
        args.tcp_bs.is_some(),
        args.buffer.is_some(),
        udp,
    );
    if auto {
        transfer.streams = 1;
    }
    let opts = JobOptions {
        transfer,
        auto_streams: auto,
        concurrency: match args.concurrency {
            Concurrency::Auto => None,
            Concurrency::Fixed(n) => Some(n),
        },
        sync: args
            .sync
            .unwrap_or(if args.recursive || args.files_from.is_some() {
                SyncMode::Mtime
            } else {
                SyncMode::None
            }),
        retry: plan::RetryPolicy {
            retries: args.retries,
            ..plan::RetryPolicy::default()
        },
        tls: args.tls.settings()?,
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let progress = Arc::new(JobProgress::default());
    let src_name = args.src.clone().unwrap_or_else(|| {
        args.files_from
            .as_ref()
            .map(|p| format!("--files-from {}", p.display()))
            .unwrap_or_default()
    });
    let dst_name = args.dst.clone().unwrap_or_default();
    let result = rt.block_on(async {
        let work = async {
            let job = build(&args, &opts).await?;
            let opts = auto_transport(&args, opts.clone(), &job);
            let ends = (job.src_server.clone(), job.dst_server.clone());
            let bar = job_bar(args.quiet, progress.clone());
            let report = drsftp_io::client::job::run(job, &opts, progress.clone()).await;
            bar.finish();
            Ok::<_, anyhow::Error>((report, ends))
        };
        tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        }
    });
    let (report, ends) = match result {
        Ok(r) => r,
        Err(e) => {
            if args.json {
                println!("{}", super::json::error(&e, &src_name, &dst_name));
            }
            return Err(e);
        }
    };
    if args.transport == "auto" && !args.no_path_memory {
        let summaries = report.records.iter().filter_map(|r| r.summary.as_ref());
        match &ends {
            (Some(s), None) => super::memory::record_job(&s.authority, summaries, false),
            (None, Some(s)) => super::memory::record_job(&s.authority, summaries, true),
            _ => {}
        }
    }
    let failed = report.count(|s| *s == FileStatus::Failed);
    let n = report.records.len();
    if args.json {
        let mut j = job_json(&report, &src_name, &dst_name, &opts, &ends);
        if failed > 0 {
            j["error"] = json!(format!("{failed} of {n} files failed"));
        }
        println!("{j}");
    }
    if !args.quiet {
        for note in &report.notes {
            eprintln!("drsftp: note: {note}");
        }
        for r in &report.records {
            for note in &r.notes {
                eprintln!("drsftp: note: {}: {note}", shown(&r.dst, &ends.1));
            }
        }
        if !args.json {
            eprintln!("{}", summary_line(&report));
            // `--transport auto`'s choice for each file that could use blast (small files stay on TCP, unsaid).
            for r in &report.records {
                let c = r.summary.as_ref().and_then(|s| s.transport_choice.as_ref());
                if let Some(c) = c.filter(|c| !c.reason.starts_with("a file below")) {
                    eprintln!(
                        "transport {}: {}: {}",
                        c.chosen,
                        shown(&r.src, &ends.0),
                        c.reason
                    );
                }
            }
        }
    }
    if failed > 0 {
        for r in report
            .records
            .iter()
            .filter(|r| r.status == FileStatus::Failed)
        {
            eprintln!(
                "drsftp: failed: {} -> {}: {}",
                shown(&r.src, &ends.0),
                shown(&r.dst, &ends.1),
                r.error.as_deref().unwrap_or("?")
            );
        }
        bail!("{failed} of {n} files failed");
    }
    Ok(())
}

/// "copied 12 files (1.5 GiB) in 3.2 s: 4 Gbit/s, 3 skipped, 0 failed, 4 sessions".
fn summary_line(r: &JobReport) -> String {
    let copied = r.count(|s| *s == FileStatus::Copied);
    let skipped = r.count(|s| matches!(s, FileStatus::Skipped(_)));
    let failed = r.count(|s| *s == FileStatus::Failed);
    let mbps = if r.seconds > 0.0 {
        r.bytes() as f64 * 8.0 / 1e6 / r.seconds
    } else {
        0.0
    };
    format!(
        "copied {copied} file{} ({}) in {:.1} s: {}, {skipped} skipped, {failed} failed, {} session{}",
        if copied == 1 { "" } else { "s" },
        human_bytes(r.bytes()),
        r.seconds,
        human_rate(mbps),
        r.concurrency,
        if r.concurrency == 1 { "" } else { "s" },
    )
}

fn status_name(s: &FileStatus) -> &'static str {
    match s {
        FileStatus::Copied => "copied",
        FileStatus::Skipped(_) => "skipped",
        FileStatus::Failed => "failed",
    }
}

/// A location as the user would write it: a local path, or the server's URL.
fn shown(l: &Loc, server: &Option<Server>) -> String {
    match (l, server) {
        (Loc::Remote(p), Some(s)) => format!("ftp://{}{p}", s.authority),
        _ => l.to_string(),
    }
}

type Ends = (Option<Server>, Option<Server>);

fn record_json(r: &FileRecord, ends: &Ends) -> serde_json::Value {
    let s = r.summary.as_ref();
    json!({
        "source": shown(&r.src, &ends.0),
        "destination": shown(&r.dst, &ends.1),
        "status": status_name(&r.status),
        "reason": match &r.status { FileStatus::Skipped(w) => Some(w.clone()), _ => None },
        "attempts": r.attempts,
        "error": r.error,
        "bytes": s.map_or(0, |s| s.bytes),
        "resumed_bytes": s.map_or(0, |s| s.resumed),
        "seconds": s.map_or(0.0, |s| s.seconds),
        "mbps": s.map_or(0.0, |s| s.mbps()),
        "streams": s.map(|s| s.streams),
        "wire_mode": s.map(|s| s.mode.letter().to_string()),
        "transport": s.map(|s| s.transport),
        "transport_choice": s.and_then(|s| s.transport_choice.as_ref()).map(|c| json!({
            "chosen": c.chosen, "reason": c.reason, "tcp_bytes": c.tcp_bytes,
            "learned_age_seconds": c.learned_age})),
        "verified": s.is_some_and(|s| s.verified),
        "checksum": s.and_then(|s| s.checksum.as_ref()).map(|(a, h)| format!("{}:{h}", a.to_ascii_lowercase())),
        "notices": s.map(|s| s.notices.clone()).unwrap_or_default().into_iter().chain(r.notes.clone()).collect::<Vec<_>>(),
    })
}

/// The job's JSON: the single-file summary's common keys (source, destination, bytes, seconds, mbps, mode) plus
/// counts and one record per file.
fn job_json(
    r: &JobReport,
    src: &str,
    dst: &str,
    opts: &JobOptions,
    ends: &Ends,
) -> serde_json::Value {
    let bytes = r.bytes();
    json!({
        "source": src,
        "destination": dst,
        "mode": "job",
        "bytes": bytes,
        "seconds": r.seconds,
        "mbps": if r.seconds > 0.0 { bytes as f64 * 8.0 / 1e6 / r.seconds } else { 0.0 },
        "files": r.records.len(),
        "copied": r.count(|s| *s == FileStatus::Copied),
        "skipped": r.count(|s| matches!(s, FileStatus::Skipped(_))),
        "failed": r.count(|s| *s == FileStatus::Failed),
        "concurrency": r.concurrency,
        "sync": opts.sync.to_string(),
        "buffer_policy": opts.transfer.buffer.to_string(),
        "verified": r.records.iter().all(|x| x.status != FileStatus::Copied || x.summary.as_ref().is_some_and(|s| s.verified)),
        "notices": r.notes,
        "records": r.records.iter().map(|x| record_json(x, ends)).collect::<Vec<_>>(),
    })
}

/// The job's one progress bar: bytes of the whole job, rate, ETA, and files done/total.
fn job_bar(quiet: bool, p: Arc<JobProgress>) -> Bar {
    let new = || {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:20.cyan/blue} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    };
    Bar::draw(quiet, new, move |b| {
        b.set_length(p.bytes_total().max(p.bytes()));
        b.set_position(p.bytes());
        let failed = p.files_failed();
        b.set_message(if failed > 0 {
            format!(
                "{}/{} files, {failed} failed",
                p.files_done(),
                p.files_total()
            )
        } else {
            format!("{}/{} files", p.files_done(), p.files_total())
        });
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_values() {
        assert_eq!(concurrency_arg("auto"), Ok(Concurrency::Auto));
        assert_eq!(concurrency_arg("4"), Ok(Concurrency::Fixed(4)));
        assert!(concurrency_arg("0").is_err());
        assert!(concurrency_arg("65").is_err());
    }

    #[test]
    fn files_from_refuses_mixed_servers_and_directions() {
        let mut job = Job::default();
        add_file(&mut job, resolve("ftp://a:21/x", "/tmp/x").unwrap(), 1).unwrap();
        add_file(&mut job, resolve("ftp://a:21/y", "/tmp/y").unwrap(), 2).unwrap();
        let e = add_file(&mut job, resolve("ftp://b:21/y", "/tmp/y").unwrap(), 3).unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let up = resolve(f.path().to_str().unwrap(), "ftp://c:21/in/z").unwrap();
        let e = add_file(&mut job, up, 4).unwrap_err();
        assert!(e.to_string().contains("same way"), "{e}");
        assert_eq!(job.files.len(), 2);
        assert_eq!(job.files[1].src, Loc::Remote("/y".into()));
    }
}
