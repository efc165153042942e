//! CKSM `<alg> <offset> <length> <path>` (Globus / GridFTP v2): checksum of a byte range (`length` -1 = to the
//! end), computed by the driver; reply `213 <hex>`. Unknown algorithms get `504`.

use std::time::Instant;

use drsftp_storage::ChecksumAlg;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::{FsRequest, FsResult};

/// FEAT lists every algorithm CKSM accepts, in our preference order.
pub(super) const CKSM: Verb = Verb::cmd("CKSM", cksm).feat_from(130, |_| {
    let algs: String = ChecksumAlg::ALL
        .iter()
        .map(|a| format!("{};", a.name()))
        .collect();
    vec![format!("CKSM {algs}")]
});

/// `CKSM alg offset length path`.
fn cksm(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let req = request(ctx, arg)?;
    ctx.fs(req, |ctx, _now, r| match r {
        FsResult::Checksum(hex)
            if !hex.is_empty()
                && hex.len() <= 256
                && hex.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            ctx.reply(213, &hex.to_ascii_lowercase())
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// The filesystem request `CKSM <arg>` makes in the session's present state (also for
/// [`Action::Prefetch`](crate::server::Action::Prefetch), before the command runs).
pub(super) fn request(ctx: &Ctx, arg: &str) -> Result<FsRequest, CommandError> {
    let bad = || CommandError::syntax("Syntax: CKSM <algorithm> <offset> <length> <path>.");
    let mut it = arg.splitn(4, ' ');
    let (Some(alg), Some(off), Some(len), Some(path)) =
        (it.next(), it.next(), it.next(), it.next())
    else {
        return Err(bad());
    };
    if path.is_empty() {
        return Err(bad());
    }
    let alg: ChecksumAlg = alg
        .parse()
        .map_err(|_| CommandError::Unsupported("Unsupported checksum algorithm.".into()))?;
    let offset = super::parse_u64(off).ok_or_else(bad)?;
    let length = match len {
        "-1" => None,
        l => Some(super::parse_u64(l).ok_or_else(bad)?),
    };
    Ok(FsRequest::Checksum {
        alg,
        path: ctx.resolve(path),
        offset,
        length,
    })
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{FsRequest, FsResult};
    use drsftp_storage::{ChecksumAlg, StorageError};

    #[test]
    fn cksm_requests_and_replies() {
        let mut h = H::new();
        h.login();
        h.send("CKSM ADLER32 0 -1 /tmp/gftp/src/f200M");
        let req = FsRequest::Checksum {
            alg: ChecksumAlg::Adler32,
            path: "/tmp/gftp/src/f200M".into(),
            offset: 0,
            length: None,
        };
        assert_eq!(
            h.fs(req, FsResult::Checksum("21082f38".into())),
            "213 21082f38\r\n"
        );
        h.send("CKSM md5 1000 5000 dir/with space");
        let req = FsRequest::Checksum {
            alg: ChecksumAlg::Md5,
            path: "/dir/with space".into(),
            offset: 1000,
            length: Some(5000),
        };
        assert!(h
            .fs(
                req.clone(),
                FsResult::Err(StorageError::NotFound("x".into()))
            )
            .starts_with("550 "));
        h.send("CKSM MD5 1000 5000 dir/with space");
        assert!(h
            .fs(req, FsResult::Checksum("not hex\r\n".into()))
            .starts_with("451 "));
        assert_eq!(
            h.cmd("CKSM SHA512 0 -1 /f"),
            "504 Unsupported checksum algorithm.\r\n"
        );
        for bad in [
            "CKSM",
            "CKSM MD5 0 -1",
            "CKSM MD5 x -1 /f",
            "CKSM MD5 0 -2 /f",
            "CKSM MD5 0 -1 ",
        ] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
    }

    fn crc(path: &str) -> FsRequest {
        FsRequest::Checksum {
            alg: ChecksumAlg::Crc32c,
            path: path.into(),
            offset: 0,
            length: None,
        }
    }

    /// first22c: a CKSM queued behind a whole-file RETR of the same file is answered from the data engine's CRC
    /// later: no prefetch. It runs in order, as an `Fs` request, once the transfer has ended.
    #[test]
    fn a_cksm_behind_a_whole_retr_of_its_file_is_left_to_the_engine() {
        let mut h = H::new();
        h.login();
        h.pasv();
        let plan = h.retr_file("/f", 5000);
        h.send("CKSM CRC32C 0 -1 /f");
        assert_eq!(h.actions(), vec![], "no prefetch, no answer yet");
        h.s.handle_transfer_done(
            h.now,
            plan.id,
            crate::server::TransferResult::Ok {
                bytes: 5000,
                streams: 1,
            },
        );
        assert!(h.out().starts_with("226 "));
        assert_eq!(
            h.fs(crc("/f"), FsResult::Checksum("0a1b2c3d".into())),
            "213 0a1b2c3d\r\n"
        );
    }

    /// first22c: behind a send that will not yield the file's digest (here a restarted RETR; a blast RETR is the
    /// case that matters), the CKSM at the head of the queue is offered for prefetch once, and still runs in order
    /// after the transfer.
    #[test]
    fn a_cksm_behind_a_partial_retr_is_prefetched_once_and_still_answered_in_order() {
        let mut h = H::new();
        h.login();
        h.pasv();
        assert!(h.cmd("REST 100").starts_with("350 "));
        let plan = h.retr_file("/f", 5000);
        h.send("CKSM CRC32C 0 -1 /f");
        assert_eq!(
            h.actions(),
            vec![crate::server::Action::Prefetch(crc("/f"))]
        );
        assert_eq!(h.out(), "", "no reply before the transfer's");
        h.send("NOOP");
        assert_eq!(h.actions(), vec![], "offered once");
        h.s.handle_transfer_done(
            h.now,
            plan.id,
            crate::server::TransferResult::Ok {
                bytes: 4900,
                streams: 1,
            },
        );
        assert!(h.out().starts_with("226 "));
        let r = h.fs(crc("/f"), FsResult::Checksum("0a1b2c3d".into()));
        assert!(r.starts_with("213 0a1b2c3d\r\n200 "), "{r}");
    }

    /// A CKSM of another file behind a whole RETR is offered too; one behind another queued command is not (that
    /// command could change what the path names).
    #[test]
    fn only_the_head_of_the_queue_is_offered_for_prefetch() {
        let mut h = H::new();
        h.login();
        h.pasv();
        let _plan = h.retr_file("/f", 5000);
        h.send("CKSM CRC32C 0 -1 other");
        assert_eq!(
            h.actions(),
            vec![crate::server::Action::Prefetch(crc("/other"))]
        );

        let mut h = H::new();
        h.login();
        h.pasv();
        let _plan = h.retr_file("/f", 5000);
        h.send("CWD /d");
        h.send("CKSM CRC32C 0 -1 other");
        assert_eq!(h.actions(), vec![]);
    }
}
