//! Virtual path handling: lexical normalisation that can never climb above `/`, validation of components, and
//! recognition of hidden part-file names.

use crate::{Result, StorageError};

/// Longest accepted path component in bytes (Linux `NAME_MAX`).
pub const MAX_COMPONENT_LEN: usize = 255;
/// Longest accepted virtual path in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;

/// Marker inside the names of hidden part files (`.<name>.drsftp-part.<unique>`).
pub(crate) const PART_MARKER: &str = ".drsftp-part.";

/// Normalise a virtual path to an absolute `/a/b` form (`.` and `..` resolved lexically, never above `/`).
///
/// Repeated slashes collapse, a trailing slash is dropped, and the empty path is the root. NUL bytes are kept
/// (callers reject them with [`validate`]).
pub fn normalize_virtual(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for comp in path.split('/') {
        match comp {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(path.len() + 1);
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Resolve `path` against working directory `cwd` (both virtual) and normalise. An absolute `path` ignores `cwd`;
/// an empty `path` is `cwd` itself.
pub fn join_virtual(cwd: &str, path: &str) -> String {
    if path.starts_with('/') {
        normalize_virtual(path)
    } else {
        normalize_virtual(&format!("{cwd}/{path}"))
    }
}

/// Reject paths no backend may accept: NUL bytes, components longer than [`MAX_COMPONENT_LEN`], and paths longer
/// than [`MAX_PATH_LEN`]. Errors are [`StorageError::InvalidPath`] (reply 553).
pub fn validate(path: &str) -> Result<()> {
    if path.contains('\0') {
        return Err(StorageError::InvalidPath(path.replace('\0', "\\0")));
    }
    if path.len() > MAX_PATH_LEN || path.split('/').any(|c| c.len() > MAX_COMPONENT_LEN) {
        return Err(StorageError::InvalidPath(truncate_for_error(path)));
    }
    Ok(())
}

/// Validate then normalise: the form every backend method starts from.
pub(crate) fn clean(path: &str) -> Result<String> {
    validate(path)?;
    Ok(normalize_virtual(path))
}

/// Split a normalised path into (parent, final name); `None` for the root.
pub(crate) fn split_parent(norm: &str) -> Option<(&str, &str)> {
    if norm == "/" {
        return None;
    }
    let idx = norm.rfind('/')?;
    let parent = if idx == 0 { "/" } else { &norm[..idx] };
    Some((parent, &norm[idx + 1..]))
}

/// The final component of a normalised path (`/` for the root).
pub(crate) fn file_name(norm: &str) -> &str {
    split_parent(norm).map_or("/", |(_, n)| n)
}

/// Whether a directory entry name is a hidden part file (`.<name>.drsftp-part.<unique>`).
pub fn is_part_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(PART_MARKER)
}

/// Whether `child` (normalised) lies strictly below `ancestor` (normalised).
pub(crate) fn is_strictly_below(child: &str, ancestor: &str) -> bool {
    if ancestor == "/" {
        return child != "/";
    }
    child.len() > ancestor.len()
        && child.starts_with(ancestor)
        && child.as_bytes()[ancestor.len()] == b'/'
}

fn truncate_for_error(path: &str) -> String {
    const KEEP: usize = 64;
    if path.len() <= KEEP {
        return path.to_string();
    }
    let mut end = KEEP;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &path[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalizes() {
        assert_eq!(normalize_virtual(""), "/");
        assert_eq!(normalize_virtual("/"), "/");
        assert_eq!(normalize_virtual("a/b"), "/a/b");
        assert_eq!(normalize_virtual("//a///b//"), "/a/b");
        assert_eq!(normalize_virtual("/a/./b/."), "/a/b");
        assert_eq!(normalize_virtual("/a/b/../c"), "/a/c");
        assert_eq!(normalize_virtual("/../../etc/passwd"), "/etc/passwd");
        assert_eq!(normalize_virtual("a/../../.."), "/");
        assert_eq!(normalize_virtual("..."), "/...");
        assert_eq!(normalize_virtual("/a/..b/c.."), "/a/..b/c..");
    }

    #[test]
    fn joins() {
        assert_eq!(join_virtual("/home/u", "f"), "/home/u/f");
        assert_eq!(join_virtual("/home/u", "../v/f"), "/home/v/f");
        assert_eq!(join_virtual("/home/u", "/etc/f"), "/etc/f");
        assert_eq!(join_virtual("/home/u", ""), "/home/u");
        assert_eq!(join_virtual("/", "../../x"), "/x");
        assert_eq!(join_virtual("", "x"), "/x");
    }

    #[test]
    fn validates() {
        assert!(validate("/a/b").is_ok());
        assert!(matches!(
            validate("/a\0b"),
            Err(StorageError::InvalidPath(_))
        ));
        let long = "x".repeat(MAX_COMPONENT_LEN + 1);
        assert!(matches!(
            validate(&format!("/d/{long}")),
            Err(StorageError::InvalidPath(_))
        ));
        assert!(validate(&format!("/d/{}", "x".repeat(MAX_COMPONENT_LEN))).is_ok());
        let deep = "/ab".repeat(MAX_PATH_LEN / 3 + 1);
        assert!(matches!(validate(&deep), Err(StorageError::InvalidPath(_))));
        assert_eq!(validate("/a\0").unwrap_err().reply_code(), 553);
    }

    #[test]
    fn splits() {
        assert_eq!(split_parent("/"), None);
        assert_eq!(split_parent("/a"), Some(("/", "a")));
        assert_eq!(split_parent("/a/b"), Some(("/a", "b")));
        assert_eq!(file_name("/"), "/");
        assert_eq!(file_name("/a/b"), "b");
    }

    #[test]
    fn part_names_and_ancestry() {
        assert!(is_part_name(".f.drsftp-part.12.3"));
        assert!(!is_part_name("f.drsftp-part.12.3"));
        assert!(!is_part_name(".hidden"));
        assert!(is_strictly_below("/a/b", "/a"));
        assert!(!is_strictly_below("/ab", "/a"));
        assert!(!is_strictly_below("/a", "/a"));
        assert!(is_strictly_below("/a", "/"));
        assert!(!is_strictly_below("/", "/"));
    }

    fn path_strategy() -> impl Strategy<Value = String> {
        let comp = prop_oneof![
            Just("..".to_string()),
            Just(".".to_string()),
            Just(String::new()),
            "[a-z.]{1,4}",
        ];
        (any::<bool>(), prop::collection::vec(comp, 0..12)).prop_map(|(abs, comps)| {
            let s = comps.join("/");
            if abs {
                format!("/{s}")
            } else {
                s
            }
        })
    }

    fn assert_normal(n: &str) {
        assert!(n.starts_with('/'), "{n:?}");
        assert!(n == "/" || !n.ends_with('/'), "{n:?}");
        assert!(!n.contains("//"), "{n:?}");
        assert!(n.split('/').all(|c| c != ".." && c != "."), "{n:?}");
    }

    proptest! {
        #[test]
        fn normalized_is_absolute_without_dot_components(p in path_strategy()) {
            let n = normalize_virtual(&p);
            assert_normal(&n);
            // Idempotent.
            prop_assert_eq!(normalize_virtual(&n), n.clone());
        }

        #[test]
        fn joined_is_absolute_without_dot_components(cwd in path_strategy(), p in path_strategy()) {
            let j = join_virtual(&cwd, &p);
            assert_normal(&j);
            if p.starts_with('/') {
                prop_assert_eq!(j, normalize_virtual(&p));
            } else {
                prop_assert!(j.starts_with('/'));
            }
        }

        #[test]
        fn arbitrary_strings_normalize_safely(p in ".{0,64}") {
            assert_normal(&normalize_virtual(&p));
        }
    }
}
