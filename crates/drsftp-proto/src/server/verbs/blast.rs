//! The UDP blast data channel (docs/blast.md): FEAT lists ` BLAST`; `OPTS BLAST MTU=<n>;Rate=<bps>;[AckEvery=<n>;]`
//! sets the path MTU (packet size) and sending-rate cap; `BPAS <client UDP address>` has the driver bind a UDP
//! socket and answers `229 Entering Blast Passive Mode (h1,h2,h3,h4,p1,p2) Id=<16 hex digits>`. The channel then
//! carries the next RETR/ERET (server sends) or STOR/APPE/ESTO (server receives, ALLO required) and is used up by
//! it; the `150` reply states `Size=<bytes>;Packet=<payload bytes>;`. A client that never sends these commands
//! (any Globus tool) never sees any of it.
//!
//! `BPAS` takes the client's address as `h1,h2,h3,h4,p1,p2` or `|1|a.b.c.d|port|` / `|2|v6|port|` (RFC 2428) and
//! applies the same bounce protection as PORT. `Rate=0` means no cap from the client; the reply gives the rate in
//! force (the smaller non-zero of the client's and the server's `blast_max_rate`) and the MTU in force (clamped to
//! `blast_max_mtu`). `Start=<bps>` asks the sender to start at that rate rather than 10 Mbit/s (the path
//! profile's rate, for short transfers); it is clamped to the rate in force and to [`MAX_START_RATE`] and
//! echoed when given. As with `OPTS RETR`, every option ends in `;`, keys are case-insensitive, unknown keys are
//! ignored.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::Verb;
use crate::hostport::host_port_any;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::{BlastEndpoint, DataEndpoint};

/// The blast channel as a feature: ` BLAST BPRT` in FEAT unless disabled (BPRT: the two-step third-party
/// set-up in `bprt.rs`), and `OPTS BLAST`.
pub(super) const BLAST: Verb = Verb::feature("BLAST")
    .feat_from(160, |ctx| {
        if ctx.cfg.blast {
            vec!["BLAST BPRT".into()]
        } else {
            Vec::new()
        }
    })
    .opts(opts_blast);

/// Smallest MTU accepted (the IPv4 minimum reassembly size).
pub(crate) const MIN_MTU: u32 = 576;
/// IPv4 + UDP + blast data header bytes per packet (`drsftp_blast::wire`: 28 + 36).
pub(crate) const PACKET_OVERHEAD: u32 = 64;
/// Most packets in one blast transfer (`drsftp_blast::wire::MAX_PACKETS`).
pub(crate) const MAX_PACKETS: u64 = 1 << 30;

/// Bytes an AEAD-sealed datagram (`PROT P`) has beyond a cleartext one: counter and tag
/// (`drsftp_blast::wire::AEAD_OVERHEAD`); its payload is that much smaller so it still fits the MTU.
pub(crate) const AEAD_OVERHEAD: usize = 24;

/// Payload bytes per data packet for a path MTU (`drsftp_blast::payload_size_for_mtu`).
pub(crate) fn payload_for_mtu(mtu: u32) -> usize {
    mtu.saturating_sub(PACKET_OVERHEAD).max(1) as usize
}

/// Options of `OPTS BLAST` (each `None` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BlastOpts {
    pub(crate) mtu: Option<u32>,
    pub(crate) rate: Option<u64>,
    pub(crate) ack_every: Option<u32>,
    pub(crate) start: Option<u64>,
}

/// Parses `MTU=1500;Rate=500000000;AckEvery=64;Start=180000000;`. `None` if malformed, out of range, or without trailing `;`.
pub(crate) fn parse_opts_blast(opts: &str) -> Option<BlastOpts> {
    let body = opts.trim().strip_suffix(';')?;
    let mut o = BlastOpts::default();
    for opt in body.split(';') {
        let (key, value) = opt.split_once('=')?;
        let key = key.trim();
        let n = super::parse_u64(value.trim());
        if key.eq_ignore_ascii_case("MTU") {
            let m = n.filter(|m| (MIN_MTU as u64..=65_535).contains(m))?;
            o.mtu = Some(m as u32);
        } else if key.eq_ignore_ascii_case("Rate") {
            o.rate = Some(n?);
        } else if key.eq_ignore_ascii_case("AckEvery") {
            let a = n.filter(|a| (1..=1_000_000).contains(a))?;
            o.ack_every = Some(a as u32);
        } else if key.eq_ignore_ascii_case("Start") {
            o.start = Some(n?);
        } else if value.trim().is_empty() {
            return None;
        }
    }
    Some(o)
}

/// The smaller non-zero of two rate caps (0 = none).
pub(super) fn min_rate(a: u64, b: u64) -> u64 {
    match (a, b) {
        (0, x) | (x, 0) => x,
        (x, y) => x.min(y),
    }
}

/// Most a client may ask the server's sender to start at when the server has no `--blast-max-rate`.
pub(crate) const MAX_START_RATE: u64 = 1_000_000_000;

/// The start rate in force: the client's hint (`Start=`, 0 = none) clamped to the rate in force (`rate`, 0 =
/// none) and to [`MAX_START_RATE`]. A hostile client gains nothing it could not get by acknowledging quickly:
/// before the first ack the sender's unacked budget (512 KiB) bounds what leaves for any address, and once
/// acks arrive the rate controller backs off on spread-out packets, a standing queue or a loss spike.
pub(crate) fn start_rate(hint: u64, rate: u64) -> u64 {
    match hint {
        0 => 0,
        h => min_rate(h, rate).min(MAX_START_RATE),
    }
}

pub(super) fn check_enabled(ctx: &Ctx) -> CmdResult {
    ctx.require_login()?;
    if !ctx.cfg.blast {
        return Err(CommandError::Reply(
            502,
            "BLAST is disabled on this server.".into(),
        ));
    }
    Ok(())
}

/// `OPTS BLAST <options>` (the `OPTS` hook of the registry row).
fn opts_blast(ctx: &mut Ctx, rest: &str) -> CmdResult {
    check_enabled(ctx)?;
    let o =
        parse_opts_blast(rest).ok_or_else(|| CommandError::Reply(500, "OPTS failed.".into()))?;
    if let Some(m) = o.mtu {
        ctx.data.blast.mtu = m.min(ctx.cfg.blast_max_mtu.max(MIN_MTU));
    }
    if let Some(r) = o.rate {
        ctx.data.blast.rate = r;
    }
    if o.ack_every.is_some() {
        ctx.data.blast.ack_every = o.ack_every;
    }
    // A start rate describes the path of the transfer at hand: an OPTS BLAST without one goes back to the default.
    ctx.data.blast.start = o.start.unwrap_or(0);
    let b = ctx.data.blast;
    let ack = b
        .ack_every
        .map_or(String::new(), |a| format!("AckEvery={a};"));
    let rate = min_rate(b.rate, ctx.cfg.blast_max_rate);
    let start = match start_rate(b.start, rate) {
        0 => String::new(),
        s => format!("Start={s};"),
    };
    ctx.reply(
        200,
        &format!("OPTS BLAST MTU={};Rate={rate};{ack}{start}", b.mtu),
    );
    Ok(())
}

/// `BPAS <client UDP address>`.
pub(super) fn bpas(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    check_enabled(ctx)?;
    let arg = super::required(arg, "BPAS")?.trim();
    let peer = if arg.starts_with(|c: char| c.is_ascii_digit()) {
        super::port::parse_host_port(arg)
            .ok_or_else(|| CommandError::syntax("Syntax error in BPAS argument."))?
    } else {
        super::port::parse_eprt(arg)?
    };
    super::port::check_target(ctx, peer)?;
    open_channel(ctx, move |_| peer)
}

/// Has the driver bind the UDP socket and answers `229 ... Id=<hex>`; the endpoint's peer is `peer(local)` (the
/// client's address for `BPAS <address>`, a placeholder until `BPRT` for the third-party `BPAS`, `bprt.rs`).
pub(super) fn open_channel(
    ctx: &mut Ctx,
    peer: impl FnOnce(SocketAddr) -> SocketAddr + Send + 'static,
) -> CmdResult {
    let bind = ctx.data_ip();
    let shown: IpAddr = ctx.advertised_ip();
    let b = ctx.data.blast;
    let max_rate = min_rate(b.rate, ctx.cfg.blast_max_rate);
    let start = start_rate(b.start, max_rate);
    ctx.blast_bind(bind, move |ctx, _now, r| match r {
        Ok((local, id)) if local.port() != 0 => {
            ctx.data.endpoint = Some(DataEndpoint::Blast(BlastEndpoint {
                local,
                peer: peer(local),
                transfer_id: id,
                payload_size: payload_for_mtu(b.mtu),
                max_rate,
                ack_every: b.ack_every,
                start_rate: start,
                adopted_id: false,
            }));
            let addr = host_port_any(SocketAddr::new(shown, local.port()));
            ctx.reply(
                229,
                &format!("Entering Blast Passive Mode ({addr}) Id={id:016x}"),
            );
        }
        Ok(_) => ctx.reply(425, "Cannot open blast data channel: no UDP port"),
        Err(e) => ctx.reply(425, &format!("Cannot open blast data channel: {e}")),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testutil::{file, H};
    use crate::server::types::{
        Action, FsRequest, FsResult, Payload, ServerConfig, TransferResult,
    };

    fn bound(h: &mut H, id: u64) -> String {
        let acts = h.actions();
        assert_eq!(
            acts,
            vec![Action::BlastBind {
                ip: "127.0.0.1".parse().unwrap()
            }]
        );
        h.s.handle_blast_bound(h.now, Ok(("127.0.0.1:40001".parse().unwrap(), id)));
        h.out()
    }

    #[test]
    fn opts_blast_parsing() {
        let o = parse_opts_blast("MTU=1500;Rate=500000000;").unwrap();
        assert_eq!(
            (o.mtu, o.rate, o.ack_every),
            (Some(1500), Some(500_000_000), None)
        );
        let o = parse_opts_blast("mtu=9000;ackevery=3000;Future=x;").unwrap();
        assert_eq!((o.mtu, o.ack_every), (Some(9000), Some(3000)));
        for bad in [
            "MTU=1500",
            "MTU=100;",
            "MTU=70000;",
            "Rate=-1;",
            "Rate=1e9;",
            "AckEvery=0;",
            "MTU;",
            "Foo=;",
            "",
        ] {
            assert_eq!(parse_opts_blast(bad), None, "{bad}");
        }
        assert_eq!(payload_for_mtu(1500), 1436);
        assert_eq!(min_rate(0, 5), 5);
        assert_eq!(min_rate(7, 5), 5);
        assert_eq!(min_rate(7, 0), 7);
    }

    #[test]
    fn prot_p_blast_has_room_for_the_aead_and_no_adopted_ids() {
        let mut h = H::with_cfg(ServerConfig {
            tls: crate::server::TlsPolicy::Offered,
            ..ServerConfig::default()
        });
        h.cmd("AUTH TLS");
        h.actions();
        h.cmd("PBSZ 0");
        assert!(h.cmd("PROT P").starts_with("200 "));
        h.login();
        h.cmd("TYPE I");
        h.send("BPAS 127,0,0,1,156,64");
        bound(&mut h, 0x77);
        h.send("RETR /f");
        let r = h.fs(
            FsRequest::Stat("/f".into()),
            FsResult::Stat(file("f", 5000)),
        );
        // The 150 announces the AEAD payload (MTU 1500 − 64 − 24), which both ends feed the key exporter.
        assert_eq!(
            r,
            "150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1412;).\r\n"
        );
        let plan = h.transfer();
        assert!(plan.protect);
        assert!(matches!(
            plan.endpoint,
            DataEndpoint::Blast(BlastEndpoint {
                payload_size: 1412,
                ..
            })
        ));
        h.done_ok(plan.id);
        // A client-chosen id (BPRT, third-party) would let one TLS session derive the same keys twice.
        h.send("BPAS");
        bound(&mut h, 0x78);
        assert!(h
            .cmd("BPRT 127,0,0,1,156,70 Id=0000000000000077")
            .starts_with("200 "));
        h.send("RETR /f");
        let r = h.fs(
            FsRequest::Stat("/f".into()),
            FsResult::Stat(file("f", 5000)),
        );
        assert_eq!(r, "536 Third-party blast with PROT P is not supported.\r\n");
    }

    #[test]
    fn negotiation_dialogue_download_and_upload() {
        let mut h = H::with_cfg(ServerConfig {
            blast_max_rate: 800_000_000,
            blast_max_mtu: 9000,
            anonymous_write: true,
            ..ServerConfig::default()
        });
        assert!(h.cmd("FEAT").contains("\r\n BLAST BPRT\r\n"));
        assert!(h.cmd("BPAS 127,0,0,1,156,64").starts_with("530 "));
        h.login();
        assert_eq!(
            h.cmd("OPTS BLAST MTU=65000;Rate=0;"),
            "200 OPTS BLAST MTU=9000;Rate=800000000;\r\n"
        );
        assert_eq!(
            h.cmd("OPTS BLAST MTU=1500;Rate=500000000;AckEvery=50;"),
            "200 OPTS BLAST MTU=1500;Rate=500000000;AckEvery=50;\r\n"
        );
        assert_eq!(h.cmd("OPTS BLAST MTU=1500"), "500 OPTS failed.\r\n");
        h.cmd("TYPE I");
        h.send("BPAS 127,0,0,1,156,64");
        assert_eq!(
            bound(&mut h, 0x5f1d_3c0a_9b2e_4d71),
            "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=5f1d3c0a9b2e4d71\r\n"
        );
        h.send("RETR /f");
        let r = h.fs(
            FsRequest::Stat("/f".into()),
            FsResult::Stat(file("f", 104_857_600)),
        );
        assert_eq!(
            r,
            "150 Opening BLAST data channel for RETR /f (Size=104857600;Packet=1436;).\r\n"
        );
        let plan = h.transfer();
        let DataEndpoint::Blast(ep) = plan.endpoint else {
            panic!("{plan:?}")
        };
        assert_eq!(
            ep,
            BlastEndpoint {
                local: "127.0.0.1:40001".parse().unwrap(),
                peer: "127.0.0.1:40000".parse().unwrap(),
                transfer_id: 0x5f1d_3c0a_9b2e_4d71,
                payload_size: 1436,
                max_rate: 500_000_000,
                ack_every: Some(50),
                start_rate: 0,
                adopted_id: false,
            }
        );
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        // The channel is used up: the next transfer needs a new BPAS.
        assert!(h.cmd("RETR /f").starts_with("425 "));
        // Upload: ALLO is required.
        h.send("BPAS |1|127.0.0.1|40000|");
        bound(&mut h, 7);
        assert!(h.cmd("STOR /up").starts_with("503 "), "no ALLO");
    }

    /// `Start=` (issue 22): the sender's first rate, clamped to the rate in force, then to [`MAX_START_RATE`]. A
    /// client asking 1 Tbit/s gets the server's cap (the unacked budget still bounds the first round trip,
    /// `silent_port_gets_at_most_the_unacked_budget*` in drsftp-io).
    #[test]
    fn start_rate_is_clamped_to_the_servers_caps() {
        assert_eq!(start_rate(0, 0), 0, "no hint: the sender's default");
        assert_eq!(start_rate(180_000_000, 0), 180_000_000);
        assert_eq!(start_rate(1_000_000_000_000, 0), MAX_START_RATE);
        assert_eq!(start_rate(900_000_000, 300_000_000), 300_000_000);
        let mut h = H::with_cfg(ServerConfig {
            blast_max_rate: 200_000_000,
            ..ServerConfig::default()
        });
        h.login();
        assert_eq!(
            h.cmd("OPTS BLAST MTU=1500;Rate=0;Start=1000000000000;"),
            "200 OPTS BLAST MTU=1500;Rate=200000000;Start=200000000;\r\n"
        );
        h.cmd("TYPE I");
        h.send("BPAS 127,0,0,1,156,64");
        bound(&mut h, 5);
        h.send("RETR /f");
        h.fs(
            FsRequest::Stat("/f".into()),
            FsResult::Stat(file("f", 5000)),
        );
        let DataEndpoint::Blast(ep) = h.transfer().endpoint else {
            panic!()
        };
        assert_eq!((ep.max_rate, ep.start_rate), (200_000_000, 200_000_000));
        assert_eq!(parse_opts_blast("Start=x;"), None);
    }

    #[test]
    fn upload_with_allo_and_refusals() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        h.send("BPAS 127,0,0,1,156,64");
        bound(&mut h, 9);
        assert_eq!(h.cmd("ALLO 5000"), "200 ALLO command successful.\r\n");
        h.send("STOR /up");
        assert_eq!(
            h.out(),
            "150 Opening BLAST data channel for STOR /up (Size=5000;Packet=1436;).\r\n"
        );
        let plan = h.transfer();
        assert!(matches!(
            plan.payload,
            Payload::RecvFile {
                expected: Some(5000),
                ..
            }
        ));
        assert!(matches!(
            plan.endpoint,
            DataEndpoint::Blast(BlastEndpoint { transfer_id: 9, .. })
        ));
        h.s.handle_transfer_done(
            h.now,
            plan.id,
            TransferResult::Ok {
                bytes: 5000,
                streams: 1,
            },
        );
        assert_eq!(h.out(), "226 Transfer complete.\r\n");
        // Bounce protection, bad syntax, bind failure, TYPE A, listings.
        assert!(h.cmd("BPAS 10,0,0,1,156,64").starts_with("504 "));
        assert!(h.cmd("BPAS 127,0,0,1,0,21").starts_with("504 "));
        assert!(h.cmd("BPAS 127,0,0,1").starts_with("501 "));
        // A bare `BPAS` is the third-party form (bprt.rs).
        assert!(h.cmd("BPAS |3|x|1|").starts_with("522 "));
        h.send("BPAS 127,0,0,1,156,64");
        h.actions();
        h.s.handle_blast_bound(h.now, Err("no ports".into()));
        assert_eq!(h.out(), "425 Cannot open blast data channel: no ports\r\n");
        h.send("BPAS 127,0,0,1,156,64");
        bound(&mut h, 10);
        h.send("LIST /");
        assert!(
            h.fs(
                FsRequest::Stat("/".into()),
                FsResult::Stat(crate::server::testutil::dir("/")),
            )
            .starts_with("425 "),
            "listings need PASV/EPSV"
        );
        h.cmd("TYPE A");
        h.send("RETR /f");
        assert!(h
            .fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)))
            .starts_with("504 "));
        h.cmd("TYPE I");
        h.cmd("MODE E");
        // REST ranges on a blast channel resume a blast download: retr.rs tests.
    }

    #[test]
    fn disabled_server_does_not_offer_it() {
        let mut h = H::with_cfg(ServerConfig {
            blast: false,
            ..ServerConfig::default()
        });
        assert!(!h.cmd("FEAT").contains("BLAST"));
        h.login();
        assert!(h.cmd("OPTS BLAST MTU=1500;").starts_with("502 "));
        assert!(h.cmd("BPAS 127,0,0,1,156,64").starts_with("502 "));
    }
}
