//! Filesystem backend confined to a served root. (Being written.)

/// A directory tree on the local filesystem served as `/`.
#[derive(Debug)]
pub struct FsStorage {}
