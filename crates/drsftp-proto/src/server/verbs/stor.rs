//! STOR, APPE and ESTO: the server receives a file.
//!
//! * `STOR`: a new part file renamed into place on success (`Replace`). After `REST n` (stream) or
//!   `REST a-b,...` (MODE E) the existing file is written in place instead (`InPlace`): in stream mode the
//!   first byte lands at `n`, in MODE E blocks land at their own offsets (the client sends only the gaps).
//! * `APPE`: in place at the current size (stat first; a missing file counts as empty).
//! * `ESTO A <offset> <path>`: in place, `offset` added to every block offset (GFD.20); a stream-mode REST
//!   offset adds to it.
//!
//! A MODE E `STOR` armed by `SITE PARTIAL` (verbs/partial.rs) is kept for resume if it fails.
//!
//! A `Replace` STOR asks the driver to open its part file first ([`FsRequest::OpenWrite`]) and sends its
//! `150` only once that worked: a destination that cannot be written is refused before the preliminary reply,
//! so a client pipelining many STORs (an upload batch) sees one refused file, not a transfer that failed after
//! it had said go.
//!
//! `ALLO` announces the expected size. In MODE E the session sends `112`/`111` markers (see `transfer.rs`).

use std::time::Instant;

use drsftp_storage::{EntryKind, StorageError, WriteMode};

use super::Verb;
use crate::server::ctx::{Ctx, Rest};
use crate::server::error::{CmdResult, CommandError};
use crate::server::transfer::Command;
use crate::server::types::{FsRequest, FsResult, Keep, Mode, Payload};

pub(super) const STOR: Verb = Verb::cmd("STOR", stor).writes();
pub(super) const APPE: Verb = Verb::cmd("APPE", appe).writes();
pub(super) const ESTO: Verb = Verb::cmd("ESTO", esto).writes().feat(80, &["ESTO"]);

/// Write mode and first-byte offset implied by REST for a STOR in `mode`.
pub(crate) fn plan_recv(rest: Option<&Rest>, mode: Mode) -> Result<(WriteMode, u64), CommandError> {
    let held = rest.map(Rest::held).unwrap_or_default();
    match (held.ranges(), mode) {
        ([], _) => Ok((WriteMode::Replace, 0)),
        (_, Mode::Extended) => Ok((WriteMode::InPlace, 0)),
        ([r], Mode::Stream) if r.start == 0 => Ok((WriteMode::InPlace, r.end)),
        _ => Err(CommandError::Reply(
            554,
            "Stream mode restarts from one offset; use MODE E for range restarts.".into(),
        )),
    }
}

fn receive(
    ctx: &mut Ctx,
    now: Instant,
    cmd: Command,
    write_mode: WriteMode,
    offset: u64,
    expected: Option<u64>,
    keep: Option<Keep>,
) -> CmdResult {
    let mode = ctx.data.mode;
    let payload = Payload::RecvFile {
        path: cmd.path.clone(),
        write_mode,
        offset,
        expected,
        keep,
    };
    ctx.start_transfer(now, payload, mode, cmd)
}

/// `STOR path`.
fn stor(ctx: &mut Ctx, now: Instant, arg: &str) -> CmdResult {
    let arg = super::required(arg, "STOR")?;
    let rest = ctx.take_rest();
    let expected = ctx.data.allo.take();
    let armed = ctx.data.kept.take();
    ctx.endpoint()?;
    let (write_mode, offset) = plan_recv(rest.as_ref(), ctx.data.mode)?;
    let path = ctx.resolve(arg);
    // Kept for resume only as SITE PARTIAL armed it: this path, this size, MODE E (blocks carry offsets).
    let keep = armed
        .filter(|id| {
            id.path == path && Some(id.size) == expected && ctx.data.mode == Mode::Extended
        })
        .map(|id| Keep {
            id,
            limits: ctx.cfg.kept,
        });
    let cmd = Command::new("STOR", &path, rest);
    if write_mode != WriteMode::Replace || keep.is_some() {
        // In place (after REST) the file exists or is created at its offset; a kept upload opens its partial.
        return receive(ctx, now, cmd, write_mode, offset, expected, keep);
    }
    let req = FsRequest::OpenWrite {
        path: path.clone(),
        write_mode,
    };
    ctx.fs(req, move |ctx, now, r| match r {
        FsResult::Done => {
            if let Err(e) = receive(ctx, now, cmd, write_mode, offset, expected, None) {
                ctx.refuse(&e);
            }
        }
        other => ctx.fs_failed(other),
    });
    Ok(())
}

/// `APPE path`.
fn appe(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let arg = super::required(arg, "APPE")?;
    // APPE writes at the current size whatever REST said: the REST is dropped, not logged.
    ctx.take_rest();
    let expected = ctx.data.allo.take();
    ctx.endpoint()?;
    let path = ctx.resolve(arg);
    ctx.fs(FsRequest::Stat(path.clone()), move |ctx, now, r| {
        let size = match r {
            FsResult::Stat(m) if m.kind == EntryKind::File => m.size,
            FsResult::Stat(_) => return ctx.reply(550, &format!("{path}: not a regular file.")),
            FsResult::Err(StorageError::NotFound(_)) => 0,
            other => return ctx.fs_failed(other),
        };
        let cmd = Command::new("APPE", &path, None);
        if let Err(e) = receive(ctx, now, cmd, WriteMode::InPlace, size, expected, None) {
            ctx.refuse(&e);
        }
    });
    Ok(())
}

/// `ESTO A <offset> <path>`.
fn esto(ctx: &mut Ctx, now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax: ESTO A <offset> <path>.");
    let mut it = arg.splitn(3, ' ');
    super::only_mode(it.next(), "A", "ESTO", bad)?;
    let offset = it.next().and_then(super::parse_u64).ok_or_else(bad)?;
    let arg = it.next().filter(|p| !p.is_empty()).ok_or_else(bad)?;
    let rest = ctx.take_rest();
    let expected = ctx.data.allo.take();
    ctx.endpoint()?;
    let (_, extra) = plan_recv(rest.as_ref(), ctx.data.mode)?;
    let offset = offset.checked_add(extra).ok_or_else(bad)?;
    let path = ctx.resolve(arg);
    let cmd = Command::new("ESTO", &path, rest);
    receive(ctx, now, cmd, WriteMode::InPlace, offset, expected, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranges::RangeSet;
    use crate::server::testutil::{dir, file, H};
    use crate::server::DataEndpoint;

    fn recv(path: &str, write_mode: WriteMode, offset: u64, expected: Option<u64>) -> Payload {
        Payload::RecvFile {
            path: path.into(),
            write_mode,
            offset,
            expected,
            keep: None,
        }
    }

    #[test]
    fn recv_plans() {
        assert_eq!(plan_recv(None, Mode::Stream), Ok((WriteMode::Replace, 0)));
        assert_eq!(
            plan_recv(Some(&Rest::Offset(0)), Mode::Stream),
            Ok((WriteMode::Replace, 0))
        );
        assert_eq!(
            plan_recv(Some(&Rest::Offset(7)), Mode::Stream),
            Ok((WriteMode::InPlace, 7))
        );
        assert_eq!(
            plan_recv(Some(&Rest::Offset(7)), Mode::Extended),
            Ok((WriteMode::InPlace, 0))
        );
        let r = Rest::Ranges(RangeSet::parse("0-5,9-12").unwrap());
        assert_eq!(
            plan_recv(Some(&r), Mode::Extended),
            Ok((WriteMode::InPlace, 0))
        );
        assert_eq!(plan_recv(Some(&r), Mode::Stream).unwrap_err().code(), 554);
    }

    #[test]
    fn stor_replace_vs_rest_in_place() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        assert!(h.cmd("STOR up").starts_with("425 "));
        h.pasv();
        h.cmd("ALLO 1000");
        assert_eq!(
            h.cmd("STOR up"),
            "150 Opening BINARY mode data connection for STOR /up.\r\n"
        );
        let plan = h.transfer();
        assert_eq!(plan.payload, recv("/up", WriteMode::Replace, 0, Some(1000)));
        assert_eq!(
            h.s.poll_timeout(),
            Some(h.now + std::time::Duration::from_secs(60)),
            "stream-mode receive: no markers, only the data timeout"
        );
        h.done_ok(plan.id);
        h.cmd("REST 4096");
        h.cmd("STOR up");
        let plan = h.transfer();
        assert_eq!(
            plan.payload,
            recv("/up", WriteMode::InPlace, 4096, None),
            "ALLO and REST are used once"
        );
        h.done_ok(plan.id);
        h.cmd("STOR up");
        assert_eq!(
            h.transfer().payload,
            recv("/up", WriteMode::Replace, 0, None)
        );
    }

    #[test]
    fn an_unwritable_destination_is_refused_before_the_preliminary_reply() {
        let mut h = H::new();
        h.opens = false;
        h.login();
        h.cmd("TYPE I");
        h.pasv();
        // Pipelined as an upload batch sends them: the refused file's ALLO and STOR, then the next file's.
        h.send_raw(b"ALLO 10\r\nSTOR d\r\nALLO 20\r\nSTOR f\r\n");
        let want = |p: &str| FsRequest::OpenWrite {
            path: p.into(),
            write_mode: WriteMode::Replace,
        };
        let r = h.fs(
            want("/d"),
            FsResult::Err(StorageError::NotAFile("/d".into())),
        );
        assert!(r.starts_with("200 "), "ALLO: {r}");
        assert!(r.contains("\r\n550 ") && !r.contains("150 "), "{r}");
        let r = h.fs(want("/f"), FsResult::Done);
        assert!(r.starts_with("150 Opening"), "{r}");
        let plan = h.transfer();
        assert_eq!(plan.payload, recv("/f", WriteMode::Replace, 0, Some(20)));
        h.done_ok(plan.id);
        h.send("STOR p");
        let r = h.fs(
            want("/p"),
            FsResult::Err(StorageError::PermissionDenied("/p".into())),
        );
        assert!(r.starts_with("550 "), "{r}");
        assert_eq!(h.s.poll_action(), None, "no transfer for a refused STOR");
        // After REST the file is written in place: opened by the transfer, as before.
        h.cmd("REST 5");
        assert!(h.cmd("STOR q").starts_with("150 "));
    }

    #[test]
    fn appe_at_current_size() {
        let mut h = H::new();
        h.login();
        h.pasv();
        h.send("APPE log");
        assert_eq!(
            h.fs(
                FsRequest::Stat("/log".into()),
                FsResult::Stat(file("log", 123))
            ),
            "150 Opening ASCII mode data connection for APPE /log.\r\n"
        );
        let plan = h.transfer();
        assert_eq!(plan.payload, recv("/log", WriteMode::InPlace, 123, None));
        h.done_ok(plan.id);
        h.send("APPE new");
        h.fs(
            FsRequest::Stat("/new".into()),
            FsResult::Err(StorageError::NotFound("/new".into())),
        );
        let plan = h.transfer();
        assert_eq!(plan.payload, recv("/new", WriteMode::InPlace, 0, None));
        h.done_ok(plan.id);
        h.send("APPE d");
        assert!(h
            .fs(FsRequest::Stat("/d".into()), FsResult::Stat(dir("d")))
            .starts_with("550 "));
        h.send("APPE p");
        let r = h.fs(
            FsRequest::Stat("/p".into()),
            FsResult::Err(StorageError::PermissionDenied("/p".into())),
        );
        assert!(r.starts_with("550 "));
    }

    #[test]
    fn esto_plans() {
        let mut h = H::new();
        h.login();
        h.cmd("MODE E");
        h.pasv();
        h.cmd("ALLO 5000000");
        assert_eq!(
            h.cmd("ESTO A 1000 /tmp/gftp/dst/partial_up").lines().next(),
            Some("125 Beginning MODE E transfer of ESTO /tmp/gftp/dst/partial_up.")
        );
        let plan = h.transfer();
        assert_eq!(
            plan.payload,
            recv(
                "/tmp/gftp/dst/partial_up",
                WriteMode::InPlace,
                1000,
                Some(5000000)
            )
        );
        assert_eq!(plan.endpoint, DataEndpoint::Passive);
        h.done_ok(plan.id);
        h.cmd("MODE S");
        h.cmd("REST 10");
        h.cmd("ESTO A 1000 f");
        assert_eq!(
            h.transfer().payload,
            recv("/f", WriteMode::InPlace, 1010, None)
        );
        h.done_ok(2);
        for bad in ["ESTO", "ESTO A", "ESTO A x /f", "ESTO A 1 "] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
        assert!(h.cmd("ESTO B 1 /f").starts_with("504 "));
        assert!(h.cmd("STOR").starts_with("501 "));
        assert!(h.cmd("APPE").starts_with("501 "));
    }
}
