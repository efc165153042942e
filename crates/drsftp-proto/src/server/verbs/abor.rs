//! ABOR: stops the running transfer. It jumps ahead of queued commands; the driver stops the transfer
//! ([`Action::Abort`]) and reports `Aborted`, and the session then replies `426 Transfer aborted.` followed by
//! `226 Abort successful.` (if the transfer ended on its own first: its own reply, then `226`). Without a
//! transfer ABOR just gets `226`.

use std::time::Instant;

use super::{Busy, Verb};
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;
use crate::server::types::Action;

pub(super) const ABOR: Verb = Verb::cmd("ABOR", abor).busy(Busy::Jump);

/// `ABOR`.
fn abor(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    let Some(aborts) = ctx.xfer.running.as_ref().map(|r| r.aborts) else {
        ctx.reply(226, "Abort successful.");
        return Ok(());
    };
    if aborts == 0 {
        ctx.action(Action::Abort);
    }
    if let Some(run) = ctx.xfer.running.as_mut() {
        run.aborts = aborts.saturating_add(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{Action, TransferResult};

    #[test]
    fn abor_during_transfer_jumps_the_queue() {
        let mut h = H::new();
        h.login();
        h.pasv();
        let plan = h.retr_file("/big", 1 << 30);
        // Queued behind the transfer: PWD; ABOR overtakes it (Telnet IP/DM in front, as RFC 959 clients send).
        h.send_raw(b"PWD\r\n\xff\xf4\xff\xf2ABOR\r\n");
        assert_eq!(h.out(), "");
        assert_eq!(h.actions(), vec![Action::Abort]);
        h.s.handle_transfer_done(h.now, plan.id, TransferResult::Aborted);
        assert_eq!(
            h.out(),
            "426 Transfer aborted.\r\n226 Abort successful.\r\n257 \"/\" is the current directory.\r\n"
        );
        assert_eq!(h.cmd("ABOR"), "226 Abort successful.\r\n");
    }

    #[test]
    fn abor_racing_the_end_of_the_transfer() {
        let mut h = H::new();
        h.login();
        h.pasv();
        let plan = h.retr_file("/f", 10);
        h.send("ABOR");
        assert_eq!(h.actions(), vec![Action::Abort]);
        h.send("ABOR");
        assert_eq!(h.actions(), vec![], "one Abort action");
        assert_eq!(
            h.done_ok(plan.id),
            "226 Transfer complete.\r\n226 Abort successful.\r\n226 Abort successful.\r\n"
        );
    }
}
