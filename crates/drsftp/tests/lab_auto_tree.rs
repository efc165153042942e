//! `drsftp copy -r` with no transport flag (`--transport auto`) on a lossy WAN lab path (100 Mbit/s · 50 ms · 1 %,
//! the server on cubic), one session: the first large file starts on TCP and moves to blast, the next large file
//! starts on blast from that verdict, the small files stay on TCP; each file record in `--json` says which and why.
//! Every file is checked against the source's SHA-256. Needs root and /dev/net/tun; otherwise prints
//! `SKIPPED <test>: <reason>` and returns.

mod common;

use std::time::Duration;

use common::auto::*;
use common::*;

#[test]
fn auto_tree_carries_the_lossy_verdict_to_later_large_files() {
    drsftp_testkit::require_lab!("auto_tree_carries_the_lossy_verdict_to_later_large_files");
    let lab = two_host_lab("atr", 50, 100_000_000, 0.01);
    let dir = open_tempdir();
    let [root, conf, out] = subdirs(dir.path(), ["root", "config", "out"]);
    let tree = root.join("t");
    std::fs::create_dir(&tree).unwrap();
    let files = [
        ("a_big.bin", (40 << 20) + 3),
        ("b_big.bin", (20 << 20) + 5),
        ("c_small.bin", 300_000),
        ("d_small.bin", 7),
    ];
    let sums: Vec<String> = files
        .iter()
        .enumerate()
        .map(|(k, (n, len))| random_file(&tree.join(n), *len, 50 + k as u64))
        .collect();
    let srv = drsftp_serve(
        lab.exec(1, bin().to_str().unwrap()),
        &format!("{}:0", lab.addr(1)),
        &root,
        &["--congestion", "cubic"],
    );
    let mut cmd = lab.exec(2, bin().to_str().unwrap());
    cmd.env("XDG_CONFIG_HOME", &conf)
        .args(["copy", "-r", "--json", "--no-resume", "--concurrency", "1"])
        .arg(srv.url("/t/"))
        .arg(out.join("t"));
    let (ok, o, e) = run(&mut cmd, Duration::from_secs(300));
    assert!(ok, "tree copy: {o} {e}\nserver log:\n{}", srv.log_text());
    let j = json_of(&o);
    let recs = j["records"].as_array().unwrap();
    let choice = |name: &str| {
        let r = recs
            .iter()
            .find(|r| r["source"].as_str().unwrap().ends_with(name))
            .unwrap_or_else(|| panic!("no record for {name}: {j}"));
        eprintln!("{name}: {}", r["transport_choice"]);
        r["transport_choice"].clone()
    };
    let a = choice("a_big.bin");
    assert_eq!(a["chosen"], "tcp+udp", "{j}");
    assert!(a["reason"].as_str().unwrap().contains("random loss"), "{j}");
    let b = choice("b_big.bin");
    assert_eq!(b["chosen"], "udp", "{j}");
    assert!(
        b["reason"]
            .as_str()
            .unwrap()
            .contains("an earlier file of this job"),
        "{j}"
    );
    for small in ["c_small.bin", "d_small.bin"] {
        let c = choice(small);
        // Batched small files carry no choice of their own; one moved alone says why it stayed on TCP.
        assert!(c.is_null() || c["chosen"] == "tcp", "{j}");
    }
    for ((n, _), sum) in files.iter().zip(&sums) {
        assert_eq!(&sha256_file(&out.join("t").join(n)), sum, "{n}");
    }
    drop(srv);
    lab.down().expect("lab down");
}
