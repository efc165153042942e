//! `Lab`: an RAII guard over N network namespaces (`drs-NAME-hK`, host K = 198.18.0.K/24 on `tun0`) joined by the
//! in-process forwarder thread; tears everything down on Drop, and a watchdog process does so if we die (Ctrl-C,
//! panic=abort, SIGKILL).

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use drsftp_netem::{LinkConfig, LossModel, Profile, QueueLimit};
use drsftp_sys::netns;
use drsftp_sys::tun::{self, Tun, TUN_F_CSUM, TUN_F_TSO4, TUN_F_TSO6, TUN_F_TSO_ECN};

use crate::fabric::Topology;
use crate::forward::{self, ForwarderSpec, ForwarderStats};

/// Why a lab could not be brought up (or torn down).
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("the WAN lab needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) to create network namespaces; running as uid {0}")]
    NotRoot(u32),
    #[error("the WAN lab needs TUN devices: {0}")]
    NoTun(String),
    #[error("the WAN lab needs iproute2's `ip` command: {0}")]
    NoIp(String),
    #[error("invalid lab configuration: {0}")]
    Config(String),
    #[error("lab {0:?} already exists (namespaces drs-{0}-h*); run `drsftp lab down {0}`")]
    Exists(String),
    /// `cause` is part of the message (deliberately not an error `source`, so `{:#}` chains do not print it twice).
    #[error("{what}: {cause}")]
    Io { what: String, cause: std::io::Error },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |cause| LabError::Io { what, cause }
}

/// Per-host TCP settings, applied inside each namespace (these sysctls are per network namespace).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TcpSettings {
    /// `net.ipv4.tcp_congestion_control` (`cubic`, `bbr`, `reno`); `None` = namespace default (bbr here).
    pub congestion: Option<String>,
    /// `net.ipv4.tcp_rmem` as "min default max".
    pub rmem: Option<String>,
    /// `net.ipv4.tcp_wmem` as "min default max".
    pub wmem: Option<String>,
}

/// The TCP settings in force in one host, read back after applying, plus the global limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpReport {
    pub congestion: String,
    pub rmem: String,
    pub wmem: String,
    /// Global (not settable per namespace): net.core.rmem_max / wmem_max.
    pub rmem_max: String,
    pub wmem_max: String,
}

impl std::fmt::Display for TcpReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cc={} tcp_rmem=\"{}\" tcp_wmem=\"{}\" (global rmem_max={} wmem_max={})",
            self.congestion, self.rmem, self.wmem, self.rmem_max, self.wmem_max
        )
    }
}

/// Everything that defines a lab.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// Lab name: 1-12 chars of [a-z0-9]; namespaces are `drs-NAME-hK`.
    pub name: String,
    /// Number of hosts (2..=250).
    pub hosts: usize,
    /// Each direction's link; `delay` is one-way (RTT/2). The seed is mixed per (src, dst) link.
    pub link: LinkConfig,
    /// Optional time-varying profile (RTT/rate/loss) applied to every link from lab start.
    pub profile: Option<Profile>,
    /// Interface MTU (default 1500).
    pub mtu: u32,
    /// Use IFF_VNET_HDR + TSO offload (GSO super-packets forwarded whole) where the link model allows it. Default
    /// true. Ignored (per-packet forwarding) when [`per_packet_model`](LabConfig::per_packet_model) is true: loss,
    /// reordering and duplication must act on each MTU packet, not on a super-packet of up to 44 segments.
    pub gso: bool,
    pub tcp: TcpSettings,
    /// How the hosts are joined: every pair its own `link` (the default), or per-host access links and a shared
    /// core (`link` is then the core's).
    pub topology: Topology,
}

impl LabConfig {
    /// A lab of `hosts` hosts with the given RTT and rate, 1×BDP queue, no loss.
    pub fn new(name: &str, hosts: usize, rtt: Duration, rate_bps: u64) -> LabConfig {
        LabConfig {
            name: name.to_string(),
            hosts,
            link: LinkConfig::new(rtt / 2, rate_bps).with_queue(QueueLimit::Bdp(1.0)),
            profile: None,
            mtu: 1500,
            gso: true,
            tcp: TcpSettings::default(),
            topology: Topology::Mesh,
        }
    }

    /// True if the link has per-packet randomness (loss, also from a profile step; reordering; duplication). Such a
    /// lab forwards MTU-sized packets (no GSO): deciding loss once per GSO super-packet would drop bursts of ~10-44
    /// segments at once, which keeps the byte loss rate but makes loss *events* 10-44× rarer — TCP then runs far
    /// faster than over a real link with that loss rate (measured: 63 vs 11 Mbit/s at 0.1 %, 100 ms, 100 Mbit/s).
    pub fn per_packet_model(&self) -> bool {
        let l = &self.link;
        let lossy = match l.loss {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0,
            LossModel::GilbertElliott { .. } => true,
        };
        lossy
            || l.reorder > 0.0
            || l.duplicate > 0.0
            || self
                .profile
                .as_ref()
                .is_some_and(|p| p.steps.iter().any(|s| s.loss.is_some_and(|x| x > 0.0)))
    }

    /// Whether the lab forwards GSO super-packets: `gso` unless the link model needs per-packet forwarding.
    pub fn effective_gso(&self) -> bool {
        self.gso && !self.per_packet_model()
    }
}

/// One emulated host.
#[derive(Debug, Clone)]
pub struct HostInfo {
    /// 1-based host number.
    pub index: usize,
    /// Namespace name (`drs-NAME-hK`).
    pub netns: String,
    pub addr: Ipv4Addr,
}

/// The lab's network: 198.18.0.0/24, host K at 198.18.0.K.
pub const LAB_NET: [u8; 3] = [198, 18, 0];

/// `txqueuelen` of each host's `tun0`, which is also the size of the TUN driver's ring of packets waiting for the
/// forwarder. When the forwarder falls behind (a TCP slow-start burst at twice the link rate through a
/// per-packet lab), a full ring drops packets *outside* the emulated link; with 1000 that cost a 1 Gbit/s · 100 ms
/// per-packet lab 6199 such drops and a third of its rate. 10000 absorbs the bursts so that drops happen in the
/// emulated drop-tail queue; while the forwarder keeps up the ring is empty and adds no delay.
/// [`Lab::tun_tx_dropped`] reports any drops that still happen there.
pub const TUN_TXQUEUELEN: u32 = 10_000;

/// Namespace name of host `k` of lab `name`.
pub fn netns_name(name: &str, k: usize) -> String {
    format!("drs-{name}-h{k}")
}

/// Namespaces that belong to lab `name`.
pub fn lab_namespaces(name: &str) -> Vec<String> {
    let prefix = format!("drs-{name}-h");
    netns::list()
        .into_iter()
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|r| r.parse::<u32>().is_ok())
        })
        .collect()
}

/// A time-varying link profile ([`LabConfig::profile`]) by built-in name (`lanl-ny`) or from a profile file
/// (drsftp-netem text format); the one reader used by `drsftp lab up --profile` and the benchmark harnesses.
pub fn load_profile(spec: &str) -> Result<Profile, LabError> {
    if let Some(p) = Profile::builtin(spec) {
        return Ok(p);
    }
    let text = std::fs::read_to_string(spec).map_err(io_err(format!("reading profile {spec}")))?;
    Profile::parse(&text).map_err(|e| LabError::Config(format!("profile {spec}: {e}")))
}

/// Check the prerequisites (root, /dev/net/tun, `ip`); `Err` says what is missing. Tests call this to skip.
pub fn check_prerequisites() -> Result<(), LabError> {
    let uid = nix::unistd::geteuid().as_raw();
    if uid != 0 {
        return Err(LabError::NotRoot(uid));
    }
    tun::check_tun_available().map_err(LabError::NoTun)?;
    Command::new("ip")
        .arg("-V")
        .output()
        .map_err(|e| LabError::NoIp(e.to_string()))?;
    Ok(())
}

/// For tests that need the lab: if a prerequisite is missing, print `SKIPPED <test>: <reason>` and return true
/// (the caller returns early). The line goes straight to the process's stderr, past libtest's output capture, so
/// `cargo test` shows it even for the (passing) skipped test.
pub fn skip_if_unavailable(test: &str) -> bool {
    match check_prerequisites() {
        Ok(()) => false,
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
            true
        }
    }
}

/// PIDs of the processes whose network namespace is `ns` (`ip netns pids`; zombies are not listed).
pub fn namespace_pids(ns: &str) -> Vec<i32> {
    Command::new("ip")
        .args(["netns", "pids", ns])
        .stderr(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .filter(|&p: &i32| p > 1 && p != std::process::id() as i32)
                .collect()
        })
        .unwrap_or_default()
}

/// End every process still running inside the namespaces `nss` (e.g. an `iperf3 -s -D` started with `lab exec`):
/// SIGTERM, up to 1 s grace, then SIGKILL. Deleting a namespace does not end its processes; they would keep it
/// (and any TUN device they hold) alive, unreachable. Returns the PIDs that were signalled.
pub fn kill_namespace_processes(nss: &[String]) -> Vec<i32> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pids: Vec<i32> = nss.iter().flat_map(|ns| namespace_pids(ns)).collect();
    for &p in &pids {
        let _ = kill(Pid::from_raw(p), Signal::SIGTERM);
    }
    let t = std::time::Instant::now();
    while t.elapsed() < Duration::from_secs(1) && pids.iter().any(|&p| crate::daemon::pid_alive(p))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &p in &pids {
        if crate::daemon::pid_alive(p) {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
    }
    pids
}

/// Delete all namespaces of lab `name` (used by `lab down` for leftovers), ending processes still inside them
/// first. Returns the names removed.
pub fn remove_namespaces(name: &str) -> Vec<String> {
    let v = lab_namespaces(name);
    kill_namespace_processes(&v);
    for ns in &v {
        let _ = netns::delete(ns);
    }
    v
}

/// A running lab; dropping it removes the namespaces, TUN devices and forwarder thread.
pub struct Lab {
    cfg: LabConfig,
    hosts: Vec<HostInfo>,
    tcp: Vec<TcpReport>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
    stats: Arc<Mutex<ForwarderStats>>,
    watchdog: Option<Child>,
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<String, LabError> {
    let out = cmd.output().map_err(io_err(what))?;
    if !out.status.success() {
        return Err(LabError::Io {
            what: what.to_string(),
            cause: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn read_global(key: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/")))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

impl Lab {
    /// Create the namespaces and TUN devices, apply TCP settings, start the forwarder.
    pub fn up(cfg: LabConfig) -> Result<Lab, LabError> {
        check_prerequisites()?;
        if cfg.name.is_empty()
            || cfg.name.len() > 12
            || !cfg
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        {
            return Err(LabError::Config(format!(
                "name {:?} must be 1-12 chars of [a-z0-9]",
                cfg.name
            )));
        }
        if !(2..=250).contains(&cfg.hosts) {
            return Err(LabError::Config(format!(
                "hosts must be 2..=250, got {}",
                cfg.hosts
            )));
        }
        if let Topology::SharedCore { site_a, .. } = cfg.topology {
            if !(1..cfg.hosts).contains(&site_a) {
                return Err(LabError::Config(format!(
                    "a shared core needs hosts on both sites: site A has {site_a} of {} hosts",
                    cfg.hosts
                )));
            }
        }
        if !(576..=65_000).contains(&cfg.mtu) {
            return Err(LabError::Config(format!(
                "mtu must be 576..=65000, got {}",
                cfg.mtu
            )));
        }
        if !lab_namespaces(&cfg.name).is_empty() {
            return Err(LabError::Exists(cfg.name.clone()));
        }
        let hosts: Vec<HostInfo> = (1..=cfg.hosts)
            .map(|k| HostInfo {
                index: k,
                netns: netns_name(&cfg.name, k),
                addr: Ipv4Addr::new(LAB_NET[0], LAB_NET[1], LAB_NET[2], k as u8),
            })
            .collect();
        // Watchdog: its own process group (so Ctrl-C does not reach it); when our end of its stdin closes
        // (normal drop or our death), it ends the processes left inside the namespaces (TERM, 1 s, KILL) and
        // deletes the namespaces (their TUN devices go with them).
        let script = format!(
            "read _x; NS=\"{}\"; pids() {{ for ns in $NS; do ip netns pids \"$ns\" 2>/dev/null; done; }}; \
             p=$(pids); if [ -n \"$p\" ]; then kill $p 2>/dev/null; i=0; \
             while [ $i -lt 10 ] && [ -n \"$(pids)\" ]; do sleep 0.1; i=$((i+1)); done; \
             p=$(pids); [ -n \"$p\" ] && kill -9 $p 2>/dev/null; fi; \
             for ns in $NS; do ip netns del \"$ns\" 2>/dev/null; done",
            hosts
                .iter()
                .map(|h| h.netns.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(io_err("spawn watchdog"))?;
        let mut lab = Lab {
            cfg: cfg.clone(),
            hosts: hosts.clone(),
            tcp: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            thread: None,
            stats: Arc::new(Mutex::new(ForwarderStats::default())),
            watchdog: Some(watchdog),
        };
        let mut tuns = Vec::new();
        for h in &hosts {
            netns::create(&h.netns).map_err(io_err(format!("create namespace {}", h.netns)))?;
            let gso = cfg.effective_gso();
            let t = netns::run_in(&h.netns, move || -> std::io::Result<Tun> {
                let t = Tun::open("tun0", gso)?;
                if gso {
                    t.set_offload(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN)?;
                }
                Ok(t)
            })
            .and_then(|r| r)
            .map_err(io_err(format!("open TUN in {}", h.netns)))?;
            tuns.push(t);
            let ns = h.netns.as_str();
            let addr = format!("{}/24", h.addr);
            let mtu = cfg.mtu.to_string();
            let txq = TUN_TXQUEUELEN.to_string();
            for args in [
                vec!["-n", ns, "link", "set", "lo", "up"],
                vec!["-n", ns, "addr", "add", &addr, "dev", "tun0"],
                vec![
                    "-n",
                    ns,
                    "link",
                    "set",
                    "tun0",
                    "mtu",
                    &mtu,
                    "txqueuelen",
                    &txq,
                    "up",
                ],
            ] {
                run_ok(
                    Command::new("ip").args(&args),
                    &format!("ip {}", args.join(" ")),
                )?;
            }
            let mut sets = vec![
                "net.ipv6.conf.all.disable_ipv6=1".to_string(),
                "net.ipv6.conf.default.disable_ipv6=1".to_string(),
                "net.ipv4.tcp_no_metrics_save=1".to_string(),
            ];
            if let Some(c) = &cfg.tcp.congestion {
                // A non-initial namespace may only default to an algorithm in the *global*
                // net.ipv4.tcp_allowed_congestion_control list (EPERM otherwise); say so instead of a bare sysctl error.
                let r = run_ok(
                    Command::new("ip")
                        .args(["netns", "exec", ns, "sysctl", "-q", "-w"])
                        .arg(format!("net.ipv4.tcp_congestion_control={c}")),
                    "set congestion control",
                );
                if r.is_err() {
                    return Err(LabError::Config(format!(
                        "cannot make {c:?} the default congestion control in {ns}: a namespace may only default to an algorithm \
                         in the global net.ipv4.tcp_allowed_congestion_control (now \"{}\"). Set it per socket instead \
                         (TCP_CONGESTION as root, e.g. iperf3 -C {c}), or allow it machine-wide with \
                         sysctl -w net.ipv4.tcp_allowed_congestion_control=\"... {c}\"",
                        read_global("net.ipv4.tcp_allowed_congestion_control")
                    )));
                }
            }
            if let Some(r) = &cfg.tcp.rmem {
                sets.push(format!("net.ipv4.tcp_rmem={r}"));
            }
            if let Some(w) = &cfg.tcp.wmem {
                sets.push(format!("net.ipv4.tcp_wmem={w}"));
            }
            run_ok(
                Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-q", "-w"])
                    .args(&sets),
                &format!("sysctl in {ns}"),
            )?;
            let got = run_ok(
                Command::new("ip").args([
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-n",
                    "net.ipv4.tcp_congestion_control",
                    "net.ipv4.tcp_rmem",
                    "net.ipv4.tcp_wmem",
                ]),
                "read back sysctls",
            )?;
            let l: Vec<String> = got
                .lines()
                .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            lab.tcp.push(TcpReport {
                congestion: l.first().cloned().unwrap_or_default(),
                rmem: l.get(1).cloned().unwrap_or_default(),
                wmem: l.get(2).cloned().unwrap_or_default(),
                rmem_max: read_global("net.core.rmem_max"),
                wmem_max: read_global("net.core.wmem_max"),
            });
        }
        let spec = ForwarderSpec {
            tuns,
            link: cfg.link.clone(),
            topology: cfg.topology,
            profile: cfg.profile.clone(),
            net: LAB_NET,
        };
        let (stop, stats) = (lab.stop.clone(), lab.stats.clone());
        lab.thread = Some(
            std::thread::Builder::new()
                .name(format!("drs-fwd-{}", cfg.name))
                .spawn(move || forward::run(spec, stop, stats))
                .map_err(io_err("spawn forwarder"))?,
        );
        Ok(lab)
    }

    pub fn config(&self) -> &LabConfig {
        &self.cfg
    }

    pub fn hosts(&self) -> &[HostInfo] {
        &self.hosts
    }

    /// Host `k` (1-based). Panics if out of range.
    pub fn host(&self, k: usize) -> &HostInfo {
        &self.hosts[k - 1]
    }

    /// Address of host `k` (1-based).
    pub fn addr(&self, k: usize) -> Ipv4Addr {
        self.host(k).addr
    }

    /// TCP settings read back from host `k` (1-based) plus global limits.
    pub fn tcp_report(&self, k: usize) -> &TcpReport {
        &self.tcp[k - 1]
    }

    /// A `Command` running `program` inside host `k`'s namespace (via `ip netns exec`). Add args and spawn it.
    pub fn exec(&self, k: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.host(k).netns, program]);
        c
    }

    /// Run `f` on a thread inside host `k`'s namespace (sockets created there stay there).
    pub fn run_in<F, R>(&self, k: usize, f: F) -> std::io::Result<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        netns::run_in(&self.host(k).netns, f)
    }

    /// Latest forwarder counters (refreshed every ~200 ms).
    pub fn stats(&self) -> ForwarderStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Per host (index k-1): packets the kernel dropped at `tun0` because the forwarder did not read them in time
    /// (TUN ring full). These losses are *not* part of the link model; non-zero means the forwarder was overloaded
    /// (see [`TUN_TXQUEUELEN`]). Reads `ip -s -j link` in each namespace.
    pub fn tun_tx_dropped(&self) -> Vec<u64> {
        self.hosts
            .iter()
            .map(|h| {
                Command::new("ip")
                    .args(["-s", "-j", "-n", &h.netns, "link", "show", "tun0"])
                    .output()
                    .ok()
                    .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                    .and_then(|v| v[0]["stats64"]["tx"]["dropped"].as_u64())
                    .unwrap_or(0)
            })
            .collect()
    }

    /// True while the forwarder thread is running.
    pub fn forwarder_alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Tear down now, reporting errors (Drop does the same but ignores them).
    pub fn down(mut self) -> Result<(), LabError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), LabError> {
        // Processes the user started inside the hosts first (while the forwarder still runs), then the forwarder.
        let nss: Vec<String> = self.hosts.iter().map(|h| h.netns.clone()).collect();
        kill_namespace_processes(&nss);
        self.stop.store(true, Ordering::Relaxed);
        let mut res = Ok(());
        if let Some(t) = self.thread.take() {
            if let Ok(Err(e)) = t.join() {
                res = Err(LabError::Io {
                    what: "forwarder".into(),
                    cause: e,
                });
            }
        }
        for h in &self.hosts {
            if let Err(e) = netns::delete(&h.netns) {
                res = Err(LabError::Io {
                    what: format!("delete {}", h.netns),
                    cause: e,
                });
            }
        }
        if let Some(mut w) = self.watchdog.take() {
            if let Some(mut stdin) = w.stdin.take() {
                let _ = stdin.write_all(b"\n");
            }
            let _ = w.wait();
        }
        res
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_load_by_builtin_name_or_from_a_file() {
        assert_eq!(
            load_profile("lanl-ny").unwrap(),
            Profile::builtin("lanl-ny").unwrap()
        );
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.txt");
        std::fs::write(&f, "0s rtt=20ms rate=10mbit\n5s rate=20mbit\nrepeat 10s\n").unwrap();
        let p = load_profile(f.to_str().unwrap()).unwrap();
        assert_eq!(p.repeat, Some(Duration::from_secs(10)));
        let missing = dir.path().join("none.txt");
        assert!(matches!(
            load_profile(missing.to_str().unwrap()),
            Err(LabError::Io { .. })
        ));
        std::fs::write(&f, "0s bogus=1\n").unwrap();
        assert!(matches!(
            load_profile(f.to_str().unwrap()),
            Err(LabError::Config(_))
        ));
    }

    #[test]
    fn per_packet_forwarding_when_the_model_is_random_per_packet() {
        let base = LabConfig::new("x", 2, Duration::from_millis(100), 100_000_000);
        assert!(base.effective_gso());
        let mut c = base.clone();
        c.link.loss = LossModel::Bernoulli { p: 0.0 };
        assert!(c.effective_gso(), "zero loss keeps GSO");
        c.link.loss = LossModel::Bernoulli { p: 0.001 };
        assert!(!c.effective_gso());
        let mut c = base.clone();
        c.link.loss = LossModel::GilbertElliott {
            p_gb: 0.01,
            p_bg: 0.5,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        assert!(!c.effective_gso());
        let mut c = base.clone();
        c.link.reorder = 0.01;
        assert!(!c.effective_gso());
        let mut c = base.clone();
        c.link.duplicate = 0.01;
        assert!(!c.effective_gso());
        let mut c = base.clone();
        c.link.jitter = Duration::from_millis(2);
        assert!(
            c.effective_gso(),
            "jitter alone is applied per super-packet"
        );
        let mut c = base.clone();
        c.profile = Some(Profile::parse("0s rtt=10ms\n5s loss=0.1%\n").unwrap());
        assert!(!c.effective_gso(), "a profile step with loss");
        c.profile = Some(Profile::builtin("lanl-ny").unwrap());
        assert!(c.effective_gso(), "lanl-ny has no loss");
        let mut c = base;
        c.gso = false;
        assert!(!c.effective_gso());
    }
}
