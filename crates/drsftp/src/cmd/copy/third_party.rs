//! `drsftp copy ftp://A/x ftp://B/y`: logs in to both servers and runs the third-party copy of
//! `drsftp_io::client::third_party_copy` (TCP stream mode / MODE E, or the UDP blast channel), with the progress
//! bar fed from the servers' perf markers and Ctrl-C turned into ABOR on both ends.

use std::sync::Arc;

use anyhow::{Context, Result};
use drsftp_io::client::{Client, ClientOptions, TransferSummary};
use drsftp_io::data::Progress;

use super::{Args, Bar};
use crate::url::FtpUrl;

/// Runs the copy; the caller reports the summary.
pub(super) async fn copy(
    src: &FtpUrl,
    dst: &FtpUrl,
    args: &Args,
    opts: &ClientOptions,
) -> Result<TransferSummary> {
    if args.off.is_some() || args.len.is_some() {
        anyhow::bail!("--off/--len do not apply to third-party (server-to-server) copies");
    }
    // Both control connections under --tls (each server's certificate checked); with TLS on both, the data
    // channel is TLS too (`drsftp_io::client::third_party`: SSCN with the destination's pinned certificate).
    let tls = args.tls.settings()?;
    let login = |u: &FtpUrl| {
        let (a, user, pass, t) = (u.authority(), u.user.clone(), u.pass.clone(), opts.timeout);
        let tls = tls.clone();
        async move {
            Client::connect_tls(&a, &user, &pass, t, &tls)
                .await
                .with_context(|| format!("logging in to {a}"))
        }
    };
    let (s, d) = tokio::join!(login(src), login(dst));
    let (mut s, mut d) = (s?, d?);
    let progress = Arc::new(Progress::new());
    let total = s.size(&src.path).await.ok();
    let bar = Bar::start(args.quiet, total, progress.clone());
    let cancel = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let r = drsftp_io::client::third_party_copy(
        &mut s,
        &src.path,
        &mut d,
        &dst.path,
        opts,
        progress.clone(),
        cancel,
    )
    .await;
    bar.finish();
    let mut summary = r.with_context(|| format!("copying {src} to {dst} (third-party)"))?;
    if args.trace.is_some() {
        summary.notices.push(
            "--trace: no trace for a third-party copy (the data connections are the servers')"
                .into(),
        );
    }
    for c in [s, d] {
        if let Err(e) = c.quit().await {
            tracing::debug!("QUIT: {e}");
        }
    }
    Ok(summary)
}
