//! SBUF (GFD.20): `SBUF <bytes>` sets the TCP buffer for the next data channels (plain decimal only; `0` means
//! the default; values above `max_buffer` are clamped). `SBUF <id> <size>` during a transfer is the seed-000
//! control-channel probe: the driver resizes the running streams ([`Action::SetBuffer`]) and the reply echoes
//! `200 SBUF <id> <size>`. The buffer parser is shared with `SITE RETRBUFSIZE`/`STORBUFSIZE`.

use std::time::Instant;

use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::Action;

/// True for the two-argument form, which runs at once during a transfer.
pub(super) fn is_in_transfer_form(arg: &str) -> bool {
    arg.split_whitespace().count() == 2
}

/// Sets the buffer for later data channels from a decimal byte count.
pub(super) fn set_buffer(ctx: &mut Ctx, arg: &str) -> Result<(), CommandError> {
    let n = super::parse_u64(arg.trim())
        .ok_or_else(|| CommandError::syntax("Buffer size must be a decimal number of bytes."))?;
    ctx.tcp_buffer = (n > 0).then(|| n.min(ctx.cfg.max_buffer));
    Ok(())
}

/// `SBUF <bytes>` or, during a transfer, `SBUF <id> <size>`.
pub(super) fn sbuf(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
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
            if ctx.transfer.is_none() {
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

#[cfg(test)]
mod tests {
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
        assert!(
            h.cmd("SBUF 7 65536").starts_with("503 "),
            "two-argument form needs a transfer"
        );
        // Clamped to max_buffer, visible in the plan.
        h.cmd("SBUF 99999999");
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert_eq!(plan.tcp_buffer, Some(1 << 20));
        assert_eq!(h.cmd("SBUF 3 131072"), "200 SBUF 3 131072\r\n");
        assert_eq!(
            h.actions(),
            vec![Action::SetBuffer {
                id: 3,
                size: 131072
            }]
        );
        h.cmd("SBUF 0");
        h.done_ok(plan.id);
        h.pasv();
        assert_eq!(h.retr_file("/f", 10).tcp_buffer, None);
    }
}
