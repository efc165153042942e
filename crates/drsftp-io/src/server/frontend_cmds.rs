//! The commands a striped frontend gives its movers, and the checks before it does: PORT/SPOR and REST texts,
//! the common set-up of a transfer, data protection, the hidden part file's name, and a user's path mapped to
//! the movers' tree (`frontend.rs` drives the sessions).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use drsftp_proto::client::port_command;
use drsftp_proto::ranges::RangeSet;
use drsftp_proto::server::{Mode, Payload, StripeLayout, TransferPlan, TransferResult};
use drsftp_storage::Storage;

/// `addr` as a PORT/SPOR host-port (`PORT h1,...,p2` is the one formatter both sides share).
pub(super) fn host_port(a: SocketAddr) -> Result<String, String> {
    match a.ip() {
        IpAddr::V4(_) => Ok(port_command(a).trim_start_matches("PORT ").to_string()),
        IpAddr::V6(_) => Err("striped transfers need IPv4 data addresses".into()),
    }
}

/// `REST` text for held `ranges`.
pub(super) fn rest_text(ranges: &RangeSet) -> String {
    ranges
        .iter()
        .map(|r| format!("{}-{}", r.start, r.end))
        .collect::<Vec<_>>()
        .join(",")
}

/// Commands every mover of `plan` gets first: mode, buffer, in-band DRS, parallelism, layout.
pub(super) fn common_setup(plan: &TransferPlan) -> Vec<String> {
    let mut v = vec![match plan.mode {
        Mode::Extended => "MODE E".to_string(),
        Mode::Stream => "MODE S".to_string(),
    }];
    if let Some(b) = plan.tcp_buffer {
        v.push(format!("SBUF {b}"));
    }
    if plan.inband_drs {
        v.push("OPTS DRS Inband=1;".into());
    }
    if plan.mode == Mode::Extended {
        // A receiving mover takes at most its `Parallelism` connections: the most this plan may take.
        let p = match plan.payload {
            Payload::RecvFile { .. } => plan.max_connections,
            _ => plan.parallelism,
        }
        .max(1);
        let (lo, hi) = plan.parallelism_range.unwrap_or((p, p));
        let layout = match plan.layout {
            StripeLayout::Partitioned => "StripeLayout=Partitioned;".to_string(),
            StripeLayout::Blocked { block_size } => {
                format!("StripeLayout=Blocked;BlockSize={block_size};")
            }
        };
        v.push(format!("OPTS RETR {layout}Parallelism={p},{lo},{hi};"));
    }
    v
}

/// The part file a striped receive of `path` lands in: hidden, beside it, unique.
pub(super) fn part_name(path: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{dir}/.{name}.drsftp-stripe-{}-{t}-{n}", std::process::id())
}

/// The path a mover is given for the user's `path` (a normalised path of the user's tree): the same file in the
/// served tree the movers share, beneath the user's `root`. Normalising first removes every `..`, so the result
/// cannot climb above `root`; control characters would end the mover's command line early (a second command
/// smuggled in a file name), so they are refused.
pub(super) fn mover_path(root: &str, path: &str) -> Result<String, TransferResult> {
    if path.chars().any(char::is_control) {
        return Err(TransferResult::Failed {
            code: 553,
            message: "File name not allowed (control character).".into(),
        });
    }
    let p = drsftp_storage::normalize_virtual(path);
    Ok(drsftp_storage::join_virtual(
        root,
        p.trim_start_matches('/'),
    ))
}

/// Resolves `path` (or, for a receive, its directory) in the user's own tree before any mover is asked: a path
/// that does not resolve beneath the user's root (a missing file, a symlink leading out) is refused here with the
/// storage's reply, as an unstriped server would.
pub(super) async fn check_user_path(
    storage: &Arc<dyn Storage>,
    path: &str,
    receive: bool,
) -> Result<(), TransferResult> {
    let p = drsftp_storage::normalize_virtual(path);
    let target = if receive {
        p.rsplit_once('/')
            .map(|(d, _)| if d.is_empty() { "/" } else { d })
            .unwrap_or("/")
            .to_string()
    } else {
        p
    };
    let st = storage.clone();
    match tokio::task::spawn_blocking(move || st.stat(&target)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(TransferResult::Failed {
            code: e.reply_code(),
            message: e.to_string(),
        }),
        Err(e) => Err(TransferResult::Failed {
            code: 451,
            message: e.to_string(),
        }),
    }
}

/// The commands that give a mover the client's data protection: `PROT P` (the mover then runs TLS on its data
/// connections with the certificate it shares with this frontend, so the client checks it exactly as it checked
/// ours) or `PROT C`, and which side of a server-to-server channel is the TLS client (`SSCN`, with the pin the
/// client gave us).
pub(super) fn protection(protect: bool, tls_client: bool, pin: Option<[u8; 32]>) -> Vec<String> {
    if !protect {
        return vec!["PROT C".into()];
    }
    let sscn = match (tls_client, pin) {
        (false, _) => "SSCN OFF".to_string(),
        (true, None) => "SSCN ON".to_string(),
        (true, Some(pin)) => format!(
            "SSCN ON {}",
            pin.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ),
    };
    vec!["PROT P".into(), sscn]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mover_paths_stay_beneath_the_users_root() {
        let ok = |root: &str, p: &str| mover_path(root, p).map_err(|_| ()).unwrap();
        assert_eq!(ok("/", "/a/b.bin"), "/a/b.bin");
        assert_eq!(ok("/alice", "/a/b.bin"), "/alice/a/b.bin");
        assert_eq!(ok("/alice", "/"), "/alice");
        // `..` never climbs above the user's root, however it is spelled.
        assert_eq!(ok("/alice", "/../bob/x"), "/alice/bob/x");
        assert_eq!(ok("/alice", "a/../../../../bob/x"), "/alice/bob/x");
        assert_eq!(ok("/alice", "//..//.//bob/./x/"), "/alice/bob/x");
        // A control character would end the mover's command line and start another command.
        for bad in ["/x\r\nDELE /y", "/x\rDELE /y", "/x\nDELE /y", "/x\0y"] {
            match mover_path("/alice", bad) {
                Err(TransferResult::Failed { code, .. }) => assert_eq!(code, 553, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn movers_get_the_clients_protection() {
        assert_eq!(protection(false, true, None), ["PROT C"]);
        assert_eq!(protection(true, false, None), ["PROT P", "SSCN OFF"]);
        assert_eq!(protection(true, true, None), ["PROT P", "SSCN ON"]);
        assert_eq!(
            protection(true, true, Some([0xab; 32]))[1],
            format!("SSCN ON {}", "ab".repeat(32))
        );
    }
}
