//! `drsftp copy -r LOCALDIR ftp://…` of many small files against `drsftp serve` on loopback: the pipelined
//! upload batches (`Client::upload_batch`). Every file of a 203-file tree with spaces and unicode in its names
//! lands identical, verified and with its modification time; the control dialogue shows STOR for later files
//! going out before the first file's 226, over one data connection per session; a rerun skips everything from one
//! listing; a file the server refuses in the middle fails alone, with the job exiting non-zero and naming it;
//! and a name it cannot write (a directory there) is refused before its 150 without breaking the batch.
//! Every server started here is killed by PID when its test ends.

mod common;

use common::tree::*;
use common::*;
use std::time::Duration;

const T: Duration = Duration::from_secs(180);

#[test]
fn a_small_tree_uploads_pipelined_over_one_data_connection() {
    let dir = open_tempdir();
    let (src, root) = (dir.path().join("src"), dir.path().join("root"));
    std::fs::create_dir_all(&root).unwrap();
    let n = make_small_tree(&src, 200, true).len();
    let srv = drsftp_server(&root, &[]);
    let src_arg = format!("{}/", src.display());

    // One session, so the control dialogue is one sequence of commands and replies.
    let (ok, out, err) = copy_tree_logged(&src_arg, &srv.url("/up/"), 1);
    assert!(ok, "upload failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(j["copied"], n, "{j}");
    assert_eq!(j["failed"], 0, "{j}");
    for r in records(&j) {
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["attempts"], 1, "{r}");
    }
    same_tree(&src, &root.join("up"), "");
    // Pipelined: more STORs went out before the first 226 came back (the window), and each upload batch
    // reported one data connection for all its files.
    let lines: Vec<&str> = err.lines().collect();
    let first_stor = lines
        .iter()
        .position(|l| l.contains("-> STOR "))
        .expect("a STOR in the log");
    let first_226 = first_stor
        + lines[first_stor..]
            .iter()
            .position(|l| l.contains("<- 226"))
            .expect("a 226 after it");
    let early = lines[..first_226]
        .iter()
        .filter(|l| l.contains("-> STOR "))
        .count();
    assert!(
        early >= 8,
        "{early} STOR(s) before the first one's 226:\n{}",
        lines[first_stor..first_226].join("\n")
    );
    let batches: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("upload batch") && l.contains("files="))
        .collect();
    assert!(!batches.is_empty(), "no upload batch ran:\n{err}");
    for b in &batches {
        assert!(b.contains("connections=1"), "{b}");
    }
    // The listings for `--sync` (one MLSD per directory) have a PASV each; the files have one between them.
    let count = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    assert_eq!(
        count("-> PASV") - count("-> MLSD"),
        1,
        "one PASV for every file of the job: its connection carried them all"
    );

    // A rerun (default `--sync mtime`) skips every file, from one MLSD per directory rather than SIZE/MDTM
    // per file.
    let (ok, out, err) = drsftp_logged(&["copy", "-r", "--json", &src_arg, &srv.url("/up/")], T);
    assert!(ok, "rerun failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(
        (j["copied"].as_u64(), j["skipped"].as_u64()),
        (Some(0), Some(n as u64)),
        "{j}"
    );
    assert!(
        !err.contains("-> SIZE") && !err.contains("-> MDTM"),
        "{err}"
    );

    // The default concurrency (several sessions, each with its own batches) lands the same tree.
    let (ok, out, err) = drsftp_logged(&["copy", "-r", "--json", &src_arg, &srv.url("/again/")], T);
    assert!(ok, "upload failed:\n{out}\n{err}");
    assert_eq!(json_of(&out)["copied"], n);
    same_tree(&src, &root.join("again"), "");
}

#[test]
fn a_refused_file_mid_batch_fails_alone() {
    let dir = open_tempdir();
    let (src, root) = (dir.path().join("src"), dir.path().join("root"));
    for d in ["a", "blocked", "c"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for i in 0..20 {
        random_file(&src.join(format!("a/{i:02}.bin")), 3000 + i * 10, i as u64);
        random_file(
            &src.join(format!("c/{i:02}.bin")),
            5000 + i * 10,
            100 + i as u64,
        );
    }
    random_file(&src.join("blocked/x.bin"), 1234, 99);
    // On the server `up/blocked` is a regular file: nothing can be stored below it.
    std::fs::create_dir_all(root.join("up")).unwrap();
    std::fs::write(root.join("up/blocked"), b"not a directory").unwrap();
    let srv = drsftp_server(&root, &[]);
    let src_arg = format!("{}/", src.display());
    let (ok, out, err) = copy_tree_logged(&src_arg, &srv.url("/up/"), 1);
    assert!(!ok, "the job must exit non-zero:\n{out}\n{err}");
    let j = json_of(&out);
    the_one_failure(&j, 40, "/up/blocked/x.bin", "55");
    same_tree(&src.join("a"), &root.join("up/a"), "");
    same_tree(&src.join("c"), &root.join("up/c"), "");
    assert_eq!(
        std::fs::read(root.join("up/blocked")).unwrap(),
        b"not a directory"
    );
}

/// A destination name the server cannot write (a directory of that name is there) is refused before the STOR's
/// `150`: the batch records that one file as failed and carries on, every other file going in its first attempt.
#[test]
fn an_unwritable_name_fails_alone_and_the_batch_carries_on() {
    let dir = open_tempdir();
    let (src, root) = (dir.path().join("src"), dir.path().join("root"));
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..30 {
        random_file(
            &src.join(format!("{i:02}.bin")),
            2000 + i * 100,
            300 + i as u64,
        );
    }
    std::fs::create_dir_all(root.join("up/07.bin/inner")).unwrap();
    let srv = drsftp_server(&root, &[]);
    let src_arg = format!("{}/", src.display());
    let (ok, out, err) = copy_tree_logged(&src_arg, &srv.url("/up/"), 1);
    assert!(!ok, "the job must exit non-zero:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(
        (j["copied"].as_u64(), j["failed"].as_u64()),
        (Some(29), Some(1)),
        "{j}"
    );
    for r in records(&j) {
        let d = r["destination"].as_str().unwrap();
        if d.ends_with("/up/07.bin") {
            assert_eq!(r["status"], "failed", "{r}");
            assert!(
                r["error"].as_str().is_some_and(|e| e.contains("550")),
                "the server's refusal: {r}"
            );
        } else {
            assert_eq!(r["status"], "copied", "{r}");
            assert_eq!(r["attempts"], 1, "the batch went on past the refusal: {r}");
        }
    }
    assert!(err.contains("07.bin"), "the failure is named: {err}");
    for i in (0..30).filter(|&i| i != 7) {
        let n = format!("{i:02}.bin");
        assert_eq!(
            sha256_file(&src.join(&n)),
            sha256_file(&root.join("up").join(&n)),
            "{n}"
        );
    }
    assert!(
        root.join("up/07.bin/inner").is_dir(),
        "the directory is untouched"
    );
    let parts: Vec<_> = std::fs::read_dir(root.join("up"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("part"))
        .collect();
    assert!(parts.is_empty(), "part files left: {parts:?}");
}
