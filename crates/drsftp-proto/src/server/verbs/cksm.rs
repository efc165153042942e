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
    let path = ctx.resolve(path);
    let req = FsRequest::Checksum {
        alg,
        path,
        offset,
        length,
    };
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
}
