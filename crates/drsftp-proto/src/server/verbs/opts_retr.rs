//! `OPTS RETR <options>` (GFD.20): `Parallelism=<start>,<min>,<max>;` and the stripe options Globus sends. As in
//! Globus every option must end in `;` and keys are case-insensitive. `Parallelism=<n>;` and `<n>,<n>,<n>;` (what
//! globus-url-copy sends) fix the stream count; `<start>,<min>,<max>;` with `min < max` asks this server to refine
//! online between `min` and `max` on RETR/ERET in MODE E (`TransferPlan::parallelism_range`, `-p auto` on a
//! download; Globus servers ignore min/max and use `<start>`). Values must satisfy `1 <= min <= start <= max`:
//! anything else is refused with 501 (not clamped) and the previous setting stays; every value is then capped at
//! `ServerConfig::max_parallelism`. FEAT announces it as ` PARALLEL` (on the RETR registry row, `retr.rs`).
//! `StripeLayout=Partitioned;` or `StripeLayout=Blocked;[BlockSize=<n>;]` (what globus-url-copy `-stripe -sbs n`
//! sends) choose how a send to several SPOR addresses is divided (`server/stripes.rs`); `BlockSize` alone sets the
//! block size of the Blocked layout. Other keys (Markers...) are accepted and ignored, as Globus does.

use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::StripeLayout;

/// A `Parallelism` setting: streams to start with and the range online refinement may move in (`min == max ==
/// start` for a fixed count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Parallelism {
    pub(crate) start: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
}

/// What one `OPTS RETR` sets (`None`: the key was absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RetrOpts {
    pub(crate) parallelism: Option<Parallelism>,
    /// `StripeLayout=`: true for Partitioned, false for Blocked.
    pub(crate) partitioned: Option<bool>,
    pub(crate) block_size: Option<u64>,
}

/// Parallelism from `OPTS RETR` options (`None` = options without a Parallelism key). `Err`: why it is malformed.
#[cfg(test)]
fn parse(opts: &str) -> Result<Option<Parallelism>, String> {
    parse_all(opts).map(|o| o.parallelism)
}

/// Every option of an `OPTS RETR`. `Err`: why it is malformed.
pub(super) fn parse_all(opts: &str) -> Result<RetrOpts, String> {
    let opts = opts.trim();
    let Some(body) = opts.strip_suffix(';') else {
        return Err("OPTS RETR options must each end in `;`.".into());
    };
    let mut out = RetrOpts::default();
    for opt in body.split(';') {
        let (key, value) = opt
            .split_once('=')
            .ok_or_else(|| format!("OPTS RETR: `{opt}` is not <key>=<value>;."))?;
        let value = value.trim();
        if value.is_empty() {
            return Err(format!("OPTS RETR: {} has no value.", key.trim()));
        }
        let key = key.trim();
        if key.eq_ignore_ascii_case("Parallelism") {
            out.parallelism = Some(parse_parallelism(value)?);
        } else if key.eq_ignore_ascii_case("StripeLayout") {
            out.partitioned = Some(if value.eq_ignore_ascii_case("Partitioned") {
                true
            } else if value.eq_ignore_ascii_case("Blocked") {
                false
            } else {
                return Err(format!(
                    "OPTS RETR: StripeLayout={value} is neither Blocked nor Partitioned."
                ));
            });
        } else if key.eq_ignore_ascii_case("BlockSize") {
            let n = super::parse_u64(value)
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("OPTS RETR: BlockSize={value} is not a positive number."))?;
            out.block_size = Some(n);
        }
        // Markers...: accepted and ignored.
    }
    Ok(out)
}

fn parse_parallelism(value: &str) -> Result<Parallelism, String> {
    let bad = || {
        format!(
            "OPTS RETR: Parallelism={value} is not <start>,<min>,<max> (or <n>) with 1 <= min <= start <= max."
        )
    };
    let nums = value
        .split(',')
        .map(|v| super::parse_u64(v.trim()).map(|n| u32::try_from(n).unwrap_or(u32::MAX)))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(bad)?;
    let p = match nums[..] {
        [n] => Parallelism {
            start: n,
            min: n,
            max: n,
        },
        [start, min, max] => Parallelism { start, min, max },
        _ => return Err(bad()),
    };
    if p.min == 0 || p.min > p.start || p.start > p.max {
        return Err(bad());
    }
    Ok(p)
}

/// `OPTS RETR <options>` (the `OPTS` hook of the registry row).
pub(super) fn opts_retr(ctx: &mut Ctx, rest: &str) -> CmdResult {
    ctx.require_login()?;
    let o = parse_all(rest).map_err(CommandError::syntax)?;
    let block = |l: StripeLayout| match l {
        StripeLayout::Blocked { block_size } => block_size,
        StripeLayout::Partitioned => crate::server::DEFAULT_STRIPE_BLOCK,
    };
    match (o.partitioned, o.block_size) {
        (Some(true), _) => ctx.data.layout = StripeLayout::Partitioned,
        (Some(false), b) => {
            let block_size = b.unwrap_or_else(|| block(ctx.data.layout));
            ctx.data.layout = StripeLayout::Blocked { block_size };
        }
        (None, Some(block_size)) => ctx.data.layout = StripeLayout::Blocked { block_size },
        (None, None) => {}
    }
    if let Some(p) = o.parallelism {
        let cap = ctx.cfg.max_parallelism.max(1);
        let (start, min, max) = (p.start.min(cap), p.min.min(cap), p.max.min(cap));
        ctx.data.parallelism = Some(start);
        ctx.data.parallelism_range = (min < max).then_some((min, max));
    }
    ctx.reply(200, "OPTS Command Successful.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{parse, Parallelism};
    use crate::server::testutil::H;
    use crate::server::Mode;

    fn p(start: u32, min: u32, max: u32) -> Option<Parallelism> {
        Some(Parallelism { start, min, max })
    }

    #[test]
    fn parses_like_globus_plus_a_range() {
        assert_eq!(parse("Parallelism=4,4,4;"), Ok(p(4, 4, 4)));
        assert_eq!(parse("parallelism=2;"), Ok(p(2, 2, 2)));
        assert_eq!(parse("Parallelism=2,1,8;"), Ok(p(2, 1, 8)));
        assert_eq!(parse(" Parallelism = 2 , 1 , 8 ; "), Ok(p(2, 1, 8)));
        assert_eq!(
            parse("StripeLayout=Blocked;BlockSize=1048576;Parallelism=3,1,8;"),
            Ok(p(3, 1, 8))
        );
        assert_eq!(parse("StripeLayout=Partitioned;"), Ok(None));
        for bad in [
            "Parallelism=4,4,4",
            "Parallelism=0;",
            "Parallelism=x;",
            "Parallelism=;",
            "Parallelism=2,1;",
            "Parallelism=2,1,8,9;",
            "Parallelism=1,2,8;",
            "Parallelism=9,1,8;",
            "Parallelism=2,0,8;",
            "Parallelism=2,3,1;",
            "Parallelism=-1,1,8;",
            "Parallelism=2,,8;",
            ";",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn range_reaches_the_plan_and_bad_values_get_501() {
        let mut h = H::new();
        h.login();
        for c in ["TYPE I", "MODE E", "PORT 127,0,0,1,235,41"] {
            assert!(h.cmd(c).starts_with("200 "), "{c}");
        }
        assert_eq!(
            h.cmd("OPTS RETR Parallelism=2,1,8;"),
            "200 OPTS Command Successful.\r\n"
        );
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!(plan.mode, Mode::Extended);
        assert_eq!(
            (plan.parallelism, plan.parallelism_range),
            (2, Some((1, 8)))
        );
        h.done_ok(plan.id);
        // Malformed: a clear 501, the previous setting stays, and the session goes on.
        for bad in [
            "OPTS RETR Parallelism=9,1,8;",
            "OPTS RETR Parallelism=a,b,c;",
            "OPTS RETR Parallelism=2,1;",
            "OPTS RETR Parallelism=4,4,4",
        ] {
            let r = h.cmd(bad);
            assert!(r.starts_with("501 OPTS RETR"), "{bad}: {r}");
        }
        assert!(h.cmd("NOOP").starts_with("200 "));
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!(
            (plan.parallelism, plan.parallelism_range),
            (2, Some((1, 8)))
        );
        h.done_ok(plan.id);
        // A fixed count (globus-url-copy) clears the range.
        h.cmd("OPTS RETR Parallelism=4,4,4;");
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!((plan.parallelism, plan.parallelism_range), (4, None));
        h.done_ok(plan.id);
        // Capped at max_parallelism (64 by default): a range squeezed to one value is fixed.
        h.cmd("OPTS RETR Parallelism=100,80,200;");
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!((plan.parallelism, plan.parallelism_range), (64, None));
        h.done_ok(plan.id);
        h.cmd("OPTS RETR Parallelism=60,1,200;");
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!(
            (plan.parallelism, plan.parallelism_range),
            (60, Some((1, 64)))
        );
        h.done_ok(plan.id);
        // Uploads and stream mode never refine (the server is not the MODE E sender).
        assert!(h.cmd("STOR /up").starts_with("125 "));
        let plan = h.transfer();
        assert_eq!(plan.parallelism_range, None);
        h.done_ok(plan.id);
        h.cmd("MODE S");
        assert_eq!(h.retr_file("/f", 10).parallelism_range, None);
    }

    #[test]
    fn stripe_layout_reaches_the_plan() {
        use crate::server::StripeLayout;
        let mut h = H::new();
        h.login();
        for c in ["TYPE I", "MODE E", "SPOR 127,0,0,1,235,41 127,0,0,1,235,42"] {
            assert!(h.cmd(c).starts_with("200 "), "{c}");
        }
        let plan = h.retr_file("/f", 1 << 20);
        assert_eq!(plan.layout, StripeLayout::default());
        h.done_ok(plan.id);
        for (opts, want) in [
            (
                "StripeLayout=Blocked;BlockSize=65536;Parallelism=2,2,2;",
                StripeLayout::Blocked { block_size: 65536 },
            ),
            ("StripeLayout=Partitioned;", StripeLayout::Partitioned),
            (
                "BlockSize=4096;",
                StripeLayout::Blocked { block_size: 4096 },
            ),
            (
                "stripelayout=blocked;",
                StripeLayout::Blocked { block_size: 4096 },
            ),
        ] {
            assert!(
                h.cmd(&format!("OPTS RETR {opts}")).starts_with("200 "),
                "{opts}"
            );
            let plan = h.retr_file("/f", 1 << 20);
            assert_eq!(plan.layout, want, "{opts}");
            h.done_ok(plan.id);
        }
        for bad in ["StripeLayout=Diagonal;", "BlockSize=0;", "BlockSize=x;"] {
            assert!(
                h.cmd(&format!("OPTS RETR {bad}")).starts_with("501 "),
                "{bad}"
            );
        }
    }
}
