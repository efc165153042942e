//! PWD, CWD and CDUP: the working directory. CWD asks the driver to stat the target (it must be a directory);
//! paths are resolved lexically under the virtual root, so `..` can never climb above `/`.

use std::time::Instant;

use drsftp_storage::EntryKind;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;
use crate::server::types::{FsRequest, FsResult};

pub(super) const PWD: Verb = Verb::cmd("PWD", pwd);
pub(super) const XPWD: Verb = Verb::cmd("XPWD", pwd);
pub(super) const CWD: Verb = Verb::cmd("CWD", cwd);
pub(super) const XCWD: Verb = Verb::cmd("XCWD", cwd);
pub(super) const CDUP: Verb = Verb::cmd("CDUP", cdup);
pub(super) const XCUP: Verb = Verb::cmd("XCUP", cdup);

/// `"path"` with embedded quotes doubled (RFC 959 §7 for 257 replies).
pub(crate) fn quoted(path: &str) -> String {
    format!("\"{}\"", path.replace('"', "\"\""))
}

/// `PWD`.
fn pwd(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    let q = quoted(&ctx.cwd);
    ctx.reply(257, &format!("{q} is the current directory."));
    Ok(())
}

fn change_to(ctx: &mut Ctx, path: String) {
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, _now, r| match r {
        FsResult::Stat(m) if m.kind == EntryKind::Dir => {
            ctx.cwd = path;
            ctx.reply(250, "CWD command successful.");
        }
        FsResult::Stat(_) => ctx.reply(550, &format!("{path}: not a directory.")),
        other => ctx.fs_failed(other),
    });
}

/// `CWD path`.
fn cwd(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let arg = super::required(arg, "CWD")?;
    let path = ctx.resolve(arg);
    change_to(ctx, path);
    Ok(())
}

/// `CDUP`: CWD to the parent.
fn cdup(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    let path = ctx.resolve("..");
    change_to(ctx, path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::{dir, file, H};
    use crate::server::{FsRequest, FsResult};
    use drsftp_storage::StorageError;

    #[test]
    fn cwd_cdup_pwd_and_escape_attempts() {
        let mut h = H::new();
        h.login();
        h.send("CWD data/sub");
        assert_eq!(
            h.fs(
                FsRequest::Stat("/data/sub".into()),
                FsResult::Stat(dir("sub"))
            ),
            "250 CWD command successful.\r\n"
        );
        assert_eq!(
            h.cmd("PWD"),
            "257 \"/data/sub\" is the current directory.\r\n"
        );
        h.send("CDUP");
        h.fs(FsRequest::Stat("/data".into()), FsResult::Stat(dir("data")));
        // `..` cannot leave the virtual root.
        h.send("CWD ../../../../etc");
        h.fs(FsRequest::Stat("/etc".into()), FsResult::Stat(dir("etc")));
        assert_eq!(h.cmd("PWD"), "257 \"/etc\" is the current directory.\r\n");
        h.send("CWD /x/f");
        assert_eq!(
            h.fs(FsRequest::Stat("/x/f".into()), FsResult::Stat(file("f", 3))),
            "550 /x/f: not a directory.\r\n"
        );
        h.send("CWD nope");
        let r = h.fs(
            FsRequest::Stat("/etc/nope".into()),
            FsResult::Err(StorageError::NotFound("/etc/nope".into())),
        );
        assert!(r.starts_with("550 "), "{r}");
        assert_eq!(h.cmd("PWD"), "257 \"/etc\" is the current directory.\r\n");
        assert!(h.cmd("CWD").starts_with("501 "));
        assert_eq!(super::quoted("/a\"b"), "\"/a\"\"b\"");
    }
}
