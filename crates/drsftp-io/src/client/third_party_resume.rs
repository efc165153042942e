//! Third-party resume (docs/resume.md "Third-party resume"): what a killed server-to-server copy left at the
//! destination, and the `REST <ranges>` a rerun sends to both ends so only the gaps travel (GFD.20's MODE E
//! restart: the source sends only what `REST` does not name, the destination writes blocks in place).
//!
//! * A drsftp destination keeps the partial of a `STOR` that `SITE PARTIAL` armed and answers its ranges
//!   (upload.rs, [`ask_kept`]). The source tag names the *source file's* version: a hash of the source
//!   server's address and path, SIZE and MDTM, so a changed source never resumes into another version's bytes.
//! * A destination without `SITE PARTIAL` (globus-gridftp-server, `500`) keeps what it wrote under the final
//!   name and confirms it with `111 Range Marker` replies during the `STOR`. The client records them in the
//!   same marker checkpoint as uploads ([`MarkerCheckpoint`], same store, format and sweep), keyed by the
//!   destination and the same tag. Bytes past the last marker (Globus marks every 5 s) are checked as for
//!   uploads, comparing the two servers' CKSM of the same range ([`tail_between`]).
//! * Only a whole-file MODE E TCP copy of at least [`TCP_RESUME_MIN`], with a CKSM both servers list (the
//!   caller checks) and MDTM on the source. Resumed bytes are never trusted alone: the caller compares the
//!   whole file's CKSM on both ends, and a mismatch after a resume deletes the destination and sends it all.

use std::sync::Arc;

use drsftp_proto::client::{Op, Outcome};
use drsftp_proto::ranges::RangeSet;
use sha2::{Digest, Sha256};

use super::control::Control;
use super::download::TCP_RESUME_MIN;
use super::resume;
use super::third_party::{at, End};
use super::third_party_verify::checksum;
use super::upload::ask_kept;
use super::upload_resume::{MarkerCheckpoint, TailSearch};
use super::ClientError;
use crate::data::Progress;

/// What a rerun of one copy holds at the destination, and where this run's markers are recorded.
pub(super) struct Resume {
    /// Ranges the destination holds: not asked of the source again.
    pub(super) held: RangeSet,
    /// Globus-style destinations: this run's markers are saved here.
    pub(super) markers: Option<MarkerCheckpoint>,
    /// For the summary (a resume, or a partial discarded on purpose).
    pub(super) notices: Vec<String>,
}

impl Resume {
    /// `REST <held>` for both ends, if anything is held.
    pub(super) fn rest(&self) -> Option<String> {
        (!self.held.is_empty()).then(|| format!("REST {}", self.held))
    }
}

/// Asks the destination what it keeps of this copy (arming it to keep this run's bytes if it fails), or opens
/// the marker checkpoint of a destination that keeps no partials. `None` when the copy cannot resume: smaller
/// than [`TCP_RESUME_MIN`], or the source has no MDTM to tell its versions apart. `use_existing` false
/// (`--no-resume`) still arms the destination but sends everything.
async fn prepare(
    (s, src_path, d, dst_path): (&mut Control, &str, &mut Control, &str),
    size: u64,
    alg: &str,
    use_existing: bool,
) -> Result<Option<Resume>, ClientError> {
    if size < TCP_RESUME_MIN {
        return Ok(None);
    }
    let id = resume::identity(s, src_path, size).await;
    let Some(mtime) = &id.mtime else {
        return Ok(None);
    };
    let tag = source_tag(&id.source, size, mtime);
    let mut notices = vec![];
    let discard = |notices: &mut Vec<String>| {
        notices
            .push("--no-resume: the destination's partial copy is replaced; starting afresh".into())
    };
    let (held, markers) = match ask_kept(d, size, &tag, dst_path).await? {
        Some(kept) => {
            let kept = kept.intersect(0..size);
            if use_existing {
                (kept, None)
            } else {
                if !kept.is_empty() {
                    discard(&mut notices);
                }
                (RangeSet::new(), None)
            }
        }
        None => {
            let peer = d.peer().to_string();
            let mut m = MarkerCheckpoint::open(&peer, dst_path, size, &tag, use_existing);
            if let Some(n) = m.as_ref().and_then(|m| m.note()) {
                notices.push(n.replace("upload", "copy"));
            }
            if let Some(m) = m.as_mut().filter(|m| m.found()) {
                let ends = (&mut *s, src_path, &mut *d, dst_path);
                let found = tail_between(ends, alg, m.held(), size).await?;
                m.add(&found);
            }
            let held = m.as_ref().map(|m| m.held().clone()).unwrap_or_default();
            (held, m)
        }
    };
    if !held.is_empty() {
        notices.push(format!(
            "resuming an interrupted third-party copy: {} of {size} bytes already at the destination",
            held.covered()
        ));
    }
    Ok(Some(Resume {
        held,
        markers,
        notices,
    }))
}

/// What the destination wrote past the last restart marker that matches the source ([`TailSearch`]: the two
/// servers' CKSM of the same range compared), so a rerun does not send up to 5 s of data again. Empty if the
/// destination has nothing there, either server refuses a ranged CKSM, or nothing matched.
async fn tail_between(
    (s, src_path, d, dst_path): (&mut Control, &str, &mut Control, &str),
    alg: &str,
    held: &RangeSet,
    size: u64,
) -> Result<RangeSet, ClientError> {
    let Some(there) = super::stat::size_if_any(d, dst_path).await? else {
        return Ok(RangeSet::new());
    };
    // The algorithm rides in the state: each comparison's future borrows only from there.
    let mut ends = (s, src_path, d, dst_path, alg);
    TailSearch::run(held, size, there, &mut ends, |(s, sp, d, dp, alg), r| {
        Box::pin(async move {
            let a = checksum(s, alg, sp, Some(r.clone())).await;
            let b = checksum(d, alg, dp, Some(r)).await;
            match (a, b) {
                (Ok(a), Ok(b)) => Ok(Some(a.eq_ignore_ascii_case(&b))),
                (Err(e), _) | (_, Err(e)) if e.reply_code().is_some() => Ok(None),
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        })
    })
    .await
}

/// The destination-side name of one version of the source file (`SITE PARTIAL` takes up to 64 characters of
/// `[A-Za-z0-9_-]`).
fn source_tag(source: &str, size: u64, mtime: &str) -> String {
    let h = Sha256::digest(format!("third-party\n{source}\n{size}\n{mtime}").as_bytes());
    let hex: String = h.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("t{hex}")
}

/// The resume hook of one copy attempt: [`prepare`], its notices into `notices`, then `REST <held>` to both ends
/// (right before the transfer commands, as a server keeps a REST for the next transfer only) and this run's
/// marker recording started. A refused REST fails the attempt and retires the markers, so the next try starts
/// afresh rather than failing the same way again.
pub(super) async fn begin(
    (s, src_path, d, dst_path): (&mut Control, &str, &mut Control, &str),
    size: u64,
    alg: &str,
    use_existing: bool,
    progress: &Arc<Progress>,
    notices: &mut Vec<String>,
) -> Result<Option<Resume>, ClientError> {
    let ends = (&mut *s, src_path, &mut *d, dst_path);
    let Some(r) = prepare(ends, size, alg, use_existing).await? else {
        return Ok(None);
    };
    notices.extend(r.notices.iter().cloned());
    if let Some(line) = r.rest() {
        let rested = async {
            send_rest(d, &line)
                .await
                .map_err(|e| at(End::Destination, d, e))?;
            send_rest(s, &line).await.map_err(|e| at(End::Source, s, e))
        };
        if let Err(e) = rested.await {
            if let Some(m) = &r.markers {
                m.complete();
            }
            return Err(e);
        }
    }
    if let Some(m) = &r.markers {
        m.start(progress.clone());
    }
    Ok(Some(r))
}

/// `REST <ranges>` on one end; a refusal is an error (only the gaps would travel).
async fn send_rest(c: &mut Control, line: &str) -> Result<(), ClientError> {
    match c.run(Op::Command(line.to_string())).await? {
        Outcome::Reply(r) if r.code == 350 => Ok(()),
        other => Err(ClientError::Invalid(format!(
            "`{line}` not accepted ({other:?}): cannot resume"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_tag_names_the_version_within_site_partial_limits() {
        let a = source_tag("ftp://198.18.0.1:2811/x", 10 << 20, "20261126110000");
        assert!(a.len() <= 64 && a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_ne!(
            a,
            source_tag("ftp://198.18.0.1:2811/x", 10 << 20, "20261126110001")
        );
        assert_ne!(
            a,
            source_tag("ftp://198.18.0.1:2811/x", 11 << 20, "20261126110000")
        );
        assert_ne!(
            a,
            source_tag("ftp://198.18.0.1:2811/y", 10 << 20, "20261126110000")
        );
    }
}
