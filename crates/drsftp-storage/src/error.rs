//! `StorageError` and its mapping to FTP reply codes: the one place where storage failures become replies.

use std::io;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The path does not exist.
    #[error("{0}: no such file or directory")]
    NotFound(String),
    /// The path leaves the served root (`..`, absolute host paths, symlinks pointing out).
    #[error("{0}: path leaves the served root")]
    Escape(String),
    /// Permission denied by the OS.
    #[error("{0}: permission denied")]
    PermissionDenied(String),
    /// Expected a regular file, got something else.
    #[error("{0}: not a regular file")]
    NotAFile(String),
    /// Expected a directory.
    #[error("{0}: not a directory")]
    NotADirectory(String),
    /// The target already exists (MKD, RNTO onto a directory).
    #[error("{0}: already exists")]
    AlreadyExists(String),
    /// RMD of a non-empty directory.
    #[error("{0}: directory not empty")]
    NotEmpty(String),
    /// The disk or quota is full.
    #[error("no space left on device")]
    NoSpace,
    /// A path component is not valid (NUL byte, over-long name).
    #[error("{0}: invalid path")]
    InvalidPath(String),
    /// Unsupported checksum algorithm or bad range.
    #[error("{0}")]
    Invalid(String),
    /// Any other I/O error.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: io::Error,
    },
}

impl StorageError {
    /// Classify an OS error for `path`.
    pub fn from_io(path: &str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => return StorageError::NoSpace,
            Some(libc::ENOTDIR) => return StorageError::NotADirectory(path.into()),
            Some(libc::EISDIR) => return StorageError::NotAFile(path.into()),
            Some(libc::ENOTEMPTY) => return StorageError::NotEmpty(path.into()),
            Some(libc::ELOOP) => return StorageError::Escape(path.into()),
            Some(libc::ENAMETOOLONG) => return StorageError::InvalidPath(path.into()),
            _ => {}
        }
        match e.kind() {
            io::ErrorKind::NotFound => StorageError::NotFound(path.into()),
            io::ErrorKind::PermissionDenied => StorageError::PermissionDenied(path.into()),
            io::ErrorKind::AlreadyExists => StorageError::AlreadyExists(path.into()),
            _ => StorageError::Io {
                context: path.into(),
                source: e,
            },
        }
    }

    /// The FTP reply code for this failure (RFC 959): 550 not found / not allowed, 553 bad file name,
    /// 452 insufficient storage, 451 local error, 501 bad argument.
    pub fn reply_code(&self) -> u16 {
        match self {
            StorageError::NotFound(_)
            | StorageError::Escape(_)
            | StorageError::PermissionDenied(_)
            | StorageError::NotAFile(_)
            | StorageError::NotADirectory(_)
            | StorageError::AlreadyExists(_)
            | StorageError::NotEmpty(_) => 550,
            StorageError::InvalidPath(_) => 553,
            StorageError::NoSpace => 452,
            StorageError::Invalid(_) => 501,
            StorageError::Io { .. } => 451,
        }
    }
}
