//! REST: `REST n` (stream-mode offset, RFC 3659) and `REST a-b,c-d` (GFD.20: the ranges the client already
//! holds; a MODE E RETR then sends only the gaps). It applies to the next transfer command only.

use std::time::Instant;

use super::Verb;
use crate::ranges::RangeSet;
use crate::server::ctx::{Ctx, Rest};
use crate::server::error::{CmdResult, CommandError};

/// ` REST STREAM` (RFC 3659): stream-mode restart offsets; range lists need no FEAT line (GFD.20).
pub(super) const REST: Verb = Verb::cmd("REST", rest).feat(50, &["REST STREAM"]);

/// `REST <offset>` or `REST <ranges>`.
fn rest(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let arg = arg.trim();
    let r = if let Some(n) = super::parse_u64(arg) {
        Rest::Offset(n)
    } else if let Some(set) = RangeSet::parse(arg) {
        Rest::Ranges(set)
    } else {
        return Err(CommandError::syntax("Syntax error in REST argument."));
    };
    ctx.data.rest = Some(r);
    ctx.reply(
        350,
        "Restart Marker OK. Send STORE or RETR to initiate transfer.",
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;

    #[test]
    fn rest_forms() {
        let mut h = H::new();
        h.login();
        assert_eq!(
            h.cmd("REST 1000"),
            "350 Restart Marker OK. Send STORE or RETR to initiate transfer.\r\n"
        );
        assert!(h.cmd("REST 0-1048576,2097152-20000000").starts_with("350 "));
        for bad in ["REST", "REST -5", "REST 5-1", "REST 1-2,", "REST 4M"] {
            assert!(h.cmd(bad).starts_with("501 "), "{bad}");
        }
    }
}
