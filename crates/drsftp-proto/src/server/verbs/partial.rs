//! `SITE PARTIAL <size> <tag> <path>`: resumable uploads (docs/resume.md "Upload resume"). It answers which byte
//! ranges of `path` the server keeps from an earlier failed upload by this user of the same source (`tag`, the
//! client's name for its file's version) and size, and arms the next `STOR` of `path` with `ALLO <size>` in
//! MODE E to be kept the same way if it fails. The ranges come back in the form of a GridFTP restart marker
//! (`213 Range Marker 0-1048576,...`, GFD.20), which is what the client then sends with `REST` before `STOR`;
//! `200` when nothing is held. A server without it (Globus) answers `500`, and the client uploads as before.

use std::time::Instant;

use drsftp_storage::KeptId;

use crate::ranges::RangeSet;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::{FsRequest, FsResult, Keep};

/// Longest source tag accepted (a client sends a short hash).
const MAX_TAG: usize = 64;

/// `SITE PARTIAL <size> <tag> <path>` (the SITE dispatcher hands over what follows `PARTIAL`).
pub(super) fn site_partial(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax: SITE PARTIAL <size> <tag> <path>.");
    let mut it = arg.splitn(3, ' ');
    let size = it.next().and_then(super::parse_u64).ok_or_else(bad)?;
    let tag = it
        .next()
        .filter(|t| {
            !t.is_empty()
                && t.len() <= MAX_TAG
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .ok_or_else(bad)?;
    let path = it.next().filter(|p| !p.is_empty()).ok_or_else(bad)?;
    let Some(user) = ctx.login.logged_in.clone() else {
        return Err(CommandError::Reply(
            530,
            "Please login with USER and PASS.".into(),
        ));
    };
    if ctx.login.read_only {
        return Err(CommandError::Reply(
            550,
            "Permission denied: read-only session.".into(),
        ));
    }
    if ctx.cfg.kept.max_files == 0 {
        return Err(CommandError::Reply(
            502,
            "Partial uploads are not kept on this server.".into(),
        ));
    }
    let id = KeptId {
        user,
        path: ctx.resolve(path),
        size,
        tag: tag.to_string(),
    };
    let keep = Keep {
        id: id.clone(),
        limits: ctx.cfg.kept,
    };
    ctx.fs(FsRequest::KeptHeld(keep), move |ctx, _now, r| {
        let held = match r {
            FsResult::Kept(held) => held
                .and_then(|h| RangeSet::parse(&h))
                .map(|h| h.intersect(0..size))
                .unwrap_or_default(),
            other => return ctx.fs_failed(other),
        };
        ctx.data.kept = Some(id);
        if held.is_empty() {
            ctx.reply(200, "No partial upload held; the next STOR of it is kept.");
        } else {
            ctx.reply(213, &format!("Range Marker {held}"));
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testutil::H;
    use crate::server::types::Payload;
    use drsftp_storage::{KeptLimits, WriteMode};

    fn id(path: &str, size: u64, tag: &str) -> KeptId {
        KeptId {
            user: "anonymous".into(),
            path: path.into(),
            size,
            tag: tag.into(),
        }
    }

    #[test]
    fn partial_query_arms_the_next_stor() {
        let mut h = H::new();
        h.login();
        h.cmd("MODE E");
        h.pasv();
        h.send("SITE PARTIAL 1000 ab12 up");
        let keep = Keep {
            id: id("/up", 1000, "ab12"),
            limits: KeptLimits::default(),
        };
        let r = h.fs(
            FsRequest::KeptHeld(keep.clone()),
            FsResult::Kept(Some("0-100,500-2000".into())),
        );
        assert_eq!(
            r, "213 Range Marker 0-100,500-1000\r\n",
            "clamped to the size"
        );
        h.cmd("ALLO 1000");
        h.cmd("REST 0-100,500-1000");
        h.cmd("STOR up");
        match h.transfer().payload {
            Payload::RecvFile {
                keep: k,
                write_mode,
                expected,
                ..
            } => {
                assert_eq!(k, Some(keep.clone()));
                assert_eq!(write_mode, WriteMode::InPlace);
                assert_eq!(expected, Some(1000));
            }
            p => panic!("{p:?}"),
        }
        h.done_ok(1);
        // Used once; another path, another size or stream mode is not kept.
        h.cmd("ALLO 1000");
        h.cmd("STOR up");
        assert!(matches!(
            h.transfer().payload,
            Payload::RecvFile { keep: None, .. }
        ));
        h.done_ok(2);
        for (line, stor) in [
            ("SITE PARTIAL 1000 t other", "STOR up"),
            ("SITE PARTIAL 999 t up", "STOR up"),
        ] {
            h.send(line);
            let path = if line.ends_with("other") {
                "/other"
            } else {
                "/up"
            };
            let size = if line.contains("999") { 999 } else { 1000 };
            let keep = Keep {
                id: id(path, size, "t"),
                limits: KeptLimits::default(),
            };
            assert!(h
                .fs(FsRequest::KeptHeld(keep), FsResult::Kept(None))
                .starts_with("200 "));
            h.cmd("ALLO 1000");
            h.cmd(stor);
            assert!(matches!(
                h.transfer().payload,
                Payload::RecvFile { keep: None, .. }
            ));
            h.done_ok(3);
        }
    }

    #[test]
    fn partial_refuses_bad_arguments() {
        let mut h = H::new();
        assert!(h.cmd("SITE PARTIAL 10 t f").starts_with("530 "));
        h.login();
        let long = "x".repeat(MAX_TAG + 1);
        for bad in [
            "SITE PARTIAL",
            "SITE PARTIAL 10",
            "SITE PARTIAL 10 t",
            "SITE PARTIAL x t f",
            "SITE PARTIAL 10 a/b f",
            &format!("SITE PARTIAL 10 {long} f"),
        ] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
    }
}
