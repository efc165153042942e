//! End-to-end checks after a transfer: the byte count and ranges the engine reports against what was asked for,
//! and the CKSM comparison (the best algorithm both sides know, per `VERIFY_PREFERENCE`) of the local file with the
//! server's copy. With CRC32C the local side needs no re-read: the engine CRC'd every block as it moved it
//! ([`engine_crc`]), and that is exactly the CRC32C of the bytes written (download) or sent (upload).

use std::ops::Range;
use std::sync::Arc;

use drsftp_proto::client::{Features, Op, Outcome, Reply, VERIFY_PREFERENCE};
use drsftp_storage::{ChecksumAlg, FileHandle};

use super::control::Control;
use super::{ClientError, TransferSummary};
use crate::data::DataReport;

/// The checksum algorithm to verify with: the first of [`VERIFY_PREFERENCE`] that the server lists in FEAT CKSM
/// and that we can compute locally.
pub(crate) fn pick_alg(features: &Features) -> Option<ChecksumAlg> {
    let listed = features.checksum_algorithms();
    VERIFY_PREFERENCE
        .iter()
        .filter(|p| listed.iter().any(|a| a == *p))
        .find_map(|p| p.parse::<ChecksumAlg>().ok())
}

/// Checks that the engine moved exactly `want` (file offsets): byte count, and coverage when ranges are reported.
pub(crate) fn check_moved(
    what: &str,
    data: &DataReport,
    want: Range<u64>,
) -> Result<(), ClientError> {
    let len = want.end - want.start;
    if data.bytes != len {
        return Err(ClientError::SizeMismatch {
            what: what.to_string(),
            expected: len,
            got: data.bytes,
        });
    }
    if !data.ranges.is_empty() {
        let gaps = data.ranges.gaps(want.clone());
        if !gaps.is_empty() || data.ranges.covered() != len {
            return Err(ClientError::Invalid(format!(
                "{what}: bytes {} arrived, expected exactly {}-{} (missing {gaps:?})",
                data.ranges, want.start, want.end
            )));
        }
    }
    Ok(())
}

/// Whether the engine should CRC32C the blocks it moves for this transfer: verifying with CRC32C, a whole file.
/// [`check_moved`] for a resumed download: what arrived plus what was `held` covers `want` exactly (the server
/// may send held bytes again, e.g. after refusing REST ranges, but nothing outside `want`).
pub(crate) fn check_resumed(
    what: &str,
    data: &DataReport,
    want: Range<u64>,
    held: &drsftp_proto::ranges::RangeSet,
) -> Result<(), ClientError> {
    let mut all = held.clone();
    all.extend(&data.ranges);
    let gaps = all.gaps(want.clone());
    if !gaps.is_empty() || all.covered() != want.end - want.start {
        return Err(ClientError::Invalid(format!(
            "{what}: bytes {} arrived and {held} were held, expected exactly {}-{} (missing {gaps:?})",
            data.ranges, want.start, want.end
        )));
    }
    Ok(())
}

pub(crate) fn want_engine_crc(alg: Option<ChecksumAlg>, whole: bool) -> bool {
    whole && alg == Some(ChecksumAlg::Crc32c)
}

/// The engine's CRC32C of the file's `want` bytes, usable as the local checksum: only for CRC32C, only for a
/// range from offset 0, and only when the engine's blocks covered exactly `want` (its CRC is of `0..end` of what
/// moved, and `None` on any gap or overlap).
pub(crate) fn engine_crc(alg: ChecksumAlg, data: &DataReport, want: &Range<u64>) -> Option<u32> {
    let exact = want.start == 0
        && data.ranges.covered() == want.end
        && data.ranges.gaps(want.clone()).is_empty();
    (alg == ChecksumAlg::Crc32c && exact)
        .then_some(data.crc32c)
        .flatten()
}

/// Result of a verification attempt.
#[derive(Debug)]
pub(crate) struct Verified {
    /// Algorithm and the agreed digest, when compared.
    pub(crate) checksum: Option<(String, String)>,
    /// A reason the comparison could not be made (server refused CKSM), for the summary.
    pub(crate) skipped: Option<String>,
}

impl Verified {
    /// Records the outcome in a transfer's summary.
    pub(crate) fn record(self, summary: &mut TransferSummary) {
        summary.verified = self.checksum.is_some();
        summary.checksum = self.checksum;
        summary.notices.extend(self.skipped);
    }
}

/// The end-to-end check after a download or upload of `range` that moved `data`: [`compare`] with `alg` (the
/// engine's CRC32C standing in for a re-read where it covers the file), or, with no common algorithm, a notice.
/// `theirs`: the server's answer to the `alg` CKSM pipelined behind the transfer, if there was one.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn check(
    control: &mut Control,
    alg: Option<ChecksumAlg>,
    remote: &str,
    local: Arc<dyn FileHandle>,
    range: Range<u64>,
    data: &DataReport,
    whole: bool,
    theirs: Option<Result<String, Reply>>,
) -> Result<Verified, ClientError> {
    match alg {
        Some(alg) => {
            let known = engine_crc(alg, data, &range);
            let theirs = theirs.filter(|_| whole);
            compare(control, alg, remote, local, range, whole, known, theirs).await
        }
        None => match unlisted_alg(control.session().features()) {
            Some(alg) => compare(control, alg, remote, local, range, whole, None, None).await,
            None => Ok(Verified {
                checksum: None,
                skipped: Some(
                    "checksum not verified: the server lists no CKSM algorithm we know".into(),
                ),
            }),
        },
    }
}

/// The algorithm to ask a GridFTP server for when its FEAT lists no CKSM line at all: a Globus frontend with
/// remote data nodes (`-r`) answers `CKSM SHA256` but leaves CKSM out of FEAT. Only for the final comparison:
/// resuming still needs a listed algorithm, so bytes from an earlier run are never trusted on a guess; a refusal
/// ends as a "not verified" notice, as before.
fn unlisted_alg(features: &Features) -> Option<ChecksumAlg> {
    (features.parallel() && !features.has("CKSM")).then_some(ChecksumAlg::Sha256)
}

/// Compares the server's CKSM of `range` of `remote` with the local file. Mismatch is an error; a server that
/// refuses the command gives `skipped`. `known`: the CRC32C of the local range from [`engine_crc`] (then the local
/// file is not read again). `theirs`: the server's reply already in hand (pipelined behind the transfer), so no
/// CKSM is sent.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn compare(
    control: &mut Control,
    alg: ChecksumAlg,
    remote: &str,
    local: Arc<dyn FileHandle>,
    range: Range<u64>,
    whole: bool,
    known: Option<u32>,
    theirs: Option<Result<String, Reply>>,
) -> Result<Verified, ClientError> {
    let op = Op::Checksum {
        algorithm: alg.name().to_string(),
        offset: range.start,
        length: if whole {
            None
        } else {
            Some(range.end - range.start)
        },
        path: remote.to_string(),
    };
    // Both sides hash at once: the local digest on a blocking thread while the server computes its CKSM.
    let len = range.end - range.start;
    let known = known.filter(|_| alg == ChecksumAlg::Crc32c);
    if known.is_some() {
        tracing::debug!(
            "local CRC32C from the data engine's blocks: the local file is not read again"
        );
    }
    let ours = tokio::task::spawn_blocking(move || match known {
        // Same format as `drsftp_storage::checksum` for CRC32C: 8 lower-case hex digits.
        Some(c) => Ok(format!("{c:08x}")),
        None => drsftp_storage::checksum(local.as_ref(), alg, range.start, Some(len)),
    });
    let asked = match theirs {
        Some(Ok(h)) => Ok(Outcome::Checksum(h)),
        Some(Err(reply)) => Err(ClientError::Session(
            drsftp_proto::client::ClientError::Refused {
                command: format!("CKSM {} 0 -1 {remote}", alg.name()),
                reply,
            },
        )),
        None => control.run(op).await,
    };
    let theirs = match asked {
        Ok(Outcome::Checksum(h)) => h.to_ascii_lowercase(),
        Ok(other) => {
            return Err(ClientError::Invalid(format!(
                "unexpected CKSM outcome {other:?}"
            )));
        }
        Err(ClientError::Session(e)) if !e.is_fatal() => {
            return Ok(Verified {
                checksum: None,
                skipped: Some(format!("checksum not verified: {e}")),
            });
        }
        Err(e) => return Err(e),
    };
    let ours = ours
        .await
        .map_err(|e| ClientError::Invalid(format!("checksum task: {e}")))??
        .to_ascii_lowercase();
    if ours != theirs {
        return Err(ClientError::ChecksumMismatch {
            what: remote.to_string(),
            alg: alg.name().to_string(),
            local: ours,
            remote: theirs,
        });
    }
    Ok(Verified {
        checksum: Some((alg.name().to_string(), ours)),
        skipped: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_best_common_algorithm() {
        let f = Features::from_pairs([("CKSM", "MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;")]);
        assert_eq!(pick_alg(&f), Some(ChecksumAlg::Sha256));
        // SHA512 is preferred by the session but not computable here: skipped for the next one.
        let f = Features::from_pairs([("CKSM", "SHA512,MD5")]);
        assert_eq!(pick_alg(&f), Some(ChecksumAlg::Md5));
        assert_eq!(pick_alg(&Features::default()), None);
    }

    #[test]
    fn unlisted_cksm_is_tried_only_on_gridftp_servers_without_a_cksm_line() {
        let globus_r = Features::from_pairs([("PARALLEL", ""), ("ERET", ""), ("SPAS", "")]);
        assert_eq!(unlisted_alg(&globus_r), Some(ChecksumAlg::Sha256));
        assert_eq!(
            pick_alg(&globus_r),
            None,
            "resume still needs a listed algorithm"
        );
        let plain_ftp = Features::from_pairs([("SIZE", ""), ("MDTM", "")]);
        assert_eq!(unlisted_alg(&plain_ftp), None);
        let listed_unknown = Features::from_pairs([("PARALLEL", ""), ("CKSM", "WHIRLPOOL")]);
        assert_eq!(unlisted_alg(&listed_unknown), None);
    }

    #[test]
    fn moved_bytes_must_match_the_request() {
        let rep = |bytes, ranges: &[(u64, u64)]| DataReport {
            bytes,
            streams: 1,
            ranges: ranges.iter().map(|&(a, b)| a..b).collect(),
            reusable: Vec::new(),
            peak_buffer: 0,
            peak_window: 0,
            traces: Vec::new(),
            crc32c: None,
        };
        assert!(check_moved("f", &rep(10, &[(0, 10)]), 0..10).is_ok());
        assert!(check_moved("f", &rep(10, &[]), 0..10).is_ok());
        assert!(check_moved("f", &rep(9, &[(0, 9)]), 0..10).is_err());
        assert!(check_moved("f", &rep(10, &[(0, 5), (6, 11)]), 0..10).is_err());
        assert!(check_moved("f", &rep(5, &[(1000, 1005)]), 1000..1005).is_ok());
    }
}
