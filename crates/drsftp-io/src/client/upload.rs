//! Upload orchestration: open the local file, STOR (or `ESTO A offset` for `--off/--len`) in stream mode or MODE E
//! with ALLO, then check the server's SIZE (whole files) and compare CKSM. A mismatch is reported as an error; the
//! remote file is left for the user to inspect (we do not delete on the server).

use std::path::Path;
use std::sync::Arc;

use drsftp_proto::client::{Direction, TransferMode, TransferSpec};
use drsftp_storage::FileHandle;
use drsftp_tune::BufferPolicy;

use super::blast;
use super::control::Control;
use super::download::size_if_supported;
use super::local::LocalFile;
use super::transfer::{self, DataJob};
use super::{verify, ClientError, ClientOptions, TransferSummary};
use crate::data::Progress;

/// Uploads `local` to `remote`. See the module docs.
pub(crate) async fn run(
    control: &mut Control,
    local: &Path,
    remote: &str,
    opts: &ClientOptions,
    progress: Arc<Progress>,
) -> Result<TransferSummary, ClientError> {
    let lf = LocalFile::open_read(local)?;
    let len = lf.len()?;
    let file: Arc<dyn FileHandle> = Arc::new(lf);
    let range = match opts.partial {
        Some(p) => {
            let end = p
                .offset
                .checked_add(p.length)
                .filter(|e| *e <= len)
                .ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "--off {} --len {} is past the end of {} ({len} bytes)",
                        p.offset,
                        p.length,
                        local.display()
                    ))
                })?;
            p.offset..end
        }
        None => 0..len,
    };
    // Online `-p auto` needs MODE E (connections join and retire), even when it starts on one stream.
    let mode = match opts.auto_streams {
        Some(_) => TransferMode::Extended,
        None => opts.mode(),
    };
    let (udp, udp_notice) = blast::wanted(control, opts);
    let alg = if opts.verify {
        verify::pick_alg(control.session().features())
    } else {
        None
    };
    let job = match mode {
        TransferMode::Extended => DataJob::SendModeE {
            file: file.clone(),
            range: range.clone(),
            wire_sub: range.start,
            auto: opts.auto_streams.clone(),
        },
        TransferMode::Stream => DataJob::SendStream {
            file: file.clone(),
            range: range.clone(),
        },
    };
    let spec = TransferSpec {
        direction: Direction::Upload,
        path: remote.to_string(),
        mode,
        streams: opts.streams.max(1),
        streams_range: None,
        tcp_buffer: opts.tcp_buffer,
        partial: opts.partial,
        alloc: Some(len),
        drs: opts.buffer == BufferPolicy::Drs,
        transport: blast::transport(udp),
        stripes: opts.stripes,
    };
    let moved = match udp {
        Some(b) => {
            let side = blast::Side::Send {
                file: file.clone(),
                base: range.start,
            };
            let len = Some(range.end - range.start);
            blast::run(control, spec, side, len, b, progress, opts.timeout).await?
        }
        None => {
            let mut dopts = opts.data_opts();
            // The CRC32C of what we send, block by block as it is read: no re-read to verify.
            dopts.crc32c = verify::want_engine_crc(alg, opts.partial.is_none());
            transfer::run(control, spec, job, dopts, progress, opts.timeout).await?
        }
    };
    verify::check_moved(&local.display().to_string(), &moved.data, range.clone())?;
    if opts.partial.is_none() {
        if let Some(got) = size_if_supported(control, remote).await? {
            if got != len {
                return Err(ClientError::SizeMismatch {
                    what: remote.to_string(),
                    expected: len,
                    got,
                });
            }
        }
    }
    let mut summary = TransferSummary::new(mode, &moved);
    summary.notices.extend(udp_notice);
    if opts.verify {
        let whole = opts.partial.is_none();
        verify::check(control, alg, remote, file, range, &moved.data, whole)
            .await?
            .record(&mut summary);
    }
    Ok(summary)
}
