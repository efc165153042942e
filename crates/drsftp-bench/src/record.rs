//! Run records: the `bench/runs/<YYYY-MM-DD>-<shortcommit>-<name>/` folders written by `--record` and by
//! `drsftp-bench record` (which the bench/*.sh drivers call through bench/lib/record.sh), and `Md`, the report
//! text a harness prints while it builds it.
//!
//! A run folder holds `command.txt` (the exact command line, shell-quoted), `machine.txt` (uname -a, nproc,
//! memory, rustc version and the TCP sysctls), the raw CSV/JSON files of the run and the report as `README.md`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};

/// The 1, 5 and 15 minute load averages, e.g. `1.52 1.70 1.68` (empty if unreadable): every harness prints them
/// next to its numbers, since these machines are shared.
pub(crate) fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Where `--record` puts run folders unless given a directory.
pub const DEFAULT_RUNS_DIR: &str = "bench/runs";

/// The sysctls recorded in machine.txt.
const SYSCTLS: [&str; 5] = [
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_congestion_control",
];

/// One run folder; created with its command.txt and machine.txt, filled by the harness.
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// Creates `<base>/<YYYY-MM-DD>-<shortcommit>-<name>/` (with `-2`, `-3`, ... if that exists already) and
    /// writes command.txt (`argv`, shell-quoted) and machine.txt. The commit is the one `bin` (the drsftp binary
    /// the run uses) was built from, as its `--version` says; the checkout's HEAD only if it cannot tell, since a
    /// worktree's HEAD can be ahead of or behind the binary that actually ran.
    pub fn create(base: &Path, name: &str, argv: &[String], bin: &Path) -> Result<RunDir> {
        if name.is_empty() || name.contains('/') {
            bail!("run name {name:?}: must be non-empty and contain no '/'");
        }
        std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
        let version = binary_version(bin);
        let commit = version
            .as_deref()
            .and_then(version_commit)
            .map_or_else(short_commit, str::to_string);
        let stem = format!("{}-{commit}-{name}", utc_date(SystemTime::now()));
        let mut path = base.join(&stem);
        let mut n = 1;
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    n += 1;
                    path = base.join(format!("{stem}-{n}"));
                }
                Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
            }
        }
        let run = RunDir { path };
        run.write("command.txt", &format!("{}\n", shell_line(argv)))?;
        let binary = format!(
            "binary: {} = {}\n",
            bin.display(),
            version.as_deref().unwrap_or("(no --version output)")
        );
        run.write("machine.txt", &(machine() + &binary))?;
        eprintln!("recording this run in {}", run.path.display());
        Ok(run)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path()/name`, for a harness that writes a raw file straight into the folder.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> Result<()> {
        let p = self.path.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    }

    /// The report, as README.md.
    pub fn report(&self, markdown: &str) -> Result<()> {
        self.write("README.md", markdown)
    }

    /// After the harness failed: a folder with nothing but command.txt and machine.txt is removed; one with partial
    /// results is kept (it has no README.md) and named on stderr.
    pub fn failed(&self) {
        let only_header = std::fs::read_dir(&self.path).is_ok_and(|d| {
            d.flatten()
                .all(|e| e.file_name() == "command.txt" || e.file_name() == "machine.txt")
        });
        if only_header {
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            eprintln!(
                "run folder {} kept with partial results",
                self.path.display()
            );
        }
    }

    /// Copies a raw file the harness wrote elsewhere into the folder, under its own file name.
    pub fn add(&self, src: &Path) -> Result<()> {
        let name = src
            .file_name()
            .with_context(|| format!("{} has no file name", src.display()))?;
        if name == "README.md" || name == "command.txt" || name == "machine.txt" {
            bail!("{}: that name is reserved in a run folder", src.display());
        }
        std::fs::copy(src, self.path.join(name))
            .with_context(|| format!("copying {} into {}", src.display(), self.path.display()))?;
        Ok(())
    }
}

/// The report of a harness: every piece is printed on stdout as it is produced and kept for the run record.
#[derive(Debug, Default)]
pub struct Md(String);

impl Md {
    /// Prints `s` and a newline.
    pub fn line(&mut self, s: impl AsRef<str>) {
        self.push(s);
        self.push("\n");
    }

    /// Prints `s` (flushed, no newline).
    pub fn push(&mut self, s: impl AsRef<str>) {
        let s = s.as_ref();
        print!("{s}");
        let _ = std::io::stdout().flush();
        self.0.push_str(s);
    }

    pub fn text(&self) -> &str {
        &self.0
    }
}

/// `argv` as one shell command line (arguments quoted where the shell would split or expand them).
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// `YYYY-MM-DD` (UTC) of `t`.
pub fn utc_date(t: SystemTime) -> String {
    let days = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        / 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative here).
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `BIN --version`'s first line, e.g. `drsftp 0.1.0 (9f93cc7)`.
fn binary_version(bin: &Path) -> Option<String> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?;
    let line = s.lines().next()?.trim();
    (out.status.success() && !line.is_empty()).then(|| line.to_string())
}

/// The commit in a `drsftp --version` line (`drsftp 0.1.0 (9f93cc7)` → `9f93cc7`); None for a build made outside
/// git (`(unknown commit)`) or an older binary without one.
fn version_commit(version: &str) -> Option<&str> {
    let inner = version.rsplit_once('(')?.1.strip_suffix(')')?;
    (!inner.is_empty() && inner.chars().all(|c| c.is_ascii_hexdigit())).then_some(inner)
}

/// `git rev-parse --short HEAD` of the current directory, or `nogit`.
fn short_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "nogit".into())
}

fn command_output(prog: &str, args: &[&str]) -> String {
    match Command::new(prog).args(args).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => format!(
            "({prog} failed: {})",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("({prog} unavailable: {e})"),
    }
}

/// machine.txt: what the numbers of a run depend on besides the code.
fn machine() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "uname -a: {}", command_output("uname", &["-a"]));
    let _ = writeln!(s, "nproc: {}", command_output("nproc", &[]));
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    for key in ["MemTotal:", "MemAvailable:"] {
        if let Some(l) = meminfo.lines().find(|l| l.starts_with(key)) {
            let _ = writeln!(
                s,
                "memory {}",
                l.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
    }
    let _ = writeln!(s, "rustc: {}", command_output("rustc", &["--version"]));
    for k in SYSCTLS {
        let p = format!("/proc/sys/{}", k.replace('.', "/"));
        let v = std::fs::read_to_string(&p)
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|e| format!("(unreadable: {e})"));
        let _ = writeln!(s, "{k} = {v}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(utc_date(UNIX_EPOCH), "1970-01-01");
        let at = |s: u64| utc_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_795_651_199), "2026-11-25");
        assert_eq!(at(1_795_651_200), "2026-11-26");
    }

    #[test]
    fn command_lines_are_quoted_for_the_shell() {
        let argv: Vec<String> = [
            "drsftp-bench",
            "drs",
            "--rate",
            "100mbit",
            "--rmem",
            "4096 131072 262144",
            "it's",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            shell_line(&argv),
            r"drsftp-bench drs --rate 100mbit --rmem '4096 131072 262144' 'it'\''s'"
        );
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn a_run_folder_has_command_machine_and_report() {
        let base = tempfile::tempdir().unwrap();
        let argv = vec!["drsftp-bench".to_string(), "lab".to_string()];
        let no_bin = base.path().join("no-such-drsftp");
        let a = RunDir::create(base.path(), "lab", &argv, &no_bin).unwrap();
        let b = RunDir::create(base.path(), "lab", &argv, &no_bin).unwrap();
        assert_ne!(a.path(), b.path());
        let name = a.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.ends_with("-lab") && name.len() > "YYYY-MM-DD--lab".len(),
            "{name}"
        );
        assert!(b.path().to_string_lossy().ends_with("-lab-2"));
        assert_eq!(
            std::fs::read_to_string(a.join("command.txt")).unwrap(),
            "drsftp-bench lab\n"
        );
        let m = std::fs::read_to_string(a.join("machine.txt")).unwrap();
        for k in ["uname -a:", "nproc:", "memory MemTotal:", "rustc:"]
            .iter()
            .chain(SYSCTLS.iter())
        {
            assert!(m.contains(k), "machine.txt lacks {k}:\n{m}");
        }
        let raw = base.path().join("x.csv");
        std::fs::write(&raw, "a,b\n").unwrap();
        a.add(&raw).unwrap();
        a.report("# r\n").unwrap();
        assert_eq!(std::fs::read_to_string(a.join("x.csv")).unwrap(), "a,b\n");
        assert_eq!(
            std::fs::read_to_string(a.join("README.md")).unwrap(),
            "# r\n"
        );
        assert!(
            m.contains("binary: ") && m.contains("(no --version output)"),
            "{m}"
        );
        assert!(RunDir::create(base.path(), "a/b", &argv, &no_bin).is_err());
    }

    #[test]
    fn the_folder_is_named_after_the_binary_that_ran() {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(version_commit("drsftp 0.1.0 (9f93cc7)"), Some("9f93cc7"));
        assert_eq!(version_commit("drsftp 0.1.0 (unknown commit)"), None);
        assert_eq!(version_commit("drsftp 0.1.0"), None);
        let base = tempfile::tempdir().unwrap();
        let bin = base.path().join("drsftp");
        std::fs::write(&bin, "#!/bin/sh\necho 'drsftp 0.1.0 (abc1234)'\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = vec!["drsftp-bench".to_string(), "tls".to_string()];
        let run = RunDir::create(&base.path().join("runs"), "tls", &argv, &bin).unwrap();
        let name = run
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.ends_with("-abc1234-tls"), "{name}");
        let m = std::fs::read_to_string(run.join("machine.txt")).unwrap();
        assert!(m.contains("= drsftp 0.1.0 (abc1234)"), "{m}");
    }
}
