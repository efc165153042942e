//! SBUF and the DRS opt-in (docs/drs.md §4.3-4.4). `SBUF <bytes>` (GFD.20) sets the TCP buffer for the next data
//! channels (plain decimal only; `0` means the default; values above `max_buffer` are clamped). Dynamic
//! Right-Sizing is negotiated: FEAT lists ` DRS`, and only after `OPTS DRS Inband=1;` (trailing `;` required, as
//! for `OPTS RETR`; `Inband=0;` turns it off again) does the server accept the seed-000 two-argument
//! `SBUF <id> <size>` during a transfer (the driver resizes the running streams, [`Action::SetBuffer`], and the
//! reply echoes `200 SBUF <id> <size>`), send informational `126 SBUF <id> <size>` while it receives in stream
//! mode, and mark MODE E plans for in-band SBUF headers (descriptors 0x02/0x01, `TransferPlan::inband_drs`).
//! A peer that never sent the OPTS (globus-url-copy) never sees any of it. The buffer parser is shared with
//! `SITE RETRBUFSIZE`/`STORBUFSIZE`.

use std::time::Instant;

use super::{Busy, Verb};
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::Action;

/// Two-argument SBUF (`SBUF <id> <size>`) acts at once, even during a transfer.
pub(super) const SBUF: Verb = Verb::cmd("SBUF", sbuf)
    .busy(Busy::JumpIf(is_in_transfer_form))
    .feat(110, &["SBUF"]);
/// The DRS opt-in as a feature: ` DRS` in FEAT and `OPTS DRS Inband=1;`.
pub(super) const DRS: Verb = Verb::feature("DRS").feat(120, &["DRS"]).opts(opts_drs);

/// True for the two-argument form, which runs at once during a transfer.
pub(super) fn is_in_transfer_form(arg: &str) -> bool {
    arg.split_whitespace().count() == 2
}

/// Sets the buffer for later data channels from a decimal byte count.
pub(super) fn set_buffer(ctx: &mut Ctx, arg: &str) -> Result<(), CommandError> {
    let n = super::parse_u64(arg.trim())
        .ok_or_else(|| CommandError::syntax("Buffer size must be a decimal number of bytes."))?;
    ctx.data.tcp_buffer = (n > 0).then(|| n.min(ctx.cfg.max_buffer));
    Ok(())
}

/// `SBUF <bytes>` or, during a transfer after `OPTS DRS Inband=1;`, `SBUF <id> <size>`.
fn sbuf(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let words: Vec<&str> = arg.split_whitespace().collect();
    match words.as_slice() {
        [n] => {
            set_buffer(ctx, n)?;
            ctx.reply(200, "SBUF Command Successful.");
            Ok(())
        }
        [id, size] => {
            let (Some(id), Some(size)) = (super::parse_u64(id), super::parse_u64(size)) else {
                return Err(CommandError::syntax("Syntax: SBUF <id> <size>."));
            };
            if !ctx.data.drs_inband {
                return Err(CommandError::Sequence(
                    "SBUF <id> <size> needs OPTS DRS Inband=1; first.".into(),
                ));
            }
            if ctx.xfer.running.is_none() {
                return Err(CommandError::Sequence(
                    "SBUF <id> <size> needs a running transfer.".into(),
                ));
            }
            let size = size.min(ctx.cfg.max_buffer);
            ctx.action(Action::SetBuffer { id, size });
            ctx.reply(200, &format!("SBUF {id} {size}"));
            Ok(())
        }
        _ => Err(CommandError::syntax("Syntax: SBUF <bytes>.")),
    }
}

/// The `Inband` value of `OPTS DRS` options (`Inband=1;` / `Inband=0;`, key case-insensitive, other keys
/// ignored). `None` if malformed, the trailing `;` is missing, or there is no `Inband` key.
pub(super) fn parse_opts_drs(opts: &str) -> Option<bool> {
    let body = opts.trim().strip_suffix(';')?;
    let mut inband = None;
    for opt in body.split(';') {
        let (key, value) = opt.split_once('=')?;
        let value = value.trim();
        if value.is_empty() {
            return None;
        }
        if key.trim().eq_ignore_ascii_case("Inband") {
            inband = Some(match value {
                "1" => true,
                "0" => false,
                _ => return None,
            });
        }
    }
    inband
}

/// `OPTS DRS <options>` (the `OPTS` hook of the registry row).
fn opts_drs(ctx: &mut Ctx, rest: &str) -> CmdResult {
    ctx.require_login()?;
    match parse_opts_drs(rest) {
        Some(on) => {
            ctx.data.drs_inband = on;
            ctx.reply(200, &format!("DRS Inband={};", u8::from(on)));
            Ok(())
        }
        None => Err(CommandError::Reply(500, "OPTS failed.".into())),
    }
}

impl Ctx {
    /// Queues `126 SBUF <id> <size>` (seed 000 §4.4: the receiving server announces its new receive buffer to
    /// the sending client) if DRS was opted in and a stream-mode receive is running. Returns whether it did.
    pub(crate) fn sbuf_notice(&mut self, id: u64, size: u64) -> bool {
        let receiving = self.xfer.running.as_ref().is_some_and(|r| r.stream_recv);
        if !self.data.drs_inband || !receiving || self.closed {
            return false;
        }
        self.reply(126, &format!("SBUF {id} {size}"));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::parse_opts_drs;
    use crate::server::testutil::H;
    use crate::server::{Action, ServerConfig};

    #[test]
    fn sbuf_forms() {
        let mut h = H::with_cfg(ServerConfig {
            max_buffer: 1 << 20,
            ..ServerConfig::default()
        });
        h.login();
        assert_eq!(h.cmd("SBUF 65536"), "200 SBUF Command Successful.\r\n");
        assert!(h.cmd("SBUF 4M").starts_with("501 "), "no suffixes");
        assert!(h.cmd("SBUF").starts_with("501 "));
        assert!(h.cmd("SBUF 1 2 3").starts_with("501 "));
        assert_eq!(h.cmd("OPTS DRS Inband=1;"), "200 DRS Inband=1;\r\n");
        assert!(
            h.cmd("SBUF 7 65536").starts_with("503 "),
            "two-argument form needs a transfer"
        );
        // Clamped to max_buffer, visible in the plan.
        h.cmd("SBUF 99999999");
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert_eq!(plan.tcp_buffer, Some(1 << 20));
        assert!(!plan.inband_drs, "stream mode: no in-band headers");
        assert_eq!(h.cmd("SBUF 3 131072"), "200 SBUF 3 131072\r\n");
        assert_eq!(
            h.actions(),
            vec![Action::SetBuffer {
                id: 3,
                size: 131072
            }]
        );
        assert_eq!(
            h.cmd("SBUF 4 99999999"),
            format!("200 SBUF 4 {}\r\n", 1 << 20)
        );
        h.actions();
        h.cmd("SBUF 0");
        h.done_ok(plan.id);
        h.pasv();
        assert_eq!(h.retr_file("/f", 10).tcp_buffer, None);
    }

    #[test]
    fn two_argument_sbuf_is_refused_before_opt_in() {
        let mut h = H::new();
        h.login();
        h.pasv();
        let plan = h.retr_file("/f", 10);
        let r = h.cmd("SBUF 1 65536");
        assert_eq!(
            r,
            "503 SBUF <id> <size> needs OPTS DRS Inband=1; first.\r\n"
        );
        assert_eq!(h.actions(), vec![], "no SetBuffer without opt-in");
        assert!(
            !h.s.send_sbuf_notice(h.now, 1, 65536),
            "not a receive, not opted in"
        );
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        // The one-argument GFD.20 form is unaffected.
        assert_eq!(h.cmd("SBUF 65536"), "200 SBUF Command Successful.\r\n");
        // Turning DRS on, then off again, leaves it refused.
        h.cmd("OPTS DRS Inband=1;");
        assert_eq!(h.cmd("OPTS DRS Inband=0;"), "200 DRS Inband=0;\r\n");
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert!(h.cmd("SBUF 2 65536").starts_with("503 "));
        h.done_ok(plan.id);
    }

    #[test]
    fn opts_drs_syntax() {
        assert_eq!(parse_opts_drs("Inband=1;"), Some(true));
        assert_eq!(parse_opts_drs(" inband=0; "), Some(false));
        assert_eq!(parse_opts_drs("Future=x;Inband=1;"), Some(true));
        assert_eq!(parse_opts_drs("Inband=1"), None, "trailing ; required");
        assert_eq!(parse_opts_drs("Inband=2;"), None);
        assert_eq!(parse_opts_drs("Inband=;"), None);
        assert_eq!(parse_opts_drs("Future=x;"), None);
        assert_eq!(parse_opts_drs(""), None);

        let mut h = H::new();
        assert!(
            h.cmd("OPTS DRS Inband=1;").starts_with("530 "),
            "login first"
        );
        h.login();
        assert_eq!(h.cmd("OPTS DRS Inband=1"), "500 OPTS failed.\r\n");
        assert_eq!(h.cmd("opts drs INBAND=1;"), "200 DRS Inband=1;\r\n");
    }

    #[test]
    fn mode_e_plans_carry_inband_drs_only_after_opt_in() {
        let mut h = H::new();
        h.login();
        h.cmd("MODE E");
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert!(!plan.inband_drs, "a Globus client never opted in");
        h.done_ok(plan.id);
        h.cmd("OPTS DRS Inband=1;");
        let plan = h.retr_file("/f", 10);
        assert!(plan.inband_drs);
        h.done_ok(plan.id);
        h.cmd("OPTS DRS Inband=0;");
        let plan = h.retr_file("/f", 10);
        assert!(!plan.inband_drs);
        h.done_ok(plan.id);
    }

    #[test]
    fn sbuf_notices_only_while_receiving_in_stream_mode_after_opt_in() {
        let mut h = H::new();
        h.login();
        h.cmd("TYPE I");
        h.pasv();
        assert!(!h.s.send_sbuf_notice(h.now, 1, 1 << 20), "no transfer");
        // Opted out: a STOR runs, no notice.
        let r = h.cmd("STOR /up");
        assert!(r.starts_with("150 "), "{r}");
        let plan = h.transfer();
        assert!(!h.s.send_sbuf_notice(h.now, 1, 1 << 20));
        assert_eq!(h.out(), "");
        h.done_ok(plan.id);
        // Opted in: the notice goes out, between the 150 and the 226.
        h.cmd("OPTS DRS Inband=1;");
        h.cmd("STOR /up");
        let plan = h.transfer();
        assert!(h.s.send_sbuf_notice(h.now, 9, 4 << 20));
        assert_eq!(h.out(), "126 SBUF 9 4194304\r\n");
        assert_eq!(h.done_ok(plan.id), "226 Transfer complete.\r\n");
        assert!(!h.s.send_sbuf_notice(h.now, 10, 1 << 20), "transfer over");
        // A download (server sends): no notice even when opted in.
        let plan = h.retr_file("/f", 10);
        assert!(!h.s.send_sbuf_notice(h.now, 11, 1 << 20));
        h.done_ok(plan.id);
    }
}
