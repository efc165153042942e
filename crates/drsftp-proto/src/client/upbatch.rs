//! Pipelined batches of whole-file uploads ([`Op::UploadBatch`](super::Op::UploadBatch), the mirror of
//! `batch.rs`): TYPE I, MODE E, (a new data channel: PASV, and the driver connects once), then for each file
//! `ALLO <size>`, `STOR`, `MFMT` (if asked) and `CKSM`, sent while earlier files' replies are still due, at most
//! [`UploadBatchSpec::window`] STORs unanswered. The server runs them in order and keeps the MODE E data
//! connection between files (the sender ends each file with EOF/EOD and does not close, GFD.20 §3.4.4).
//!
//! Sending a STOR early is harmless; sending its *data* early is not: a server that refused file k and then
//! accepted file k+1 would read k's bytes as k+1's. So the session says when a file's data may go
//! ([`Event::BatchStarted`], on that STOR's own 125/150, which a server sends only after the previous STOR's
//! final reply), and the driver sends nothing for a file before it. A STOR refused without a 1xx gets no data
//! and fails that file only; the batch goes on.

use std::collections::VecDeque;

use super::plan::{Kind, Step};
use super::session::ClientSession;
use super::types::{TransferMode, UploadBatchSpec};

/// Most files an upload batch keeps in flight whatever the spec says: four lines each (ALLO, STOR, MFMT, CKSM)
/// stay at half the 256 lines a drsftp server queues before it gives up on a session.
pub const MAX_UPLOAD_WINDOW: usize = 32;

impl ClientSession {
    /// The steps of an upload batch: see the module docs.
    pub(super) fn plan_upload_batch(&self, spec: &UploadBatchSpec) -> VecDeque<Step> {
        let mut s = self.prelude(Some(TransferMode::Extended));
        // A small file is over before DRS has a round trip to measure: switch it off if an earlier
        // transfer on this session had it on.
        if let Some((line, on)) = self.drs_opts(false) {
            s.push_back(Step::Cmd(line.to_string(), Kind::OptsDrs(on)));
        }
        if spec.pasv {
            if let Some(host) = &spec.peer {
                s.push_back(Step::Cmd(format!("PEER {host}"), Kind::Peer));
            }
            s.push_back(Step::Cmd("PASV".into(), Kind::Pasv));
        }
        for (i, f) in spec.files.iter().enumerate() {
            let p = &f.path;
            s.push_back(Step::Cmd(format!("ALLO {}", f.size), Kind::Allo));
            s.push_back(Step::Cmd(format!("STOR {p}"), Kind::BatchStor(i)));
            if let Some(t) = &f.mtime {
                s.push_back(Step::Cmd(format!("MFMT {t} {p}"), Kind::BatchMfmt(i)));
            }
            if let Some(alg) = &spec.checksum {
                s.push_back(Step::Cmd(
                    format!("CKSM {alg} 0 -1 {p}"),
                    Kind::BatchCksm(i),
                ));
            }
        }
        s
    }
}
