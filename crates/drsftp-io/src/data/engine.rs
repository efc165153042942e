//! The data-channel engine: socket set-up with the buffer policy, stream-mode and MODE E senders and receivers.
//! (Signatures fixed; bodies being written.)

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use drsftp_storage::FileHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::{DataError, DataOpts, DataReport, Progress};

/// A data listener on `addr` (port 0 = any) with `opts.buffer` applied before `listen` (window scale).
pub async fn listen(addr: SocketAddr, opts: &DataOpts) -> std::io::Result<TcpListener> {
    let _ = (addr, opts);
    todo!("data engine: listen")
}

/// A data connection to `addr` with `opts.buffer` applied before `connect`.
pub async fn connect(addr: SocketAddr, opts: &DataOpts) -> std::io::Result<TcpStream> {
    let _ = (addr, opts);
    todo!("data engine: connect")
}

/// Stream mode: send `range` of `file`, then shut the socket down.
pub async fn send_stream(
    sock: TcpStream,
    file: Arc<dyn FileHandle>,
    range: Range<u64>,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let _ = (sock, file, range, opts, progress);
    todo!("data engine: send_stream")
}

/// Stream mode: read to EOF, writing at `offset + n`.
pub async fn recv_stream(
    sock: TcpStream,
    file: Arc<dyn FileHandle>,
    offset: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let _ = (sock, file, offset, opts, progress);
    todo!("data engine: recv_stream")
}

/// MODE E: send `ranges` of `file` over `socks`; block offsets on the wire are `file offset - wire_sub`
/// (ERET sends offsets relative to the section start).
pub async fn send_mode_e(
    socks: Vec<TcpStream>,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let _ = (socks, file, ranges, wire_sub, opts, progress);
    todo!("data engine: send_mode_e")
}

/// MODE E: receive from connections arriving on `conns` until EOF and all EODs; blocks land at
/// `wire offset + wire_add` (ESTO A offset).
pub async fn recv_mode_e(
    conns: mpsc::Receiver<TcpStream>,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let _ = (conns, file, wire_add, opts, progress);
    todo!("data engine: recv_mode_e")
}
