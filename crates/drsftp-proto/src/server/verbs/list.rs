//! LIST, NLST and MLSD: directory listings sent over the data channel, always in stream mode (whatever MODE
//! says). The driver is asked to stat the path; a directory's listing is streamed by the driver, which formats
//! entries as it reads them (`Payload::SendListing`), so no listing is ever held whole in memory. LIST and NLST
//! of a file list that file, MLSD of a file is `501` (RFC 3659 §7.1). LIST/NLST ignore leading `ls` options.

use std::time::Instant;

use drsftp_storage::EntryKind;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;
use crate::server::listing::{self, ListFormat, ListKind};
use crate::server::transfer::Command;
use crate::server::types::{FsRequest, FsResult, Mode, Payload};

pub(super) const MLSD: Verb = Verb::cmd("MLSD", mlsd);
pub(super) const LIST: Verb = Verb::cmd("LIST", list);
pub(super) const NLST: Verb = Verb::cmd("NLST", nlst);

fn verb(kind: ListKind) -> &'static str {
    match kind {
        ListKind::List => "LIST",
        ListKind::Nlst => "NLST",
        ListKind::Mlsd => "MLSD",
    }
}

/// Drops leading `-xyz` option words.
fn strip_options(arg: &str) -> &str {
    let mut rest = arg;
    loop {
        let t = rest.trim_start();
        if !t.starts_with('-') {
            return if rest.len() == arg.len() { arg } else { t };
        }
        rest = t.split_once(' ').map_or("", |(_, r)| r);
    }
}

fn format(ctx: &Ctx, now: Instant, kind: ListKind) -> ListFormat {
    ListFormat::new(kind, ctx.epoch_secs(now), ctx.facts)
}

fn send(ctx: &mut Ctx, now: Instant, kind: ListKind, path: &str, payload: Payload) {
    let cmd = Command::new(verb(kind), path, None);
    if let Err(e) = ctx.start_transfer(now, payload, Mode::Stream, cmd) {
        ctx.refuse(&e);
    }
}

fn listing_cmd(ctx: &mut Ctx, arg: &str, kind: ListKind) -> CmdResult {
    let arg = if kind == ListKind::Mlsd {
        arg
    } else {
        strip_options(arg)
    };
    ctx.take_rest();
    ctx.endpoint()?;
    let path = ctx.resolve(arg);
    let given = if arg.is_empty() {
        path.clone()
    } else {
        arg.to_string()
    };
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, now, r| match r {
        // A directory streams: the driver reads and formats its entries as the data connection takes them.
        FsResult::Stat(m) if m.kind == EntryKind::Dir => {
            let format = format(ctx, now, kind);
            let payload = Payload::SendListing {
                path: path.clone(),
                format,
            };
            send(ctx, now, kind, &path, payload);
        }
        FsResult::Stat(_) if kind == ListKind::Mlsd => {
            ctx.reply(501, &format!("{path}: not a directory."))
        }
        FsResult::Stat(m) => {
            let line = format(ctx, now, kind).line_named(&m, &given);
            let bytes = listing::to_bytes(&[line]);
            send(ctx, now, kind, &path, Payload::SendBytes(bytes));
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `LIST [-opts] [path]`.
fn list(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    listing_cmd(ctx, arg, ListKind::List)
}

/// `NLST [-opts] [path]`.
fn nlst(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    listing_cmd(ctx, arg, ListKind::Nlst)
}

/// `MLSD [path]`.
fn mlsd(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    listing_cmd(ctx, arg, ListKind::Mlsd)
}

#[cfg(test)]
mod tests {
    use super::strip_options;
    use crate::server::testutil::{dir, file, H};
    use crate::server::{FsRequest, FsResult, ListKind, Mode, Payload};
    use drsftp_storage::{EntryKind, Metadata};

    /// What the driver would send for a `SendListing` of `entries` (in the order it reads them).
    fn render(p: &Payload, path: &str, kind: ListKind, entries: &[Metadata]) -> String {
        let Payload::SendListing { path: p, format } = p else {
            panic!("{p:?}")
        };
        assert_eq!(p, path);
        assert_eq!(format.kind(), kind);
        let mut out = vec![];
        for e in entries {
            format.push_line(e, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    fn entries() -> Vec<Metadata> {
        let mut sub = dir("sub");
        sub.mode = 0o755;
        vec![file("a.dat", 1024), sub, file("z\r\nfake", 1)]
    }

    #[test]
    fn mlsd_in_mode_e_goes_over_stream_mode() {
        let mut h = H::new();
        h.login();
        h.cmd("MODE E");
        assert!(
            h.cmd("MLSD /d").starts_with("425 "),
            "needs a data endpoint"
        );
        h.pasv();
        h.send("MLSD /d");
        let r = h.fs(FsRequest::Stat("/d".into()), FsResult::Stat(dir("d")));
        assert_eq!(r, "150 Opening ASCII mode data connection for MLSD /d.\r\n");
        let plan = h.transfer();
        assert_eq!(plan.mode, Mode::Stream);
        assert!(!plan.ascii);
        assert_eq!(
            render(&plan.payload, "/d", ListKind::Mlsd, &entries()),
            "type=file;size=1024;modify=20261122145117;perm=adfwr;UNIX.mode=0644; a.dat\r\n\
             type=dir;size=0;modify=20261122145117;perm=cdfmpel;UNIX.mode=0755; sub\r\n\
             type=file;size=1;modify=20261122145117;perm=adfwr;UNIX.mode=0644; z??fake\r\n"
        );
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        h.send("MLSD /d/a.dat");
        assert!(h
            .fs(
                FsRequest::Stat("/d/a.dat".into()),
                FsResult::Stat(file("a.dat", 1))
            )
            .starts_with("501 "));
    }

    #[test]
    fn list_and_nlst() {
        let mut h = H::new();
        h.login();
        h.s.set_epoch(h.now, 1_795_359_077.0 + 3600.0);
        h.pasv();
        h.send("LIST -la");
        h.fs(FsRequest::Stat("/".into()), FsResult::Stat(dir("/")));
        let plan = h.transfer();
        let text = render(&plan.payload, "/", ListKind::List, &entries());
        assert!(
            text.starts_with("-rw-r--r-- 1 ftp ftp         1024 Nov 22 14:51 a.dat\r\ndrwxr-xr-x "),
            "{text}"
        );
        h.done_ok(plan.id);
        h.send("NLST f.txt");
        h.fs(
            FsRequest::Stat("/f.txt".into()),
            FsResult::Stat(file("f.txt", 5)),
        );
        let plan = h.transfer();
        assert_eq!(plan.payload, Payload::SendBytes(b"f.txt\r\n".to_vec()));
        h.done_ok(plan.id);
        h.send("NLST /nope");
        let r = h.fs(
            FsRequest::Stat("/nope".into()),
            FsResult::Err(drsftp_storage::StorageError::NotFound("/nope".into())),
        );
        assert!(r.starts_with("550 "));
        // Other entries are listed (never opened).
        let mut o = file("sock", 0);
        o.kind = EntryKind::Other;
        h.send("LIST");
        h.fs(FsRequest::Stat("/".into()), FsResult::Stat(dir("/")));
        let text = render(&h.transfer().payload, "/", ListKind::List, &[o]);
        assert!(text.starts_with("?rw-r--r--"), "{text}");
    }

    #[test]
    fn ls_options_are_skipped() {
        assert_eq!(strip_options("-la /x y"), "/x y");
        assert_eq!(strip_options("-l -a"), "");
        assert_eq!(strip_options(" dir"), " dir");
        assert_eq!(strip_options(""), "");
    }
}
