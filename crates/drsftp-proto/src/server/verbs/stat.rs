//! STAT: without an argument (or during a transfer) the session status on the control channel (`211`); with a
//! path, its LIST-style listing on the control channel (`213`, RFC 959).

use std::time::Instant;

use drsftp_storage::EntryKind;

use super::{Busy, Verb};
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;
use crate::server::listing;
use crate::server::types::{DataEndpoint, FsRequest, FsResult, Mode, STAT_LIST_LIMIT};

pub(super) const STAT: Verb = Verb::cmd("STAT", stat).busy(Busy::Inline);

fn status(ctx: &mut Ctx, now: Instant) {
    let mut body = vec![
        format!(" Connected to {}", ctx.peer),
        format!(
            " Logged in as {}",
            ctx.login.logged_in.as_deref().unwrap_or("?")
        ),
        format!(
            " TYPE: {}, MODE: {}, STRU: F, parallelism: {}, TCP buffer: {}",
            if ctx.data.ascii { "ASCII" } else { "BINARY" },
            if ctx.data.mode == Mode::Extended {
                "E"
            } else {
                "S"
            },
            ctx.data.parallelism.unwrap_or(ctx.cfg.default_parallelism),
            ctx.data
                .tcp_buffer
                .map_or("default".to_string(), |b| b.to_string()),
        ),
        format!(
            " Data endpoint: {}",
            match &ctx.data.endpoint {
                None => "none".to_string(),
                Some(DataEndpoint::Passive) => "passive".to_string(),
                Some(DataEndpoint::Active(a)) => format!("active {a:?}"),
                Some(DataEndpoint::Blast(b)) => format!("blast {} <-> {}", b.local, b.peer),
            }
        ),
    ];
    match &ctx.xfer.running {
        Some(run) => {
            let secs = now.saturating_duration_since(run.started).as_secs_f64();
            body.push(format!(" Transferring: {} (id {})", run.what, run.id));
            body.push(format!(" {} bytes in {secs:.1} s", run.progress.bytes));
        }
        None => body.push(format!(" {} transfers completed", ctx.xfer.done)),
    }
    ctx.reply_multi(211, "drsftp server status:", &body, "End of status.");
}

/// `STAT [path]`.
fn stat(ctx: &mut Ctx, now: Instant, arg: &str) -> CmdResult {
    if arg.trim().is_empty() || ctx.xfer.running.is_some() {
        status(ctx, now);
        return Ok(());
    }
    let path = ctx.resolve(arg);
    let given = arg.to_string();
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, now, r| match r {
        FsResult::Stat(m) if m.kind == EntryKind::Dir => {
            ctx.fs(FsRequest::List(path.clone()), move |ctx, now, r| match r {
                FsResult::List(mut entries) => {
                    let when = ctx.epoch_secs(now);
                    let more = entries.len() > STAT_LIST_LIMIT;
                    entries.truncate(STAT_LIST_LIMIT);
                    entries.sort_by(|a, b| a.name.cmp(&b.name));
                    let mut body: Vec<String> = entries
                        .iter()
                        .map(|e| format!(" {}", listing::list_line(e, &e.name, when)))
                        .collect();
                    if more {
                        body.push(format!(
                            " (only the first {STAT_LIST_LIMIT} entries; use MLSD or LIST for all)"
                        ));
                    }
                    ctx.reply_multi(213, &format!("Status of {path}:"), &body, "End of status.");
                }
                other => ctx.fs_failed(other),
            })
        }
        FsResult::Stat(m) => {
            let line = format!(" {}", listing::list_line(&m, &given, ctx.epoch_secs(now)));
            ctx.reply_multi(
                213,
                &format!("Status of {path}:"),
                &[line],
                "End of status.",
            );
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::{dir, file, H};
    use crate::server::{FsRequest, FsResult, TransferProgress};

    /// A directory's STAT goes over the control connection, so it shows at most STAT_LIST_LIMIT entries,
    /// sorted, and says there are more (the driver stops reading the directory one entry past the limit).
    #[test]
    fn stat_of_a_huge_directory_is_capped() {
        use crate::server::STAT_LIST_LIMIT;
        let mut h = H::new();
        h.login();
        h.send("STAT /d");
        h.fs(FsRequest::Stat("/d".into()), FsResult::Stat(dir("d")));
        let entries = (0..=STAT_LIST_LIMIT)
            .rev()
            .map(|i| file(&format!("f{i:06}"), 1))
            .collect();
        let s = h.fs(FsRequest::List("/d".into()), FsResult::List(entries));
        let lines: Vec<&str> = s.split_terminator("\r\n").collect();
        assert_eq!(
            lines.len(),
            STAT_LIST_LIMIT + 3,
            "header, entries, note, end"
        );
        // The first STAT_LIST_LIMIT the directory gave (here f010000 down to f000001), shown sorted.
        assert!(lines[1].ends_with(" f000001"), "{}", lines[1]);
        assert!(lines[STAT_LIST_LIMIT].ends_with(" f010000"));
        assert!(lines[STAT_LIST_LIMIT + 1].contains("only the first 10000 entries"));
        assert_eq!(lines[STAT_LIST_LIMIT + 2], "213 End of status.");
    }

    #[test]
    fn stat_forms() {
        let mut h = H::new();
        h.login();
        let s = h.cmd("STAT");
        assert!(
            s.starts_with("211-drsftp server status:\r\n Connected to 127.0.0.1:50000\r\n"),
            "{s}"
        );
        assert!(s.ends_with(" 0 transfers completed\r\n211 End of status.\r\n"));
        h.send("STAT /d");
        h.fs(FsRequest::Stat("/d".into()), FsResult::Stat(dir("d")));
        let s = h.fs(
            FsRequest::List("/d".into()),
            FsResult::List(vec![file("x", 3)]),
        );
        assert!(
            s.starts_with(
                "213-Status of /d:\r\n -rw-r--r-- 1 ftp ftp            3 Nov 22 14:51 x\r\n213 End"
            ),
            "{s}"
        );
        // During a transfer: status with progress, at once.
        h.pasv();
        let plan = h.retr_file("/f", 100);
        h.s.handle_progress(
            h.now,
            TransferProgress {
                bytes: 42,
                ..Default::default()
            },
        );
        let s = h.cmd("STAT /ignored");
        assert!(
            s.contains(" Transferring: RETR /f (id 1)\r\n 42 bytes in 0.0 s\r\n"),
            "{s}"
        );
        h.done_ok(plan.id);
    }
}
