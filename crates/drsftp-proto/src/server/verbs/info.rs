//! SIZE, MDTM and MLST: metadata of one path on the control channel (RFC 3659), each after one Stat.

use std::time::Instant;

use drsftp_storage::EntryKind;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;
use crate::server::listing::{self, FactSet};
use crate::server::types::{FsRequest, FsResult};

pub(super) const SIZE: Verb = Verb::cmd("SIZE", size).feat(30, &["SIZE"]);
pub(super) const MDTM: Verb = Verb::cmd("MDTM", mdtm).feat(40, &["MDTM"]);
/// FEAT shows the facts with `*` on the selected ones; `OPTS MLST <facts>` selects them (also before login).
pub(super) const MLST: Verb = Verb::cmd("MLST", mlst)
    .feat_from(20, |ctx| vec![format!("MLST {}", ctx.facts.feat())])
    .opts(opts_mlst);

/// `SIZE path` → `213 <bytes>` (regular files only; the stored size whatever the TYPE, like Globus).
fn size(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let path = ctx.resolve(super::required(arg, "SIZE")?);
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, _now, r| match r {
        FsResult::Stat(m) if m.kind == EntryKind::File => ctx.reply(213, &m.size.to_string()),
        FsResult::Stat(_) => ctx.reply(550, &format!("{path}: not a regular file.")),
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `MDTM path` → `213 YYYYMMDDHHMMSS` (UTC).
fn mdtm(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let path = ctx.resolve(super::required(arg, "MDTM")?);
    ctx.fs(FsRequest::Stat(path), move |ctx, _now, r| match r {
        FsResult::Stat(m) => ctx.reply(213, &listing::timeval(m.modified)),
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `MLST [path]` → `250-Listing path` / ` facts path` / `250 End.`
fn mlst(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let path = ctx.resolve(arg);
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, _now, r| match r {
        FsResult::Stat(m) => {
            let line = format!(" {}", listing::mlsx_line(&m, &path, ctx.facts));
            ctx.reply_multi(250, &format!("Listing {path}"), &[line], "End.");
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `OPTS MLST <fact>;...`: selects the facts MLST and MLSD send; the reply names the selection.
fn opts_mlst(ctx: &mut Ctx, rest: &str) -> CmdResult {
    ctx.facts = FactSet::parse(rest.trim());
    let sel = ctx.facts.selected();
    ctx.reply(200, &format!("MLST OPTS {sel}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::{dir, file, H};
    use crate::server::{FsRequest, FsResult};

    #[test]
    fn size_mdtm_mlst() {
        let mut h = H::new();
        h.login();
        h.send("SIZE /tmp/f200M");
        assert_eq!(
            h.fs(
                FsRequest::Stat("/tmp/f200M".into()),
                FsResult::Stat(file("f200M", 209715200))
            ),
            "213 209715200\r\n"
        );
        h.send("SIZE /tmp");
        assert!(h
            .fs(FsRequest::Stat("/tmp".into()), FsResult::Stat(dir("tmp")))
            .starts_with("550 "));
        h.send("MDTM f");
        assert_eq!(
            h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 1))),
            "213 20261122145117\r\n"
        );
        h.send("MLST f");
        assert_eq!(
            h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 7))),
            "250-Listing /f\r\n type=file;size=7;modify=20261122145117;perm=adfwr;UNIX.mode=0644; /f\r\n250 End.\r\n"
        );
        h.send("MLST");
        assert!(h
            .fs(FsRequest::Stat("/".into()), FsResult::Stat(dir("/")))
            .contains(" type=dir;"));
    }
}
