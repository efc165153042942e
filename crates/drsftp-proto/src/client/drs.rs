//! Dynamic Right-Sizing on the client's control channel (docs/drs.md §4.3-4.4): whether the server has DRS on
//! for this session, which `OPTS DRS` a transfer needs, and matching the replies to in-transfer
//! `SBUF <id> <size>` commands (`200 SBUF <id> <size>`, or a refusal that can only come after the transfer's
//! own final reply). DRS is opt-in: nothing here is ever sent to a server whose FEAT lacks `DRS`.

use std::collections::VecDeque;

use super::reply::Reply;
use super::types::Event;

/// The `OPTS DRS` line that switches DRS on.
pub(super) const OPTS_ON: &str = "OPTS DRS Inband=1;";
/// The `OPTS DRS` line that switches DRS off again.
pub(super) const OPTS_OFF: &str = "OPTS DRS Inband=0;";

/// `SBUF <id> <size>` at the start of a reply text (`200 SBUF 3 131072`, `126 SBUF 9 4194304`).
pub(super) fn parse_sbuf(text: &str) -> Option<(u64, u64)> {
    let mut w = text.split_whitespace();
    if !w.next()?.eq_ignore_ascii_case("SBUF") {
        return None;
    }
    let id = w.next()?.parse().ok()?;
    let size = w.next()?.parse().ok()?;
    Some((id, size))
}

/// The session's DRS state.
#[derive(Debug, Default)]
pub(super) struct Drs {
    /// The server accepted `OPTS DRS Inband=1;` (and no `Inband=0;` since).
    pub(super) on: bool,
    /// Ids of `SBUF <id> <size>` commands sent whose reply has not come yet, oldest first.
    pending: VecDeque<u64>,
}

impl Drs {
    /// The `OPTS DRS` command a transfer needs before PASV/PORT, and the state it sets when accepted: on if the
    /// transfer asks for DRS and the server offers it, off if it does not ask but DRS is still on.
    pub(super) fn opts_for(&self, want: bool, offered: bool) -> Option<(&'static str, bool)> {
        match (want && offered, self.on) {
            (true, false) => Some((OPTS_ON, true)),
            (false, true) => Some((OPTS_OFF, false)),
            _ => None,
        }
    }

    /// An `SBUF <id> <size>` command went out.
    pub(super) fn sent(&mut self, id: u64) {
        self.pending.push_back(id);
    }

    /// Some SBUF command still waits for its reply.
    pub(super) fn outstanding(&self) -> bool {
        !self.pending.is_empty()
    }

    /// A final reply arrived while SBUF commands are outstanding. `200 SBUF <id> <size>` answers one of them
    /// (an echo). Any other final reply answers the oldest one only when no transfer command is waiting: the
    /// server replies to an in-transfer SBUF at once, so a refusal can only follow the transfer's own final
    /// reply (`226`, then `503 ... needs a running transfer`). Returns the event, or `None` if the reply belongs
    /// to the running command.
    pub(super) fn take_answer(&mut self, reply: &Reply, transfer_waiting: bool) -> Option<Event> {
        if reply.code == 200 {
            if let Some((id, size)) = parse_sbuf(reply.text()) {
                match self.pending.iter().position(|p| *p == id) {
                    Some(i) => {
                        self.pending.remove(i);
                    }
                    None => {
                        self.pending.pop_front();
                    }
                }
                return Some(Event::SbufEcho { id, size });
            }
        }
        if transfer_waiting {
            return None;
        }
        let id = self.pending.pop_front()?;
        Some(Event::Notice(format!(
            "server did not apply SBUF {id}: {reply}"
        )))
    }

    /// The control connection is gone: nothing is outstanding any more.
    pub(super) fn reset(&mut self) {
        self.on = false;
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sbuf_reply_text() {
        assert_eq!(parse_sbuf("SBUF 3 131072"), Some((3, 131072)));
        assert_eq!(parse_sbuf("sbuf 3 131072 extra"), Some((3, 131072)));
        assert_eq!(parse_sbuf("SBUF Command Successful."), None);
        assert_eq!(parse_sbuf("SBUF 3"), None);
        assert_eq!(
            parse_sbuf("1 2 3"),
            None,
            "a stripe-count 126 is not an SBUF notice"
        );
    }

    #[test]
    fn opts_only_when_offered_and_changed() {
        let mut d = Drs::default();
        assert_eq!(
            d.opts_for(true, false),
            None,
            "never to a server without DRS in FEAT"
        );
        assert_eq!(d.opts_for(false, true), None);
        assert_eq!(d.opts_for(true, true), Some((OPTS_ON, true)));
        d.on = true;
        assert_eq!(d.opts_for(true, true), None, "already on");
        assert_eq!(d.opts_for(false, true), Some((OPTS_OFF, false)));
    }

    #[test]
    fn answers_are_matched_in_order() {
        let mut d = Drs::default();
        d.sent(1);
        d.sent(2);
        let echo = Reply::new(200, "SBUF 2 65536");
        assert_eq!(
            d.take_answer(&echo, true),
            Some(Event::SbufEcho { id: 2, size: 65536 })
        );
        let done = Reply::new(226, "Transfer complete.");
        assert_eq!(d.take_answer(&done, true), None, "the transfer's own reply");
        let refused = Reply::new(503, "SBUF <id> <size> needs a running transfer.");
        assert!(
            matches!(d.take_answer(&refused, false), Some(Event::Notice(n)) if n.contains("SBUF 1"))
        );
        assert!(!d.outstanding());
    }
}
