//! In-memory backend for deterministic tests. (Being written.)

/// An in-memory file tree.
#[derive(Debug, Default)]
pub struct MemStorage {}
