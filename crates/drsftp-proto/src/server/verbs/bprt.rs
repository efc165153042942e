//! The two-step blast set-up for third-party (server-to-server) transfers (docs/blast.md "Negotiation"): `BPAS`
//! without an argument binds the UDP socket and answers `229 ... Id=<hex>` with the peer not yet known, and
//! `BPRT <peer UDP address> Id=<16 hex digits>` names the peer (the other server's `BPAS` address) and adopts its
//! transfer id, so two servers introduced by a client share one channel. `BPAS <address>` (two-party, one step)
//! is unchanged and still handled in `blast.rs`. FEAT advertises the pair as ` BLAST BPRT`.
//!
//! A BPRT address is as trusted as a PORT address: the same bounce protection applies (`port::check_target`:
//! port ≥ 1024, the control peer's host unless the login may do third-party transfers, and never loopback,
//! link-local, multicast or the server's own addresses unless `--third-party all`); acks and data then go only to that
//! address and datagrams from any other are dropped. A transfer on a channel whose peer is still unknown gets `425`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use super::blast::check_enabled;
use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::DataEndpoint;

pub(super) const BPAS: Verb = Verb::cmd("BPAS", bpas);
/// FEAT announces BPRT in the BLAST row's line (`blast.rs`).
pub(super) const BPRT: Verb = Verb::cmd("BPRT", bprt);

/// `BPAS` dispatch: no argument is the first step of a third-party set-up, an address the two-party form.
fn bpas(ctx: &mut Ctx, now: Instant, arg: &str) -> CmdResult {
    if arg.trim().is_empty() {
        bpas_open(ctx)
    } else {
        super::blast::bpas(ctx, now, arg)
    }
}

/// The "peer not yet known" placeholder: the unspecified address of the bound socket's family, port 0.
fn unknown_peer(local: SocketAddr) -> SocketAddr {
    match local {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// `BPAS` with no argument: bind, answer 229, peer unknown until `BPRT`.
fn bpas_open(ctx: &mut Ctx) -> CmdResult {
    check_enabled(ctx)?;
    super::blast::open_channel(ctx, unknown_peer)
}

/// Parses `<address> Id=<hex>`: the address as in BPAS (`h1,h2,h3,h4,p1,p2` or `|1|a.b.c.d|port|` /
/// `|2|v6|port|`), the id 1-16 hex digits.
fn parse_bprt(arg: &str) -> Result<(SocketAddr, u64), CommandError> {
    let bad = || CommandError::syntax("Syntax error in BPRT argument (BPRT <address> Id=<hex>).");
    let (addr, id) = arg.trim().split_once(char::is_whitespace).ok_or_else(bad)?;
    let id = id.trim();
    let hex = id
        .get(..3)
        .filter(|k| k.eq_ignore_ascii_case("Id="))
        .map(|_| &id[3..])
        .filter(|h| (1..=16).contains(&h.len()) && h.bytes().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(bad)?;
    let id = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
    let peer = if addr.starts_with(|c: char| c.is_ascii_digit()) {
        super::port::parse_host_port(addr).ok_or_else(bad)?
    } else if addr.starts_with('|') {
        super::port::parse_eprt(addr)?
    } else {
        return Err(bad());
    };
    Ok((peer, id))
}

/// `BPRT <peer UDP address> Id=<hex>`: the second step of a third-party set-up (see the module docs).
fn bprt(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    check_enabled(ctx)?;
    let (peer, id) = parse_bprt(super::required(arg, "BPRT")?)?;
    super::port::check_target(ctx, peer)?;
    let Some(DataEndpoint::Blast(ep)) = ctx.data.endpoint.as_mut() else {
        return Err(CommandError::Sequence("Use BPAS first.".into()));
    };
    if peer.is_ipv4() != ep.local.is_ipv4() {
        return Err(CommandError::Reply(
            522,
            "BPRT address family differs from the BPAS socket's.".into(),
        ));
    }
    ep.peer = peer;
    ep.transfer_id = id;
    ep.adopted_id = true;
    let text = format!("BPRT command successful (peer {peer}, Id={id:016x}).");
    ctx.reply(200, &text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testutil::{file, H};
    use crate::server::types::{Action, FsRequest, FsResult};

    fn bind(h: &mut H, id: u64) -> String {
        assert_eq!(
            h.actions(),
            vec![Action::BlastBind {
                ip: "127.0.0.1".parse().unwrap()
            }]
        );
        h.s.handle_blast_bound(h.now, Ok(("127.0.0.1:40001".parse().unwrap(), id)));
        h.out()
    }

    #[test]
    fn feat_lists_bprt_in_the_blast_line() {
        let mut h = H::new();
        assert!(h.cmd("FEAT").contains("\r\n BLAST BPRT\r\n"));
    }

    #[test]
    fn third_party_two_step_set_up() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        h.send("BPAS");
        assert_eq!(
            bind(&mut h, 0xab),
            "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=00000000000000ab\r\n"
        );
        // Peer still unknown: no transfer.
        h.cmd("ALLO 5000");
        h.send("STOR /up");
        assert!(h.out().starts_with("425 "), "transfer before BPRT");
        // The failed STOR did not use the channel up; name the peer and adopt its id.
        assert_eq!(
            h.cmd("BPRT 127,0,0,1,156,64 Id=5f1d3c0a9b2e4d71"),
            "200 BPRT command successful (peer 127.0.0.1:40000, Id=5f1d3c0a9b2e4d71).\r\n"
        );
        h.cmd("ALLO 5000");
        h.send("STOR /up");
        assert_eq!(
            h.out(),
            "150 Opening BLAST data channel for STOR /up (Size=5000;Packet=1436;).\r\n"
        );
        let plan = h.transfer();
        let DataEndpoint::Blast(ep) = plan.endpoint else {
            panic!("{plan:?}")
        };
        assert_eq!(ep.peer, "127.0.0.1:40000".parse().unwrap());
        assert_eq!(ep.transfer_id, 0x5f1d_3c0a_9b2e_4d71);
        assert_eq!(ep.local, "127.0.0.1:40001".parse().unwrap());
    }

    #[test]
    fn bprt_after_one_step_bpas_replaces_the_peer() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        h.send("BPAS 127,0,0,1,156,64");
        bind(&mut h, 7);
        assert!(h.cmd("BPRT |1|127.0.0.1|40002| id=FF").starts_with("200 "));
        h.send("RETR /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        let plan = h.transfer();
        let DataEndpoint::Blast(ep) = plan.endpoint else {
            panic!("{plan:?}")
        };
        assert_eq!((ep.peer.port(), ep.transfer_id), (40002, 0xff));
    }

    #[test]
    fn bprt_refusals() {
        let mut h = H::new();
        assert!(h.cmd("BPRT 127,0,0,1,156,64 Id=1").starts_with("530 "));
        h.login();
        // Without a prior BPAS.
        assert!(h.cmd("BPRT 127,0,0,1,156,64 Id=1").starts_with("503 "));
        h.send("BPAS");
        bind(&mut h, 1);
        for bad in [
            "BPRT",
            "BPRT 127,0,0,1,156,64",
            "BPRT 127,0,0,1,156 Id=1",
            "BPRT 127,0,0,1,156,64,1 Id=1",
            "BPRT 127,0,0,1,156,64 Id=",
            "BPRT 127,0,0,1,156,64 Id=xyz",
            "BPRT 127,0,0,1,156,64 Id=11112222333344445",
            "BPRT 127,0,0,1,156,64 Key=1",
            "BPRT localhost:40000 Id=1",
            "BPRT 300,0,0,1,156,64 Id=1",
        ] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
        // Bounce protection as for PORT.
        assert!(h.cmd("BPRT 10,0,0,1,156,64 Id=1").starts_with("504 "));
        assert!(h.cmd("BPRT 127,0,0,1,0,21 Id=1").starts_with("504 "));
        // A foreign loopback address (::1 is not the peer's 127.0.0.1), and link-local even where third-party
        // transfers are allowed.
        assert!(h.cmd("BPRT |2|::1|40000| Id=1").starts_with("504 "));
        assert!(h.cmd("BPRT 127,0,0,2,156,64 Id=1").starts_with("504 "));
        h.s.set_allow_foreign_data(true);
        let r = h.cmd("BPRT 169,254,169,254,156,64 Id=1");
        assert!(r.starts_with("504 ") && r.contains("link-local"), "{r}");
        assert!(h.cmd("BPRT |2|2001:db8::1|40000| Id=1").starts_with("522 "));
        // Still usable after the refusals.
        assert!(h.cmd("BPRT 127,0,0,1,156,64 Id=1").starts_with("200 "));
    }
}
