//! PORT, EPRT and SPOR: the server connects to the client (or to a third-party receiver). Arguments are parsed
//! strictly. Bounce protection (RFC 2577, [`check_target`]): the target must be the control peer's address unless
//! foreign data addresses are allowed (the configured [`ThirdParty`] policy for this login, or the driver's
//! override), a foreign one is never loopback, link-local, multicast, unspecified, broadcast or this server's
//! own unless the policy is `all`, and a port below 1024 never; otherwise `504`. Replies follow Globus: `200 PORT Command successful.`

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::DataEndpoint;
use crate::server::ThirdParty;

pub(super) const PORT: Verb = Verb::cmd("PORT", port);
pub(super) const EPRT: Verb = Verb::cmd("EPRT", eprt).feat(150, &["EPRT"]);
pub(super) const SPOR: Verb = Verb::cmd("SPOR", spor).feat(100, &["SPOR"]);

/// Most addresses accepted in one SPOR.
const MAX_STRIPES: usize = 16;

/// Parses `h1,h2,h3,h4,p1,p2` (each a decimal 0..=255).
pub(crate) fn parse_host_port(s: &str) -> Option<SocketAddr> {
    let mut n = [0u8; 6];
    let mut parts = s.trim().split(',');
    for slot in &mut n {
        let p = parts.next()?.trim();
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let ip = Ipv4Addr::new(n[0], n[1], n[2], n[3]);
    Some(SocketAddr::new(
        IpAddr::V4(ip),
        u16::from(n[4]) << 8 | u16::from(n[5]),
    ))
}

/// Parses `EPRT <d><proto><d><addr><d><port><d>` (RFC 2428). `Err(522)` for an unknown protocol number.
pub(crate) fn parse_eprt(s: &str) -> Result<SocketAddr, CommandError> {
    let bad = || CommandError::syntax("Syntax error in EPRT argument.");
    let s = s.trim();
    let d = s.chars().next().ok_or_else(bad)?;
    if !(d.is_ascii_graphic()) || d.is_ascii_alphanumeric() || d == '.' || d == ':' {
        return Err(bad());
    }
    let fields: Vec<&str> = s.split(d).collect();
    let [empty, proto, addr, port, end] = fields.as_slice() else {
        return Err(bad());
    };
    if !empty.is_empty() || !end.is_empty() {
        return Err(bad());
    }
    let port = super::parse_u64(port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(bad)?;
    let ip = match *proto {
        "1" => IpAddr::V4(addr.parse::<Ipv4Addr>().map_err(|_| bad())?),
        "2" => IpAddr::V6(addr.parse::<Ipv6Addr>().map_err(|_| bad())?),
        p if super::parse_u64(p).is_some() => {
            return Err(CommandError::Reply(
                522,
                "Network protocol not supported, use (1,2)".into(),
            ))
        }
        _ => return Err(bad()),
    };
    Ok(SocketAddr::new(ip, port))
}

/// Why a foreign data address is never a legitimate third-party receiver (unless `--third-party all`): the
/// classes that reach this host or its link rather than another server. `ip` is canonical (no v4-mapped form).
fn special_class(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("a loopback")
            } else if v4.is_link_local() {
                Some("a link-local")
            } else if v4.is_multicast() {
                Some("a multicast")
            } else if v4.is_broadcast() {
                Some("the broadcast")
            } else if o[0] == 0 {
                // 0.0.0.0/8 ("this network"): Linux connects 0.0.0.0 to the local host.
                Some("an unspecified")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let seg = v6.segments();
            if v6.is_loopback() {
                Some("a loopback")
            } else if v6.is_unspecified() {
                Some("an unspecified")
            } else if v6.is_multicast() {
                Some("a multicast")
            } else if seg[0] & 0xffc0 == 0xfe80 {
                Some("a link-local")
            } else if seg[..6] == [0; 6] {
                // Deprecated IPv4-compatible `::a.b.c.d`: judge the embedded IPv4 address.
                let [a, b, c, d] = v6.octets()[12..] else {
                    unreachable!()
                };
                special_class(IpAddr::V4(Ipv4Addr::new(a, b, c, d)))
            } else {
                None
            }
        }
    }
}

/// Bounce protection for one data address a client names (PORT, EPRT, SPOR, `BPAS <addr>`, BPRT): never a port
/// below 1024; the control peer's own address always (a client on loopback names 127.0.0.1); any other
/// ("foreign") address only when the login may do third-party transfers ([`Ctx::foreign_data_allowed`]), and
/// even then never loopback, link-local, multicast, unspecified or broadcast (v4-mapped forms included) nor
/// this server's own addresses, unless the policy is `all`: a third-party receiver is another host, and those
/// classes would let a client aim this server at services only it or its link can reach.
pub(crate) fn check_target(ctx: &Ctx, a: SocketAddr) -> CmdResult {
    if a.port() < 1024 {
        return Err(CommandError::Unsupported(
            "Refusing a data connection to a port below 1024.".into(),
        ));
    }
    let ip = a.ip().to_canonical();
    if ip == ctx.peer.ip().to_canonical() {
        return Ok(());
    }
    if !ctx.foreign_data_allowed() {
        return Err(CommandError::Unsupported(
            "Refusing a data connection to a host other than the client (no third-party transfers for this login)."
                .into(),
        ));
    }
    if ctx.cfg.third_party == ThirdParty::All {
        return Ok(());
    }
    if let Some(class) = special_class(ip) {
        return Err(CommandError::Unsupported(format!(
            "Refusing a third-party data connection to {ip}: {class} address (allowed only with --third-party all)."
        )));
    }
    if ctx.is_own_addr(ip) {
        return Err(CommandError::Unsupported(format!(
            "Refusing a third-party data connection to {ip}: this server's own address (allowed only with --third-party all)."
        )));
    }
    Ok(())
}

fn set_active(ctx: &mut Ctx, addrs: Vec<SocketAddr>, text: &str) -> CmdResult {
    if ctx.data.epsv_all {
        return Err(CommandError::Sequence(
            "EPSV ALL in effect: only EPSV may set up data connections.".into(),
        ));
    }
    for a in &addrs {
        check_target(ctx, *a)?;
    }
    ctx.data.endpoint = Some(DataEndpoint::Active(addrs));
    ctx.reply(200, text);
    Ok(())
}

/// `PORT h1,h2,h3,h4,p1,p2`.
fn port(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let a = parse_host_port(arg)
        .ok_or_else(|| CommandError::syntax("Syntax error in PORT argument."))?;
    set_active(ctx, vec![a], "PORT Command successful.")
}

/// `EPRT |1|a.b.c.d|port|` or `EPRT |2|v6addr|port|`.
fn eprt(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let a = parse_eprt(arg)?;
    set_active(ctx, vec![a], "EPRT Command successful.")
}

/// `SPOR hp1 hp2 ...`: one address per receiving stripe.
fn spor(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax error in SPOR arguments.");
    let addrs: Vec<SocketAddr> = arg
        .split_whitespace()
        .map(|w| parse_host_port(w).ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    if addrs.is_empty() || addrs.len() > MAX_STRIPES {
        return Err(bad());
    }
    set_active(ctx, addrs, "PORT Command successful.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testutil::H;

    #[test]
    fn host_port_parsing_is_strict() {
        assert_eq!(
            parse_host_port("127,0,0,1,235,41"),
            Some("127.0.0.1:60201".parse().unwrap())
        );
        for bad in [
            "127,0,0,1,235",
            "127,0,0,1,235,41,1",
            "127,0,0,256,1,1",
            "127,0,0,1,+1,1",
            "1,2,3,4,5,",
            "",
            "a,b,c,d,e,f",
            "0001,0,0,1,1,1",
        ] {
            assert_eq!(parse_host_port(bad), None, "{bad}");
        }
        assert_eq!(
            parse_eprt("|1|132.235.1.2|6275|"),
            Ok("132.235.1.2:6275".parse().unwrap())
        );
        assert_eq!(
            parse_eprt("!2!::1!5282!"),
            Ok("[::1]:5282".parse().unwrap())
        );
        assert_eq!(parse_eprt("|3|1.2.3.4|5|").unwrap_err().code(), 522);
        for bad in [
            "",
            "|1|1.2.3.4|5",
            "|1|1.2.3.4|0|",
            "|1|::1|5000|",
            "|2|1.2.3.4|5000|",
            "|1|1.2.3.4|70000|",
            "x1x1.2.3.4x5x",
            "|1|1.2.3.4|5||",
        ] {
            assert_eq!(parse_eprt(bad).map_err(|e| e.code()), Err(501), "{bad}");
        }
    }

    #[test]
    fn bad_port_arguments_and_bounce_protection() {
        let mut h = H::new(); // peer 127.0.0.1
        h.login();
        assert!(h.cmd("PORT 127,0,0,1").starts_with("501 "));
        assert!(h.cmd("PORT 127,0,0,1,0,21").starts_with("504 "), "port 21");
        assert!(
            h.cmd("PORT 10,0,0,1,235,41").starts_with("504 "),
            "foreign host"
        );
        assert!(h.cmd("EPRT |1|10.0.0.1|60000|").starts_with("504 "));
        assert!(h.cmd("SPOR 127,0,0,1,4,1 10,0,0,1,4,1").starts_with("504 "));
        assert!(h.cmd("SPOR").starts_with("501 "));
        // No endpoint was set by any of them; the session still works.
        assert!(h.cmd("RETR /f").starts_with("425 "));
        assert_eq!(
            h.cmd("PORT 127,0,0,1,235,41"),
            "200 PORT Command successful.\r\n"
        );
        // ::1 is loopback but not the peer's address (127.0.0.1): another service on the server's host.
        assert!(h.cmd("EPRT |2|::1|60000|").starts_with("504 "));
        h.s.set_allow_foreign_data(true);
        assert_eq!(
            h.cmd("SPOR 127,0,0,1,178,3 10,0,0,2,135,213"),
            "200 PORT Command successful.\r\n"
        );
        assert_eq!(
            h.retr_file("/f", 1).endpoint,
            DataEndpoint::Active(vec![
                "127.0.0.1:45571".parse().unwrap(),
                "10.0.0.2:34773".parse().unwrap()
            ])
        );
        let mut h = H::with_addrs("[::ffff:192.0.2.1]:2811", "[::ffff:192.0.2.7]:5000");
        h.login();
        assert_eq!(
            h.cmd("PORT 192,0,2,7,4,1"),
            "200 PORT Command successful.\r\n",
            "v4-mapped peer"
        );
    }

    /// `ServerConfig::third_party`: `none` refuses foreign data addresses for everyone, `auth` (the default)
    /// allows them for configured users only, `all` for anonymous sessions too. Same for EPRT, BPAS and BPRT.
    #[test]
    fn third_party_policy_decides_foreign_data_addresses_per_login() {
        use crate::server::{ServerConfig, ThirdParty};
        assert_eq!(ServerConfig::default().third_party, ThirdParty::Auth);
        let session = |policy: ThirdParty, anonymous: bool| {
            let mut h = H::with_users(
                ServerConfig {
                    third_party: policy,
                    ..ServerConfig::default()
                },
                &[("alice", "s3cret", false)],
            );
            if anonymous {
                h.login();
            } else {
                assert!(h.cmd("USER alice").starts_with("331 "));
                assert_eq!(h.cmd("PASS s3cret"), "230 User alice logged in.\r\n");
            }
            h
        };
        let foreign = "PORT 10,0,0,1,235,41";
        for (policy, anonymous, want) in [
            (ThirdParty::None, true, "504 "),
            (ThirdParty::None, false, "504 "),
            (ThirdParty::Auth, true, "504 "),
            (ThirdParty::Auth, false, "200 "),
            (ThirdParty::All, true, "200 "),
            (ThirdParty::All, false, "200 "),
        ] {
            let mut h = session(policy, anonymous);
            let r = h.cmd(foreign);
            assert!(r.starts_with(want), "{policy} anonymous={anonymous}: {r}");
            let r = h.cmd("EPRT |1|10.0.0.1|60000|");
            assert!(r.starts_with(want), "{policy} anonymous={anonymous}: {r}");
            // An allowed BPRT address is refused later, only because no BPAS channel exists (503).
            let r = h.cmd("BPRT 10,0,0,1,156,64 Id=0000000000000001");
            let bprt_want = if want == "504 " { "504 " } else { "503 " };
            assert!(
                r.starts_with(bprt_want),
                "{policy} anonymous={anonymous}: {r}"
            );
            // Below 1024 stays refused, and the control peer's own host is always fine.
            assert!(h.cmd("PORT 10,0,0,1,0,21").starts_with("504 "));
            assert!(h.cmd("PORT 127,0,0,1,235,41").starts_with("200 "));
        }
        // A new USER ends the real user's privileges until the next login; an anonymous re-login under `auth`
        // does not inherit them.
        let mut h = session(ThirdParty::Auth, false);
        h.login();
        assert!(h.cmd(foreign).starts_with("504 "));
        // The driver's override still allows it for anyone.
        let mut h = session(ThirdParty::None, true);
        h.s.set_allow_foreign_data(true);
        assert!(h.cmd(foreign).starts_with("200 "));
    }

    /// A session with configured user alice, control connection 198.18.0.2:2811 ← 198.18.0.1:50000 (the lab's
    /// addresses: not loopback, so every address class is foreign to the peer).
    fn lab_session(policy: crate::server::ThirdParty, anonymous: bool) -> H {
        let mut h = H::build(
            crate::server::ServerConfig {
                third_party: policy,
                ..crate::server::ServerConfig::default()
            },
            "198.18.0.2:2811",
            "198.18.0.1:50000",
        );
        h.users = vec![("alice".into(), "s3cret".into(), false)];
        if anonymous {
            h.login();
        } else {
            assert!(h.cmd("USER alice").starts_with("331 "));
            assert!(h.cmd("PASS s3cret").starts_with("230 "));
        }
        h.s.add_own_addrs(["10.9.9.9".parse().unwrap()]);
        h
    }

    /// Address class × policy × anonymous, for every verb that names a data address. `Peer`: always allowed;
    /// `Foreign`: allowed where the policy allows third-party for the login; `Special`: only with `all`.
    #[test]
    fn address_classes_by_policy_and_login() {
        use crate::server::ThirdParty;
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Class {
            Peer,
            Foreign,
            Special,
        }
        use Class::*;
        let targets: &[(&str, Class)] = &[
            ("198.18.0.1", Peer),
            ("::ffff:198.18.0.1", Peer),
            ("198.18.0.5", Foreign),
            ("203.0.113.7", Foreign),
            ("2001:db8::7", Foreign),
            ("::ffff:198.18.0.9", Foreign),
            ("127.0.0.1", Special),
            ("127.0.0.2", Special),
            ("::1", Special),
            ("::ffff:127.0.0.1", Special),
            ("::127.0.0.1", Special),
            ("169.254.1.1", Special),
            ("::ffff:169.254.169.254", Special),
            ("fe80::1", Special),
            ("febf::1", Special),
            ("224.0.0.1", Special),
            ("239.255.255.250", Special),
            ("ff02::1", Special),
            ("::ffff:224.0.0.251", Special),
            ("0.0.0.0", Special),
            ("0.1.2.3", Special),
            ("::", Special),
            ("255.255.255.255", Special),
            ("198.18.0.2", Special), // the control connection's local address
            ("::ffff:198.18.0.2", Special), // the same, v4-mapped
            ("10.9.9.9", Special),   // an own address the driver added
        ];
        for policy in [ThirdParty::None, ThirdParty::Auth, ThirdParty::All] {
            for anonymous in [true, false] {
                let mut h = lab_session(policy, anonymous);
                for &(ip, class) in targets {
                    let ok = match class {
                        Peer => true,
                        Foreign => policy.allows(anonymous),
                        Special => policy == ThirdParty::All,
                    };
                    let ipa: IpAddr = ip.parse().unwrap();
                    let what = format!("{ip} ({class:?}) under {policy}, anonymous={anonymous}");
                    let eprt = match ipa {
                        IpAddr::V4(v4) => format!("EPRT |1|{v4}|40000|"),
                        IpAddr::V6(v6) => format!("EPRT |2|{v6}|40000|"),
                    };
                    let r = h.cmd(&eprt);
                    assert!(
                        r.starts_with(if ok { "200 " } else { "504 " }),
                        "{what}: {r}"
                    );
                    if !ok {
                        assert!(r.contains("Refusing"), "{what}: {r}");
                    }
                    // Below 1024 never, whatever the class.
                    let low = eprt.replace("|40000|", "|1023|");
                    assert!(h.cmd(&low).starts_with("504 "), "{what}: port 1023");
                    let canon = ipa.to_canonical();
                    if let IpAddr::V4(v4) = canon {
                        let [a, b, c, d] = v4.octets();
                        let hp = format!("{a},{b},{c},{d},156,64");
                        let r = h.cmd(&format!("PORT {hp}"));
                        assert!(
                            r.starts_with(if ok { "200 " } else { "504 " }),
                            "PORT {what}: {r}"
                        );
                        // SPOR: one bad address refuses the whole list.
                        let r = h.cmd(&format!("SPOR 198,18,0,1,156,64 {hp}"));
                        assert!(
                            r.starts_with(if ok { "200 " } else { "504 " }),
                            "SPOR {what}: {r}"
                        );
                        // BPRT: allowed ones fail later only for want of a BPAS channel (503).
                        let r = h.cmd(&format!("BPRT {hp} Id=1"));
                        assert!(
                            r.starts_with(if ok { "503 " } else { "504 " }),
                            "BPRT {what}: {r}"
                        );
                        // BPAS <addr>: allowed ones ask the driver to bind (no reply yet).
                        h.cmd("TYPE I");
                        let r = h.cmd(&format!("BPAS {hp}"));
                        if ok {
                            assert_eq!(r, "", "BPAS {what}");
                            h.actions();
                            h.s.handle_blast_bound(h.now, Err("test: no socket".into()));
                            h.out();
                        } else {
                            assert!(r.starts_with("504 "), "BPAS {what}: {r}");
                        }
                    }
                }
            }
        }
    }

    /// On loopback the client's own address (127.0.0.1) stays allowed for everyone, but another loopback address
    /// is another service on the server's host: refused for a real user under the default policy.
    #[test]
    fn loopback_client_may_name_itself_but_no_other_loopback_service() {
        use crate::server::{ServerConfig, ThirdParty};
        for policy in [ThirdParty::Auth, ThirdParty::All] {
            let mut h = H::with_users(
                ServerConfig {
                    third_party: policy,
                    ..ServerConfig::default()
                },
                &[("alice", "s3cret", false)],
            );
            assert!(h.cmd("USER alice").starts_with("331 "));
            assert!(h.cmd("PASS s3cret").starts_with("230 "));
            let want = if policy == ThirdParty::All {
                "200 "
            } else {
                "504 "
            };
            assert!(h.cmd("PORT 127,0,0,1,156,64").starts_with("200 "));
            assert!(h.cmd("EPRT |1|127.0.0.1|40000|").starts_with("200 "));
            assert!(h.cmd("PORT 127,0,0,2,156,64").starts_with(want), "{policy}");
            assert!(h.cmd("EPRT |2|::1|40000|").starts_with(want), "{policy}");
            assert!(
                h.cmd("PORT 169,254,1,1,156,64").starts_with(want),
                "{policy}"
            );
            assert!(
                h.cmd("PORT 198,18,0,5,156,64").starts_with("200 "),
                "{policy}"
            );
        }
    }

    /// A RETR opens `parallelism` connections per SPOR address: the total stays within max_parallelism.
    #[test]
    fn spor_times_parallelism_is_capped_at_max_parallelism() {
        use crate::server::{ServerConfig, ThirdParty};
        let mut h = H::with_cfg(ServerConfig {
            third_party: ThirdParty::All,
            ..ServerConfig::default()
        });
        h.login();
        h.cmd("TYPE I");
        h.cmd("MODE E");
        assert!(h.cmd("OPTS RETR Parallelism=64;").starts_with("200 "));
        let spor: Vec<String> = (1..=16).map(|i| format!("198,18,0,{i},156,64")).collect();
        assert!(h
            .cmd(&format!("SPOR {}", spor.join(" ")))
            .starts_with("200 "));
        let plan = h.retr_file("/f", 1 << 20);
        let DataEndpoint::Active(addrs) = &plan.endpoint else {
            panic!("{plan:?}")
        };
        assert_eq!(addrs.len(), 16);
        assert_eq!(plan.parallelism, 4, "16 addresses × 4 = max_parallelism 64");
        assert!(addrs.len() as u32 * plan.parallelism <= ServerConfig::default().max_parallelism);
    }
}
