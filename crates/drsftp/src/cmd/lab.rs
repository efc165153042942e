//! `drsftp lab up|down|exec|status`: the WAN lab from the command line. `up` daemonises a `lab serve`
//! process that owns the lab (namespaces, TUN devices, forwarder); its PID, config and stats live in
//! /run/drsftp-lab/NAME/.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Subcommand;
use drsftp_lab::daemon::{pid_alive, terminate, TermSignals};
use drsftp_lab::{
    check_prerequisites, lab_namespaces, load_profile, remove_namespaces, Lab, LabConfig, Topology,
};
use drsftp_netem::{parse_queue, LossModel};
use drsftp_units::{parse_duration, parse_probability, parse_rate};

const STATE_DIR: &str = "/run/drsftp-lab";

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Example (4 hosts 198.18.0.1-4, 100 ms RTT, 100 Mbit/s, 0.1 % loss):
  drsftp lab up wan --rtt 100ms --rate 100mbit --loss 0.1% --hosts 4
  drsftp lab exec wan h2 -- iperf3 -s -1 -D
  drsftp lab exec wan h1 -- iperf3 -c 198.18.0.2 -t 10
  drsftp lab status
  drsftp lab down wan
Two sites of 2 hosts, each host capped at 200 Mbit/s, all sharing one 1 Gbit/s core with 50 ms RTT:
  drsftp lab up wan --hosts 4 --topology shared-core --access-rate 200mbit --core-rate 1gbit --rtt 50ms
Needs root and /dev/net/tun. Processes started with `lab exec` that are still running are ended by `lab down`."
)]
pub struct Args {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Subcommand, Debug)]
enum LabCmd {
    /// Bring up lab NAME: N namespaces drs-NAME-hK (198.18.0.K/24) joined by an emulated WAN; daemonises.
    Up(UpArgs),
    /// (internal) Run lab NAME in the foreground until SIGTERM/SIGINT; used by `up`.
    #[command(hide = true)]
    Serve(UpArgs),
    /// Tear down lab NAME: processes still running inside its hosts, forwarder, namespaces, TUN devices.
    Down {
        /// Lab name given to `lab up`.
        name: String,
    },
    /// Run a command inside host HOST of lab NAME (its network namespace); exits with the command's status.
    Exec {
        /// Lab name given to `lab up`.
        name: String,
        /// Host: 1, h1 or 198.18.0.1.
        host: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// List labs, their hosts and forwarder counters.
    Status,
}

#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Every option applies to each direction of every host pair (N hosts: N*(N-1) links); with
--topology shared-core to each direction of the core link instead (see --topology).
Units (the same for every drsftp command): durations ns us ms s m h (a plain number is ms); rates in bit/s with
a decimal prefix k m g t: 100mbit = 100Mbps = 100mb, and an upper-case B is bytes: 100MBps = 100MB/s = 800mbit;
sizes with binary suffixes K M G (64K = 64KB = 65536 bytes); probabilities 0.1% or 0.001.
Loss, reordering and duplication are decided per MTU packet, so such labs forward without GSO (ceiling ~1.8 Gbit/s).

Profile file (--profile FILE): one step per line, `#` comments, optional last line `repeat PERIOD`; each step
sets any of rtt=, rate=, loss= from its offset on, e.g.
  0s   rtt=119ms rate=28.5mbit loss=0%
  20s  rtt=475ms rate=26kbit
  40s  rate=12mbit loss=0.1%
  repeat 60s
Built-in: lanl-ny (seed 000 Los Alamos-New York: RTT 119-475 ms, 0.026-28.5 Mbit/s, 20 s steps, 10 min period).

Prints each host's address (198.18.0.K), namespace (drs-NAME-hK) and TCP settings, then returns; the lab runs in
a background `drsftp lab serve` process (state and log in /run/drsftp-lab/NAME/) until `drsftp lab down NAME`."
)]
pub struct UpArgs {
    /// Lab name, 1-12 chars of [a-z0-9].
    name: String,
    /// Round-trip time (each direction gets half).
    #[arg(long, default_value = "100ms")]
    rtt: String,
    /// Bottleneck rate per direction per host pair (e.g. 100mbit, 1gbit, 12.5MBps = 100mbit; 0 = unlimited).
    #[arg(long, default_value = "100mbit")]
    rate: String,
    /// Bernoulli loss per direction (e.g. 0.1%).
    #[arg(long)]
    loss: Option<String>,
    /// Gilbert-Elliott loss instead: "p_gb,p_bg,loss_good,loss_bad" (probabilities, % allowed).
    #[arg(long, conflicts_with = "loss")]
    ge: Option<String>,
    /// Uniform jitter (delay ± jitter, never reordering by itself).
    #[arg(long)]
    jitter: Option<String>,
    /// Reordering probability (held back by 1 ms).
    #[arg(long)]
    reorder: Option<String>,
    /// Duplication probability.
    #[arg(long)]
    duplicate: Option<String>,
    /// Drop-tail queue: 1bdp, 2xbdp, a size (64K, 12.5M; binary), unlimited.
    #[arg(long, default_value = "1bdp")]
    queue: String,
    /// Number of hosts.
    #[arg(long, default_value_t = 4)]
    hosts: usize,
    /// Time-varying RTT/rate/loss: a profile file (format below) or a built-in name (lanl-ny). Overrides
    /// --rtt/--rate/--loss from each step's offset on.
    #[arg(long)]
    profile: Option<String>,
    /// Seed of all link randomness (loss, jitter, reordering, duplication); same seed, same decisions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Default congestion control in every host (bbr, reno; others only if listed in the global
    /// net.ipv4.tcp_allowed_congestion_control — else choose per socket, e.g. iperf3 -C cubic). Default: bbr.
    #[arg(long)]
    cc: Option<String>,
    /// tcp_rmem "min default max" in every host.
    #[arg(long)]
    tcp_rmem: Option<String>,
    /// tcp_wmem "min default max" in every host.
    #[arg(long)]
    tcp_wmem: Option<String>,
    /// MTU of every host's tun0 (576-65000).
    #[arg(long, default_value_t = 1500)]
    mtu: u32,
    /// Disable vnet-hdr/TSO (one MTU packet per read; implied by --loss/--ge/--reorder/--duplicate).
    #[arg(long)]
    no_gso: bool,
    /// How hosts are joined. mesh: every host pair has its own link (--rate, --rtt, ... per pair).
    /// shared-core: hosts 1..=--site-a form site A, the rest site B; every host has its own access link each way
    /// (--access-rate, no delay) and all traffic between the sites crosses one core link per direction
    /// (--core-rate, --rtt, --loss, --queue, --profile), so the hosts really share that bottleneck.
    #[arg(long, default_value = "mesh", value_parser = ["mesh", "shared-core"])]
    topology: String,
    /// shared-core: each host's access link rate per direction (0 = unlimited).
    #[arg(long, value_name = "RATE")]
    access_rate: Option<String>,
    /// shared-core: the core link's rate per direction; default --rate.
    #[arg(long, value_name = "RATE")]
    core_rate: Option<String>,
    /// shared-core: hosts on site A (the first ones); default half of --hosts.
    #[arg(long, value_name = "N")]
    site_a: Option<usize>,
}

fn build_config(a: &UpArgs) -> anyhow::Result<LabConfig> {
    let rtt = parse_duration(&a.rtt)?;
    let shared = a.topology == "shared-core";
    if !shared && (a.access_rate.is_some() || a.core_rate.is_some() || a.site_a.is_some()) {
        bail!("--access-rate, --core-rate and --site-a need --topology shared-core");
    }
    let rate = parse_rate(a.core_rate.as_deref().unwrap_or(&a.rate))?;
    let mut cfg = LabConfig::new(&a.name, a.hosts, rtt, rate);
    if shared {
        let access = a
            .access_rate
            .as_deref()
            .context("--topology shared-core needs --access-rate (each host's cap)")?;
        cfg.topology = Topology::SharedCore {
            access_bps: parse_rate(access)?,
            site_a: a.site_a.unwrap_or(a.hosts / 2),
        };
    }
    cfg.link.queue = parse_queue(&a.queue)?;
    cfg.link.seed = a.seed;
    if let Some(l) = &a.loss {
        cfg.link.loss = LossModel::Bernoulli {
            p: parse_probability(l)?,
        };
    }
    if let Some(g) = &a.ge {
        let v: Vec<f64> = g
            .split(',')
            .map(parse_probability)
            .collect::<Result<_, _>>()?;
        let [p_gb, p_bg, loss_good, loss_bad] = v[..] else {
            bail!("--ge needs 4 comma-separated probabilities")
        };
        cfg.link.loss = LossModel::GilbertElliott {
            p_gb,
            p_bg,
            loss_good,
            loss_bad,
        };
    }
    if let Some(j) = &a.jitter {
        cfg.link.jitter = parse_duration(j)?;
    }
    if let Some(r) = &a.reorder {
        cfg.link.reorder = parse_probability(r)?;
    }
    if let Some(d) = &a.duplicate {
        cfg.link.duplicate = parse_probability(d)?;
    }
    if let Some(p) = &a.profile {
        cfg.profile = Some(load_profile(p)?);
    }
    cfg.mtu = a.mtu;
    cfg.gso = !a.no_gso;
    cfg.tcp.congestion = a.cc.clone();
    cfg.tcp.rmem = a.tcp_rmem.clone();
    cfg.tcp.wmem = a.tcp_wmem.clone();
    Ok(cfg)
}

fn state_dir(name: &str) -> PathBuf {
    PathBuf::from(STATE_DIR).join(name)
}

fn read_pid(name: &str) -> Option<i32> {
    std::fs::read_to_string(state_dir(name).join("pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn describe(lab: &Lab, a: &UpArgs) -> String {
    let cfg = lab.config();
    let loss = match (&a.loss, &a.ge) {
        (Some(l), _) => l.clone(),
        (_, Some(g)) => format!("ge:{g}"),
        _ => "0".into(),
    };
    let mut s = format!(
        "lab {}: {} hosts, rtt={} rate={} queue={} loss={} jitter={} reorder={} duplicate={} seed={} profile={} mtu={} gso={}\n",
        a.name,
        a.hosts,
        a.rtt,
        a.core_rate.as_deref().unwrap_or(&a.rate),
        a.queue,
        loss,
        a.jitter.as_deref().unwrap_or("0"),
        a.reorder.as_deref().unwrap_or("0"),
        a.duplicate.as_deref().unwrap_or("0"),
        a.seed,
        a.profile.as_deref().unwrap_or("-"),
        a.mtu,
        if cfg.effective_gso() {
            "on"
        } else if cfg.gso {
            "off (per-packet loss/reorder/duplicate)"
        } else {
            "off"
        }
    );
    if let Topology::SharedCore { site_a, .. } = cfg.topology {
        s += &format!(
            "  topology shared-core: site A h1-h{site_a}, site B h{}-h{}; access {} per host and direction; the core has the rate, rtt, loss and queue above\n",
            site_a + 1,
            a.hosts,
            a.access_rate.as_deref().unwrap_or("-"),
        );
    }
    if a.profile.is_some() {
        s += "  (the profile overrides rtt/rate/loss from its first step on)\n";
    }
    for h in lab.hosts() {
        s += &format!(
            "  h{} {} netns {}  TCP: {}\n",
            h.index,
            h.addr,
            h.netns,
            lab.tcp_report(h.index)
        );
    }
    s
}

fn up(a: UpArgs) -> anyhow::Result<()> {
    check_prerequisites()?;
    build_config(&a)?; // validate before daemonising
    let dir = state_dir(&a.name);
    if let Some(pid) = read_pid(&a.name) {
        if pid_alive(pid) {
            bail!("lab {} is already up (pid {pid})", a.name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let log = std::fs::File::create(dir.join("log"))?;
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let i = args
        .iter()
        .position(|x| x == "up")
        .context("cannot find `up` in argv")?;
    args[i] = "serve".into();
    // Ctrl-C/SIGTERM while the lab comes up: forwarded to `lab serve` (which inherits them blocked and tears
    // down once its lab is up), so an interrupted `up` leaves nothing behind.
    let signals = TermSignals::block()?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(std::env::current_exe()?)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()?
    };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        if dir.join("ready").exists() {
            print!(
                "{}",
                std::fs::read_to_string(dir.join("info")).unwrap_or_default()
            );
            println!("forwarder pid {} (state in {})", child.id(), dir.display());
            return Ok(());
        }
        if let Some(st) = child.try_wait()? {
            let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
            bail!("lab serve exited ({st}):\n{log}");
        }
        if let Some(sig) = signals.wait_timeout(Duration::from_millis(50))? {
            let _ = terminate(child.id() as i32);
            let st = child.wait()?;
            remove_namespaces(&a.name);
            let _ = std::fs::remove_dir_all(&dir);
            bail!(
                "interrupted ({sig}) while lab {} was coming up; torn down (lab serve {st})",
                a.name
            );
        }
    }
    bail!(
        "lab {} did not become ready in 30 s; see {}/log",
        a.name,
        dir.display()
    )
}

fn serve(a: UpArgs) -> anyhow::Result<()> {
    let set = TermSignals::block()?; // inherited by the forwarder thread; we wait for them below
    let cfg = build_config(&a)?;
    let dir = state_dir(&a.name);
    std::fs::create_dir_all(&dir)?;
    let lab = Lab::up(cfg)?;
    std::fs::write(dir.join("pid"), std::process::id().to_string())?;
    std::fs::write(dir.join("info"), describe(&lab, &a))?;
    std::fs::write(dir.join("ready"), "")?;
    let lab = std::sync::Arc::new(lab);
    let weak = std::sync::Arc::downgrade(&lab);
    let sdir = dir.clone();
    std::thread::spawn(move || loop {
        // Weak: the stats writer must not keep the lab alive at teardown.
        let Some((st, host_drops)) = weak.upgrade().map(|l| (l.stats(), l.tun_tx_dropped())) else {
            return;
        };
        let mut s = String::new();
        for (i, row) in st.links.iter().enumerate() {
            for (j, l) in row.iter().enumerate() {
                if i != j && l.sent_pkts > 0 {
                    s += &format!(
                        "h{}->h{}: sent {} pkts / {} B, delivered {} / {} B, dropped queue {} loss {}, duplicated {}, reordered {}, max backlog {} B\n",
                        i + 1,
                        j + 1,
                        l.sent_pkts,
                        l.sent_bytes,
                        l.delivered_pkts,
                        l.delivered_bytes,
                        l.dropped_queue_pkts,
                        l.dropped_loss_pkts,
                        l.duplicated_pkts,
                        l.reordered_pkts,
                        l.max_backlog_bytes
                    );
                }
            }
        }
        for (name, l) in &st.named {
            if l.sent_pkts > 0 {
                s += &format!(
                    "{name}: sent {} pkts / {} B, delivered {} / {} B, dropped queue {} loss {}, max backlog {} B\n",
                    l.sent_pkts,
                    l.sent_bytes,
                    l.delivered_pkts,
                    l.delivered_bytes,
                    l.dropped_queue_pkts,
                    l.dropped_loss_pkts,
                    l.max_backlog_bytes
                );
            }
        }
        s += &format!(
            "read {} (gso {}), unroutable {}, write errors {}\n",
            st.read_pkts, st.gso_pkts, st.unroutable_pkts, st.write_errors
        );
        if host_drops.iter().any(|&d| d > 0) {
            s += &format!(
                "WARNING forwarder overloaded: packets dropped in the hosts' tun0 before the emulated link: {}\n",
                host_drops
                    .iter()
                    .enumerate()
                    .map(|(i, d)| format!("h{} {d}", i + 1))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = std::fs::write(sdir.join("stats"), s);
        std::thread::sleep(Duration::from_secs(1));
    });
    let sig = set.wait()?;
    eprintln!("lab {}: {sig}, tearing down", a.name);
    let _ = std::fs::remove_file(dir.join("ready"));
    let mut lab = lab;
    for _ in 0..100 {
        match std::sync::Arc::try_unwrap(lab) {
            Ok(l) => {
                l.down()?;
                break;
            }
            Err(again) => {
                lab = again;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    remove_namespaces(&a.name);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn down(name: &str) -> anyhow::Result<()> {
    let mut stopped = false;
    if let Some(pid) = read_pid(name) {
        if pid_alive(pid) {
            terminate(pid)?;
            let t = Instant::now();
            while pid_alive(pid) && t.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(50));
            }
            if pid_alive(pid) {
                bail!("lab {name}: forwarder pid {pid} did not exit after SIGTERM");
            }
            stopped = true;
        }
    }
    let left = remove_namespaces(name);
    let had_state = state_dir(name).exists();
    let _ = std::fs::remove_dir_all(state_dir(name));
    if !stopped && had_state {
        println!("lab {name}: daemon had already exited; state removed");
    }
    if !stopped && !had_state && left.is_empty() {
        bail!("no lab named {name}");
    }
    println!(
        "lab {name} down{}",
        if left.is_empty() {
            String::new()
        } else {
            format!(" (removed leftover {})", left.join(" "))
        }
    );
    Ok(())
}

fn status() -> anyhow::Result<()> {
    let mut names: Vec<String> = std::fs::read_dir(STATE_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        println!("no labs under {STATE_DIR}");
    }
    for n in &names {
        let dir = state_dir(n);
        let pid = read_pid(n);
        let alive = pid.is_some_and(pid_alive);
        println!(
            "== {n}: pid {} {}",
            pid.map(|p| p.to_string()).unwrap_or("-".into()),
            if alive { "running" } else { "NOT running" }
        );
        print!(
            "{}",
            std::fs::read_to_string(dir.join("info")).unwrap_or_default()
        );
        print!(
            "{}",
            std::fs::read_to_string(dir.join("stats")).unwrap_or_default()
        );
    }
    let stray: Vec<String> = drsftp_sys::netns::list()
        .into_iter()
        .filter(|ns| {
            ns.starts_with("drs-") && !names.iter().any(|n| ns.starts_with(&format!("drs-{n}-h")))
        })
        .collect();
    if !stray.is_empty() {
        println!(
            "namespaces with prefix drs- not owned by a running `lab up`: {}",
            stray.join(" ")
        );
    }
    Ok(())
}

fn exec(name: &str, host: &str, cmd: &[String]) -> anyhow::Result<()> {
    let k: usize = host
        .trim_start_matches('h')
        .rsplit('.')
        .next()
        .unwrap_or("")
        .parse()
        .with_context(|| format!("bad host {host:?} (1, h1 or 198.18.0.1)"))?;
    let ns = drsftp_lab::netns_name(name, k);
    if !lab_namespaces(name).contains(&ns) {
        bail!("lab {name} has no host {k} (namespace {ns} missing)");
    }
    let st = Command::new("ip")
        .args(["netns", "exec", &ns])
        .args(cmd)
        .status()?;
    let _ = std::io::stdout().flush();
    std::process::exit(st.code().unwrap_or(1));
}

pub fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Serve(a) => serve(a),
        LabCmd::Down { name } => down(&name),
        LabCmd::Exec { name, host, cmd } => exec(&name, &host, &cmd),
        LabCmd::Status => status(),
    }
}
