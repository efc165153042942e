//! SIZE and MDTM for a transfer's checks and the progress bar: the answers kept per path (`control::LastSize`) so
//! that a second ask costs no round trip, TYPE I + SIZE + MDTM in one write to a drsftp server, and the readings
//! of a refusal (no such file, or a server without SIZE).

use drsftp_proto::client::{Op, Outcome};

use super::control::{self, Control};
use super::ClientError;

/// `SIZE path`. A second ask for the same path with no other operation in between (the progress bar's, then the
/// download's) is answered from the first: one control round trip less. A drsftp server is asked MDTM in the
/// same write (`size_and_mtime`), so that the download's resume identity costs no round trip either.
pub(super) async fn size(control: &mut Control, path: &str) -> Result<u64, ClientError> {
    // Both answer from the kept SIZE when it is this path's.
    if control.session().features().drs() {
        if let (Some(n), _) = size_and_mtime(control, path, true).await? {
            return Ok(n);
        }
    }
    size_alone(control, path).await
}

/// `SIZE path` on its own (TYPE I ahead of it), or the answer kept from the last ask.
pub(super) async fn size_alone(control: &mut Control, path: &str) -> Result<u64, ClientError> {
    if let Some(k) = control.last_size.as_ref().filter(|k| k.path == path) {
        return Ok(k.size);
    }
    match control.run(Op::Size(path.to_string())).await? {
        Outcome::Size(n) => {
            control.last_size = Some(control::LastSize {
                path: path.to_string(),
                size: n,
                mtime: None,
            });
            Ok(n)
        }
        other => Err(ClientError::Invalid(format!(
            "unexpected SIZE outcome {other:?}"
        ))),
    }
}

/// `SIZE path`, where any reply refusing it (550 no such file, 5xx no SIZE) is `None`: the resume checks that have
/// nothing to compare then. Only a dead or broken connection is an error.
pub(super) async fn size_if_any(
    control: &mut Control,
    path: &str,
) -> Result<Option<u64>, ClientError> {
    match size(control, path).await {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.reply_code().is_some() => Ok(None),
        Err(e) => Err(e),
    }
}

/// `SIZE path`, where "the server does not do SIZE" (500/502/504) is `None` and everything else (550 no such
/// file, a dead connection) is an error.
pub(crate) async fn size_if_supported(
    control: &mut Control,
    path: &str,
) -> Result<Option<u64>, ClientError> {
    match size_alone(control, path).await {
        Ok(n) => Ok(Some(n)),
        Err(e) if matches!(e.reply_code(), Some(500 | 502 | 504)) => {
            tracing::info!("server does not answer SIZE: {e}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// SIZE, and for a whole-file download also MDTM (the resume identity's modification time), in one round trip
/// with a drsftp server: TYPE I, SIZE and MDTM go out in one write ([`Op::Commands`]), where they took two
/// round trips one after the other. Any other server, a partial download or a size already known: SIZE alone
/// (MDTM then follows in `resume::identity` when needed). The second value is `Some(mtime)` when MDTM was
/// asked here (`None` inside: the server gave none).
pub(crate) async fn size_and_mtime(
    control: &mut Control,
    path: &str,
    whole: bool,
) -> Result<(Option<u64>, Option<Option<String>>), ClientError> {
    let known = control.last_size.as_ref().filter(|k| k.path == path);
    if let Some(k) = known.filter(|k| whole && k.mtime.is_some()) {
        return Ok((Some(k.size), k.mtime.clone()));
    }
    if !whole || known.is_some() || !control.session().features().drs() {
        return Ok((size_if_supported(control, path).await?, None));
    }
    let cmds = stat_commands(path);
    let replies = match control.run(Op::Commands(cmds.clone())).await? {
        Outcome::Replies(r) if r.len() == 3 => r,
        other => {
            return Err(ClientError::Invalid(format!(
                "unexpected outcome of TYPE I, SIZE and MDTM: {other:?}"
            )))
        }
    };
    let (size, mtime) = read_stat(path, &cmds, &replies)?;
    if let Some(n) = size {
        keep(control, path, n, mtime.clone());
    }
    Ok((size, Some(mtime)))
}

/// TYPE I, SIZE and MDTM of `path`: what [`size_and_mtime`] sends in one write, and what a login to a drsftp
/// server may carry behind its FEAT (`Client::connect_to_fetch`).
pub(super) fn stat_commands(path: &str) -> Vec<String> {
    vec![
        "TYPE I".to_string(),
        format!("SIZE {path}"),
        format!("MDTM {path}"),
    ]
}

/// The size (`None`: the server does not do SIZE) and modification time (`None`: none given) in the replies to
/// [`stat_commands`]; a refused TYPE I or SIZE (no such file) is its error.
fn read_stat(
    path: &str,
    cmds: &[String],
    replies: &[drsftp_proto::client::Reply],
) -> Result<(Option<u64>, Option<String>), ClientError> {
    let refused = |i: usize| -> ClientError {
        drsftp_proto::client::ClientError::Refused {
            command: cmds[i].clone(),
            reply: replies[i].clone(),
        }
        .into()
    };
    if !replies[0].is_ok() {
        return Err(refused(0));
    }
    let size = match replies[1].code {
        213 => match replies[1].text().trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return Err(ClientError::Invalid(format!(
                    "SIZE {path}: not a size: {}",
                    replies[1]
                )))
            }
        },
        500 | 502 | 504 => {
            tracing::info!("server does not answer SIZE: {}", replies[1]);
            None
        }
        _ => return Err(refused(1)),
    };
    let mtime = (replies[2].code == 213).then(|| replies[2].text().trim().to_string());
    Ok((size, mtime))
}

fn keep(control: &mut Control, path: &str, size: u64, mtime: Option<String>) {
    control.last_size = Some(control::LastSize {
        path: path.to_string(),
        size,
        mtime: Some(mtime),
    });
}

/// Keeps the answers to [`stat_commands`] that rode behind the login (`replies`: none if they did not), so the
/// first SIZE of `path` and the download's MDTM are answered without a round trip. Anything else (a refusal, no
/// SIZE, a garbled answer) keeps nothing: the first ask then goes to the server and meets the error itself.
pub(super) fn keep_after_login(
    control: &mut Control,
    path: &str,
    replies: &[drsftp_proto::client::Reply],
) {
    if replies.len() != 3 {
        return;
    }
    if let Ok((Some(n), mtime)) = read_stat(path, &stat_commands(path), replies) {
        keep(control, path, n, mtime);
    }
}
