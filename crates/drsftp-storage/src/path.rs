//! Virtual path handling: lexical normalisation that can never climb above `/`. (Being written.)

/// Normalise a virtual path to an absolute `/a/b` form (`.` and `..` resolved lexically, never above `/`).
pub fn normalize_virtual(path: &str) -> String {
    let _ = path;
    todo!("normalize_virtual")
}

/// Resolve `path` against working directory `cwd` (both virtual) and normalise.
pub fn join_virtual(cwd: &str, path: &str) -> String {
    let _ = (cwd, path);
    todo!("join_virtual")
}
