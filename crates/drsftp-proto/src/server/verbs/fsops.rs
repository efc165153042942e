//! MKD, RMD, DELE, RNFR and RNTO: namespace changes, each one filesystem request. RNFR checks that the source
//! exists (`350`); the session forgets it unless the very next command is RNTO.

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::{FsRequest, FsResult};

pub(super) const MKD: Verb = Verb::cmd("MKD", mkd).writes();
pub(super) const XMKD: Verb = Verb::cmd("XMKD", mkd).writes();
pub(super) const RMD: Verb = Verb::cmd("RMD", rmd).writes();
pub(super) const XRMD: Verb = Verb::cmd("XRMD", rmd).writes();
pub(super) const DELE: Verb = Verb::cmd("DELE", dele).writes();
pub(super) const RNFR: Verb = Verb::cmd("RNFR", rnfr).writes();
pub(super) const RNTO: Verb = Verb::cmd("RNTO", rnto).writes();

/// Runs `req`; on `Done` replies `code text`.
fn simple(ctx: &mut Ctx, req: FsRequest, code: u16, text: String) {
    ctx.fs(req, move |ctx, _now, r| match r {
        FsResult::Done => ctx.reply(code, &text),
        other => ctx.fs_failed(other),
    });
}

/// `MKD path` → `257 "path" directory created.`
fn mkd(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let path = ctx.resolve(super::required(arg, "MKD")?);
    let text = format!("{} directory created.", super::nav::quoted(&path));
    simple(ctx, FsRequest::Mkdir(path), 257, text);
    Ok(())
}

/// `RMD path`.
fn rmd(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    remove(ctx, arg, "RMD", FsRequest::Rmdir)
}

/// `DELE path`.
fn dele(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    remove(ctx, arg, "DELE", FsRequest::Remove)
}

/// RMD and DELE: `req` on the resolved path, `250 <verb> command successful.` when done.
fn remove(ctx: &mut Ctx, arg: &str, verb: &str, req: fn(String) -> FsRequest) -> CmdResult {
    let path = ctx.resolve(super::required(arg, verb)?);
    simple(ctx, req(path), 250, format!("{verb} command successful."));
    Ok(())
}

/// `RNFR path`: remembers an existing source.
fn rnfr(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let path = ctx.resolve(super::required(arg, "RNFR")?);
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, _now, r| match r {
        FsResult::Stat(_) => {
            ctx.rnfr = Some(path);
            ctx.reply(350, "File exists, ready for destination name.");
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `RNTO path`: right after a successful RNFR.
fn rnto(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let Some(from) = ctx.rnfr.take() else {
        return Err(CommandError::Sequence("RNFR required first.".into()));
    };
    let to = ctx.resolve(super::required(arg, "RNTO")?);
    simple(
        ctx,
        FsRequest::Rename { from, to },
        250,
        "Rename successful.".into(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::{file, H};
    use crate::server::{FsRequest, FsResult};
    use drsftp_storage::StorageError;

    #[test]
    fn mkd_rmd_dele() {
        let mut h = H::new();
        h.login();
        h.send("MKD new dir");
        assert_eq!(
            h.fs(FsRequest::Mkdir("/new dir".into()), FsResult::Done),
            "257 \"/new dir\" directory created.\r\n"
        );
        h.send("MKD new dir");
        let r = h.fs(
            FsRequest::Mkdir("/new dir".into()),
            FsResult::Err(StorageError::AlreadyExists("/new dir".into())),
        );
        assert!(r.starts_with("550 "));
        h.send("RMD /new dir/");
        assert_eq!(
            h.fs(FsRequest::Rmdir("/new dir".into()), FsResult::Done),
            "250 RMD command successful.\r\n"
        );
        h.send("DELE a/../b");
        assert_eq!(
            h.fs(FsRequest::Remove("/b".into()), FsResult::Done),
            "250 DELE command successful.\r\n"
        );
        assert!(h.cmd("DELE").starts_with("501 "));
        // A driver answering with the wrong kind is a local error, not a panic.
        h.send("DELE c");
        assert!(h
            .fs(FsRequest::Remove("/c".into()), FsResult::List(vec![]))
            .starts_with("451 "));
    }

    #[test]
    fn rename_sequence() {
        let mut h = H::new();
        h.login();
        assert_eq!(h.cmd("RNTO b"), "503 RNFR required first.\r\n");
        h.send("RNFR a");
        assert_eq!(
            h.fs(FsRequest::Stat("/a".into()), FsResult::Stat(file("a", 1))),
            "350 File exists, ready for destination name.\r\n"
        );
        h.send("RNTO b");
        assert_eq!(
            h.fs(
                FsRequest::Rename {
                    from: "/a".into(),
                    to: "/b".into()
                },
                FsResult::Done
            ),
            "250 Rename successful.\r\n"
        );
        // RNFR is forgotten by any other command in between.
        h.send("RNFR a");
        h.fs(FsRequest::Stat("/a".into()), FsResult::Stat(file("a", 1)));
        h.cmd("NOOP");
        assert_eq!(h.cmd("RNTO b"), "503 RNFR required first.\r\n");
        h.send("RNFR missing");
        let r = h.fs(
            FsRequest::Stat("/missing".into()),
            FsResult::Err(StorageError::NotFound("/missing".into())),
        );
        assert!(r.starts_with("550 "));
        assert_eq!(h.cmd("RNTO b"), "503 RNFR required first.\r\n");
    }
}
