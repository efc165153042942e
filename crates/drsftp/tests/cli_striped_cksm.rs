//! A striped frontend's `CKSM CRC32C` is computed by its movers (issue 23): each mover checksums one contiguous
//! share of the range and the frontend combines the CRCs. The answers must equal those of a single server reading
//! the same file, for empty, 1-byte, unaligned and multi-share files and for ranges; a mover that is down gives a
//! 4xx (never a checksum of part of the file), and once it is back the frontend reconnects and answers again.

mod common;

use common::cluster::Cluster;
use common::*;

/// `CKSM <alg> <offset> <length> <path>` on `raw`, the whole reply.
fn cksm(raw: &mut Raw, alg: &str, offset: u64, length: i64, path: &str) -> String {
    raw.cmd(&format!("CKSM {alg} {offset} {length} {path}"))
}

#[test]
fn frontend_cksm_from_the_movers_equals_a_single_servers() {
    let dir = open_tempdir();
    let c = Cluster::start(dir.path(), 3);
    // Sizes: empty, 1 byte, just under two shares' worth (frontend reads), unaligned over 3 movers, larger.
    let files: [(&str, usize); 5] = [
        ("empty.bin", 0),
        ("one.bin", 1),
        ("small.bin", (2 << 20) - 1),
        ("odd.bin", (3 << 20) + 7),
        ("big.bin", (9 << 20) + 12_345),
    ];
    for (i, (name, len)) in files.iter().enumerate() {
        random_file(&c.root.join(name), *len, 40 + i as u64);
    }
    let single = drsftp_server(&c.root, &[]);
    let mut front = Raw::connect(c.front.addr);
    front.login();
    let mut one = Raw::connect(single.addr);
    one.login();
    let mut asked = 0;
    for (name, len) in files {
        let len = len as u64;
        let ranges: [(u64, i64); 4] = [
            (0, -1),
            (0, len as i64),
            (len.min(5), 3_000_001),
            (len - len / 3, -1),
        ];
        for (off, l) in ranges {
            for alg in ["CRC32C", "SHA256"] {
                let want = cksm(&mut one, alg, off, l, name);
                assert!(want.starts_with("213 "), "single server: {want}");
                let got = cksm(&mut front, alg, off, l, name);
                assert_eq!(got, want, "{alg} {off} {l} {name}\n{}", c.logs());
                asked += 1;
            }
        }
    }
    assert_eq!(asked, 40);
    // Past the end: the frontend gives the single server's error, not a mover's.
    let want = cksm(&mut one, "CRC32C", 99 << 20, -1, "big.bin");
    assert!(want.starts_with("501"), "{want}");
    assert_eq!(cksm(&mut front, "CRC32C", 99 << 20, -1, "big.bin"), want);
}

#[test]
fn a_mover_down_during_cksm_gives_a_4xx_and_it_answers_again_once_back() {
    let dir = open_tempdir();
    let mut c = Cluster::start(dir.path(), 2);
    random_file(&c.root.join("f.bin"), (6 << 20) + 3, 7);
    let single = drsftp_server(&c.root, &[]);
    let mut one = Raw::connect(single.addr);
    one.login();
    let want = cksm(&mut one, "CRC32C", 0, -1, "f.bin");
    assert!(want.starts_with("213 "), "{want}");
    let mut front = Raw::connect(c.front.addr);
    front.login();
    // The first CKSM opens the sessions to both movers; then mover 1 goes away with its session open.
    assert_eq!(cksm(&mut front, "CRC32C", 0, -1, "f.bin"), want);
    c.kill_mover(1);
    let r = cksm(&mut front, "CRC32C", 0, -1, "f.bin");
    assert!(r.starts_with("451"), "mover down: {r}\n{}", c.logs());
    // Not even a new session can be opened now: still a 4xx, and the session goes on.
    let r = cksm(&mut front, "CRC32C", 0, -1, "f.bin");
    assert!(r.starts_with("451"), "mover still down: {r}");
    assert!(front.cmd("NOOP").starts_with("200"));
    c.restart_mover(1);
    assert_eq!(
        cksm(&mut front, "CRC32C", 0, -1, "f.bin"),
        want,
        "{}",
        c.logs()
    );
}
