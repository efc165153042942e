//! The client driver's error type: everything `drsftp copy`/`ls` can fail on, from name resolution to a checksum
//! mismatch. Protocol refusals keep the sans-IO session's error (with the server's reply).
//!
//! Each variant's message already contains its cause (OS error, server reply, engine error), so none of them
//! reports a `source()`: printing the chain (`{:#}` in anyhow) shows every cause exactly once.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use drsftp_proto::client::ClientError as SessionError;
use drsftp_storage::StorageError;

use crate::data::DataError;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The host name did not resolve, or resolved to nothing.
    #[error("cannot resolve {host}: {error}")]
    Resolve {
        /// What was looked up (`host:port`).
        host: String,
        /// The resolver's error.
        error: io::Error,
    },
    /// The control connection could not be opened.
    #[error("cannot connect to {addr}: {error}")]
    Connect {
        /// The address tried (`host:port`).
        addr: String,
        /// The socket error.
        error: io::Error,
    },
    /// Reading or writing the control connection failed.
    #[error("TLS: {0}")]
    /// The TLS handshake on the control connection failed (untrusted certificate, wrong fingerprint, no TLS
    /// at all): the client never goes on in cleartext after asking for TLS.
    Tls(String),
    #[error("control connection: {0}")]
    Control(io::Error),
    /// The server refused a command, sent something unintelligible, timed out or hung up.
    #[error("{0}")]
    Session(SessionError),
    /// A data connection could not be set up (listen, connect).
    #[error("data connection set-up: {0}")]
    DataSetup(io::Error),
    /// The data transfer itself failed.
    #[error("{0}")]
    Data(DataError),
    /// A local file could not be opened, created, renamed or removed.
    #[error("{}: {error}", path.display())]
    Local {
        /// The local path.
        path: PathBuf,
        /// The OS error.
        error: io::Error,
    },
    /// Reading or checksumming a local file failed.
    #[error("local file: {0}")]
    Storage(StorageError),
    /// No data moved for this long while a transfer was running.
    #[error("transfer stalled: no data for {0:?}")]
    Stalled(Duration),
    /// `--transport auto` started on blast and no datagram arrived in time (UDP blocked on the path): the
    /// caller falls back to TCP.
    #[error("no blast datagram arrived (download) or was acknowledged (upload) within {0:?} of the server's 150: UDP looks blocked")]
    BlastBlocked(Duration),
    /// The number of bytes moved is not what the server's SIZE (or the requested range) says.
    #[error("size mismatch for {what}: expected {expected} bytes, got {got}")]
    SizeMismatch {
        /// Which file.
        what: String,
        /// What it should be.
        expected: u64,
        /// What it is.
        got: u64,
    },
    /// The local and remote checksums differ.
    #[error("{alg} checksum mismatch for {what}: local {local}, server {remote}")]
    ChecksumMismatch {
        /// Which file.
        what: String,
        /// Algorithm name (`SHA256`).
        alg: String,
        /// Local digest (hex).
        local: String,
        /// Server's digest (hex).
        remote: String,
    },
    /// The request cannot be carried out (bad range, unsupported combination).
    #[error("{0}")]
    Invalid(String),
}

impl ClientError {
    /// The FTP reply code, if the server refused something.
    pub fn reply_code(&self) -> Option<u16> {
        match self {
            ClientError::Session(e) => e.reply_code(),
            _ => None,
        }
    }

    pub(crate) fn local(path: impl Into<PathBuf>, error: io::Error) -> Self {
        ClientError::Local {
            path: path.into(),
            error,
        }
    }
}

impl From<SessionError> for ClientError {
    fn from(e: SessionError) -> Self {
        ClientError::Session(e)
    }
}

impl From<DataError> for ClientError {
    fn from(e: DataError) -> Self {
        ClientError::Data(e)
    }
}

impl From<StorageError> for ClientError {
    fn from(e: StorageError) -> Self {
        ClientError::Storage(e)
    }
}
