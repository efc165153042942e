//! Per-path tuning profiles written by `drsftp tune calibrate` and read by `-p auto`'s start choice
//! ([`super::auto_start`]): one JSON file, `$XDG_CONFIG_HOME/drsftp/paths.json` (or `~/.config/drsftp/paths.json`),
//! keyed by the server's `host:port`. Here, in the library, so that any client of drsftp-io starts as
//! `drsftp copy -p auto` does. The same file keeps the *path memory* of `--transport auto` (docs/auto-transport.md):
//! what a default copy learned about a path's random loss, in its own `learned` section so that a calibrated
//! fit is never touched by it, read back by the next copy while it is younger than [`LEARNED_TTL`].

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Why the profile file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Reading, writing, creating or renaming failed.
    #[error("{}: {error}", path.display())]
    Io { path: PathBuf, error: io::Error },
    /// The file is not a profile file (it is left alone rather than silently replaced).
    #[error("{}: not a path-profile file: {error}", path.display())]
    Json {
        path: PathBuf,
        error: serde_json::Error,
    },
}

type Result<T> = std::result::Result<T, ProfileError>;

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ProfileError + '_ {
    move |error| ProfileError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// The profile key of a server: `host:port`, with an IPv6 literal in brackets (`[::1]:2811`).
pub fn path_key(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// What calibration learned about one server path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathProfile {
    /// `host:port` as in the URL (the key).
    pub host_port: String,
    /// Control-channel round trip of a NOOP, median of several, milliseconds.
    pub rtt_ms: f64,
    /// Rate estimate: the best throughput seen in the sweep, bit/s.
    pub rate_bps: f64,
    /// Fitted C1' (streams x KB^C2 per ms of RTT at `rate_bps`); absent when the sweep could not be fitted.
    pub c1: Option<f64>,
    /// Fitted C2.
    pub c2: Option<f64>,
    /// The fit's mean and max |P_model - P_measured| / P_measured over the saturation points.
    pub fit_mean_rel_err: Option<f64>,
    pub fit_max_rel_err: Option<f64>,
    /// Saturation points the fit used.
    pub points: usize,
    /// When it was measured, seconds since the Unix epoch.
    pub timestamp: u64,
    /// Random packet loss on the path, a fraction (0.01 = 1 %), when known: from 0.05 % up `--transport auto`
    /// starts on UDP blast directly (docs/auto-transport.md). `tune calibrate` measures it with a paced blast probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
}

impl PathProfile {
    /// The fitted model, its reference rate being the measured rate; `None` without a fit.
    pub fn model(&self) -> Option<drsftp_tune::Model> {
        Some(drsftp_tune::Model {
            c1: self.c1?,
            c2: self.c2?,
            ref_rate_bps: self.rate_bps,
        })
    }
}

/// How long a learned path reading starts copies: 6 hours. Random loss on a path changes with its route and its
/// load (a diurnal cycle, a flapping link), so a day is too long to trust one copy's reading; within a working
/// session's repeated copies (hours) it saves each copy the rule's ~1 s of evidence on TCP. Expiry is cheap
/// either way: without memory a copy starts on TCP, watched, and learns the path again.
pub const LEARNED_TTL: std::time::Duration = std::time::Duration::from_secs(6 * 3600);

/// How long "UDP blast was blocked" is remembered: shorter than [`LEARNED_TTL`], because a copy that trusts it
/// never tries blast and so cannot see the block lifted (a transient outage must not pin a lossy path to TCP for
/// hours), while an hour still spares the copies of a working session the ~1 s wait for a datagram each.
pub const BLOCKED_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// What a `--transport auto` copy learned about one path (path memory; not a calibration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedPath {
    /// `host:port` as in the URL (the key).
    pub host_port: String,
    /// Whether the path showed random loss at or above `drsftp_tune::PROFILE_LOSSY`: the next default copy
    /// starts on blast if so, on TCP (watched) if not.
    pub lossy: bool,
    /// The loss seen, a fraction: blast's measured loss (lost / sent transmissions) when blast ran; otherwise
    /// the TCP evidence's share of loss marks (a receiver's out-of-order share overstates the loss rate by
    /// about a window; a sender's retransmitted share is close to it), see `loss_from`.
    pub loss: f64,
    /// Where `loss` comes from: "blast", "tcp out-of-order", "tcp retransmitted".
    pub loss_from: String,
    /// The rate seen, bit/s (blast's delivery rate, or TCP's best interval).
    pub rate_bps: f64,
    /// The path's minimum RTT seen, milliseconds (0 when not known).
    pub min_rtt_ms: f64,
    /// When, seconds since the Unix epoch.
    pub timestamp: u64,
    /// UDP blast was tried and no datagram got through: the next default copies stay on TCP without trying
    /// (for [`BLOCKED_TTL`]). Older files have no such field (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blast_blocked: bool,
}

impl LearnedPath {
    /// Seconds since it was learned at `now` (0 if the clock went back).
    pub fn age(&self, now: u64) -> u64 {
        now.saturating_sub(self.timestamp)
    }

    /// Still young enough to start a copy ([`LEARNED_TTL`], [`BLOCKED_TTL`] for a block); a reading from the
    /// future (clock change) is not.
    pub fn fresh(&self, now: u64) -> bool {
        let ttl = if self.blast_blocked {
            BLOCKED_TTL
        } else {
            LEARNED_TTL
        };
        self.timestamp <= now + 60 && self.age(now) < ttl.as_secs()
    }

    /// `self` recorded over `old`: the new reading wins; a rate or RTT it lacks (0) keeps the old one's.
    pub fn merged_over(mut self, old: Option<&LearnedPath>) -> LearnedPath {
        if let Some(o) = old {
            if self.rate_bps <= 0.0 {
                self.rate_bps = o.rate_bps;
            }
            if self.min_rtt_ms <= 0.0 {
                self.min_rtt_ms = o.min_rtt_ms;
            }
        }
        self
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct FileFormat {
    version: u32,
    paths: BTreeMap<String, PathProfile>,
    /// Path memory (older files have none; older readers ignore it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    learned: BTreeMap<String, LearnedPath>,
}

/// The profile file in one directory.
#[derive(Debug, Clone)]
pub struct ProfileStore {
    file: PathBuf,
}

impl ProfileStore {
    /// `dir/paths.json`.
    pub fn in_dir(dir: &Path) -> ProfileStore {
        ProfileStore {
            file: dir.join("paths.json"),
        }
    }

    /// `$XDG_CONFIG_HOME/drsftp`, else `$HOME/.config/drsftp`; `None` if neither variable is set.
    pub fn default_dir() -> Option<PathBuf> {
        xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("drsftp"))
    }

    /// The store in `dir`, or in [`Self::default_dir`].
    pub fn open(dir: Option<&Path>) -> Option<ProfileStore> {
        match dir {
            Some(d) => Some(Self::in_dir(d)),
            None => Self::default_dir().map(|d| Self::in_dir(&d)),
        }
    }

    pub fn path(&self) -> &Path {
        &self.file
    }

    fn load(&self) -> Result<FileFormat> {
        match std::fs::read_to_string(&self.file) {
            Ok(t) => serde_json::from_str(&t).map_err(|error| ProfileError::Json {
                path: self.file.clone(),
                error,
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(FileFormat::default()),
            Err(e) => Err(io_err(&self.file)(e)),
        }
    }

    /// The profile for `host_port`, if one was stored.
    pub fn get(&self, host_port: &str) -> Result<Option<PathProfile>> {
        Ok(self.load()?.paths.remove(host_port))
    }

    /// All stored profiles.
    pub fn all(&self) -> Result<Vec<PathProfile>> {
        Ok(self.load()?.paths.into_values().collect())
    }

    /// Stores (replaces) the profile for its `host_port`; other paths and the path memory are kept.
    pub fn put(&self, p: &PathProfile) -> Result<()> {
        let mut f = self.load()?;
        f.paths.insert(p.host_port.clone(), p.clone());
        self.save(f)
    }

    /// What a default copy learned about `host_port`, fresh or not (see [`LearnedPath::fresh`]).
    pub fn learned(&self, host_port: &str) -> Result<Option<LearnedPath>> {
        Ok(self.load()?.learned.remove(host_port))
    }

    /// Records `l` in the path memory, merged over what was learned before ([`LearnedPath::merged_over`]);
    /// the calibrated profiles are not touched. Two copies finishing at once: the later write wins.
    pub fn learn(&self, l: &LearnedPath) -> Result<()> {
        let mut f = self.load()?;
        let merged = l.clone().merged_over(f.learned.get(&l.host_port));
        f.learned.insert(l.host_port.clone(), merged);
        self.save(f)
    }

    /// Writes the file: a temporary file created 0600 (it names the servers one copies from), then renamed over
    /// the old one, so a reader never sees half a file.
    fn save(&self, mut f: FileFormat) -> Result<()> {
        f.version = 1;
        if let Some(dir) = self.file.parent() {
            std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        let text = serde_json::to_string_pretty(&f).map_err(|error| ProfileError::Json {
            path: self.file.clone(),
            error,
        })? + "\n";
        crate::private_file::replace(&self.file, text.as_bytes(), |_| Ok(()))
            .map_err(|(at, e)| io_err(&at)(e))
    }
}

/// Seconds since the Unix epoch, now.
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An XDG base directory: `$var`, else `$HOME/home_sub`; `None` if neither is set (an empty value counts as
/// unset, as the XDG spec says).
pub(crate) fn xdg_dir(var: &str, home_sub: &str) -> Option<PathBuf> {
    let nonempty = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    nonempty(var).or_else(|| nonempty("HOME").map(|h| h.join(home_sub)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prof(hp: &str, rate: f64) -> PathProfile {
        PathProfile {
            loss: None,
            host_port: hp.into(),
            rtt_ms: 20.5,
            rate_bps: rate,
            c1: Some(73.7),
            c2: Some(0.93),
            fit_mean_rel_err: Some(0.12),
            fit_max_rel_err: Some(0.28),
            points: 3,
            timestamp: 1_700_000_000,
        }
    }

    #[test]
    fn profiles_round_trip_per_host() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::in_dir(&dir.path().join("nested"));
        assert_eq!(store.get("a:2811").unwrap(), None, "missing file is empty");
        let a = prof("a:2811", 9e8);
        let b = PathProfile {
            loss: None,
            c1: None,
            c2: None,
            ..prof("[::1]:2811", 3e9)
        };
        store.put(&a).unwrap();
        store.put(&b).unwrap();
        assert_eq!(store.get("a:2811").unwrap(), Some(a.clone()));
        assert_eq!(store.get("[::1]:2811").unwrap(), Some(b.clone()));
        assert_eq!(store.get("a:2812").unwrap(), None, "keyed by host and port");
        // Replacing one path keeps the others.
        let a2 = prof("a:2811", 5e8);
        store.put(&a2).unwrap();
        assert_eq!(store.get("a:2811").unwrap(), Some(a2));
        assert_eq!(store.all().unwrap().len(), 2);
        // The model comes back with the measured rate as its reference; no fit, no model.
        let m = store.get("a:2811").unwrap().unwrap().model().unwrap();
        assert_eq!((m.c1, m.c2, m.ref_rate_bps), (73.7, 0.93, 5e8));
        assert!(b.model().is_none());
        // A fresh store on the same directory reads the same file; no temporary file is left.
        let again = ProfileStore::in_dir(&dir.path().join("nested"));
        assert_eq!(again.all().unwrap().len(), 2);
        let names: Vec<_> = std::fs::read_dir(dir.path().join("nested"))
            .unwrap()
            .collect();
        assert_eq!(names.len(), 1);
        // A corrupt file is an error, not silently replaced.
        std::fs::write(store.path(), "{not json").unwrap();
        assert!(store.get("a:2811").is_err());
    }

    fn learned(hp: &str, lossy: bool, at: u64) -> LearnedPath {
        LearnedPath {
            host_port: hp.into(),
            lossy,
            loss: if lossy { 0.01 } else { 0.0 },
            loss_from: "blast".into(),
            rate_bps: 4.3e8,
            min_rtt_ms: 100.2,
            timestamp: at,
            blast_blocked: false,
        }
    }

    #[test]
    fn path_memory_merges_beside_the_calibration() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::in_dir(dir.path());
        let cal = prof("a:2811", 9e8);
        store.put(&cal).unwrap();
        store.learn(&learned("a:2811", true, 1000)).unwrap();
        // The calibrated fit is kept as it was; the memory sits beside it.
        assert_eq!(store.get("a:2811").unwrap(), Some(cal.clone()));
        assert!(store.learned("a:2811").unwrap().unwrap().lossy);
        // A later reading replaces the earlier one; a rate or RTT it lacks keeps the earlier one's.
        let clean = LearnedPath {
            rate_bps: 0.0,
            min_rtt_ms: 0.0,
            ..learned("a:2811", false, 2000)
        };
        store.learn(&clean).unwrap();
        let got = store.learned("a:2811").unwrap().unwrap();
        assert!(!got.lossy);
        assert_eq!(
            (got.rate_bps, got.min_rtt_ms, got.timestamp),
            (4.3e8, 100.2, 2000)
        );
        // Calibrating again keeps the memory.
        store.put(&prof("a:2811", 5e8)).unwrap();
        assert_eq!(store.learned("a:2811").unwrap(), Some(got));
        assert_eq!(store.learned("b:2811").unwrap(), None);
        // The file is private and replaced whole (no temporary left).
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A file without a memory section (an older drsftp's) reads, and an older reader's format still parses.
        std::fs::write(store.path(), r#"{"version":1,"paths":{}}"#).unwrap();
        assert_eq!(store.learned("a:2811").unwrap(), None);
    }

    #[test]
    fn learned_readings_expire() {
        let l = learned("a:2811", true, 10_000);
        assert!(l.fresh(10_000));
        assert!(l.fresh(10_000 + LEARNED_TTL.as_secs() - 1));
        assert!(!l.fresh(10_000 + LEARNED_TTL.as_secs()));
        assert!(
            !l.fresh(10_000 - 3600),
            "from the future: the clock changed"
        );
        assert_eq!(l.age(10_090), 90);
        // A block is trusted for less time: a copy that believes it never tries blast to see it lifted.
        let b = LearnedPath {
            blast_blocked: true,
            ..l
        };
        assert!(b.fresh(10_000 + BLOCKED_TTL.as_secs() - 1));
        assert!(!b.fresh(10_000 + BLOCKED_TTL.as_secs()));
        assert!(BLOCKED_TTL < LEARNED_TTL);
    }

    #[test]
    fn a_block_is_written_only_when_true_and_read_from_older_files_as_false() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::in_dir(dir.path());
        store.learn(&learned("a:2811", true, 1000)).unwrap();
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains("blast_blocked"), "{text}");
        let blocked = LearnedPath {
            blast_blocked: true,
            ..learned("a:2811", false, 2000)
        };
        store.learn(&blocked).unwrap();
        assert_eq!(store.learned("a:2811").unwrap(), Some(blocked));
    }

    #[test]
    fn keys_bracket_ipv6() {
        assert_eq!(path_key("example.org", 2811), "example.org:2811");
        assert_eq!(path_key("::1", 2811), "[::1]:2811");
    }
}
