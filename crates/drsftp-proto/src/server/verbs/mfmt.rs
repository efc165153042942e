//! MFMT (draft-somers-ftp-mfxx): sets a file's modification time, `MFMT YYYYMMDDHHMMSS path` → `213 Modify=...;
//! path`, so uploads (`drsftp copy -r`, FileZilla, lftp) keep their source's times. Changes the tree: writers only.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::Verb;
use crate::civil::parse_modify;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::listing;
use crate::server::types::{FsRequest, FsResult};

pub(super) const MFMT: Verb = Verb::cmd("MFMT", mfmt).writes().feat(45, &["MFMT"]);

/// `YYYYMMDDHHMMSS[.sss]` (UTC) as a time; the fraction is dropped, as MDTM shows whole seconds.
fn parse_time(s: &str) -> Option<SystemTime> {
    let secs = parse_modify(s)?;
    let d = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 {
        UNIX_EPOCH.checked_add(d)
    } else {
        UNIX_EPOCH.checked_sub(d)
    }
}

/// `MFMT <time> <path>`.
fn mfmt(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax: MFMT YYYYMMDDHHMMSS path.");
    let (time, path) = arg.split_once(' ').ok_or_else(bad)?;
    let time = parse_time(time).ok_or_else(bad)?;
    let path = ctx.resolve(super::required(path, "MFMT")?);
    let text = format!("Modify={}; {path}", listing::timeval(time));
    ctx.fs(
        FsRequest::SetModified { path, time },
        move |ctx, _now, r| match r {
            FsResult::Done => ctx.reply(213, &text),
            other => ctx.fs_failed(other),
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use drsftp_storage::StorageError;

    use crate::server::testutil::H;
    use crate::server::{FsRequest, FsResult};

    #[test]
    fn mfmt_sets_the_time_of_a_confined_path() {
        let mut h = H::new();
        h.login();
        h.send("MFMT 20020717210715 dir/../my file.txt");
        let time = UNIX_EPOCH + Duration::from_secs(1_026_940_035);
        assert_eq!(
            h.fs(
                FsRequest::SetModified {
                    path: "/my file.txt".into(),
                    time
                },
                FsResult::Done
            ),
            "213 Modify=20020717210715; /my file.txt\r\n"
        );
        h.send("MFMT 19691231235959.5 /old");
        let r = h.fs(
            FsRequest::SetModified {
                path: "/old".into(),
                time: UNIX_EPOCH - Duration::from_secs(1),
            },
            FsResult::Err(StorageError::NotFound("/old".into())),
        );
        assert!(r.starts_with("550 "), "{r}");
        for bad in [
            "MFMT",
            "MFMT 20020717210715",
            "MFMT 20020717210715 ",
            "MFMT 2002071721071 f",
            "MFMT 20021317210715 f",
            "MFMT now f",
        ] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
        assert!(h.cmd("FEAT").contains("\r\n MFMT\r\n"));
    }

    #[test]
    fn mfmt_needs_write_permission() {
        // Anonymous sessions are read-only by default: refused before any filesystem request.
        let mut h = H::with_cfg(crate::server::ServerConfig::default());
        h.login();
        assert_eq!(
            h.cmd("MFMT 20020717210715 f"),
            "550 Permission denied: read-only session.\r\n"
        );
        assert!(h.actions().is_empty());
    }
}
