//! The client's side of operating drsftp: `drsftp copy` defaults and host aliases from
//! `$XDG_CONFIG_HOME/drsftp/config.toml`, and `drsftp doctor` measuring a real server (RTT, upload and download
//! probes, the route's offloads). Servers run on loopback.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(120);

#[test]
fn client_config_gives_copy_defaults_and_host_aliases() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    let want = random_file(&root.join("f.bin"), 1 << 20, 9);
    let srv = drsftp_server(&root, &[]);
    let xdg = d.path().join("xdg");
    std::fs::create_dir_all(xdg.join("drsftp")).unwrap();
    std::fs::write(
        xdg.join("drsftp/config.toml"),
        format!(
            "[copy]\nparallel = 3\njson = true\n\n[hosts.lab]\nhost = \"{}\"\n",
            srv.addr
        ),
    )
    .unwrap();
    let copy_with = |extra: &[&str], out: &Path| {
        run(
            Command::new(bin())
                .arg("copy")
                .arg("ftp://lab/f.bin")
                .arg(out)
                .args(extra)
                .env("XDG_CONFIG_HOME", &xdg)
                .env("HOME", "/nonexistent"),
            T,
        )
    };
    // The alias reaches the server; [copy] asks for 3 streams and a JSON summary.
    let got = d.path().join("a.bin");
    let (ok, out, err) = copy_with(&[], &got);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&got), want);
    assert_eq!(json_of(&out)["streams"], 3, "{out}");
    // The command line wins over the file.
    let got = d.path().join("b.bin");
    let (ok, out, err) = copy_with(&["-p", "2"], &got);
    assert!(ok, "{err}");
    assert_eq!(json_of(&out)["streams"], 2, "{out}");
    // An unknown key is named.
    std::fs::write(xdg.join("drsftp/config.toml"), "[copy]\nparalel = 3\n").unwrap();
    let (ok, _, err) = copy_with(&[], &d.path().join("c.bin"));
    assert!(!ok && err.contains("unknown key \"paralel\""), "{err}");
}

#[test]
fn doctor_reports_host_facts_and_measures_a_server() {
    let d = tempfile::tempdir().unwrap();
    let srv = drsftp_server(d.path(), &[]);
    let (ok, out, err) = run(
        Command::new(bin())
            .args([
                "doctor",
                &srv.url("/"),
                "--rate",
                "10gbit",
                "--probe-secs",
                "0.5",
                "--json",
                "--path",
            ])
            .arg(d.path()),
        T,
    );
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // The host facts are this machine's.
    if let Ok(v) = std::fs::read_to_string("/proc/sys/net/core/rmem_max") {
        assert_eq!(r["host"]["rmem_max"], v.trim().parse::<u64>().unwrap());
    }
    let rtt = r["path"]["rtt_s"].as_f64().unwrap();
    assert!(rtt > 0.0 && rtt < 0.5, "loopback RTT {rtt}");
    // BDP = rate × RTT.
    let bdp = r["bdp_bytes"].as_u64().unwrap();
    assert_eq!(bdp, (1e10 / 8.0 * rtt) as u64);
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["topic"] == "congestion"));
    assert_eq!(r["path"]["rate_source"], "flag");
    // The directory URL: an upload probe, measured as the sender (loss is a number), its scratch file gone.
    let p = &r["probe"];
    assert_eq!(p["direction"], "upload", "{r}");
    assert!(p["bytes"].as_u64().unwrap() > 0, "{p}");
    assert!(p["rate_bps"].as_f64().unwrap() > 0.0, "{p}");
    let loss = p["loss"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&loss), "{p}");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("drsftp-doctor"))
        .collect();
    assert!(left.is_empty(), "scratch file left: {left:?}");
    // The route to the server is loopback, whose offloads the kernel reports.
    assert_eq!(r["host"]["route"]["interface"], "lo", "{r}");
    assert_eq!(r["host"]["route"]["mtu"], 65536);
    assert!(r["host"]["route"]["gso"].is_boolean(), "{r}");
    // A file URL: a download probe of that file; a receiver cannot see loss. Without --rate the BDP uses the
    // probe's rate or says it assumed one.
    std::fs::write(d.path().join("probe.bin"), vec![7u8; 4 << 20]).unwrap();
    let (ok, out, err) = run(
        Command::new(bin()).args([
            "doctor",
            &srv.url("/probe.bin"),
            "--probe-secs",
            "0.5",
            "--json",
        ]),
        T,
    );
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let p = &r["probe"];
    assert_eq!(p["direction"], "download", "{r}");
    assert_eq!(p["bytes"], 4 << 20, "{p}");
    assert!(p["loss"].is_null(), "{p}");
    let source = r["path"]["rate_source"].as_str().unwrap();
    assert!(source == "probe" || source == "assumed", "{r}");
    if source == "probe" {
        assert_eq!(r["path"]["rate_bps"], p["rate_bps"]);
    }
    // A server that is not there is an error, not a report.
    let (ok, _, err) = run(
        Command::new(bin()).args(["doctor", "ftp://127.0.0.1:1/"]),
        T,
    );
    assert!(!ok && err.contains("connect"), "{err}");
}
