//! The data-channel engine's public entry points: socket set-up with the buffer policy, stream-mode and MODE E
//! senders and receivers. The bodies live in `sockets`, `stream`, `mode_e_send` and `mode_e_recv`.
//!
//! Aborting: every function here is cancel-safe in the sense that dropping its future (or aborting the task it
//! runs in) stops the transfer at once: MODE E stream tasks are aborted with it and their sockets closed. A file
//! read or write already running on the blocking pool finishes in the background (one block at most).
//! None of these functions has an idle timeout (only `connect` does); the caller bounds a stalled transfer by
//! watching `Progress::bytes` and dropping the future.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use drsftp_storage::FileHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::mode_e_send::SendControl;
use super::{mode_e_recv, mode_e_send, sockets, stream};
use super::{DataError, DataOpts, DataReport, Progress};

/// A data listener on `addr` (port 0 = any) with `opts.buffer` applied before `listen` (window scale).
/// SO_REUSEADDR, backlog 128.
pub async fn listen(addr: SocketAddr, opts: &DataOpts) -> std::io::Result<TcpListener> {
    sockets::listen(addr, opts).await
}

/// A data connection to `addr` with `opts.buffer` applied before `connect`. Fails with `TimedOut` after 30 s.
pub async fn connect(addr: SocketAddr, opts: &DataOpts) -> std::io::Result<TcpStream> {
    sockets::connect(addr, opts).await
}

/// Stream mode: send `range` of `file`, then shut the socket down. `range.end == u64::MAX` sends to EOF; a range
/// running past EOF stops at EOF (the report's `bytes` says how much went).
pub async fn send_stream(
    sock: TcpStream,
    file: Arc<dyn FileHandle>,
    range: Range<u64>,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    stream::send_stream(sock, file, range, opts, progress).await
}

/// Stream mode: read to EOF, writing at `offset + n`.
pub async fn recv_stream(
    sock: TcpStream,
    file: Arc<dyn FileHandle>,
    offset: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    stream::recv_stream(sock, file, offset, opts, progress).await
}

/// MODE E: send `ranges` of `file` over `socks`; block offsets on the wire are `file offset - wire_sub`
/// (ERET sends offsets relative to the section start).
///
/// Ranges are merged and clipped to the file's length when the transfer starts (`u64::MAX` ends = to EOF); if the
/// file shrinks while being sent, the transfer stops at the new EOF. Every socket ends with EOD, socket 0 with
/// EOF|EOD announcing `socks.len()` EODs; all sockets are returned in `reusable`, in the order given. A range
/// starting before `wire_sub`, or no sockets, is `DataError::Io(InvalidInput)`.
pub async fn send_mode_e(
    socks: Vec<TcpStream>,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    mode_e_send::send_mode_e(socks, file, ranges, wire_sub, opts, progress).await
}

/// MODE E with a changing set of connections (`-p auto`): starts on `socks` (at least one); every connection
/// arriving on `more` joins the shared block cursor at once; `control.retire(k)` makes `k` connections finish the
/// block in hand, send EOD and stop (one always stays). The last connection to finish sends EOF|EOD announcing
/// every connection that joined (`DataReport::streams`). Connections offered after that are not used and come
/// back in `reusable` after the others (which are in joining order, retired ones included). Otherwise as
/// [`send_mode_e`]. `control` must be fresh (one per transfer).
#[allow(clippy::too_many_arguments)]
pub async fn send_mode_e_dynamic(
    socks: Vec<TcpStream>,
    more: mpsc::Receiver<TcpStream>,
    control: SendControl,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    mode_e_send::send_mode_e_dynamic(socks, more, control, file, ranges, wire_sub, opts, progress)
        .await
}

/// MODE E: receive from connections arriving on `conns` until EOF and all EODs; blocks land at
/// `wire offset + wire_add` (ESTO A offset).
///
/// Returns as soon as EOF was seen and the EOD count reached, without waiting for TCP EOF or for `conns` to
/// close. If `conns` closes and every connection has ended before that, the result is `Incomplete`. It does not
/// know the expected size: the caller checks `DataReport::ranges` against what it expected. `reusable` holds the
/// connections that ended with EOD and no CLOSE, plus any that carried nothing (including ones still queued in
/// `conns`).
pub async fn recv_mode_e(
    conns: mpsc::Receiver<TcpStream>,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    mode_e_recv::recv_mode_e(conns, file, wire_add, opts, progress).await
}
