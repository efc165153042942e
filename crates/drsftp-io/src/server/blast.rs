//! A transfer over the UDP blast channel (`DataEndpoint::Blast`, set up by `BPAS`): the server sends a file
//! section (RETR/ERET) or receives an upload (STOR/APPE/ESTO, size from ALLO) with `crate::blast`, on the UDP
//! socket bound for `BPAS`. Uploads land in the part file and are committed only when every packet was written;
//! the receiver then lingers on its own for a few seconds in case the client missed the final "complete".
//! Under `PROT P` the datagrams are sealed with keys from the control connection's TLS exporter ([`plan_params`]
//! gives the parameters both ends feed it; the session driver derives the keys, `conn.rs`). [`run`] is the
//! transfer task's entry for a plan on this channel; a whole file sent yields its CRC32C (`fs::SentCrc`).

use std::net::IpAddr;
use std::sync::Arc;

use drsftp_blast::{DataDirection, Protection, TransferParams};
use drsftp_proto::server::{BlastEndpoint, DataEndpoint, Payload, TransferPlan};
use drsftp_storage::{FileHandle, PartFile, Storage};

use super::fs::{self, SentCrc};
use super::transfer::DataCache;

use crate::blast::{self, BlastOpts};
use crate::data::{DataError, DataReport, Progress};

/// The data-path settings the server uses for one channel.
pub(crate) fn opts(ep: &BlastEndpoint, protection: &Protection) -> BlastOpts {
    BlastOpts {
        max_rate: ep.max_rate,
        ack_every: ep.ack_every,
        start_rate: ep.start_rate,
        force_buffers: false,
        protection: protection.clone(),
        ..BlastOpts::default()
    }
}

/// The section a blast RETR/ERET sends (the plan's one range; the size its `150` announced).
pub(crate) fn section(ranges: &[std::ops::Range<u64>]) -> std::ops::Range<u64> {
    ranges.first().cloned().unwrap_or(0..0)
}

/// The parameters and direction of a blast plan exactly as `send`/`recv` will use them: the exporter context of
/// its AEAD keys (the client builds the same from the `150` reply). `None` for other plans.
pub(crate) fn plan_params(plan: &TransferPlan) -> Option<(TransferParams, DataDirection)> {
    let DataEndpoint::Blast(ep) = &plan.endpoint else {
        return None;
    };
    let (size, dir) = match &plan.payload {
        Payload::SendFile { ranges, .. } => {
            let r = section(ranges);
            (r.end - r.start, DataDirection::ServerSends)
        }
        Payload::RecvFile { expected, .. } => (expected.unwrap_or(0), DataDirection::ClientSends),
        Payload::SendBytes(_) | Payload::SendListing { .. } => return None,
    };
    let p = TransferParams::new(ep.transfer_id, size, ep.payload_size).ok()?;
    Some((p, dir))
}

/// Binds a blast socket for `BPAS` and draws its transfer id.
pub(crate) fn bind(
    ip: IpAddr,
    ops: &super::ServerOps,
) -> std::io::Result<(std::net::UdpSocket, u64)> {
    // Any client's BPAS gets one: never forced past rmem_max/wmem_max.
    let opts = BlastOpts {
        force_buffers: false,
        ..BlastOpts::default()
    };
    // In --data-ports when set, like the TCP passive listeners (firewalls open one range for both).
    let sock = ops.bind_udp(|port| blast::bind(ip, port, &opts))?;
    Ok((sock, blast::random_id()))
}

/// [`bind`] on any port (tests).
#[cfg(test)]
pub(crate) fn bind_any_port(ip: IpAddr) -> std::io::Result<(std::net::UdpSocket, u64)> {
    bind(ip, &super::ServerOps::default())
}

fn params(ep: &BlastEndpoint, size: u64) -> Result<TransferParams, DataError> {
    if ep.peer.port() == 0 {
        // A bare `BPAS` without `BPRT` (the session refuses such transfers; never send to or expect port 0).
        return Err(DataError::Incomplete(
            "blast peer unknown: BPRT was not given".into(),
        ));
    }
    TransferParams::new(ep.transfer_id, size, ep.payload_size)
        .map_err(|e| DataError::Incomplete(format!("blast parameters: {e}")))
}

/// Sends `file[range]` (the plan's one range) to the client; `held` (relative to `range`, from `REST` ranges:
/// a resumed download) marks the packets the client has already, which are not sent. Returns the bytes, the
/// streams (1) and, for a send of `0..range.end` read in order, the CRC32C of those bytes (`BlastReport::crc32c`).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn send(
    ep: &BlastEndpoint,
    sock: std::net::UdpSocket,
    file: Arc<dyn FileHandle>,
    range: std::ops::Range<u64>,
    held: &drsftp_proto::ranges::RangeSet,
    progress: Arc<Progress>,
    protection: &Protection,
    metrics: Option<&super::metrics::Metrics>,
) -> Result<(u64, usize, Option<u32>), DataError> {
    let len = file.len().map_err(DataError::Storage)?;
    if len < range.end {
        return Err(DataError::Incomplete(format!(
            "the file shrank to {len} bytes since RETR announced {}",
            range.end
        )));
    }
    let p = params(ep, range.end - range.start)?;
    let acked = (!held.is_empty())
        .then(|| drsftp_blast::resume::packets_within(&p, held.ranges().iter().cloned()));
    let o = opts(ep, protection);
    let r = blast::send_with(sock, ep.peer, p, file, range.start, &o, progress, acked).await?;
    if r.resumed > 0 {
        tracing::info!(
            "blast send to {}: resumed, the client holds {} bytes",
            ep.peer,
            r.resumed
        );
    }
    tracing::info!(
        "blast send to {}: {} bytes, {} datagrams ({} resent), {} duplicates at the receiver, {} rejected, {:.2} s",
        ep.peer, r.bytes, r.datagrams, r.resent, r.duplicates, r.rejected, r.seconds
    );
    if let Some(m) = metrics {
        m.blast(r.resent, r.duplicates, 0);
    }
    Ok((r.bytes, 1, r.crc32c))
}

/// Receives the upload into `file` at `offset`, `size` bytes; the report feeds the usual completeness check.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn recv(
    ep: &BlastEndpoint,
    sock: std::net::UdpSocket,
    file: Arc<dyn FileHandle>,
    offset: u64,
    size: u64,
    progress: Arc<Progress>,
    protection: &Protection,
    metrics: Option<&super::metrics::Metrics>,
) -> Result<DataReport, DataError> {
    let p = params(ep, size)?;
    let o = opts(ep, protection);
    let (r, linger) = blast::recv(sock, ep.peer, p, file, offset, &o, progress).await?;
    linger.detach();
    tracing::info!(
        "blast receive from {}: {} bytes, {} datagrams, {} duplicates, {} rejected ({} foreign), {} socket drops, {:.2} s",
        ep.peer, r.bytes, r.datagrams, r.duplicates, r.rejected, r.foreign, r.socket_drops, r.seconds
    );
    if let Some(m) = metrics {
        m.blast(0, r.duplicates, r.socket_drops);
    }
    Ok(DataReport {
        bytes: r.bytes,
        streams: 1,
        ranges: r.ranges,
        reusable: vec![],
        traces: vec![],
        peak_buffer: 0,
        peak_window: 0,
        crc32c: r.crc32c,
    })
}

/// The blast socket for `plan`, if the connection holds the one `BPAS` bound.
pub(crate) fn take_socket(
    plan: &TransferPlan,
    held: &mut Option<std::net::UdpSocket>,
) -> Option<std::net::UdpSocket> {
    let drsftp_proto::server::DataEndpoint::Blast(ep) = &plan.endpoint else {
        return None;
    };
    match held.take() {
        Some(s) if s.local_addr().ok() == Some(ep.local) => Some(s),
        other => {
            *held = other;
            None
        }
    }
}

/// A plan on a blast channel: a file section sent, or an upload received into its part file.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    ep: &drsftp_proto::server::BlastEndpoint,
    sock: std::net::UdpSocket,
    payload: Payload,
    resume: &drsftp_proto::ranges::RangeSet,
    (storage, opened): (Arc<dyn Storage>, Option<Box<dyn PartFile>>),
    progress: Arc<Progress>,
    protection: &drsftp_blast::Protection,
    metrics: Option<&super::metrics::Metrics>,
    (sent_crc, engine_crc): (&mut Option<SentCrc>, &std::sync::atomic::AtomicBool),
) -> Result<(u64, usize, Option<DataCache>), DataError> {
    match payload {
        // The session announced the size from its stat: send exactly that (no `to_eof` re-reading).
        Payload::SendFile { path, ranges, .. } => {
            // As for TCP: a whole file sent in order yields its CRC32C from the sender's reads, and the CKSM
            // behind it reads nothing again.
            let (before, looked, file) = super::transfer::stat_then_open(&storage, &path).await?;
            let range = section(&ranges);
            let whole = before.filter(|m| {
                resume.is_empty() && range == (0..m.size) && fs::settled(m.modified, looked)
            });
            engine_crc.store(whole.is_some(), std::sync::atomic::Ordering::Relaxed);
            let (bytes, streams, crc) =
                send(ep, sock, file, range, resume, progress, protection, metrics).await?;
            if let Some(c) = SentCrc::of_send(path, whole, bytes, crc) {
                *sent_crc = Some(c);
            }
            Ok((bytes, streams, None))
        }
        Payload::RecvFile {
            path,
            write_mode,
            offset,
            expected,
            ..
        } => {
            let size = expected.unwrap_or(0);
            let part = fs::part_for(opened, storage, path, write_mode).await?;
            let r = recv(
                ep,
                sock,
                part.handle(),
                offset,
                size,
                progress,
                protection,
                metrics,
            )
            .await;
            super::transfer::finish_upload(part, r, write_mode, offset, expected, vec![]).await
        }
        Payload::SendBytes(_) | Payload::SendListing { .. } => Err(DataError::Incomplete(
            "listings do not go over BLAST".into(),
        )),
    }
}
