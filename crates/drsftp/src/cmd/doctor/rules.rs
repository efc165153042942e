//! `drsftp doctor`'s decisions, without I/O: host facts (sysctls, congestion controls, MTUs, filesystem) and,
//! optionally, path facts (RTT, rate) in; findings out, each with what limits a transfer and the exact sysctl
//! line or `drsftp` option that lifts it. The binding limit is the smallest of the rates a single stream can
//! reach under each constraint.

use serde::Serialize;

/// What the host says (None: could not be read).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostFacts {
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    /// net.ipv4.tcp_rmem: min, default, max.
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    pub window_scaling: Option<bool>,
    pub sack: Option<bool>,
    pub timestamps: Option<bool>,
    pub congestion: Option<String>,
    pub available_congestion: Vec<String>,
    pub allowed_congestion: Vec<String>,
    /// Non-loopback interfaces and their MTUs.
    pub mtus: Vec<(String, u32)>,
    /// The checked path and its filesystem type.
    pub filesystem: Option<(String, String)>,
    /// net.core.rmem_max/wmem_max can be written here: false inside a network namespace other than the
    /// host's first one, where they are global and read-only (a `sysctl -w` there would fail).
    pub core_mem_settable: bool,
    /// The interface that routes to the server, when a URL was given.
    pub route: Option<RouteFacts>,
}

/// The interface towards the server: its MTU and offloads (None: the driver did not say).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RouteFacts {
    pub local_addr: String,
    pub interface: String,
    pub mtu: Option<u32>,
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    pub gro: Option<bool>,
}

/// What a path measured (or was said to be).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PathFacts {
    pub rtt_s: f64,
    /// Bottleneck rate, bits/s.
    pub rate_bps: f64,
    /// Where the rate came from: `flag` (--rate), `probe` (measured, not window-limited) or `assumed`
    /// (1 Gbit/s: the probe was held by a window, so it only bounds the rate from below).
    pub rate_source: &'static str,
    /// Loss probability, if known.
    pub loss: Option<f64>,
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Note,
    Warn,
    Limit,
}

/// One finding: what, why, and the fix.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub level: Level,
    pub topic: &'static str,
    pub message: String,
    /// Exact lines to run or options to use.
    pub fix: Vec<String>,
    /// The rate one stream can reach under this constraint, bits/s (for the binding-limit comparison).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_bps: Option<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub host: HostFacts,
    pub path: Option<PathFacts>,
    pub bdp_bytes: Option<u64>,
    pub findings: Vec<Finding>,
    /// The topic of the finding with the lowest cap below the path rate, if any.
    pub binding: Option<&'static str>,
}

fn mb(b: f64) -> String {
    format!("{:.1} MiB", b / 1048576.0)
}

fn mbit(bps: f64) -> String {
    format!("{:.0} Mbit/s", bps / 1e6)
}

/// Buffer size worth allowing for `bdp` bytes: DRS keeps 2×BDP, rounded up to a MiB.
fn wanted_buffer(bdp: u64) -> u64 {
    (2 * bdp).div_ceil(1 << 20).max(1) << 20
}

/// The findings for `host`, and for `path` when given.
pub fn diagnose(host: &HostFacts, path: Option<PathFacts>) -> Report {
    let mut f = vec![];
    let bdp = path.map(|p| (p.rate_bps / 8.0 * p.rtt_s) as u64);
    // Without a path: enough for 1 Gbit/s at 100 ms (2×BDP = 25 MB), rounded to 32 MiB.
    let want = bdp.map_or(32 << 20, wanted_buffer);
    let cap = |window: u64| path.map(|p| window as f64 * 8.0 / p.rtt_s);
    if host.window_scaling == Some(false) {
        f.push(Finding {
            level: Level::Limit,
            topic: "window-scaling",
            message: "TCP window scaling is off: every connection's window stops at 64 KiB".into(),
            fix: vec!["sysctl -w net.ipv4.tcp_window_scaling=1".into()],
            cap_bps: cap(65535),
        });
    }
    // Receive side: DRS and fixed buffers are capped by rmem_max (without CAP_NET_ADMIN) and autotuning by
    // tcp_rmem[2]; the larger of the two is what a drsftp receiver can reach.
    for (dir, max, tcp, key, tcpkey) in [
        (
            "receive",
            host.rmem_max,
            host.tcp_rmem,
            "net.core.rmem_max",
            "net.ipv4.tcp_rmem",
        ),
        (
            "send",
            host.wmem_max,
            host.tcp_wmem,
            "net.core.wmem_max",
            "net.ipv4.tcp_wmem",
        ),
    ] {
        let (Some(max), Some(tcp)) = (max, tcp) else {
            continue;
        };
        let best = max.max(tcp[2]);
        let enough = best >= want;
        let stream_cap = cap(best / 2)
            .filter(|_| dir == "receive")
            .or(cap(best).filter(|_| dir == "send"));
        f.push(Finding {
            level: if enough {
                Level::Ok
            } else if path.is_some() {
                Level::Limit
            } else {
                Level::Warn
            },
            topic: if dir == "receive" {
                "receive-buffer"
            } else {
                "send-buffer"
            },
            message: format!(
                "{dir} buffers: {key} = {}, {tcpkey} max = {}{}",
                mb(max as f64),
                mb(tcp[2] as f64),
                match bdp {
                    Some(b) => format!(
                        "; the path's BDP is {} (DRS keeps up to 2×BDP = {})",
                        mb(b as f64),
                        mb(2.0 * b as f64)
                    ),
                    None => String::new(),
                }
            ),
            fix: if enough {
                vec![]
            } else {
                let core = if max >= want {
                    None
                } else if host.core_mem_settable {
                    Some(format!("sysctl -w {key}={want}"))
                } else {
                    Some(format!(
                        "on the machine itself (global, read-only in this network namespace): sysctl -w {key}={want}"
                    ))
                };
                core.into_iter().chain([
                    format!("sysctl -w {tcpkey}=\"{} {} {want}\"", tcp[0], tcp[1]),
                    match bdp {
                        Some(b) => format!(
                            "or without root: drsftp copy -p {} (parallel streams share the BDP)",
                            (2 * b).div_ceil(best.max(1)).clamp(2, 64)
                        ),
                        None => "or without root: drsftp copy -p auto".into(),
                    },
                ]).collect()
            },
            cap_bps: stream_cap,
        });
    }
    if host.sack == Some(false) {
        f.push(Finding {
            level: Level::Warn,
            topic: "sack",
            message: "SACK is off: each loss costs a whole window of retransmissions on long paths"
                .into(),
            fix: vec!["sysctl -w net.ipv4.tcp_sack=1".into()],
            cap_bps: None,
        });
    }
    if host.timestamps == Some(false) {
        f.push(Finding {
            level: Level::Warn,
            topic: "timestamps",
            message: "TCP timestamps are off: RTT samples (and DRS's) are coarser, PAWS is off"
                .into(),
            fix: vec!["sysctl -w net.ipv4.tcp_timestamps=1".into()],
            cap_bps: None,
        });
    }
    let has = |v: &[String], n: &str| v.iter().any(|x| x == n);
    let lossy = path.and_then(|p| p.loss).is_some_and(|l| l > 0.0);
    let bbr = if has(&host.allowed_congestion, "bbr") {
        Finding {
            level: Level::Ok,
            topic: "congestion",
            message: format!(
                "congestion control {} (bbr allowed: `drsftp serve --congestion bbr` / `drsftp copy --congestion bbr` on lossy long paths)",
                host.congestion.as_deref().unwrap_or("?")
            ),
            fix: vec![],
            cap_bps: None,
        }
    } else if has(&host.available_congestion, "bbr") {
        Finding {
            level: if lossy { Level::Warn } else { Level::Note },
            topic: "congestion",
            message: "bbr is loaded but not allowed for unprivileged sockets".into(),
            fix: vec![format!(
                "sysctl -w net.ipv4.tcp_allowed_congestion_control=\"{} bbr\"",
                host.allowed_congestion.join(" ")
            )],
            cap_bps: None,
        }
    } else {
        Finding {
            level: if lossy { Level::Warn } else { Level::Note },
            topic: "congestion",
            message: format!(
                "congestion control {}; bbr is not loaded (it keeps rate under random loss where cubic backs off)",
                host.congestion.as_deref().unwrap_or("?")
            ),
            fix: vec!["modprobe tcp_bbr".into()],
            cap_bps: None,
        }
    };
    f.push(bbr);
    for (iface, mtu) in &host.mtus {
        if *mtu < 1500 {
            f.push(Finding {
                level: Level::Warn,
                topic: "mtu",
                message: format!("{iface} has MTU {mtu}: blast packets must fit it"),
                fix: vec![format!("drsftp copy --transport udp --mtu {mtu}")],
                cap_bps: None,
            });
        }
    }
    if let Some(r) = &host.route {
        let off: Vec<&str> = [("tso", r.tso), ("gso", r.gso), ("gro", r.gro)]
            .into_iter()
            .filter(|(_, v)| *v == Some(false))
            .map(|(n, _)| n)
            .collect();
        let state = |v: Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        f.push(Finding {
            level: if off.is_empty() { Level::Ok } else { Level::Warn },
            topic: "offloads",
            message: format!(
                "{} (towards the server, from {}): MTU {}, TSO {}, GSO {}, GRO {}{}",
                r.interface,
                r.local_addr,
                r.mtu.map_or("?".into(), |m| m.to_string()),
                state(r.tso),
                state(r.gso),
                state(r.gro),
                if off.is_empty() {
                    ""
                } else {
                    "; without them every 1500-byte packet costs a trip through the stack (CPU-bound above a few Gbit/s)"
                }
            ),
            fix: if off.is_empty() {
                vec![]
            } else {
                vec![format!(
                    "ethtool -K {} {}",
                    r.interface,
                    off.iter().map(|o| format!("{o} on")).collect::<Vec<_>>().join(" ")
                )]
            },
            cap_bps: None,
        });
    }
    if let Some((p, fs)) = &host.filesystem {
        let (level, why) = match fs.as_str() {
            "nfs" | "nfs4" | "cifs" | "smb3" | "fuse.sshfs" => (
                Level::Warn,
                "a network filesystem: it may be slower than the WAN path",
            ),
            "tmpfs" | "ramfs" => (Level::Note, "memory: fast, but not kept across reboots"),
            "overlay" => (
                Level::Note,
                "an overlay (container) filesystem: large files land in the container's layer",
            ),
            _ => (Level::Ok, "a local filesystem"),
        };
        f.push(Finding {
            level,
            topic: "filesystem",
            message: format!("{p} is on {fs}, {why}"),
            fix: vec![],
            cap_bps: None,
        });
    }
    // The binding limit: the lowest single-stream cap below the path's rate.
    let binding = path.and_then(|p| {
        f.iter()
            .filter_map(|x| x.cap_bps.filter(|c| *c < p.rate_bps).map(|c| (c, x.topic)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, t)| t)
    });
    if let (Some(p), Some(t)) = (path, binding) {
        let c = f
            .iter()
            .find(|x| x.topic == t)
            .and_then(|x| x.cap_bps)
            .unwrap_or(0.0);
        f.push(Finding {
            level: Level::Limit,
            topic: "binding-limit",
            message: format!(
                "one stream reaches about {} of the path's {} here: {t} binds first",
                mbit(c),
                mbit(p.rate_bps)
            ),
            fix: vec![],
            cap_bps: None,
        });
    }
    Report {
        host: host.clone(),
        path,
        bdp_bytes: bdp,
        findings: f,
        binding,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path given on the command line.
    fn path(rtt_s: f64, rate_bps: f64, loss: Option<f64>) -> PathFacts {
        PathFacts {
            rtt_s,
            rate_bps,
            rate_source: "flag",
            loss,
        }
    }

    fn good() -> HostFacts {
        HostFacts {
            rmem_max: Some(256 << 20),
            wmem_max: Some(256 << 20),
            tcp_rmem: Some([4096, 131072, 256 << 20]),
            tcp_wmem: Some([4096, 16384, 256 << 20]),
            window_scaling: Some(true),
            sack: Some(true),
            timestamps: Some(true),
            congestion: Some("cubic".into()),
            available_congestion: vec!["reno".into(), "cubic".into(), "bbr".into()],
            allowed_congestion: vec!["reno".into(), "cubic".into(), "bbr".into()],
            mtus: vec![("eth0".into(), 1500)],
            filesystem: Some(("/data".into(), "ext4".into())),
            core_mem_settable: true,
            route: None,
        }
    }

    #[test]
    fn a_tuned_host_has_no_limit() {
        // A short path needs little: 4 MiB buffers are plenty for 10 Gbit/s at 1 ms.
        let small = HostFacts {
            rmem_max: Some(4 << 20),
            wmem_max: Some(4 << 20),
            tcp_rmem: Some([4096, 131072, 4 << 20]),
            tcp_wmem: Some([4096, 16384, 4 << 20]),
            ..good()
        };
        let r = diagnose(&small, Some(path(0.001, 1e10, None)));
        assert!(
            r.findings.iter().all(|f| f.level < Level::Warn),
            "{:#?}",
            r.findings
        );
        let r = diagnose(&good(), Some(path(0.1, 1e9, None)));
        assert_eq!(r.bdp_bytes, Some(12_500_000));
        assert!(
            r.findings.iter().all(|f| f.level < Level::Warn),
            "{:#?}",
            r.findings
        );
        assert_eq!(r.binding, None);
    }

    #[test]
    fn small_buffers_bind_and_get_exact_sysctls() {
        // Debian defaults: rmem_max 208 KiB, tcp_rmem max 6 MiB; 1 Gbit/s × 100 ms needs 2×12.5 MB.
        let h = HostFacts {
            rmem_max: Some(212_992),
            tcp_rmem: Some([4096, 131_072, 6_291_456]),
            ..good()
        };
        let r = diagnose(&h, Some(path(0.1, 1e9, None)));
        let rb = r
            .findings
            .iter()
            .find(|f| f.topic == "receive-buffer")
            .unwrap();
        assert_eq!(rb.level, Level::Limit);
        assert_eq!(rb.fix[0], "sysctl -w net.core.rmem_max=25165824");
        assert_eq!(
            rb.fix[1],
            "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 25165824\""
        );
        assert!(rb.fix[2].contains("drsftp copy -p 4"), "{:?}", rb.fix);
        assert_eq!(r.binding, Some("receive-buffer"));
        // Window scaling off binds harder than any buffer.
        let h = HostFacts {
            window_scaling: Some(false),
            ..h
        };
        let r = diagnose(&h, Some(path(0.1, 1e9, None)));
        assert_eq!(r.binding, Some("window-scaling"));
        assert!(r.findings.iter().any(|f| f
            .fix
            .contains(&"sysctl -w net.ipv4.tcp_window_scaling=1".to_string())));
    }

    #[test]
    fn bbr_and_mtu_and_filesystem_advice() {
        let h = HostFacts {
            allowed_congestion: vec!["reno".into(), "cubic".into()],
            mtus: vec![("wg0".into(), 1420)],
            filesystem: Some(("/mnt".into(), "nfs4".into())),
            ..good()
        };
        let r = diagnose(&h, Some(path(0.05, 1e9, Some(0.001))));
        let cc = r.findings.iter().find(|f| f.topic == "congestion").unwrap();
        assert_eq!(cc.level, Level::Warn);
        assert_eq!(
            cc.fix,
            vec!["sysctl -w net.ipv4.tcp_allowed_congestion_control=\"reno cubic bbr\""]
        );
        assert!(r
            .findings
            .iter()
            .any(|f| f.topic == "mtu" && f.fix == vec!["drsftp copy --transport udp --mtu 1420"]));
        assert!(r
            .findings
            .iter()
            .any(|f| f.topic == "filesystem" && f.level == Level::Warn));
    }

    #[test]
    fn namespaced_host_gets_only_commands_that_apply_there() {
        // The lab of docs/bench/doctor.md: tcp_rmem/tcp_wmem max 256 KiB in the namespace, the global
        // rmem_max 4 MiB (read-only there), 1 Gbit/s x 50 ms.
        let h = HostFacts {
            rmem_max: Some(4 << 20),
            wmem_max: Some(4 << 20),
            tcp_rmem: Some([4096, 131_072, 262_144]),
            tcp_wmem: Some([4096, 131_072, 262_144]),
            core_mem_settable: false,
            route: Some(RouteFacts {
                local_addr: "198.18.0.2".into(),
                interface: "veth0".into(),
                mtu: Some(1500),
                tso: Some(true),
                gso: Some(false),
                gro: Some(false),
            }),
            ..good()
        };
        let r = diagnose(
            &h,
            Some(PathFacts {
                rate_source: "assumed",
                ..path(0.05, 1e9, None)
            }),
        );
        assert_eq!(r.binding, Some("receive-buffer"));
        let commands: Vec<&str> = r
            .findings
            .iter()
            .flat_map(|f| f.fix.iter())
            .map(String::as_str)
            .filter(|l| l.starts_with("sysctl -w"))
            .collect();
        assert_eq!(
            commands,
            [
                "sysctl -w net.ipv4.tcp_rmem=\"4096 131072 12582912\"",
                "sysctl -w net.ipv4.tcp_wmem=\"4096 131072 12582912\"",
            ]
        );
        let rb = r
            .findings
            .iter()
            .find(|f| f.topic == "receive-buffer")
            .unwrap();
        assert!(
            rb.fix[0].starts_with("on the machine itself"),
            "{:?}",
            rb.fix
        );
        let off = r.findings.iter().find(|f| f.topic == "offloads").unwrap();
        assert_eq!(off.level, Level::Warn);
        assert_eq!(off.fix, ["ethtool -K veth0 gso on gro on"]);
    }
}
