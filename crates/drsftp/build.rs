//! Build script: stamps the git commit the binary was built from into `drsftp --version`, so a bug report or a
//! benchmark record names the code that actually ran rather than whatever the checkout holds later.

use std::path::PathBuf;
use std::process::Command;

/// One line of `git ARGS` output, or None outside a git checkout (a crates.io or .deb source build).
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

/// Tells cargo to rerun when the git file `name` (e.g. `HEAD`, `refs/heads/main`) changes; `--git-path` finds it
/// in a linked worktree too.
fn watch(name: &str) {
    if let Some(p) = git(&["rev-parse", "--git-path", name]) {
        let p = PathBuf::from(p);
        if p.exists() {
            let p = std::fs::canonicalize(&p).unwrap_or(p);
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown commit".into());
    println!("cargo:rustc-env=DRSFTP_COMMIT={commit}");
    watch("HEAD");
    watch("packed-refs");
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&r);
    }
}
