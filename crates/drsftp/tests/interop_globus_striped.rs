//! `drsftp copy` against striped Globus endpoints on loopback (`drsftp_testkit::globus::StripedGlobus`: a
//! frontend on 127.0.0.1 with `-r` data nodes on other loopback addresses, sharing one directory). The fixture
//! is first checked with globus-url-copy `-stripe` (its SPAS names both data nodes, SPOR goes to the source with
//! both); then drsftp downloads and uploads over both data nodes (each stripe carries bytes, SHA-256 compared),
//! and copies third-party between two striped endpoints with SPAS on the destination and SPOR naming all its
//! nodes on the source; and third-party between a Globus cluster and a drsftp cluster (frontend + 2 movers), both
//! directions, driven by `drsftp copy` and by globus-url-copy `-stripe`. Skipped with a printed reason when Globus
//! is not installed.

mod common;

use common::cluster::Cluster;
use common::*;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use drsftp_testkit::globus::StripedGlobus;

const T: Duration = Duration::from_secs(120);
const A: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3)];
const B: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 4), Ipv4Addr::new(127, 0, 0, 5)];

/// A striped endpoint with data nodes on `nodes` (stripe blocks of 256 KiB) in its own shared directory.
fn striped(test: &str, nodes: &[Ipv4Addr]) -> Option<(tempfile::TempDir, StripedGlobus)> {
    globus::striped_in_tempdir(test, "drsftp-it-striped-", nodes, &["-sbs", "262144"])
}

/// `ftp://frontend/<dir>/<name>`.
fn url(dir: &tempfile::TempDir, g: &StripedGlobus, name: &str) -> String {
    g.frontend.url(&dir.path().join(name).to_string_lossy())
}

/// `drsftp copy --json` with `args`, debug logging of the control commands on stderr; panics on failure.
fn copy(args: &[&str], logs: &str) -> (serde_json::Value, String) {
    let (ok, out, err) = run(
        Command::new(bin())
            .args(["--log", "drsftp_io=debug", "copy", "--json", "-q"])
            .args(args),
        T,
    );
    assert!(ok, "drsftp copy {args:?} failed: {out}\n{err}\n{logs}");
    (json_of(&out), err)
}

/// The `stripe_bytes` of a `--json` summary: `n` stripes, each with bytes, summing to `len`.
fn assert_stripes(j: &serde_json::Value, n: usize, len: u64) {
    let s: Vec<u64> = j["stripe_bytes"]
        .as_array()
        .unwrap_or_else(|| panic!("no stripe_bytes in {j}"))
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(s.len(), n, "{j}");
    assert!(s.iter().all(|b| *b > 0), "every data node moved bytes: {j}");
    assert_eq!(s.iter().sum::<u64>(), len, "{j}");
}

#[test]
fn fixture_stripes_for_globus_url_copy() {
    if !have(
        globus::GLOBUS_URL_COPY,
        "fixture_stripes_for_globus_url_copy",
    ) {
        return;
    }
    let Some((dir, g)) = striped("fixture_stripes_for_globus_url_copy", &A) else {
        return;
    };
    let want = random_file(&dir.path().join("src.bin"), 6 * 1024 * 1024 + 17, 1);
    let (src, dst) = (url(&dir, &g, "src.bin"), url(&dir, &g, "dst.bin"));
    let (ok, out, err) = run(
        Command::new("globus-url-copy").args(["-dbg", "-stripe", &src, &dst]),
        T,
    );
    let dbg = format!("{out}{err}");
    assert!(
        ok,
        "globus-url-copy -stripe failed: {dbg}\n{}",
        g.log_tail()
    );
    // The destination answered SPAS with one address per data node; the source got SPOR naming both.
    for ip in ["127,0,0,2,", "127,0,0,3,"] {
        assert!(
            dbg.lines().any(|l| l.starts_with(&format!(" {ip}"))),
            "SPAS reply lists {ip}: {dbg}"
        );
    }
    let spor = dbg
        .lines()
        .find(|l| l.starts_with("SPOR "))
        .expect("SPOR sent");
    assert_eq!(spor.split(' ').count(), 3, "{spor}");
    assert_eq!(sha256_file(&dir.path().join("dst.bin")), want);
}

#[test]
fn copy_download_and_upload_over_both_data_nodes() {
    let Some((dir, g)) = striped("copy_download_and_upload_over_both_data_nodes", &A) else {
        return;
    };
    let len = 9 * 1024 * 1024 + 5;
    let want = random_file(&dir.path().join("src.bin"), len, 2);
    let local = open_tempdir();
    let down = local.path().join("down.bin");
    let (j, err) = copy(
        &[
            "-p",
            "2",
            &url(&dir, &g, "src.bin"),
            &down.to_string_lossy(),
        ],
        &g.log_tail(),
    );
    assert_stripes(&j, 2, len as u64);
    assert!(err.contains("-> SPOR "), "a SPOR went out: {err}");
    assert_eq!(sha256_file(&down), want);

    let (j, _) = copy(
        &["-p", "2", &down.to_string_lossy(), &url(&dir, &g, "up.bin")],
        &g.log_tail(),
    );
    assert_stripes(&j, 2, len as u64);
    assert_eq!(sha256_file(&dir.path().join("up.bin")), want);

    // --no-stripes: today's single data channel.
    let one = local.path().join("one.bin");
    let (j, err) = copy(
        &[
            "-p",
            "2",
            "--no-stripes",
            &url(&dir, &g, "src.bin"),
            &one.to_string_lossy(),
        ],
        &g.log_tail(),
    );
    assert_eq!(j["stripe_bytes"], serde_json::json!([]), "{j}");
    assert!(!err.contains("-> SPAS"), "{err}");
    assert_eq!(sha256_file(&one), want);
}

#[test]
fn third_party_between_two_striped_globus_endpoints() {
    let Some((dir_a, a)) = striped("third_party_between_two_striped_globus_endpoints", &A) else {
        return;
    };
    let Some((dir_b, b)) = striped("third_party_between_two_striped_globus_endpoints", &B) else {
        return;
    };
    let len = 8 * 1024 * 1024 + 3;
    let want = random_file(&dir_a.path().join("src.bin"), len, 3);
    let logs = format!("{}\n{}", a.log_tail(), b.log_tail());
    let (j, err) = copy(
        &[
            "-p",
            "2",
            &url(&dir_a, &a, "src.bin"),
            &url(&dir_b, &b, "dst.bin"),
        ],
        &logs,
    );
    assert_eq!(j["mode"], "third-party", "{j}");
    // SPAS on the destination, SPOR with both of its data nodes to the source.
    let spor = err
        .lines()
        .find_map(|l| l.split("-> SPOR ").nth(1))
        .unwrap_or_else(|| panic!("no SPOR sent: {err}"));
    let hosts: Vec<&str> = spor.split(' ').collect();
    assert_eq!(hosts.len(), 2, "{spor}");
    assert!(hosts.iter().any(|h| h.starts_with("127,0,0,4,")), "{spor}");
    assert!(hosts.iter().any(|h| h.starts_with("127,0,0,5,")), "{spor}");
    assert_eq!(sha256_file(&dir_b.path().join("dst.bin")), want);
    // Reverse direction too.
    let (_, err) = copy(
        &[
            "-p",
            "2",
            &url(&dir_b, &b, "dst.bin"),
            &url(&dir_a, &a, "back.bin"),
        ],
        &logs,
    );
    assert!(err.contains("-> SPOR 127,0,0,"), "{err}");
    assert_eq!(sha256_file(&dir_a.path().join("back.bin")), want);
}

/// The addresses of the SPOR command a `-dbg` globus-url-copy (line `SPOR ...`) or a debug-logging `drsftp copy`
/// (`-> SPOR ...`) sent.
fn spor_hosts(log: &str) -> Vec<String> {
    log.lines()
        .find_map(|l| {
            l.strip_prefix("SPOR ")
                .or_else(|| l.split("-> SPOR ").nth(1))
        })
        .unwrap_or_else(|| panic!("no SPOR sent: {log}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn third_party_between_a_globus_cluster_and_a_drsftp_cluster_both_directions() {
    const TEST: &str = "third_party_between_a_globus_cluster_and_a_drsftp_cluster_both_directions";
    if !have(globus::GLOBUS_URL_COPY, TEST) {
        return;
    }
    // Globus data nodes on 127.0.0.4/5; the drsftp cluster's movers on 127.0.0.2/3.
    let Some((gdir, g)) = striped(TEST, &B) else {
        return;
    };
    let ddir = open_tempdir();
    let d = Cluster::start(ddir.path(), 2);
    let logs = || format!("{}\n{}", g.log_tail(), d.logs());
    let len = 8 * 1024 * 1024 + 11;
    let want = random_file(&gdir.path().join("src.bin"), len, 4);
    let drs = |name: &str| d.front.url(&format!("/{name}"));

    // drsftp copy, Globus -> drsftp: SPAS on the drsftp frontend (both movers), SPOR to the Globus frontend.
    let (j, err) = copy(
        &["-p", "2", &url(&gdir, &g, "src.bin"), &drs("g2d.bin")],
        &logs(),
    );
    assert_eq!(j["mode"], "third-party", "{j}");
    assert_stripes(&j, 2, len as u64);
    let hosts = spor_hosts(&err);
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    for ip in ["127,0,0,2,", "127,0,0,3,"] {
        assert!(hosts.iter().any(|h| h.starts_with(ip)), "{hosts:?}");
    }
    assert!(
        !err.contains("-> PEER"),
        "no single sender is named for a striped copy: {err}"
    );
    assert_eq!(sha256_file(&d.root.join("g2d.bin")), want);

    // drsftp copy, drsftp -> Globus: SPAS on the Globus frontend (both data nodes), SPOR to the drsftp frontend.
    let (j, err) = copy(
        &["-p", "2", &drs("g2d.bin"), &url(&gdir, &g, "d2g.bin")],
        &logs(),
    );
    // stripe_bytes come from the destination's 112 perf markers, which Globus sends on its own timer: a
    // sub-second copy may end before the first (1 run in 6 here). Striping itself shows in the SPOR below.
    if j["stripe_bytes"].as_array().is_some_and(|s| !s.is_empty()) {
        assert_stripes(&j, 2, len as u64);
    }
    let hosts = spor_hosts(&err);
    for ip in ["127,0,0,4,", "127,0,0,5,"] {
        assert!(hosts.iter().any(|h| h.starts_with(ip)), "{hosts:?}");
    }
    assert_eq!(sha256_file(&gdir.path().join("d2g.bin")), want);

    // globus-url-copy -stripe, both directions.
    for (src, dst, file, nodes) in [
        (
            url(&gdir, &g, "src.bin"),
            drs("guc-g2d.bin"),
            d.root.join("guc-g2d.bin"),
            ["127,0,0,2,", "127,0,0,3,"],
        ),
        (
            drs("g2d.bin"),
            url(&gdir, &g, "guc-d2g.bin"),
            gdir.path().join("guc-d2g.bin"),
            ["127,0,0,4,", "127,0,0,5,"],
        ),
    ] {
        let (ok, out, err) = run(
            Command::new("globus-url-copy").args(["-dbg", "-stripe", "-p", "2", &src, &dst]),
            T,
        );
        let dbg = format!("{out}{err}");
        assert!(ok, "globus-url-copy -stripe {src} {dst}: {dbg}\n{}", logs());
        let hosts = spor_hosts(&dbg);
        for ip in nodes {
            assert!(hosts.iter().any(|h| h.starts_with(ip)), "{src}: {hosts:?}");
        }
        assert_eq!(sha256_file(&file), want, "{src} -> {dst}");
    }
}
