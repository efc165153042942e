//! FEAT (RFC 2389, Globus layout) and OPTS, both driven by the verb registry: FEAT prints the rows' feature
//! lines, OPTS dispatches to the row its first word names (`OPTS RETR` in `opts_retr.rs`, `OPTS DRS` in `sbuf.rs`,
//! `OPTS BLAST` in `blast.rs`, `OPTS MLST` in `info.rs`). This file also owns the `UTF8` feature and `OPTS UTF8`.

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};

pub(super) const FEAT: Verb = Verb::cmd("FEAT", feat).before_login();
pub(super) const OPTS: Verb = Verb::cmd("OPTS", opts).before_login();
/// ` UTF8` (RFC 2640): names go out as stored (UTF-8 on any sane system); `OPTS UTF8 ON|OFF` is acknowledged.
pub(super) const UTF8: Verb = Verb::feature("UTF8").feat(10, &["UTF8"]).opts(opts_utf8);

/// `FEAT`: exactly what this server implements: each registry row's feature lines, in FEAT position order.
fn feat(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    let body: Vec<String> = super::feature_lines(ctx)
        .iter()
        .map(|f| format!(" {f}"))
        .collect();
    ctx.reply_multi(211, "Extensions supported:", &body, "End.");
    Ok(())
}

/// `OPTS <name> <options>`: the `OPTS` hook of the registry row named `<name>`.
fn opts(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let (cmd, rest) = arg.trim_start().split_once(' ').unwrap_or((arg.trim(), ""));
    match super::opts_hook(cmd) {
        Some(hook) => hook(ctx, rest),
        None => Err(CommandError::syntax(
            "OPTS not understood for this command.",
        )),
    }
}

/// `OPTS UTF8 [ON|OFF]`: nothing to switch (names are sent as stored either way), so only acknowledged.
fn opts_utf8(ctx: &mut Ctx, rest: &str) -> CmdResult {
    match rest.trim().to_ascii_uppercase().as_str() {
        "ON" | "" => {
            ctx.reply(200, "UTF8 set to on.");
            Ok(())
        }
        "OFF" => {
            ctx.reply(200, "UTF8 set to off (names are sent as stored).");
            Ok(())
        }
        _ => Err(CommandError::syntax("OPTS UTF8 takes ON or OFF.")),
    }
}

#[cfg(test)]
mod tests {
    use crate::client::{Features, ReplyReader};
    use crate::server::testutil::H;
    use crate::server::ServerConfig;

    #[test]
    fn feat_lists_what_is_implemented() {
        let mut h = H::new();
        let feat = h.cmd("FEAT");
        assert_eq!(
            feat,
            "211-Extensions supported:\r\n UTF8\r\n MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;\r\n SIZE\r\n \
             MDTM\r\n MFMT\r\n REST STREAM\r\n PARALLEL\r\n ERET\r\n ESTO\r\n SPAS\r\n SPOR\r\n SBUF\r\n DRS\r\n \
             CKSM SHA256;SHA1;MD5;ADLER32;CRC32C;\r\n EPSV\r\n EPRT\r\n PEER\r\n BLAST BPRT\r\n STRIPES 1\r\n\
             211 End.\r\n"
        );
        // Our own client reads it as a GridFTP server with checksums.
        let mut rd = ReplyReader::new();
        rd.push(feat.as_bytes());
        let f = Features::parse(&rd.next_reply().unwrap().unwrap());
        assert!(f.parallel() && f.has("ERET") && f.has("SPAS") && f.drs());
        assert_eq!(f.verify_algorithm(), Some("CRC32C"));
        // One stripe: this server moves its own data. A frontend says how many movers SPAS would name.
        assert_eq!(f.stripes(), Some(1));
        let mut h = H::with_cfg(ServerConfig {
            data_nodes: 3,
            ..ServerConfig::default()
        });
        assert!(h.cmd("FEAT").contains("\r\n STRIPES 3\r\n211 End."));
    }

    /// The whole FEAT reply and the OPTS replies, byte for byte, as they were before FEAT and OPTS were
    /// assembled from the verb registry (plus MFMT and the last line, STRIPES, since): globus-url-copy, curl and
    /// lftp read these bytes (the interop tests run them against it).
    #[test]
    fn feat_and_opts_bytes_are_pinned() {
        const WITHOUT_BLAST: &str = "211-Extensions supported:\r\n UTF8\r\n \
             MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;\r\n SIZE\r\n MDTM\r\n MFMT\r\n REST STREAM\r\n \
             PARALLEL\r\n \
             ERET\r\n ESTO\r\n SPAS\r\n SPOR\r\n SBUF\r\n DRS\r\n \
             CKSM SHA256;SHA1;MD5;ADLER32;CRC32C;\r\n EPSV\r\n EPRT\r\n PEER\r\n STRIPES 1\r\n211 End.\r\n";
        let with_blast = WITHOUT_BLAST.replace(" STRIPES 1", " BLAST BPRT\r\n STRIPES 1");
        assert_eq!(H::new().cmd("FEAT"), with_blast);
        let mut h = H::with_cfg(ServerConfig {
            blast: false,
            ..ServerConfig::default()
        });
        assert_eq!(h.cmd("FEAT"), WITHOUT_BLAST);
        // OPTS before login: UTF8 and MLST work, the rest want a login.
        for (cmd, reply) in [
            ("OPTS UTF8", "200 UTF8 set to on.\r\n"),
            (
                "opts utf8 off",
                "200 UTF8 set to off (names are sent as stored).\r\n",
            ),
            ("OPTS UTF8 MAYBE", "501 OPTS UTF8 takes ON or OFF.\r\n"),
            ("OPTS MLST size;", "200 MLST OPTS Size;\r\n"),
            (
                "OPTS RETR Parallelism=2;",
                "530 Please login with USER and PASS.\r\n",
            ),
            (
                "OPTS DRS Inband=1;",
                "530 Please login with USER and PASS.\r\n",
            ),
            (
                "OPTS BLAST MTU=1500;",
                "530 Please login with USER and PASS.\r\n",
            ),
            (
                "OPTS FOO bar",
                "501 OPTS not understood for this command.\r\n",
            ),
            ("OPTS", "501 OPTS not understood for this command.\r\n"),
            (
                "OPTS SIZE x",
                "501 OPTS not understood for this command.\r\n",
            ),
        ] {
            assert_eq!(h.cmd(cmd), reply, "{cmd}");
        }
        assert!(h
            .cmd("FEAT")
            .contains("\r\n MLST Type;Size*;Modify;Perm;UNIX.mode;\r\n"));
        h.login();
        for (cmd, reply) in [
            (
                "OPTS RETR Parallelism=2;",
                "200 OPTS Command Successful.\r\n",
            ),
            (
                "OPTS RETR",
                "501 OPTS RETR options must each end in `;`.\r\n",
            ),
            ("OPTS DRS Inband=1;", "200 DRS Inband=1;\r\n"),
            ("OPTS DRS", "500 OPTS failed.\r\n"),
            (
                "OPTS BLAST MTU=1500;",
                "502 BLAST is disabled on this server.\r\n",
            ),
        ] {
            assert_eq!(h.cmd(cmd), reply, "{cmd}");
        }
        let mut h = H::new();
        h.login();
        assert_eq!(
            h.cmd("OPTS BLAST MTU=1500;Rate=1000;"),
            "200 OPTS BLAST MTU=1500;Rate=1000;\r\n"
        );
        assert_eq!(h.cmd("OPTS BLAST x"), "500 OPTS failed.\r\n");
        // Feature-only registry rows are not commands.
        for cmd in ["UTF8", "DRS Inband=1;", "BLAST"] {
            assert_eq!(h.cmd(cmd), "500 Unknown command.\r\n", "{cmd}");
        }
    }

    #[test]
    fn opts_retr_like_globus() {
        // The parser's cases live in `opts_retr.rs`.
        let mut h = H::new();
        h.login();
        assert_eq!(
            h.cmd("OPTS RETR Parallelism=4,4,4;"),
            "200 OPTS Command Successful.\r\n"
        );
        assert!(h
            .cmd("OPTS RETR Parallelism=4,4,4")
            .starts_with("501 OPTS RETR options must each end in `;`."));
        assert_eq!(h.cmd("OPTS UTF8 ON"), "200 UTF8 set to on.\r\n");
        assert_eq!(
            h.cmd("OPTS MLST type;size;"),
            "200 MLST OPTS Type;Size;\r\n"
        );
        assert!(h
            .cmd("FEAT")
            .contains(" MLST Type*;Size*;Modify;Perm;UNIX.mode;\r\n"));
        assert!(h.cmd("OPTS FOO bar").starts_with("501 "));
    }
}
