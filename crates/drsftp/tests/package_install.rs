//! A fresh-machine install of the Debian package, without touching the host and without systemd: the test
//! builds the .deb (`cargo deb -p drsftp --no-build --strip`), then in a private mount namespace lays an
//! overlayfs over `/` (its upper layer a tmpfs) and `dpkg -i`s the package into it through `chroot`, so the
//! maintainer script really creates the `drsftp` account and directories. It then starts the service the way the
//! installed unit says (ExecStart, User, Group read from the unit file; only the ports are overridden so
//! parallel tests cannot collide), adds a user with `drsftp passwd` as the service account, copies a file with
//! `drsftp copy`, and reads the transfer log (through `/proc/PID/root`) and `/metrics`. `systemd-analyze verify`
//! checks the installed unit when systemd-analyze exists. The mounts die with the namespace, whose last process
//! is the server, killed by PID. Needs root, cargo-deb, unshare, chroot and dpkg: skipped with the reason
//! otherwise (scripts/setup.sh installs cargo-deb). Without root, the package metadata is still checked: every
//! asset exists, the unit's hardening and ExecStart, the packaged config parses, and the .deb lists the files.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const PW: &str = "package test password";
const T: Duration = Duration::from_secs(120);

/// Runs in the new mount namespace: `$1` is the test's temp dir holding the .deb and the file to serve.
/// It installs the package, prints the unit file between markers, then runs the one command line it reads
/// on stdin (the service) with exec, so the server's PID is this process's.
const SCRIPT: &str = r#"set -eu
T=$1
R=$T/ns/root
mount -t tmpfs tmpfs "$T/ns"
mkdir "$T/ns/upper" "$T/ns/work" "$R"
mount -t overlay overlay -o "lowerdir=/,upperdir=$T/ns/upper,workdir=$T/ns/work" "$R"
mount --bind /dev "$R/dev"
mount -t proc proc "$R/proc"
cp "$T/drsftp.deb" "$R/tmp/drsftp.deb"
chroot "$R" dpkg -i /tmp/drsftp.deb >&2
if command -v systemd-analyze >/dev/null; then
    echo "verify: $(chroot "$R" systemd-analyze verify /usr/lib/systemd/system/drsftp.service 2>&1 || echo "exit $?")"
else
    echo "verify: skipped (no systemd-analyze)"
fi
echo "account: $(chroot "$R" getent passwd drsftp)"
# As the example config says: root adds the account (the file stays the service's), and its directory.
printf '%s\n' "$PW" | chroot "$R" drsftp passwd /etc/drsftp/users.toml alice --root /alice >&2
echo "users: $(chroot "$R" stat -c %U /etc/drsftp/users.toml)"
cp "$T/data.bin" "$R/tmp/data.bin"
chroot "$R" install -d -o drsftp -g drsftp /srv/drsftp/alice
chroot "$R" install -o drsftp -g drsftp -m 0640 /tmp/data.bin /srv/drsftp/alice/data.bin
echo "--- unit"
cat "$R/usr/lib/systemd/system/drsftp.service"
echo "--- end"
read -r user group cmd
exec chroot --userspec="$user:$group" "$R" $cmd
"#;

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // The effective uid, from /proc (no libc call needed).
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?");
    if euid != "0" {
        return Some("needs root (mount namespace, overlayfs, chroot, dpkg)".into());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let deb = Command::new(cargo)
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !deb {
        return Some("cargo-deb is not installed (scripts/setup.sh installs it)".into());
    }
    for tool in ["unshare", "chroot", "dpkg"] {
        if !have(
            tool,
            "debian_package_installs_and_serves_with_the_example_config",
        ) {
            return Some(format!("{tool} is not installed"));
        }
    }
    None
}

/// `cargo deb` of the built release binary into `out` (a file or a directory). One at a time: cargo-deb strips
/// the binary into a staging file under `target/` that two concurrent runs would both write, and a package made
/// while the other run rewrites it holds a torn binary (seen as `/usr/bin/drsftp: Syntax error` after install).
fn build_deb(out: &Path) -> std::process::Output {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "deb",
            "-p",
            "drsftp",
            "--no-build",
            "--strip",
            "--fast",
            "-o",
        ])
        .arg(out)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// The value of `key=` in the unit's `[Service]` section.
fn unit_key<'a>(unit: &'a str, key: &str) -> &'a str {
    unit.lines()
        .skip_while(|l| l.trim() != "[Service]")
        .take_while(|l| !l.starts_with('[') || l.trim() == "[Service]")
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in [Service]:\n{unit}"))
        .trim()
}

/// Kills the namespace's last process (the server, or the script before it got there) by PID on drop.
struct Ns(Child);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn debian_package_installs_and_serves_with_the_example_config() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("ns")).unwrap();
    // The release binary exists already (CI builds it first; this test's own build made it too).
    let out = build_deb(&d.path().join("drsftp.deb"));
    assert!(
        out.status.success(),
        "cargo deb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb_size = std::fs::metadata(d.path().join("drsftp.deb"))
        .unwrap()
        .len();
    // Stripped: the unstripped binary alone is ~77 MB.
    assert!(deb_size < 20 << 20, ".deb is {deb_size} bytes");
    let want = random_file(&d.path().join("data.bin"), 2 << 20, 77);

    let mut child = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", SCRIPT, "sh"])
        .arg(d.path())
        .env("PW", PW)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut stderr = child.stderr.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let ns = Ns(child);
    let mut head = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            panic!("install script ended early:\n{head}\n{err}");
        }
        if line.trim() == "--- unit" {
            break;
        }
        head.push_str(&line);
    }
    let mut unit = String::new();
    loop {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "{unit}");
        if line.trim() == "--- end" {
            break;
        }
        unit.push_str(&line);
    }
    // postinst made the service account; systemd-analyze found nothing wrong with the unit.
    assert!(
        head.contains("account: drsftp:x:"),
        "no drsftp account:\n{head}"
    );
    assert!(
        head.contains("users: drsftp"),
        "drsftp passwd as root took the users file from the service account:\n{head}"
    );
    let verify = head
        .lines()
        .find_map(|l| l.strip_prefix("verify: "))
        .unwrap();
    assert!(
        verify.is_empty() || verify.starts_with("skipped"),
        "systemd-analyze verify: {verify}"
    );
    if verify.starts_with("skipped") {
        eprintln!("{verify}");
    }

    // Start the service as the unit does, with the installed example config; only the addresses change.
    let exec = unit_key(&unit, "ExecStart");
    let (user, group) = (unit_key(&unit, "User"), unit_key(&unit, "Group"));
    assert!(exec.contains("--config /etc/drsftp/drsftp.toml"), "{exec}");
    writeln!(
        stdin,
        "{user} {group} {exec} --listen 127.0.0.1:0 --metrics 127.0.0.1:0 --print-addr"
    )
    .unwrap();
    let mut addrs = vec![];
    let t0 = Instant::now();
    while addrs.len() < 2 {
        line.clear();
        if stdout.read_line(&mut line).unwrap() == 0 || t0.elapsed() > Duration::from_secs(60) {
            let mut err = String::new();
            let _ = stderr.read_to_string(&mut err);
            panic!("service did not start:\n{err}");
        }
        let l = line.trim();
        if let Some(a) = l.strip_prefix("listening ").or(l.strip_prefix("metrics ")) {
            addrs.push(a.parse::<SocketAddr>().unwrap());
        }
    }
    let (ctrl, metrics) = (addrs[0], addrs[1]);
    // Keep draining the journal-bound log so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    let pid = ns.0.id();
    // It runs as the unit's user.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        !uid_line.contains("\t0\t"),
        "server runs as root: {uid_line}"
    );

    let before = scrape(metrics);
    let got = d.path().join("got.bin");
    let (ok, _, err) = run(
        Command::new(bin())
            .arg("copy")
            .arg(format!("ftp://alice@{ctrl}/data.bin"))
            .arg(&got)
            .env("DRSFTP_PASSWORD", PW)
            .env("HOME", "/nonexistent"),
        Duration::from_secs(120),
    );
    assert!(ok, "drsftp copy: {err}");
    assert_eq!(sha256_file(&got), want);

    // The transfer log the example config names, inside the installed system.
    let xlog = format!("/proc/{pid}/root/var/log/drsftp/transfers.jsonl");
    let t0 = Instant::now();
    let rec: serde_json::Value = loop {
        let text = std::fs::read_to_string(&xlog).unwrap_or_default();
        if let Some(l) = text.lines().next() {
            break serde_json::from_str(l).unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{xlog} stays empty");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(rec["command"], "RETR");
    assert_eq!(rec["user"], "alice");
    assert_eq!(rec["path"], "/data.bin");
    assert_eq!(rec["bytes"], 2 << 20);
    assert_eq!(rec["result"], "ok");
    let meta = std::fs::metadata(&xlog).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_ne!(meta.uid(), 0, "the log belongs to the service account");

    let after = scrape(metrics);
    let delta = |name: &str| sample(&after, name) - sample(&before, name);
    assert_eq!(
        delta("drsftp_sent_bytes_total"),
        (2 << 20) as f64,
        "{after}"
    );
    assert_eq!(
        delta("drsftp_transfers_total{direction=\"out\",result=\"ok\"}"),
        1.0,
        "{after}"
    );
    drop(stdin);
    drop(ns);
    // The namespace is gone with its last process: nothing stays mounted on the temp dir.
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(!mounts.contains(d.path().to_str().unwrap()), "{mounts}");
}

#[test]
fn debian_metadata_names_files_that_exist() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&manifest).unwrap();
    let deb = &doc["package"]["metadata"]["deb"];
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dests = vec![];
    for a in deb["assets"].as_array().unwrap() {
        let a = a.as_array().unwrap();
        let (src, dest) = (a[0].as_str().unwrap(), a[1].as_str().unwrap());
        dests.push(dest.to_string());
        if !src.starts_with("target/") {
            assert!(crate_dir.join(src).is_file(), "asset {src} missing");
        }
    }
    assert!(dests.iter().any(|d| d == "usr/bin/"));
    assert!(dests.iter().any(|d| d == "etc/drsftp/drsftp.toml"));
    let units = deb["systemd-units"]["unit-scripts"].as_str().unwrap();
    assert!(crate_dir.join(units).join("drsftp.service").is_file());
    assert!(crate_dir
        .join(deb["maintainer-scripts"].as_str().unwrap())
        .join("postinst")
        .is_file());
    // The unit starts the server on the packaged config, which itself parses (every key a serve flag).
    let unit = std::fs::read_to_string(repo().join("packaging/drsftp.service")).unwrap();
    assert!(unit
        .contains("ExecStart=/usr/bin/drsftp --log info serve --config /etc/drsftp/drsftp.toml"));
    for k in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/srv/drsftp /var/log/drsftp",
        "PrivateTmp=yes",
    ] {
        assert!(unit.contains(k), "{k}");
    }
    let config = repo().join("packaging/drsftp.toml");
    let (ok, out, err) = run(
        Command::new(bin()).args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--print-config",
        ]),
        T,
    );
    assert!(ok, "{err}");
    assert!(out.contains("data-ports = \"50000-51000\""), "{out}");
    assert!(
        out.contains("transfer-log = \"/var/log/drsftp/transfers.jsonl\""),
        "{out}"
    );

    // With cargo-deb installed, build the package and list it (skipped with the reason otherwise).
    let have_deb = Command::new("cargo")
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let have_dpkg = Command::new("dpkg-deb")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(have_deb && have_dpkg) {
        eprintln!("SKIPPED building the .deb (cargo-deb: {have_deb}, dpkg-deb: {have_dpkg}; `cargo install cargo-deb --locked`)");
        return;
    }
    let out = build_deb(&std::env::temp_dir());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb_path = String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let list = Command::new("dpkg-deb")
        .args(["-c", &deb_path])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for f in [
        "./usr/bin/drsftp",
        "./etc/drsftp/drsftp.toml",
        "drsftp.service",
    ] {
        assert!(list.contains(f), "{f} not in the package:\n{list}");
    }
    let _ = std::fs::remove_file(&deb_path);
}
