//! A striped frontend's `CKSM CRC32C`, computed where the data is: the range is cut into one contiguous share per
//! mover, every mover checksums its share at once (`CKSM CRC32C <offset> <length> <path>` on its control
//! session, the movers share the frontend's storage) and the shares' CRCs are combined (`crc32c_combine`: the
//! CRC of a concatenation follows from the parts' CRCs and the second part's length). The frontend then reads
//! nothing itself, and N movers read in parallel, each on its own host. Other algorithms (no combine exists for
//! SHA-256 and the like), ranges too small to be worth splitting and ranges that do not lie inside the file (the
//! single read gives the usual answer or error) stay with the frontend's own read.

use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::server::{FsRequest, FsResult};
use drsftp_storage::{ChecksumAlg, EntryKind, Storage, StorageError};
use tokio::sync::Mutex;

use super::{Link, Movers};

/// The smallest share worth a mover's round trip: below it the frontend's own read is as quick.
const MIN_SHARE: u64 = 1 << 20;

/// How long a mover may take for a share beyond [`super::CMD_TIMEOUT`]: one second per this many bytes (a slow
/// but working disk, with room to spare).
const SLOWEST_READ: u64 = 10 << 20;

/// A session's handle on its movers for CKSM (cloned into the filesystem task).
#[derive(Clone)]
pub(crate) struct MoverChecksum {
    movers: Arc<Movers>,
    links: Arc<Mutex<Vec<Option<Link>>>>,
    /// The user's root in the served tree: a mover sees the whole tree, so paths are mapped beneath it.
    root: String,
}

impl super::Frontend {
    /// The movers' CKSM handle if `req` is one they may compute: CRC32C with more than one mover.
    pub(crate) fn checksum_by_movers(&self, req: &FsRequest) -> Option<MoverChecksum> {
        let FsRequest::Checksum {
            alg: ChecksumAlg::Crc32c,
            ..
        } = req
        else {
            return None;
        };
        (self.movers.addrs.len() > 1).then(|| MoverChecksum {
            movers: self.movers.clone(),
            links: self.links.clone(),
            root: self.root.clone().unwrap_or_else(|| "/".into()),
        })
    }
}

/// `offset..offset+length` (to the end when `None`, clamped to the end as a single read does) cut into at most
/// `movers` contiguous shares of at least [`MIN_SHARE`]; `None` when the range is not inside the file or is
/// worth no split.
fn shares(size: u64, offset: u64, length: Option<u64>, movers: usize) -> Option<Vec<(u64, u64)>> {
    if offset > size {
        return None;
    }
    let end = length.map_or(size, |l| offset.saturating_add(l).min(size));
    let len = end - offset;
    let n = (len / MIN_SHARE).min(movers as u64);
    if n < 2 {
        return None;
    }
    let (each, extra) = (len / n, len % n);
    let mut at = offset;
    Some(
        (0..n)
            .map(|i| {
                let l = each + u64::from(i < extra);
                let s = (at, l);
                at += l;
                s
            })
            .collect(),
    )
}

/// CRC32C (lower-case hex) of the concatenated shares from their CRCs and lengths, in order.
fn combine(parts: &[(u32, u64)]) -> String {
    let crc = parts.iter().fold(0u32, |acc, &(c, len)| {
        crc32c::crc32c_combine(acc, c, usize::try_from(len).expect("64-bit"))
    });
    format!("{crc:08x}")
}

impl MoverChecksum {
    /// Answers `req` (a `CKSM CRC32C`) from the movers, or by the frontend's own read (see the module docs). A
    /// mover that fails or does not answer in time gives a 451 naming it, never a checksum of part of the range.
    pub(crate) async fn run(self, storage: Arc<dyn Storage>, req: FsRequest) -> FsResult {
        let FsRequest::Checksum {
            path,
            offset,
            length,
            ..
        } = &req
        else {
            return super::super::fs::execute_async(storage, req, None).await;
        };
        let (p, st) = (path.clone(), storage.clone());
        let size = match super::blocking(move || st.stat(&p)).await {
            Ok(m) if m.kind == EntryKind::File => m.size,
            // Not a plain file (or not there): the single read gives the usual error.
            _ => return super::super::fs::execute_async(storage, req, None).await,
        };
        let Some(parts) = shares(size, *offset, *length, self.movers.addrs.len()) else {
            return super::super::fs::execute_async(storage, req, None).await;
        };
        // The same file on the movers, beneath the user's root (the frontend's storage is already confined).
        let Ok(remote) = super::cmds::mover_path(&self.root, path) else {
            return super::super::fs::execute_async(storage, req, None).await;
        };
        match self.on_movers(&remote, &parts).await {
            Ok(crcs) => {
                let v: Vec<(u32, u64)> = crcs.into_iter().zip(parts.iter().map(|p| p.1)).collect();
                FsResult::Checksum(combine(&v))
            }
            Err(e) => {
                tracing::warn!("frontend CKSM: {e}");
                FsResult::Err(StorageError::Io {
                    context: "checksum on the data movers".into(),
                    source: std::io::Error::other(e),
                })
            }
        }
    }

    /// Share `i` of `parts` checksummed by mover `i`, all at once (a missing session is opened, also at once).
    /// The links in use are taken out and put back only after a good answer, so a failed or abandoned CKSM
    /// leaves no session in an unknown state.
    async fn on_movers(&self, path: &str, parts: &[(u64, u64)]) -> Result<Vec<u32>, String> {
        let taken: Vec<Option<Link>> = {
            let mut links = self.links.lock().await;
            links
                .iter_mut()
                .take(parts.len())
                .map(Option::take)
                .collect()
        };
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (slot, &(off, len))) in taken.into_iter().zip(parts).enumerate() {
            let (m, line) = (
                self.movers.clone(),
                format!("CKSM CRC32C {off} {len} {path}"),
            );
            let limit = super::CMD_TIMEOUT + Duration::from_secs(len / SLOWEST_READ);
            tasks.spawn(async move {
                let crc = share_crc(slot, &m, i, &line, limit).await;
                (i, crc)
            });
        }
        let mut crcs = vec![0u32; parts.len()];
        let mut back = vec![];
        while let Some(j) = tasks.join_next().await {
            let (i, r) = j.map_err(|e| e.to_string())?;
            // Dropping the other tasks closes their sessions mid-command: they are not put back.
            let (crc, link) = r?;
            crcs[i] = crc;
            back.push((i, link));
        }
        let mut links = self.links.lock().await;
        for (i, link) in back {
            links[i] = Some(link);
        }
        Ok(crcs)
    }
}

/// Mover `i`'s CRC for `line` (its `CKSM`), on `slot`'s session or a new one; the session back with it.
async fn share_crc(
    slot: Option<Link>,
    m: &Movers,
    i: usize,
    line: &str,
    limit: Duration,
) -> Result<(u32, Link), String> {
    let mut link = match slot {
        Some(l) => l,
        None => Link::open(m.addrs[i], m).await?,
    };
    link.send(line).await?;
    let r = link.reply(Some(limit)).await?;
    let hex = r.lines.first().map(|l| l.trim()).unwrap_or_default();
    match u32::from_str_radix(hex, 16) {
        Ok(c) if r.code == 213 && hex.len() == 8 => Ok((c, link)),
        _ => Err(format!("data mover {i} ({}): CKSM -> {r}", m.addrs[i])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_range_contiguously_and_combine_to_the_whole_crc() {
        let data: Vec<u8> = (0..(5u32 << 20) + 13)
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let size = data.len() as u64;
        for (off, len, movers) in [(0, None, 4), (3, Some(4 << 20), 3), (1, None, 2)] {
            let parts = shares(size, off, len, movers).expect("worth a split");
            assert!(parts.len() >= 2 && parts.len() <= movers);
            assert_eq!(parts[0].0, off);
            for w in parts.windows(2) {
                assert_eq!(w[0].0 + w[0].1, w[1].0);
            }
            let end = len.map_or(size, |l| (off + l).min(size));
            let last = parts.last().expect("parts");
            assert_eq!(last.0 + last.1, end);
            let crcs: Vec<(u32, u64)> = parts
                .iter()
                .map(|&(o, l)| (crc32c::crc32c(&data[o as usize..(o + l) as usize]), l))
                .collect();
            let whole = crc32c::crc32c(&data[off as usize..end as usize]);
            assert_eq!(combine(&crcs), format!("{whole:08x}"));
        }
    }

    #[test]
    fn small_or_outside_ranges_stay_with_the_frontend() {
        assert_eq!(shares(0, 0, None, 4), None);
        assert_eq!(shares(1, 0, None, 4), None);
        assert_eq!(shares((2 << 20) - 1, 0, None, 4), None);
        assert_eq!(shares(10 << 20, 11 << 20, None, 4), None);
        assert_eq!(shares(10 << 20, 0, None, 1), None);
        assert_eq!(
            shares(4 << 20, 0, Some(u64::MAX), 4).map(|v| v.len()),
            Some(4)
        );
    }
}
