//! The verb registry: one row ([`Verb`]) per FTP command, declared in the file that owns the verb (parsing,
//! handling, tests, its FEAT line(s) and its `OPTS <verb>` hook together), and the table ([`VERBS`]) that lists
//! the rows. The session dispatches commands through the table, HELP lists its command rows in table order, FEAT
//! prints every row's feature lines sorted by their FEAT position, and OPTS calls the hook of the row its first
//! word names. A row may be feature-only (no command of that name: `UTF8`, `DRS`, `BLAST`) so that a feature
//! line and its `OPTS` sub-command live beside the behaviour they announce.
//!
//! Adding a verb (say `AUTH`, FEAT line `AUTH TLS`):
//! 1. Write `verbs/auth.rs`: a `//!` line saying what it owns, the handler, its tests, and its row, e.g.
//!    `pub(super) const AUTH: Verb = Verb::cmd("AUTH", auth).before_login().feat(5, &["AUTH TLS"]);`
//!    The number is the line's FEAT position: the rows in use are spaced by 10 (UTF8 10 ... BLAST 160), so 5
//!    lists it first; the registry test refuses a position already taken. Add `.opts(hook)` if the verb takes
//!    `OPTS AUTH ...`, `.busy(...)` if it may run during a transfer, `.feat_from(at, fn)` if its line depends on
//!    the config or session. Related verbs (PBSZ, PROT) may share the file, one row each.
//!    Add `.writes()` if the verb changes the tree: the dispatcher then refuses it in read-only sessions.
//! 2. Here: `mod auth;` and one line `auth::AUTH,` in [`VERBS`], where HELP should list it.
//!
//! Nothing else changes: the session, FEAT, OPTS and HELP read the table. State the verb keeps goes in a part
//! of [`Ctx`] (`ctx.rs` marks where TLS state will go).

use std::time::Instant;

use super::ctx::Ctx;
use super::error::CmdResult;

mod abor;
mod basic;
mod blast;
mod bprt;
mod cksm;
mod feat;
mod fsops;
mod info;
mod list;
mod login;
mod mfmt;
mod nav;
mod opts_retr;
mod params;
mod partial;
mod pasv;
mod peer;
mod port;
mod rest;
mod retr;
mod sbuf;
mod site;
mod sscn;
mod stat;
mod stor;
mod tls;

/// The reply to a verb marked `writes` in a read-only session. RFC 959 lists 550 ("file unavailable, e.g. no
/// access") for every one of these verbs (STOR, APPE, DELE, RNFR, MKD, RMD); 532 ("need account for storing
/// files") would invite clients to send ACCT, which this server does not have.
pub(crate) const READ_ONLY_REPLY: (u16, &str) = (550, "Permission denied: read-only session.");

/// Most packets in one blast transfer.
pub(crate) const MAX_BLAST_PACKETS: u64 = blast::MAX_PACKETS;
pub(crate) const BLAST_AEAD_OVERHEAD: usize = blast::AEAD_OVERHEAD;

/// A verb handler: the argument is the text after the first space (empty if none).
pub(crate) type Handler = fn(&mut Ctx, Instant, &str) -> CmdResult;

/// An `OPTS <name> <options>` hook: the argument is the text after `<name> ` (empty if none). The session does not
/// check the row's `login` for OPTS (`OPTS UTF8` and `OPTS MLST` work before login); hooks that need a user
/// check it themselves ([`Ctx::require_login`]).
pub(crate) type OptsHook = fn(&mut Ctx, &str) -> CmdResult;

/// What a command does while a transfer runs.
#[derive(Clone, Copy)]
pub(crate) enum Busy {
    /// Waits until the transfer has ended (in order with the other queued commands).
    Defer,
    /// Runs during the transfer when it is next in line.
    Inline,
    /// Runs at once, ahead of queued commands (ABOR).
    Jump,
    /// Jumps if the predicate holds for the argument, else waits (two-argument SBUF).
    JumpIf(fn(&str) -> bool),
}

/// The feature line(s) a row contributes to FEAT, without the leading space.
#[derive(Clone, Copy)]
pub(crate) enum FeatLines {
    /// Always these lines.
    Fixed(&'static [&'static str]),
    /// Built at each FEAT from the config and session (CKSM's algorithms, MLST's selected facts, BLAST only
    /// when enabled); may be empty.
    Computed(fn(&Ctx) -> Vec<String>),
}

/// A row's part of the FEAT reply.
#[derive(Clone, Copy)]
pub(crate) struct Feat {
    /// Position in the FEAT reply (lower first; unique, see the registry test). The order is part of the wire
    /// format clients have seen for years, so it is pinned rather than taken from the table (which is HELP's).
    pub(crate) at: u16,
    pub(crate) lines: FeatLines,
}

/// One registry row.
#[derive(Clone, Copy)]
pub(crate) struct Verb {
    /// Command name (upper case), or the feature/OPTS name of a feature-only row.
    pub(crate) name: &'static str,
    /// The command; `None` for a feature-only row (not dispatched, not in HELP).
    pub(crate) run: Option<Handler>,
    /// The command needs a logged-in user.
    pub(crate) login: bool,
    /// The command changes the tree (uploads, deletes, renames, directories): a read-only session (anonymous
    /// without `anonymous_write`, or a read-only user) gets [`READ_ONLY_REPLY`] from the dispatcher, so no
    /// handler has to remember the check.
    pub(crate) writes: bool,
    pub(crate) busy: Busy,
    /// What the row announces in FEAT.
    pub(crate) feat: Option<Feat>,
    /// `OPTS <name>` hook.
    pub(crate) opts: Option<OptsHook>,
}

impl Verb {
    /// A command that needs a login and waits for a running transfer (the common case); no FEAT line, no OPTS.
    pub(crate) const fn cmd(name: &'static str, run: Handler) -> Verb {
        Verb {
            name,
            run: Some(run),
            login: true,
            writes: false,
            busy: Busy::Defer,
            feat: None,
            opts: None,
        }
    }

    /// A feature-only row: a FEAT line and/or an OPTS hook for a feature that is not itself a command.
    pub(crate) const fn feature(name: &'static str) -> Verb {
        Verb {
            name,
            run: None,
            login: false,
            writes: false,
            busy: Busy::Defer,
            feat: None,
            opts: None,
        }
    }

    /// The command is accepted before login.
    pub(crate) const fn before_login(mut self) -> Verb {
        self.login = false;
        self
    }

    /// The command changes the tree: refused in read-only sessions.
    pub(crate) const fn writes(mut self) -> Verb {
        self.writes = true;
        self
    }

    /// What the command does while a transfer runs (default [`Busy::Defer`]).
    pub(crate) const fn busy(mut self, busy: Busy) -> Verb {
        self.busy = busy;
        self
    }

    /// Announces fixed `lines` at FEAT position `at`.
    pub(crate) const fn feat(mut self, at: u16, lines: &'static [&'static str]) -> Verb {
        self.feat = Some(Feat {
            at,
            lines: FeatLines::Fixed(lines),
        });
        self
    }

    /// Announces the lines `lines` computes, at FEAT position `at`.
    pub(crate) const fn feat_from(mut self, at: u16, lines: fn(&Ctx) -> Vec<String>) -> Verb {
        self.feat = Some(Feat {
            at,
            lines: FeatLines::Computed(lines),
        });
        self
    }

    /// Handles `OPTS <name> ...` with `hook`.
    pub(crate) const fn opts(mut self, hook: OptsHook) -> Verb {
        self.opts = Some(hook);
        self
    }
}

/// Every row (HELP lists the command rows in this order; FEAT order is each row's [`Feat::at`]).
pub(crate) static VERBS: &[Verb] = &[
    login::USER,
    login::PASS,
    basic::QUIT,
    basic::NOOP,
    basic::SYST,
    basic::HELP,
    feat::FEAT,
    feat::OPTS,
    feat::UTF8,
    stat::STAT,
    params::TYPE,
    params::MODE,
    params::STRU,
    params::ALLO,
    nav::PWD,
    nav::XPWD,
    nav::CWD,
    nav::XCWD,
    nav::CDUP,
    nav::XCUP,
    fsops::MKD,
    fsops::XMKD,
    fsops::RMD,
    fsops::XRMD,
    fsops::DELE,
    fsops::RNFR,
    fsops::RNTO,
    info::SIZE,
    info::MDTM,
    mfmt::MFMT,
    info::MLST,
    list::MLSD,
    list::LIST,
    list::NLST,
    pasv::PASV,
    pasv::EPSV,
    pasv::SPAS,
    pasv::STRIPES,
    port::PORT,
    port::EPRT,
    port::SPOR,
    bprt::BPAS,
    bprt::BPRT,
    blast::BLAST,
    retr::RETR,
    retr::ERET,
    stor::STOR,
    stor::APPE,
    stor::ESTO,
    rest::REST,
    abor::ABOR,
    sbuf::SBUF,
    sbuf::DRS,
    site::SITE,
    cksm::CKSM,
    peer::PEER,
    tls::AUTH,
    tls::PBSZ,
    tls::PROT,
    sscn::SSCN,
];

/// The command row for `name` (case-insensitive) and its handler; feature-only rows are not commands.
pub(crate) fn lookup(name: &str) -> Option<(&'static Verb, Handler)> {
    row(name).and_then(|v| Some((v, v.run?)))
}

/// The checksum request of a `CKSM <arg>` line, as it would run in the session's present state; `None` if it
/// would be refused.
pub(crate) fn cksm_request(ctx: &Ctx, arg: &str) -> Option<crate::server::types::FsRequest> {
    cksm::request(ctx, arg).ok()
}

/// The row named `name` (case-insensitive), command or feature-only.
fn row(name: &str) -> Option<&'static Verb> {
    VERBS.iter().find(|v| v.name.eq_ignore_ascii_case(name))
}

/// The FEAT body: every row's feature lines in FEAT position order.
pub(super) fn feature_lines(ctx: &Ctx) -> Vec<String> {
    let mut feats: Vec<Feat> = VERBS.iter().filter_map(|v| v.feat).collect();
    feats.sort_by_key(|f| f.at);
    feats
        .iter()
        .flat_map(|f| match f.lines {
            FeatLines::Fixed(lines) => lines.iter().map(|l| l.to_string()).collect(),
            FeatLines::Computed(lines) => lines(ctx),
        })
        .collect()
}

/// The `OPTS` hook of the row named `name`, if it has one.
pub(super) fn opts_hook(name: &str) -> Option<OptsHook> {
    row(name)?.opts
}

/// Strict decimal `u64`: ASCII digits only (no sign, no spaces, no suffix such as `4M`).
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The mode word of ERET (`P`) and ESTO (`A`): `want` is the only mode this server has; another gets `504`, none
/// the command's syntax error `bad`.
pub(crate) fn only_mode(
    word: Option<&str>,
    want: &str,
    verb: &str,
    bad: impl Fn() -> super::error::CommandError,
) -> Result<(), super::error::CommandError> {
    match word.unwrap_or("") {
        "" => Err(bad()),
        w if w.eq_ignore_ascii_case(want) => Ok(()),
        _ => Err(super::error::CommandError::Unsupported(format!(
            "{verb} mode not supported (only {want})."
        ))),
    }
}

/// `arg`, or `501 <what> needs an argument.` when it is empty.
pub(crate) fn required<'a>(
    arg: &'a str,
    what: &str,
) -> Result<&'a str, super::error::CommandError> {
    if arg.trim().is_empty() {
        Err(super::error::CommandError::syntax(format!(
            "{what} needs an argument."
        )))
    } else {
        Ok(arg)
    }
}

#[cfg(test)]
mod tests {
    use super::{lookup, VERBS};

    /// The verbs that change the tree are exactly the rows marked `writes` (SITE only sets buffer sizes here;
    /// blast uploads are STOR/APPE/ESTO over a BPAS channel, so they are covered by those rows).
    #[test]
    fn writing_verbs_are_marked() {
        let writes: Vec<&str> = VERBS.iter().filter(|v| v.writes).map(|v| v.name).collect();
        assert_eq!(
            writes,
            [
                "MKD", "XMKD", "RMD", "XRMD", "DELE", "RNFR", "RNTO", "MFMT", "STOR", "APPE",
                "ESTO"
            ]
        );
        assert!(!lookup("RETR").unwrap().0.writes);
    }

    #[test]
    fn names_and_feat_positions_are_unique() {
        for (i, v) in VERBS.iter().enumerate() {
            assert_eq!(v.name, v.name.to_ascii_uppercase(), "{}", v.name);
            assert!(
                VERBS[..i]
                    .iter()
                    .all(|w| !w.name.eq_ignore_ascii_case(v.name)),
                "two rows named {}",
                v.name
            );
            if let Some(f) = v.feat {
                assert!(
                    VERBS[..i]
                        .iter()
                        .all(|w| w.feat.is_none_or(|g| g.at != f.at)),
                    "{} shares FEAT position {}",
                    v.name,
                    f.at
                );
            }
            assert!(
                v.run.is_some() || v.feat.is_some() || v.opts.is_some(),
                "{} does nothing",
                v.name
            );
        }
    }
}
