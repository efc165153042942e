//! End-to-end checks after a transfer: the byte count and ranges the engine reports against what was asked for,
//! and the CKSM comparison (the best algorithm both sides know, per `VERIFY_PREFERENCE`) of the local file with the
//! server's copy.

use std::ops::Range;
use std::sync::Arc;

use drsftp_proto::client::{Features, Op, Outcome, VERIFY_PREFERENCE};
use drsftp_storage::{ChecksumAlg, FileHandle};

use super::control::Control;
use super::ClientError;
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

/// Result of a verification attempt.
#[derive(Debug)]
pub(crate) struct Verified {
    /// Algorithm and the agreed digest, when compared.
    pub(crate) checksum: Option<(String, String)>,
    /// A reason the comparison could not be made (server refused CKSM), for the summary.
    pub(crate) skipped: Option<String>,
}

/// Compares the server's CKSM of `range` of `remote` with the local file. Mismatch is an error; a server that
/// refuses the command gives `skipped`.
pub(crate) async fn compare(
    control: &mut Control,
    alg: ChecksumAlg,
    remote: &str,
    local: Arc<dyn FileHandle>,
    range: Range<u64>,
    whole: bool,
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
    let ours = tokio::task::spawn_blocking(move || {
        drsftp_storage::checksum(local.as_ref(), alg, range.start, Some(len))
    });
    let theirs = match control.run(op).await {
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
    fn moved_bytes_must_match_the_request() {
        let rep = |bytes, ranges: &[(u64, u64)]| DataReport {
            bytes,
            streams: 1,
            ranges: ranges.iter().map(|&(a, b)| a..b).collect(),
            reusable: Vec::new(),
            peak_buffer: 0,
            traces: Vec::new(),
        };
        assert!(check_moved("f", &rep(10, &[(0, 10)]), 0..10).is_ok());
        assert!(check_moved("f", &rep(10, &[]), 0..10).is_ok());
        assert!(check_moved("f", &rep(9, &[(0, 9)]), 0..10).is_err());
        assert!(check_moved("f", &rep(10, &[(0, 5), (6, 11)]), 0..10).is_err());
        assert!(check_moved("f", &rep(5, &[(1000, 1005)]), 1000..1005).is_ok());
    }
}
