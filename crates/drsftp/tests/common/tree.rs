//! Tree fixtures of the multi-file job tests (`cli_tree*`): small trees with awkward names and fixed
//! modification times, and the checks that a destination holds them whole, with their times.

use serde_json::Value;
use std::path::Path;
use std::time::Duration;

pub use drsftp_testkit::data::{mtime, set_mtime};

use super::{random_file, sha256_file};

/// `n` small files (0 to 96 KiB) with a space in their names under `dir`, and (with `unicode`) three more in a
/// subdirectory with a space and unicode names; modification times in 2020. Returns the relative names.
pub fn make_small_tree(dir: &Path, n: usize, unicode: bool) -> Vec<String> {
    std::fs::create_dir_all(dir.join("sub dir")).unwrap();
    let mut names: Vec<String> = (0..n).map(|i| format!("f {i:03}.bin")).collect();
    if unicode {
        names.extend((0..3).map(|i| format!("sub dir/ünï {i}.dat")));
    }
    for (i, name) in names.iter().enumerate() {
        let p = dir.join(name);
        random_file(&p, (i * 487) % (96 << 10), 11 + i as u64);
        set_mtime(&p, 1_600_000_000 + i as u64 * 100);
    }
    names
}

/// The per-file records of a job's `--json`.
pub fn records(j: &Value) -> &Vec<Value> {
    j["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in {j}"))
}

/// Every file of `names` is at `dst` with the same bytes (and, with `times`, the same modification time).
pub fn same_files(src: &Path, dst: &Path, names: &[String], times: bool) {
    for n in names {
        let (a, b) = (src.join(n), dst.join(n));
        assert!(b.exists(), "{n} missing at the destination");
        assert_eq!(sha256_file(&a), sha256_file(&b), "{n}");
        if times {
            assert_eq!(mtime(&a), mtime(&b), "{n}: modification time");
        }
    }
}

/// Every file below `src/rel` is at `dst/rel` with the same bytes and modification time.
pub fn same_tree(src: &Path, dst: &Path, rel: &str) {
    for e in std::fs::read_dir(src.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = Path::new(rel).join(e.file_name());
        let r = r.to_str().unwrap();
        if e.file_type().unwrap().is_dir() {
            same_tree(src, dst, r);
            continue;
        }
        same_files(src, dst, &[r.to_string()], true);
    }
}

/// The control lines of a `drsftp_logged` run (`-> CMD` / `<- reply`), without the log prefix.
pub fn dialogue(err: &str) -> Vec<&str> {
    err.lines()
        .filter_map(|l| l.split_once("control: ").map(|(_, r)| r))
        .collect()
}

/// `drsftp copy -r --json --concurrency N SRC DST` with its control dialogue logged (see `drsftp_logged`):
/// (success, stdout, stderr). One session (`concurrency` 1) makes the dialogue one sequence of commands.
pub fn copy_tree_logged(src: &str, dst: &str, concurrency: u32) -> (bool, String, String) {
    let n = concurrency.to_string();
    super::drsftp_logged(
        &["copy", "-r", "--json", "--concurrency", &n, src, dst],
        Duration::from_secs(180),
    )
}

/// The job's one failed record, after checking that `copied` files went and exactly one failed: the one whose
/// destination ends with `dest_suffix`, refused by the server with a reply naming `code` (e.g. "55").
pub fn the_one_failure<'a>(j: &'a Value, copied: u64, dest_suffix: &str, code: &str) -> &'a Value {
    assert_eq!(
        (j["copied"].as_u64(), j["failed"].as_u64()),
        (Some(copied), Some(1)),
        "{j}"
    );
    let failed: Vec<&Value> = records(j)
        .iter()
        .filter(|r| r["status"] == "failed")
        .collect();
    assert!(
        failed[0]["destination"]
            .as_str()
            .is_some_and(|d| d.ends_with(dest_suffix)),
        "{failed:?}"
    );
    assert!(
        failed[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains(code)),
        "the server's refusal: {failed:?}"
    );
    failed[0]
}
