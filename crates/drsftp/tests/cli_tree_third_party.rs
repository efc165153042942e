//! `drsftp copy -r ftp://A/dir/ ftp://B/dir/` of many small files: the pipelined third-party batches
//! (`relay_batch`). drsftp serve to drsftp serve, a 203-file tree with spaces and unicode in its names lands
//! identical, verified and with its modification times; the control dialogue shows later files' STORs going out
//! before the first file has even started on the source, every RETR only after the destination accepted that
//! file's STOR, and the destination accepting one data connection for all the files; a name the destination
//! refuses in the middle fails alone (its RETR never goes out) and the job exits non-zero naming it; and
//! globus-gridftp-server works as source and as destination. Servers started here are killed by PID on drop.

mod common;

use common::tree::*;
use common::*;
use std::path::Path;
use std::time::Duration;

const T: Duration = Duration::from_secs(180);

#[test]
fn a_small_tree_goes_server_to_server_pipelined_over_one_connection() {
    let dir = open_tempdir();
    let (ra, rb) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&rb).unwrap();
    let names = make_small_tree(&ra.join("tree"), 200, true);
    let a = drsftp_server(&ra, &[]);
    let b = drsftp_server(&rb, &["--log", "debug"]);

    // One pair of sessions, so the dialogue is one sequence.
    let (ok, out, err) = copy_tree_logged(&a.url("/tree/"), &b.url("/tp/"), 1);
    assert!(ok, "third-party copy failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(j["copied"], names.len(), "{j}");
    assert_eq!(j["failed"], 0, "{j}");
    for r in records(&j) {
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["attempts"], 1, "{r}");
        assert_eq!(r["wire_mode"], "E", "{r}");
    }
    same_files(&ra.join("tree"), &rb.join("tp"), &names, true);

    let lines = dialogue(&err);
    let pos = |what: &str| {
        lines
            .iter()
            .position(|l| *l == what)
            .unwrap_or_else(|| panic!("no `{what}` in the dialogue:\n{}", lines.join("\n")))
    };
    // The safety rule: file k's RETR goes to the source only after the destination accepted its STOR.
    for n in &names {
        let accepted = pos(&format!(
            "<- 125 Beginning MODE E transfer of STOR /tp/{n}."
        ));
        let retr = pos(&format!("-> RETR /tree/{n}"));
        assert!(accepted < retr, "RETR before the destination's 125 for {n}");
    }
    // Pipelined: the destination had later files' STORs before the source even began the first file.
    let first_started = lines
        .iter()
        .position(|l| l.starts_with("<- 125 Beginning MODE E transfer of RETR"))
        .expect("the source started a file");
    let early = lines[..first_started]
        .iter()
        .filter(|l| l.starts_with("-> STOR /tp/"))
        .count();
    assert!(early >= 8, "{early} STOR(s) before the first file started");
    // One PORT to the source and one data connection into the destination for every file (its other accepted
    // connections are the MLSD listings of `--sync`, one per directory).
    let sent = |p: &str| lines.iter().filter(|l| l.starts_with(p)).count();
    assert_eq!(sent("-> PORT "), 1, "one data channel for the batch");
    let listings = sent("-> MLSD /tp");
    let log = std::fs::read_to_string(&b.log).unwrap();
    let accepted = log.matches("data connection from").count();
    assert_eq!(
        accepted,
        listings + 1,
        "one data connection for {} files ({listings} listings)",
        names.len()
    );

    // A rerun (default `--sync mtime`) skips everything from one MLSD per destination directory.
    let (ok, out, err) = drsftp_logged(
        &["copy", "-r", "--json", &a.url("/tree/"), &b.url("/tp/")],
        T,
    );
    assert!(ok, "rerun failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(j["skipped"], names.len(), "{j}");
    assert!(!err.contains("-> SIZE") && !err.contains("-> MDTM") && !err.contains("-> STOR"));

    // The default concurrency (several pairs of sessions, each with its own batches) lands the same tree.
    let (ok, out, err) = drsftp_logged(
        &["copy", "-r", "--json", &a.url("/tree/"), &b.url("/again/")],
        T,
    );
    assert!(ok, "copy failed:\n{out}\n{err}");
    assert_eq!(json_of(&out)["copied"], names.len());
    same_files(&ra.join("tree"), &rb.join("again"), &names, true);
}

#[test]
fn a_name_the_destination_refuses_fails_alone() {
    let dir = open_tempdir();
    let (ra, rb) = (dir.path().join("a"), dir.path().join("b"));
    let src = ra.join("tree");
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
    // At the destination `tp/blocked` is a regular file: nothing can be stored below it.
    std::fs::create_dir_all(rb.join("tp")).unwrap();
    std::fs::write(rb.join("tp/blocked"), b"not a directory").unwrap();
    let (a, b) = (drsftp_server(&ra, &[]), drsftp_server(&rb, &[]));
    let (ok, out, err) = copy_tree_logged(&a.url("/tree/"), &b.url("/tp/"), 1);
    assert!(!ok, "the job must exit non-zero:\n{out}\n{err}");
    let j = json_of(&out);
    let failed = the_one_failure(&j, 40, "/tp/blocked/x.bin", "55");
    // drsftp serve opens the file only after its 125 and drops the data connection when that fails, so the batch
    // breaks there and the files behind it go one at a time (the Globus test below has a refusal before the 1xx,
    // which the batch goes on past on the same connection).
    assert!(failed["attempts"].as_u64() <= Some(2), "{failed}");
    let names: Vec<String> = (0..20)
        .flat_map(|i| [format!("a/{i:02}.bin"), format!("c/{i:02}.bin")])
        .collect();
    same_files(&src, &rb.join("tp"), &names, false);
    assert_eq!(
        std::fs::read(rb.join("tp/blocked")).unwrap(),
        b"not a directory"
    );
}

#[test]
fn globus_gridftp_server_as_source_and_as_destination() {
    let Some((dir, g)) = globus::start_in_tempdir(
        "globus_gridftp_server_as_source_and_as_destination",
        "drsftp-it",
        &[],
    ) else {
        return;
    };
    // globus-gridftp-server 13 answers 550 to non-ASCII paths: ASCII names here.
    let gsrc = dir.path().join("gsrc");
    let names = make_small_tree(&gsrc, 40, false);
    let rd = dir.path().join("d");
    std::fs::create_dir_all(&rd).unwrap();
    // Globus serves anonymous users as `nobody`: the tree must be readable and the targets writable.
    chmod(dir.path(), 0o777);
    let d = drsftp_server(&rd, &[]);
    let url = |p: &Path| g.url(p.to_str().unwrap());

    // Globus to drsftp serve.
    let (ok, out, err) = copy_tree_logged(&url(&gsrc), &d.url("/fromg/"), 2);
    assert!(ok, "globus -> drsftp failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(
        (j["copied"].as_u64(), j["failed"].as_u64()),
        (Some(40), Some(0)),
        "{j}"
    );
    assert!(records(&j).iter().all(|r| r["verified"] == true), "{j}");
    same_files(&gsrc, &rd.join("fromg"), &names, true);
    // Globus kept the connection to the destination between files.
    let reused = err.matches("reusing existing data connection").count();
    assert!(reused >= 30, "{reused} RETRs reused the connection:\n{err}");

    // drsftp serve to Globus, one pair of sessions, with a name Globus refuses (its parent is a regular file
    // there): refused before any 1xx, so it fails alone, its RETR never goes out, and the batch goes on over the
    // same connection. A Globus destination answers the first STOR of a fresh channel only once the data
    // connection is in: that file goes without the 1xx.
    let dsrc = rd.join("src");
    make_small_tree(&dsrc, 40, false);
    std::fs::create_dir_all(dsrc.join("blocked")).unwrap();
    random_file(&dsrc.join("blocked/x.bin"), 1234, 99);
    let back = dir.path().join("back");
    std::fs::create_dir_all(&back).unwrap();
    std::fs::write(back.join("blocked"), b"not a directory").unwrap();
    chmod(&back, 0o777);
    let (ok, out, err) = copy_tree_logged(&d.url("/src/"), &url(&back), 1);
    assert!(!ok, "the job must exit non-zero:\n{out}\n{err}");
    let j = json_of(&out);
    let failed = the_one_failure(&j, 40, "/blocked/x.bin", "500 Command failed");
    same_files(&gsrc, &back, &names, false);
    assert_eq!(failed["attempts"], 1, "{failed}");
    let lines = dialogue(&err);
    assert!(!lines.iter().any(|l| l.starts_with("-> RETR /src/blocked")));
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("-> PORT ")).count(),
        1
    );
    let gg = dir.path().join("gg");
    let (ok, out, err) = copy_tree_logged(&url(&gsrc), &url(&gg), 2);
    assert!(ok, "globus -> globus failed:\n{out}\n{err}");
    let j = json_of(&out);
    assert_eq!(
        (j["copied"].as_u64(), j["failed"].as_u64()),
        (Some(40), Some(0)),
        "{j}"
    );
    same_files(&gsrc, &gg, &names, true);
    let lines = dialogue(&err);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("-> PORT ")).count(),
        2,
        "one data channel per pair of sessions"
    );
    g.settle();
}
