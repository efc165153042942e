//! RETR and ERET: the server sends (part of) a file. The driver stats the file first (it must be a regular
//! file; the size bounds the ranges), then the plan says which file ranges go out:
//!
//! * `RETR`: `0..size`, running to EOF (the driver reads to the current end).
//! * `ERET P <offset> <length>`: `offset..offset+length` (cut at EOF); MODE E block offsets are relative to
//!   `offset` (`wire_sub`, GFD.20).
//! * After `REST n`: from `n`; after `REST a-b,c-d` (MODE E): only the gaps between the held ranges. Both are
//!   relative to the ERET section. Stream mode can only resume from one offset (`554` otherwise).
//! * On a blast channel, `REST a-b,c-d` resumes a blast download (docs/blast.md "Resume"): the transfer still
//!   covers the whole section (so packet numbers match the client's checkpoint), and the held ranges go to the
//!   driver in [`TransferPlan::resume`](crate::server::TransferPlan::resume), whose sender skips those packets.
//!
//! A MODE E send on a passive endpoint is accepted (the driver sends over the connections the client opens),
//! although GFD.20 has the sender connect and Globus refuses it.

use std::ops::Range;
use std::time::Instant;

use drsftp_storage::EntryKind;

use super::Verb;
use crate::ranges::RangeSet;
use crate::server::ctx::{Ctx, Rest};
use crate::server::error::{CmdResult, CommandError};
use crate::server::transfer::Command;
use crate::server::types::{DataEndpoint, FsRequest, FsResult, Mode, Payload};

/// ` PARALLEL` in FEAT announces `OPTS RETR Parallelism=` (its hook is in `opts_retr.rs`).
pub(super) const RETR: Verb = Verb::cmd("RETR", retr)
    .feat(60, &["PARALLEL"])
    .opts(super::opts_retr::opts_retr);
pub(super) const ERET: Verb = Verb::cmd("ERET", eret).feat(70, &["ERET"]);

/// File ranges to send, whether the last runs to EOF, and the MODE E offset base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SendRanges {
    pub(crate) ranges: Vec<Range<u64>>,
    pub(crate) to_eof: bool,
    pub(crate) wire_sub: u64,
}

/// Works out what to send of a `size`-byte file for an optional ERET section and REST.
pub(crate) fn plan_send(
    size: u64,
    section: Option<(u64, u64)>,
    rest: Option<&Rest>,
    mode: Mode,
) -> Result<SendRanges, CommandError> {
    let (base, view_len) = match section {
        None => (0, size),
        Some((off, len)) => (off, len.min(size.saturating_sub(off))),
    };
    if let Some(Rest::Offset(n)) = rest {
        if *n > view_len {
            return Err(CommandError::Reply(
                554,
                "Restart offset beyond end of file.".into(),
            ));
        }
    }
    let held = rest.map(Rest::held).unwrap_or_default();
    let gaps = held.gaps(0..view_len);
    if mode == Mode::Stream {
        let prefix = match gaps.as_slice() {
            [] => true,
            [g] => g.end == view_len,
            _ => false,
        };
        if !prefix {
            return Err(CommandError::Reply(
                554,
                "Stream mode restarts from one offset; use MODE E for range restarts.".into(),
            ));
        }
    }
    let to_eof = section.is_none() && gaps.last().is_some_and(|g| g.end == view_len);
    Ok(SendRanges {
        ranges: gaps.iter().map(|g| g.start + base..g.end + base).collect(),
        to_eof,
        wire_sub: base,
    })
}

fn send_file(
    ctx: &mut Ctx,
    arg: &str,
    section: Option<(u64, u64)>,
    verb: &'static str,
) -> CmdResult {
    let mut rest = ctx.take_rest();
    let restart = rest.clone();
    let blast = matches!(ctx.endpoint()?, DataEndpoint::Blast(_));
    // A blast resume: the held ranges ride along with the plan instead of cutting the section into gaps.
    let resume = match rest.take_if(|r| blast && matches!(r, Rest::Ranges(_))) {
        Some(Rest::Ranges(held)) => held,
        _ => RangeSet::new(),
    };
    let path = ctx.resolve(arg);
    let mode = ctx.data.mode;
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, now, r| match r {
        FsResult::Stat(m) if m.kind == EntryKind::File => {
            match plan_send(m.size, section, rest.as_ref(), mode) {
                Ok(s) => {
                    let view = s.ranges.first().map_or(0, |r| r.end - r.start);
                    let resume: RangeSet = resume
                        .ranges()
                        .iter()
                        .map(|r| r.start.min(view)..r.end.min(view))
                        .collect();
                    let cmd = Command::new(verb, &path, restart);
                    let payload = Payload::SendFile {
                        path,
                        ranges: s.ranges,
                        to_eof: s.to_eof,
                        wire_sub: s.wire_sub,
                    };
                    if let Err(e) = ctx.start_transfer_with(now, payload, mode, cmd, resume) {
                        ctx.refuse(&e);
                    }
                }
                Err(e) => ctx.refuse(&e),
            }
        }
        FsResult::Stat(_) => ctx.reply(550, &format!("{path}: not a regular file.")),
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `RETR path`.
fn retr(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let arg = super::required(arg, "RETR")?;
    send_file(ctx, arg, None, "RETR")
}

/// `ERET P <offset> <length> <path>`.
fn eret(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax: ERET P <offset> <length> <path>.");
    let mut it = arg.splitn(4, ' ');
    super::only_mode(it.next(), "P", "ERET", bad)?;
    let offset = it.next().and_then(super::parse_u64).ok_or_else(bad)?;
    let length = it.next().and_then(super::parse_u64).ok_or_else(bad)?;
    let path = it.next().filter(|p| !p.is_empty()).ok_or_else(bad)?;
    offset.checked_add(length).ok_or_else(bad)?;
    send_file(ctx, path, Some((offset, length)), "ERET")
}

#[cfg(test)]
mod tests {
    // One-range plans are lists of ranges, not ranges.
    #![allow(clippy::single_range_in_vec_init)]
    use super::*;
    use crate::ranges::RangeSet;
    use crate::server::testutil::{dir, file, H};
    use crate::server::{Action, DataEndpoint, TransferResult};

    fn ranges(s: &str) -> Option<Rest> {
        Some(Rest::Ranges(RangeSet::parse(s).unwrap()))
    }

    /// BPAS answered with a UDP socket and transfer id `id`.
    fn blast_channel(h: &mut H, id: u64) {
        h.send("BPAS 127,0,0,1,156,64");
        assert!(matches!(&h.actions()[..], [Action::BlastBind { .. }]));
        h.s.handle_blast_bound(h.now, Ok(("127.0.0.1:40001".parse().unwrap(), id)));
        assert!(h.out().starts_with("229 "));
    }

    /// The transfer the session started, reported done.
    fn take(h: &mut H) -> crate::server::TransferPlan {
        let plan = h.transfer();
        h.s.handle_transfer_done(
            h.now,
            plan.id,
            TransferResult::Ok {
                bytes: 0,
                streams: 1,
            },
        );
        h.out();
        plan
    }

    #[test]
    fn blast_resume_keeps_the_section_and_passes_the_held_ranges() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        blast_channel(&mut h, 9);
        // Held ranges past the end are clipped; the transfer is the whole file (packet numbers stay put).
        h.cmd("REST 0-2,5-7,9-40");
        h.send("RETR /f");
        let out = h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        assert!(out.starts_with("150 ") && out.contains("Size=10;"), "{out}");
        let plan = take(&mut h);
        assert!(matches!(&plan.payload, Payload::SendFile { ranges, .. } if ranges == &[0..10]));
        assert_eq!(plan.resume.to_string(), "0-2,5-7,9-10");
        // Without REST nothing is held; an ERET section's ranges are relative to it.
        blast_channel(&mut h, 10);
        h.send("RETR /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        assert!(take(&mut h).resume.is_empty());
        blast_channel(&mut h, 11);
        h.cmd("REST 0-3");
        h.send("ERET P 4 5 /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        let plan = take(&mut h);
        assert!(matches!(&plan.payload, Payload::SendFile { ranges, .. } if ranges == &[4..9]));
        assert_eq!(plan.resume.to_string(), "0-3");
        // REST n on a blast channel is still a plain restart offset; TCP transfers never carry `resume`.
        blast_channel(&mut h, 12);
        h.cmd("REST 4");
        h.send("RETR /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        let plan = take(&mut h);
        assert!(matches!(&plan.payload, Payload::SendFile { ranges, .. } if ranges == &[4..10]));
        assert!(plan.resume.is_empty());
        h.pasv();
        h.cmd("MODE E");
        h.cmd("REST 0-2");
        h.send("RETR /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 10)));
        let plan = take(&mut h);
        assert!(matches!(&plan.payload, Payload::SendFile { ranges, .. } if ranges == &[2..10]));
        assert!(plan.resume.is_empty());
    }

    #[test]
    fn send_plans() {
        let p = plan_send(100, None, None, Mode::Stream).unwrap();
        assert_eq!(
            p,
            SendRanges {
                ranges: vec![0..100],
                to_eof: true,
                wire_sub: 0
            }
        );
        assert_eq!(
            plan_send(0, None, None, Mode::Stream).unwrap().ranges,
            vec![]
        );
        let p = plan_send(100, None, Some(&Rest::Offset(40)), Mode::Stream).unwrap();
        assert_eq!(p.ranges, vec![40..100]);
        assert_eq!(
            plan_send(100, None, Some(&Rest::Offset(100)), Mode::Stream)
                .unwrap()
                .ranges,
            vec![]
        );
        assert_eq!(
            plan_send(100, None, Some(&Rest::Offset(101)), Mode::Stream)
                .unwrap_err()
                .code(),
            554
        );
        // notes §11: REST 0-1048576,2097152-20000000 on a 20971520-byte file.
        let p = plan_send(
            20971520,
            None,
            ranges("0-1048576,2097152-20000000").as_ref(),
            Mode::Extended,
        )
        .unwrap();
        assert_eq!(p.ranges, vec![1048576..2097152, 20000000..20971520]);
        assert!(p.to_eof);
        let p = plan_send(100, None, ranges("0-10,50-100").as_ref(), Mode::Extended).unwrap();
        assert_eq!((p.ranges, p.to_eof), (vec![10..50], false));
        assert_eq!(
            plan_send(100, None, ranges("0-10,50-60").as_ref(), Mode::Stream)
                .unwrap_err()
                .code(),
            554
        );
        assert_eq!(
            plan_send(100, None, ranges("0-10").as_ref(), Mode::Stream)
                .unwrap()
                .ranges,
            vec![10..100]
        );
        // ERET: the section, cut at EOF; REST relative to it.
        let p = plan_send(209715200, Some((1000, 5000000)), None, Mode::Extended).unwrap();
        assert_eq!(
            p,
            SendRanges {
                ranges: vec![1000..5001000],
                to_eof: false,
                wire_sub: 1000
            }
        );
        let p = plan_send(
            3000,
            Some((1000, 5000000)),
            ranges("0-500").as_ref(),
            Mode::Extended,
        )
        .unwrap();
        assert_eq!(p.ranges, vec![1500..3000]);
        assert_eq!(
            plan_send(10, Some((50, 5)), None, Mode::Stream)
                .unwrap()
                .ranges,
            vec![]
        );
    }

    #[test]
    fn pasv_retr_stat_transfer_226() {
        let mut h = H::new();
        h.login();
        h.pasv();
        // curl order: EPSV/PASV before TYPE I; the TYPE in force at RETR counts.
        h.cmd("TYPE I");
        h.send("RETR /tmp/gftp/src/f200M");
        assert_eq!(h.out(), "");
        let r = h.fs(
            FsRequest::Stat("/tmp/gftp/src/f200M".into()),
            FsResult::Stat(file("f200M", 209715200)),
        );
        assert_eq!(
            r,
            "150 Opening BINARY mode data connection for RETR /tmp/gftp/src/f200M.\r\n"
        );
        let plan = h.transfer();
        assert_eq!(plan.mode, Mode::Stream);
        assert_eq!(plan.endpoint, DataEndpoint::Passive);
        assert!(!plan.ascii);
        assert_eq!(plan.parallelism, 1);
        assert_eq!(
            plan.payload,
            Payload::SendFile {
                path: "/tmp/gftp/src/f200M".into(),
                ranges: vec![0..209715200],
                to_eof: true,
                wire_sub: 0
            }
        );
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        // A failure reply comes from the driver, and the session carries on.
        let plan = h.retr_file("/f", 5);
        h.s.handle_transfer_done(
            h.now,
            plan.id,
            TransferResult::Failed {
                code: 426,
                message: "Data connection reset.".into(),
            },
        );
        assert_eq!(h.out(), "426 Data connection reset.\r\n");
        // TYPE A stays ASCII; a directory or a missing file is 550.
        h.cmd("TYPE A");
        assert!(h.retr_file("/f", 5).ascii);
        h.done_ok(3);
        h.send("RETR /d");
        assert!(h
            .fs(FsRequest::Stat("/d".into()), FsResult::Stat(dir("d")))
            .starts_with("550 "));
    }

    #[test]
    fn mode_e_retr_with_parallelism_like_globus_url_copy() {
        // notes §3.2: TYPE I, MODE E, SITE RETRBUFSIZE, OPTS RETR, PORT, RETR.
        let mut h = H::new();
        h.login();
        for c in [
            "TYPE I",
            "MODE E",
            "SITE RETRBUFSIZE 4194304",
            "OPTS RETR Parallelism=4,4,4;",
            "PORT 127,0,0,1,235,41",
        ] {
            assert!(h.cmd(c).starts_with("200 "), "{c}");
        }
        h.send("RETR /tmp/gftp/src/f200M");
        let r = h.fs(
            FsRequest::Stat("/tmp/gftp/src/f200M".into()),
            FsResult::Stat(file("f200M", 209715200)),
        );
        assert_eq!(
            r,
            "125 Beginning MODE E transfer of RETR /tmp/gftp/src/f200M.\r\n"
        );
        let plan = h.transfer();
        assert_eq!(plan.mode, Mode::Extended);
        assert_eq!(plan.parallelism, 4);
        assert_eq!(plan.tcp_buffer, Some(4194304));
        assert_eq!(
            plan.endpoint,
            DataEndpoint::Active(vec!["127.0.0.1:60201".parse().unwrap()])
        );
        assert_eq!(
            h.s.poll_timeout(),
            Some(h.now + std::time::Duration::from_secs(60)),
            "no markers when sending, no idle timeout while transferring: only the data timeout"
        );
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        // The endpoint is kept for the next transfer (Globus -fast reuses data channels).
        h.send("ERET P 1000 5000000 /tmp/gftp/src/f200M");
        h.fs(
            FsRequest::Stat("/tmp/gftp/src/f200M".into()),
            FsResult::Stat(file("f200M", 209715200)),
        );
        let plan = h.transfer();
        assert_eq!(
            plan.payload,
            Payload::SendFile {
                path: "/tmp/gftp/src/f200M".into(),
                ranges: vec![1000..5001000],
                to_eof: false,
                wire_sub: 1000
            }
        );
        h.done_ok(plan.id);
        // REST ranges then RETR: only the gaps, computed after the Stat; REST is then forgotten.
        h.cmd("REST 0-1048576,2097152-20000000");
        h.send("RETR f");
        h.fs(
            FsRequest::Stat("/f".into()),
            FsResult::Stat(file("f", 20971520)),
        );
        let Payload::SendFile { ranges, .. } = h.transfer().payload else {
            panic!()
        };
        assert_eq!(ranges, vec![1048576..2097152, 20000000..20971520]);
        h.done_ok(3);
        let Payload::SendFile { ranges, .. } = h.retr_file("/f", 20971520).payload else {
            panic!()
        };
        assert_eq!(ranges, vec![0..20971520]);
    }

    #[test]
    fn eret_arguments() {
        let mut h = H::new();
        h.login();
        h.pasv();
        for bad in [
            "ERET",
            "ERET P",
            "ERET P 1 2",
            "ERET P x 2 /f",
            "ERET P 1 2 ",
            "ERET P 18446744073709551615 1 /f",
        ] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
        assert!(h.cmd("ERET X 1 2 /f").starts_with("504 "));
        assert!(h.cmd("RETR").starts_with("501 "));
        h.cmd("REST 5");
        h.send("ERET P 0 10 /f");
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 100)));
        let Payload::SendFile { ranges, .. } = h.transfer().payload else {
            panic!()
        };
        assert_eq!(ranges, vec![5..10]);
        assert_eq!(h.actions(), Vec::<Action>::new());
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use crate::ranges::RangeSet;
    use proptest::prelude::*;

    proptest! {
        /// In MODE E, what is sent plus what the client holds is exactly the (ERET) view, without overlap.
        #[test]
        fn gaps_complete_the_view(
            size in 0u64..10_000,
            held in proptest::collection::vec((0u64..12_000, 0u64..3_000), 0..8),
            section in proptest::option::of((0u64..12_000, 0u64..12_000)),
        ) {
            let held: RangeSet = held.into_iter().map(|(a, l)| a..a + l).collect();
            let rest = Rest::Ranges(held.clone());
            let p = plan_send(size, section, Some(&rest), Mode::Extended).unwrap();
            let (base, len) = section.map_or((0, size), |(o, l)| (o, l.min(size.saturating_sub(o))));
            let mut all: RangeSet = p.ranges.iter().map(|r| r.start - base..r.end - base).collect();
            prop_assert_eq!(all.covered(), p.ranges.iter().map(|r| r.end - r.start).sum::<u64>());
            for r in &p.ranges {
                prop_assert!(r.start < r.end && r.start >= base && r.end <= base + len);
                let view = r.start - base..r.end - base;
                let gaps = held.gaps(view.clone());
                prop_assert!(gaps.len() == 1 && gaps[0] == view, "sent bytes the client holds");
            }
            all.extend(&held);
            prop_assert!(all.contains_range(&(0..len)));
            prop_assert_eq!(p.wire_sub, base);
        }
    }
}
