//! Walking a source tree into a [`Job`]: local trees with `std::fs` (symlinks followed only to files inside the
//! tree), remote trees with MLSD (names checked by `plan::safe_component`, so a hostile listing cannot name a path
//! outside the destination). The contents of the source directory go into the destination directory, as with
//! globus-url-copy `-r` and `rsync SRC/ DST/`.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::plan::{self, EntryKind};
use super::warm::{Side, Warm};
use super::{run, FileTask, Job, JobOptions, Loc, Server};
use crate::client::{Client, ClientError, ListKind};

/// Deepest directory nesting a walk follows: a server listing an endless chain of directories stops here.
const MAX_DEPTH: usize = 256;

/// Most entries a remote walk takes: a server inventing directories in every listing makes the walk fail here
/// instead of exhausting memory.
const MAX_ENTRIES: usize = 10_000_000;

/// Control sessions a job of `opts` moves files over at most (`--concurrency`, or auto's cap): the walk logs in
/// no more than these, and hands them to the job ([`Warm`]). Each MLSD costs round trips (PASV, the listing, a
/// data connection), so a level of several directories is listed over all of them at once.
fn job_sessions(opts: &JobOptions) -> usize {
    opts.concurrency
        .unwrap_or(plan::AUTO_CONCURRENCY_MAX)
        .max(1)
}

/// A directory's listing, or why it could not be listed (the server's refusal, for the job's notes).
type Listing = Result<String, String>;

/// Unix seconds of a local file's modification time.
pub(super) fn mtime_of(m: &std::fs::Metadata) -> Option<i64> {
    let t = m.modified().ok()?;
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).ok(),
        Err(e) => i64::try_from(e.duration().as_secs()).ok().map(|s| -s),
    }
}

/// Expands `src` (a directory, or a single file) into `job` (whose servers are set): the directories to create
/// under `dst` and the files to move. A remote source is listed over one control session of the job's options.
pub async fn plan_tree(
    mut job: Job,
    src: Loc,
    dst: Loc,
    opts: &JobOptions,
) -> Result<Job, ClientError> {
    match &src {
        Loc::Local(root) => {
            let meta = std::fs::metadata(root).map_err(|e| ClientError::local(root, e))?;
            if meta.is_dir() {
                job.dirs.push(dst.clone());
                let canon = root
                    .canonicalize()
                    .map_err(|e| ClientError::local(root, e))?;
                walk_local(&canon, root, &dst, &mut job, 0)?;
            } else {
                let name = root.file_name().map(|n| n.to_string_lossy().into_owned());
                job.files.push(FileTask {
                    src: src.clone(),
                    dst: file_destination(dst, name.as_deref()),
                    size: Some(meta.len()),
                    mtime: mtime_of(&meta),
                });
            }
        }
        Loc::Remote(root) => {
            let server = job.src_server.clone().ok_or_else(|| {
                ClientError::Invalid("a remote source needs the source server".into())
            })?;
            // The workers' logins run while the tree is listed (the walk's session makes the last one).
            let k = job_sessions(opts);
            job.warm.start(Side::Src, &server, opts, k - 1);
            if let Some(d) = job.dst_server.clone() {
                job.warm.start(Side::Dst, &d, opts, k);
            }
            let walked = match run::connect_retrying(&server, opts).await {
                Ok(mut client) => {
                    let r = walk_remote(&mut client, root, &dst, &mut job, &server, opts).await;
                    job.warm.put(Side::Src, client);
                    r
                }
                Err(e) => Err(e),
            };
            if let Err(e) = walked {
                job.warm.close().await;
                return Err(e);
            }
        }
    }
    Ok(job)
}

/// Where a single source file named `name` goes when `-r` was given a file: into `dst` if it names a directory
/// (an existing local one, or a URL path ending in '/'), else to `dst` itself.
fn file_destination(dst: Loc, name: Option<&str>) -> Loc {
    let into = match &dst {
        Loc::Local(p) => p.is_dir(),
        Loc::Remote(p) => p.ends_with('/'),
    };
    match name.and_then(|n| plan::safe_component(n).ok()) {
        Some(n) if into => dst.join(n),
        _ => dst,
    }
}

/// Adds what the local directory `dir` holds (beneath `canon_root`, the walk's canonical root) to `job`, under
/// `dst`.
fn walk_local(
    canon_root: &Path,
    dir: &Path,
    dst: &Loc,
    job: &mut Job,
    depth: usize,
) -> Result<(), ClientError> {
    if depth > MAX_DEPTH {
        job.notes.push(format!(
            "{}: deeper than {MAX_DEPTH} levels, not copied",
            dir.display()
        ));
        return Ok(());
    }
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| ClientError::local(dir, e))? {
        let e = e.map_err(|e| ClientError::local(dir, e))?;
        let path = e.path();
        match e.file_name().into_string() {
            Ok(n) if plan::safe_component(&n).is_ok() => entries.push((n, path)),
            // FTP paths are UTF-8 text on one line: such a name cannot be sent.
            _ => job.notes.push(format!(
                "{}: name is not UTF-8 or holds a line break, skipped",
                path.display()
            )),
        }
    }
    entries.sort();
    for (name, path) in entries {
        let lmeta = std::fs::symlink_metadata(&path).map_err(|e| ClientError::local(&path, e))?;
        let meta = if lmeta.file_type().is_symlink() {
            // A link is followed only to a regular file inside the tree: a link leading out of it (or a
            // directory link, which could loop) would copy what the user did not ask for.
            match path.canonicalize() {
                Ok(t) if !t.starts_with(canon_root) => {
                    job.notes.push(format!(
                        "{}: symlink to {} leaves the tree, skipped",
                        path.display(),
                        t.display()
                    ));
                    continue;
                }
                Ok(t) => match std::fs::metadata(&t) {
                    Ok(m) if m.is_file() => m,
                    _ => {
                        job.notes.push(format!(
                            "{}: symlink to a directory or special file, skipped",
                            path.display()
                        ));
                        continue;
                    }
                },
                Err(e) => {
                    job.notes.push(format!(
                        "{}: dangling symlink ({e}), skipped",
                        path.display()
                    ));
                    continue;
                }
            }
        } else {
            lmeta
        };
        let to = dst.join(&name);
        if meta.is_dir() {
            job.dirs.push(to.clone());
            walk_local(canon_root, &path, &to, job, depth + 1)?;
        } else if meta.is_file() {
            job.files.push(FileTask {
                src: Loc::Local(path),
                dst: to,
                size: Some(meta.len()),
                mtime: mtime_of(&meta),
            });
        } else {
            job.notes
                .push(format!("{}: not a regular file, skipped", path.display()));
        }
    }
    Ok(())
}

/// Adds what the remote directory `root` holds to `job`, under `dst`; a `root` that is a file (MLSD refused, SIZE
/// answered) becomes one file.
async fn walk_remote(
    client: &mut Client,
    root: &str,
    dst: &Loc,
    job: &mut Job,
    server: &Server,
    opts: &JobOptions,
) -> Result<(), ClientError> {
    let first = match client.list(root, ListKind::Mlsd).await {
        Ok(t) => t,
        Err(e) if e.reply_code().is_some_and(|c| c >= 500) => {
            // Not a directory (or no MLSD): a file source is copied as one file.
            let size = client.size(root).await.map_err(|_| e)?;
            let name = root.trim_end_matches('/').rsplit('/').next();
            job.files.push(FileTask {
                src: Loc::Remote(root.to_string()),
                dst: file_destination(dst.clone(), name),
                size: Some(size),
                mtime: None,
            });
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    job.dirs.push(dst.clone());
    let warm = job.warm.clone();
    let mut prefetched = prefetch(client, root, &first, (server, &warm), opts).await?;
    // Depth-first with an explicit stack; each directory is listed once (above, level by level).
    let mut stack = vec![(
        Loc::Remote(root.to_string()),
        dst.clone(),
        0usize,
        Some(Ok(first)),
    )];
    while let Some((dir, to, depth, mut listed)) = stack.pop() {
        let Loc::Remote(dir_path) = &dir else {
            continue;
        };
        let text = match listed
            .take()
            .or_else(|| prefetched.remove(dir_path.as_str()))
        {
            Some(Ok(t)) => t,
            Some(Err(note)) => {
                job.notes.push(note);
                continue;
            }
            None => match client.list(dir_path, ListKind::Mlsd).await {
                Ok(t) => t,
                Err(e) if e.reply_code().is_some() => {
                    job.notes
                        .push(format!("{dir_path}: cannot list ({e}), skipped"));
                    continue;
                }
                Err(e) => return Err(e),
            },
        };
        let (entries, notes) = plan::parse_mlsd(&text);
        if job.files.len() + job.dirs.len() + entries.len() > MAX_ENTRIES {
            return Err(ClientError::Invalid(format!(
                "the remote tree lists more than {MAX_ENTRIES} entries; copy it in parts"
            )));
        }
        job.notes
            .extend(notes.into_iter().map(|n| format!("{dir_path}: {n}")));
        let mut subdirs = Vec::new();
        for e in entries {
            let from = dir.join(&e.name);
            let into = to.join(&e.name);
            match e.kind {
                EntryKind::File => job.files.push(FileTask {
                    src: from,
                    dst: into,
                    size: e.size,
                    mtime: e.mtime,
                }),
                EntryKind::Dir if depth >= MAX_DEPTH => job.notes.push(format!(
                    "{from}: deeper than {MAX_DEPTH} levels, not copied"
                )),
                EntryKind::Dir => {
                    job.dirs.push(into.clone());
                    subdirs.push((from, into, depth + 1, None));
                }
                EntryKind::Other(t) => job.notes.push(format!(
                    "{from}: type {t}, not a file or directory, skipped"
                )),
            }
        }
        // Reversed so the stack pops them in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// The subdirectories a listing of `dir` (at `depth`) names that the walk will list.
fn subdirs(dir: &str, text: &str, depth: usize) -> Vec<(String, usize)> {
    if depth >= MAX_DEPTH {
        return vec![];
    }
    plan::parse_mlsd(text)
        .0
        .into_iter()
        .filter(|e| e.kind == EntryKind::Dir)
        .filter_map(|e| match Loc::Remote(dir.to_string()).join(&e.name) {
            Loc::Remote(p) => Some((p, depth + 1)),
            Loc::Local(_) => None,
        })
        .collect()
}

/// Lists every directory below `root` (whose listing is `first`), one tree level at a time, a level of several
/// directories over the job's other sessions ([`job_sessions`] less this one) at once (the job's warm ones first; they go back
/// there afterwards). A refusal is kept as the directory's note; a lost connection fails the walk.
async fn prefetch(
    client: &mut Client,
    root: &str,
    first: &str,
    (server, warm): (&Server, &Warm),
    opts: &JobOptions,
) -> Result<std::collections::HashMap<String, Listing>, ClientError> {
    let mut out = std::collections::HashMap::new();
    let mut level = subdirs(root, first, 0);
    let mut pool: Vec<Client> = Vec::new();
    let mut entries = 0usize;
    let r = loop {
        if level.is_empty() {
            break Ok(out);
        }
        let extra = job_sessions(opts) - 1;
        let results = if level.len() == 1 || extra == 0 {
            let mut v = Vec::new();
            for (d, _) in &level {
                v.push((d.clone(), client.list(d, ListKind::Mlsd).await));
            }
            v
        } else {
            let want = level.len().min(extra);
            if pool.len() < want {
                pool.extend(warm.sessions(Side::Src, want - pool.len()).await);
            }
            let mut joining = tokio::task::JoinSet::new();
            for _ in pool.len()..want {
                let (s, o) = (server.clone(), opts.clone());
                joining.spawn(async move { run::connect_retrying(&s, &o).await });
            }
            while let Some(j) = joining.join_next().await {
                match j {
                    Ok(Ok(c)) => pool.push(c),
                    Ok(Err(e)) => tracing::debug!("listing session: {e}"),
                    Err(e) => tracing::debug!("listing session: {e}"),
                }
            }
            match list_parallel(&mut pool, level.iter().map(|(d, _)| d.clone()).collect()).await {
                Some(v) => v,
                // No extra session came up: the walk's own lists them.
                None => {
                    let mut v = Vec::new();
                    for (d, _) in &level {
                        v.push((d.clone(), client.list(d, ListKind::Mlsd).await));
                    }
                    v
                }
            }
        };
        let depth: std::collections::HashMap<String, usize> = level.drain(..).collect();
        let mut failed = None;
        for (d, r) in results {
            match r {
                Ok(text) => {
                    entries += text.lines().count();
                    level.extend(subdirs(
                        &d,
                        &text,
                        depth.get(&d).copied().unwrap_or(MAX_DEPTH),
                    ));
                    out.insert(d, Ok(text));
                }
                Err(e) if e.reply_code().is_some() => {
                    out.insert(d.clone(), Err(format!("{d}: cannot list ({e}), skipped")));
                }
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
        if entries > MAX_ENTRIES {
            break Err(ClientError::Invalid(format!(
                "the remote tree lists more than {MAX_ENTRIES} entries; copy it in parts"
            )));
        }
        // Name order within a level keeps the listing order of the sessions from mattering.
        level.sort();
    };
    for c in pool {
        warm.put(Side::Src, c);
    }
    r
}

/// MLSD of `dirs` over the sessions in `pool`, each taking the next directory as it is free; the sessions go back
/// into `pool` (those whose connection broke do not). `None` if `pool` is empty.
async fn list_parallel(
    pool: &mut Vec<Client>,
    dirs: Vec<String>,
) -> Option<Vec<(String, Result<String, ClientError>)>> {
    if pool.is_empty() {
        return None;
    }
    let queue = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(
        dirs,
    )));
    let mut set = tokio::task::JoinSet::new();
    for mut c in pool.drain(..) {
        let q = queue.clone();
        set.spawn(async move {
            let mut got = Vec::new();
            loop {
                let next = q.lock().ok().and_then(|mut q| q.pop_front());
                let Some(d) = next else {
                    break;
                };
                let r = c.list(&d, ListKind::Mlsd).await;
                let broken = r.as_ref().is_err_and(|e| e.reply_code().is_none());
                got.push((d, r));
                if broken {
                    return (None, got);
                }
            }
            (Some(c), got)
        });
    }
    let mut out = Vec::new();
    while let Some(j) = set.join_next().await {
        if let Ok((c, got)) = j {
            pool.extend(c);
            out.extend(got);
        }
    }
    // Directories left by sessions that broke: listed by whoever is still up, or reported as lost.
    let left: Vec<String> = queue
        .lock()
        .map(|mut q| q.drain(..).collect())
        .unwrap_or_default();
    for d in left {
        out.push((
            d,
            Err(ClientError::Control(std::io::Error::other(
                "every listing session broke",
            ))),
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_file_goes_into_a_directory_destination() {
        let d = tempfile::tempdir().unwrap();
        let local = Loc::Local(d.path().to_path_buf());
        assert_eq!(
            file_destination(local, Some("f")),
            Loc::Local(d.path().join("f"))
        );
        let named = Loc::Local(d.path().join("new"));
        assert_eq!(file_destination(named.clone(), Some("f")), named);
        let url_dir = Loc::Remote("/in/".into());
        assert_eq!(
            file_destination(url_dir, Some("f")),
            Loc::Remote("/in/f".into())
        );
        let url_file = Loc::Remote("/in/g".into());
        assert_eq!(file_destination(url_file.clone(), Some("f")), url_file);
        assert_eq!(
            file_destination(Loc::Remote("/in/".into()), Some("..")),
            Loc::Remote("/in/".into())
        );
    }

    #[test]
    fn local_walk_skips_links_leaving_the_tree() {
        let top = tempfile::tempdir().unwrap();
        let src = top.path().join("src");
        std::fs::create_dir_all(src.join("sub dir/ünï")).unwrap();
        std::fs::create_dir_all(src.join("empty")).unwrap();
        std::fs::write(src.join("-dash"), b"1").unwrap();
        std::fs::write(src.join("sub dir/ünï/f"), b"22").unwrap();
        std::fs::write(top.path().join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink(top.path().join("secret"), src.join("out")).unwrap();
        std::os::unix::fs::symlink("-dash", src.join("in")).unwrap();
        std::os::unix::fs::symlink("sub dir", src.join("dirlink")).unwrap();
        let mut job = Job::default();
        let canon = src.canonicalize().unwrap();
        let dst = Loc::Remote("/d".into());
        walk_local(&canon, &src, &dst, &mut job, 0).unwrap();
        let files: Vec<String> = job.files.iter().map(|f| f.dst.to_string()).collect();
        assert_eq!(files, ["/d/-dash", "/d/in", "/d/sub dir/ünï/f"]);
        assert_eq!(job.files[1].size, Some(1));
        let dirs: Vec<String> = job.dirs.iter().map(|d| d.to_string()).collect();
        assert_eq!(dirs, ["/d/empty", "/d/sub dir", "/d/sub dir/ünï"]);
        assert!(
            job.notes.iter().any(|n| n.contains("leaves the tree")),
            "{:?}",
            job.notes
        );
        assert!(
            job.notes.iter().any(|n| n.contains("dirlink")),
            "{:?}",
            job.notes
        );
    }
}
