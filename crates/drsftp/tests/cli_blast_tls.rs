//! `drsftp copy --transport udp` ⇄ `drsftp serve` over explicit FTPS with `PROT P`: the blast datagrams are
//! AEAD-sealed with keys from the control connection's TLS exporter. Download and upload are byte-identical and
//! report `blast.aead`; and, as root with tcpdump, a capture of the loopback UDP during a protected blast
//! download and upload of a file full of a marker string never shows the marker.

mod common;
mod tlsfix;

use common::*;
use std::process::Command;
use std::time::Duration;
use tlsfix::{url, TlsServer};

const T: Duration = Duration::from_secs(120);

/// `drsftp copy --transport udp --tls require --cacert <ca> --json ARGS...`: (ok, stdout, stderr).
fn udp_tls_copy(s: &TlsServer, args: &[&str]) -> (bool, String, String) {
    let ca = s.pki.ca.display().to_string();
    let mut a = vec![
        "copy",
        "--transport",
        "udp",
        "--tls",
        "require",
        "--cacert",
        &ca,
        "--json",
    ];
    a.extend(args);
    drsftp_logged(&a, T)
}

fn check_protected(what: &str, ok: bool, out: &str, err: &str, s: &TlsServer) {
    assert!(ok, "{what}: {out} {err}\nserver log:\n{}", s.srv.log_text());
    let j = json_of(out);
    assert_eq!(j["transport"], "udp", "{what}: {j}");
    assert_eq!(j["blast"]["aead"], true, "{what}: {j}");
    assert_eq!(j["verified"], true, "{what}: {j}");
    assert_eq!(j["rejected"].as_u64(), Some(0), "{what}: {j}");
    assert!(err.contains("-> PROT P"), "{what}: {err}");
}

#[test]
fn blast_download_and_upload_under_prot_p() {
    let s = tlsfix::serve(true);
    let len = (8 << 20) + 4321;
    let want = random_file(&s.root.join("src.bin"), len, 57);
    let dl = s.dir.path().join("dl.bin");
    let dst = dl.display().to_string();
    let (ok, out, err) = udp_tls_copy(&s, &[&url(&s, "/src.bin"), &dst]);
    check_protected("download", ok, &out, &err, &s);
    assert_eq!(sha256_file(&dl), want);
    // The sealed datagrams carry 24 bytes more, so the payload announced is that much smaller.
    assert!(err.contains("Packet=1412;"), "{err}");

    let (ok, out, err) = udp_tls_copy(&s, &[&dst, &url(&s, "/up.bin")]);
    check_protected("upload", ok, &out, &err, &s);
    assert_eq!(sha256_file(&s.root.join("up.bin")), want);
}

#[test]
fn udp_capture_of_a_prot_p_blast_shows_no_data() {
    const NAME: &str = "udp_capture_of_a_prot_p_blast_shows_no_data";
    if !is_root() {
        eprintln!("{NAME}: skipped (needs root for tcpdump)");
        return;
    }
    if !have("tcpdump", NAME) {
        return;
    }
    let s = tlsfix::serve(true);
    const MARKER: &str = "DRSFTP-MARKER-9b41d7c3-blast-plaintext";
    let mut body = Vec::new();
    for i in 0..40_000 {
        body.extend_from_slice(format!("{MARKER} line {i}\n").as_bytes());
    }
    std::fs::write(s.root.join("marked.txt"), &body).unwrap();
    let pcap = s.dir.path().join("blast.pcap");
    // Every UDP datagram on loopback while the test runs; -U writes each packet at once.
    let mut dump = Command::new("tcpdump")
        .args(["-i", "lo", "-U", "-s", "0", "-w"])
        .arg(&pcap)
        .arg("udp")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tcpdump");
    // tcpdump prints "listening on lo" once the capture is open.
    {
        use std::io::{BufRead, BufReader};
        let mut line = String::new();
        let mut r = BufReader::new(dump.stderr.take().expect("stderr"));
        let _ = r.read_line(&mut line);
        std::thread::spawn(move || {
            let mut sink = String::new();
            while r.read_line(&mut sink).unwrap_or(0) > 0 {}
        });
    }
    let dl = s.dir.path().join("marked.dl");
    let dst = dl.display().to_string();
    let down = udp_tls_copy(&s, &[&url(&s, "/marked.txt"), &dst]);
    let up = udp_tls_copy(&s, &[&dst, &url(&s, "/marked.up")]);
    std::thread::sleep(Duration::from_millis(500));
    // Stop tcpdump by its own pid (SIGINT flushes the file).
    let _ = Command::new("kill")
        .args(["-INT", &dump.id().to_string()])
        .status();
    let _ = dump.wait();
    check_protected("download", down.0, &down.1, &down.2, &s);
    check_protected("upload", up.0, &up.1, &up.2, &s);
    assert_eq!(std::fs::read(&dl).unwrap(), body);
    assert_eq!(std::fs::read(s.root.join("marked.up")).unwrap(), body);
    let cap = std::fs::read(&pcap).expect("capture file");
    // Both transfers went through the capture: more than twice the file.
    assert!(
        cap.len() > 2 * body.len(),
        "capture too small: {}",
        cap.len()
    );
    let find = |needle: &[u8]| cap.windows(needle.len()).any(|w| w == needle);
    assert!(
        !find(MARKER.as_bytes()),
        "the file's marker is in the UDP capture"
    );
    assert!(
        !find(&MARKER.as_bytes()[..16]),
        "part of the marker is in the capture"
    );
    // Sanity: the capture holds sealed blast datagrams (magic 0xB1A5, version 2).
    assert!(
        find(&[0xB1, 0xA5, 0x02, 0x01]),
        "no AEAD blast data datagram in the capture: was anything captured?"
    );
}
