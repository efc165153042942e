//! Verifying a third-party copy: both servers' CKSM of the whole file (or a range, for resume), compared with the
//! first algorithm of `VERIFY_PREFERENCE` both list; a mismatch deletes the destination.

use drsftp_proto::client::{Op, Outcome, VERIFY_PREFERENCE};

use super::control::Control;
use super::third_party::{at, delete, End};
use super::{ClientError, TransferSummary};

/// The checksum algorithm both servers list: the first of `VERIFY_PREFERENCE`, else any common one.
pub(super) fn common_alg(s: &Control, d: &Control) -> Option<String> {
    let a = s.session().features().checksum_algorithms();
    let b = d.session().features().checksum_algorithms();
    let both = |x: &str| a.iter().any(|y| y == x) && b.iter().any(|y| y == x);
    VERIFY_PREFERENCE
        .iter()
        .map(|p| p.to_string())
        .find(|p| both(p))
        .or_else(|| a.iter().find(|x| both(x)).cloned())
}

/// CKSM `alg` of `path` on one server: the whole file, or `range`.
pub(super) async fn checksum(
    c: &mut Control,
    alg: &str,
    path: &str,
    range: Option<std::ops::Range<u64>>,
) -> Result<String, ClientError> {
    let op = Op::Checksum {
        algorithm: alg.to_string(),
        offset: range.as_ref().map_or(0, |r| r.start),
        length: range.map(|r| r.end - r.start),
        path: path.to_string(),
    };
    match c.run(op).await? {
        Outcome::Checksum(h) => Ok(h),
        other => Err(ClientError::Invalid(format!(
            "unexpected CKSM outcome {other:?}"
        ))),
    }
}

/// CKSM on both servers at once; a mismatch deletes the destination and fails, a refusal is a notice.
pub(super) async fn verify(
    s: &mut Control,
    src_path: &str,
    d: &mut Control,
    dst_path: &str,
    summary: &mut TransferSummary,
) -> Result<(), ClientError> {
    let Some(alg) = common_alg(s, d) else {
        summary
            .notices
            .push("checksum not verified: the servers list no common CKSM algorithm".into());
        return Ok(());
    };
    let mut one = |r: Result<String, ClientError>, c: &Control, end: End| match r {
        Ok(h) => Ok(Some(h)),
        Err(e) if e.reply_code().is_some() => {
            summary.notices.push(format!(
                "checksum not verified: {} server refused CKSM {alg}: {e}",
                end.name()
            ));
            Ok(None)
        }
        Err(e) => Err(at(end, c, e)),
    };
    // Both servers read their copy at once: each is a whole-file read, on different hosts.
    let (rs, rd) = tokio::join!(
        checksum(s, &alg, src_path, None),
        checksum(d, &alg, dst_path, None)
    );
    let Some(hs) = one(rs, s, End::Source)? else {
        return Ok(());
    };
    let Some(hd) = one(rd, d, End::Destination)? else {
        return Ok(());
    };
    compare(d, dst_path, alg, hs, hd, summary).await
}

/// The source's and the destination's whole-file checksums `hs` and `hd` (by `alg`) compared: equal marks the
/// copy verified, different deletes the destination and fails.
pub(super) async fn compare(
    d: &mut Control,
    dst_path: &str,
    alg: String,
    hs: String,
    hd: String,
    summary: &mut TransferSummary,
) -> Result<(), ClientError> {
    if hs != hd {
        delete(d, dst_path).await;
        return Err(ClientError::ChecksumMismatch {
            what: format!("{dst_path} (the destination was deleted)"),
            alg,
            local: format!("{hs} (source)"),
            remote: hd,
        });
    }
    summary.checksum = Some((alg, hs));
    summary.verified = true;
    Ok(())
}
