//! Third-party (server-to-server) copies: the client holds a logged-in control connection to each server and
//! introduces them; the file's bytes go straight from the source server to the destination server.
//!
//! TCP: TYPE I and the same MODE on both, buffer sizes, `OPTS RETR Parallelism=P,P,P;` on the source (MODE E),
//! `PEER <source address>` on a destination whose FEAT lists `PEER` (a drsftp server accepts passive data
//! connections only from the host its session names), PASV (EPSV if refused) on the destination, PORT/EPRT with that address on the source, ALLO, then STOR on the
//! destination and RETR on the source. In MODE E the sender connects (GFD.20), which is exactly this order; in
//! stream mode it works as classic FXP. Striped (GFD.20, `ClientOptions::stripes`, MODE E): `SPAS` on a
//! destination that lists it instead of PASV and, when it names more than one data mover, `SPOR` with all of them
//! on a source that lists SPOR, so each of the source's movers sends to one of the destination's (a Globus source
//! uses as many stripes as SPOR names, up to its own node count); no `PEER` to a destination whose SPAS names
//! other hosts than itself (a cluster), as the senders are then, as a rule, the source's movers, whose hosts the
//! client does not know. UDP blast (`ClientOptions::blast`): `OPTS BLAST` on both (the smaller MTU
//! if they differ), `BPAS` without an address on the destination, `BPAS <destination's address>` on the source,
//! `BPRT <source's address> Id=<source's id>` on the destination, ALLO, STOR, RETR (docs/blast.md). A destination
//! without `BLAST BPRT` in FEAT, or a source without BLAST, gets TCP and a notice.
//!
//! Both commands are driven to their final replies together; `112` perf markers (MODE E receivers send them) feed
//! [`Progress`]. A failure on either side, or `cancel`, sends ABOR to whichever is still running and deletes the
//! destination (DELE). Afterwards SIZE and CKSM (the first of `VERIFY_PREFERENCE` both list) are compared on the
//! two servers; a mismatch deletes the destination, so it is either complete and verified or not there. Between
//! two drsftp servers the set-up goes as one batch per end and the checks ride behind the transfer commands
//! (CKSM behind RETR, SIZE and CKSM behind STOR), so neither costs round trips of its own (docs/striping.md).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use drsftp_proto::client::blast_setup::{
    bpas_line, bprt_line, offers_bprt, opts_line, parse_bpas_reply, parse_opts_mtu,
};
use drsftp_proto::client::{
    parse_epsv, parse_pasv, parse_spas, port_command, spor_command, BlastRequest, Op, Outcome,
    Reply, TransferMode,
};

use super::control::Control;
use super::third_party_run::{run, Failed};
use super::third_party_verify::{common_alg, compare, verify};
use super::{third_party_resume, Client, ClientError, ClientOptions, TransferSummary};
use crate::data::Progress;

/// Which end, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    Source,
    Destination,
}

impl End {
    pub(super) fn name(self) -> &'static str {
        match self {
            End::Source => "source",
            End::Destination => "destination",
        }
    }
}

pub(super) fn at(end: End, c: &Control, e: impl std::fmt::Display) -> ClientError {
    ClientError::Invalid(format!("{} server {}: {e}", end.name(), c.peer()))
}

/// One command to its final reply; a refusal is an error naming the server.
async fn cmd(c: &mut Control, end: End, line: &str) -> Result<Reply, ClientError> {
    match c.run(Op::Command(line.to_string())).await {
        Ok(Outcome::Reply(r)) => Ok(r),
        Ok(other) => Err(at(end, c, format!("unexpected outcome {other:?}"))),
        Err(e) => Err(at(end, c, e)),
    }
}

/// One command whose refusal is only a notice (ALLO, buffer sizes, parallelism). Dead connections still fail.
async fn soft(
    c: &mut Control,
    end: End,
    line: &str,
    notices: &mut Vec<String>,
) -> Result<bool, ClientError> {
    match c.run(Op::Command(line.to_string())).await {
        Ok(_) => Ok(true),
        Err(e) if e.reply_code().is_some() => {
            notices.push(format!("{} server refused `{line}`: {e}", end.name()));
            Ok(false)
        }
        Err(e) => Err(at(end, c, e)),
    }
}

/// Copies `src_path` on `src`'s server to `dst_path` on `dst`'s server (see the module docs). `opts`: streams and
/// MODE E, `tcp_buffer`, `verify`, `timeout` (commands, and the longest time without perf-marker progress once
/// markers arrive), `blast` for the UDP channel; `partial` and our own socket settings do not apply. `cancel`
/// resolving (Ctrl-C) aborts both transfers and deletes the destination.
///
/// A whole-file MODE E copy resumes what an earlier run left at the destination (third_party_resume.rs); if the
/// resumed file fails its checksum, the destination is deleted and the whole file sent again, verified.
pub async fn copy(
    src: &mut Client,
    src_path: &str,
    dst: &mut Client,
    dst_path: &str,
    opts: &ClientOptions,
    progress: Arc<Progress>,
    cancel: impl Future<Output = ()>,
) -> Result<TransferSummary, ClientError> {
    let mut cancel = std::pin::pin!(cancel);
    let first = copy_once(
        src,
        src_path,
        dst,
        dst_path,
        opts,
        progress.clone(),
        cancel.as_mut(),
    )
    .await;
    match first {
        Ok(s) => Ok(s),
        Err(Failure::ResumedBad(e)) => {
            tracing::warn!(
                "resumed third-party copy failed its checksum ({e}); copying it all again"
            );
            let fresh = ClientOptions {
                resume: false,
                ..opts.clone()
            };
            let again = copy_once(src, src_path, dst, dst_path, &fresh, progress, cancel);
            let mut again = again.await.map_err(Failure::into_error)?;
            again.notices.push(format!(
                "the resumed copy of {src_path} failed its checksum ({e}); copied the whole file again"
            ));
            Ok(again)
        }
        Err(f) => Err(f.into_error()),
    }
}

/// Why one attempt failed: `ResumedBad` when the file, resumed from what the destination held, failed its
/// checksum (the destination is deleted; a fresh copy can follow).
enum Failure {
    Error(ClientError),
    ResumedBad(ClientError),
}

impl Failure {
    fn into_error(self) -> ClientError {
        match self {
            Failure::Error(e) | Failure::ResumedBad(e) => e,
        }
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Error(e)
    }
}

/// One attempt of [`copy`].
async fn copy_once(
    src: &mut Client,
    src_path: &str,
    dst: &mut Client,
    dst_path: &str,
    opts: &ClientOptions,
    progress: Arc<Progress>,
    cancel: impl Future<Output = ()>,
) -> Result<TransferSummary, Failure> {
    if opts.partial.is_some() {
        return Err(ClientError::Invalid(
            "partial (--off/--len) third-party copies are not supported".into(),
        )
        .into());
    }
    let started = Instant::now();
    let (s, d) = (&mut src.control, &mut dst.control);
    let size = super::stat::size_if_supported(s, src_path)
        .await
        .map_err(|e| at(End::Source, s, e))?;
    let mut notices = Vec::new();
    let udp = match &opts.blast {
        None => None,
        Some(b) => {
            let why = if !s.session().features().has("BLAST") {
                Some("the source server does not offer BLAST")
            } else if !offers_bprt(d.session().features()) {
                Some("the destination server does not list BPRT (FEAT BLAST BPRT), so it cannot receive a third-party blast transfer")
            } else if size.is_none() {
                Some("the source server does not answer SIZE, which a blast upload needs")
            } else {
                None
            };
            match why {
                Some(w) => {
                    notices.push(format!("{w}: using TCP"));
                    None
                }
                None => Some(b),
            }
        }
    };
    let mode = if udp.is_some() {
        TransferMode::Stream
    } else {
        opts.mode()
    };
    let streams = if mode == TransferMode::Extended {
        opts.streams.max(1)
    } else {
        1
    };
    let mut buffer_command = None;
    match udp {
        Some(b) => {
            let req = BlastRequest {
                mtu: b.mtu,
                max_rate: b.max_rate,
                ack_every: b.ack_every,
                start_rate: b.start_rate,
            };
            blast_setup(s, d, req, size.unwrap_or(0)).await?;
        }
        None => {
            protect_channel(s, d, &mut notices).await?;
            let stripes = opts.stripes && mode == TransferMode::Extended;
            let both_drsftp = s.session().features().drs() && d.session().features().drs();
            if both_drsftp && opts.tcp_buffer.is_none() {
                tcp_setup_batched(s, d, (mode, streams, stripes), size, &mut notices).await?;
            } else {
                buffer_command = tcp_setup(
                    s,
                    d,
                    (mode, streams, stripes),
                    opts.tcp_buffer,
                    size,
                    &mut notices,
                )
                .await?;
            }
        }
    }
    // A whole-file MODE E copy that both ends can verify resumes what an earlier run left at the destination.
    let alg =
        common_alg(s, d).filter(|_| udp.is_none() && mode == TransferMode::Extended && opts.verify);
    let resume = match (size, alg) {
        (Some(n), Some(alg)) => {
            let ends = (&mut *s, src_path, &mut *d, dst_path);
            third_party_resume::begin(ends, n, &alg, opts.resume, &progress, &mut notices).await?
        }
        _ => None,
    };
    let held = resume.as_ref().map(|r| r.held.clone()).unwrap_or_default();
    let markers = resume.as_ref().and_then(|r| r.markers.as_ref());
    // The final checks ride behind the transfer commands with drsftp servers (the session sends them only
    // then): the source checksums its file, which the copy does not change, while the destination still
    // receives the tail, and the destination answers SIZE and CKSM right after its own 226, with no round trip
    // between. The copy is still verified only by the destination's checksum of the whole file it holds.
    let both_drs = s.session().features().drs() && d.session().features().drs();
    let check = common_alg(s, d).filter(|_| opts.verify && udp.is_none() && both_drs);
    if let Some(alg) = &check {
        d.session_mut().set_trailing_size();
        d.session_mut().set_trailing_checksum(alg);
        s.session_mut().set_trailing_checksum(alg);
    }
    let begin = Instant::now();
    let r = run(s, src_path, d, dst_path, opts.timeout, &progress, cancel).await;
    let ran = match r {
        Ok(ran) => ran,
        Err(Failed { error, touched }) => {
            // A destination that keeps what it wrote under the final name (Globus) is resumed from the markers
            // recorded: deleting it would throw them away. Its record says a rerun finishes it.
            if touched && markers.is_none() {
                delete(d, dst_path).await;
            }
            return Err(error.into());
        }
    };
    if let Some(m) = markers {
        // Every byte is at the destination: whatever the checks below say, these markers are not used again.
        m.complete();
    }
    // The data phase ends with the last transfer reply, not with the checks that rode behind it.
    let seconds = (ran.data_end - begin).as_secs_f64();
    // The outcome: sizes, then checksums; any disagreement removes the destination.
    let dst_size = match ran.dst.size.as_deref() {
        Some(Ok(n)) => Some(*n),
        _ => super::stat::size_if_supported(d, dst_path)
            .await
            .map_err(|e| at(End::Destination, d, e))?,
    };
    if let (Some(a), Some(b)) = (size, dst_size) {
        if a != b {
            delete(d, dst_path).await;
            return Err(ClientError::SizeMismatch {
                what: format!("{dst_path} (destination deleted)"),
                expected: a,
                got: b,
            }
            .into());
        }
    }
    let bytes = size.or(dst_size).unwrap_or(progress.bytes()) - held.covered();
    if progress.bytes() < bytes {
        progress.add(progress.bytes()..bytes);
    }
    let mut summary = TransferSummary {
        resumed: held.covered(),
        buffer_command,
        notices,
        transport: if udp.is_some() { "udp" } else { "tcp" },
        stripes: ran.stripes,
        // From the logins to the transfer commands: SIZE, the channel's set-up (SPAS/SPOR), resume checks.
        setup_seconds: Some((begin - started).as_secs_f64()),
        ..TransferSummary::tcp(mode, bytes, seconds, streams as usize)
    };
    if opts.verify {
        let early = match (
            check,
            ran.src.checksum.as_deref(),
            ran.dst.checksum.as_deref(),
        ) {
            (Some(alg), Some(Ok(hs)), Some(Ok(hd))) => Some((alg, hs.clone(), hd.clone())),
            // Not asked, or refused by either end: both are asked again, one command each.
            _ => None,
        };
        let r = match early {
            Some((alg, hs, hd)) => compare(d, dst_path, alg, hs, hd, &mut summary).await,
            None => verify(s, src_path, d, dst_path, &mut summary).await,
        };
        match r {
            Ok(()) => {}
            Err(e @ ClientError::ChecksumMismatch { .. }) if !held.is_empty() => {
                return Err(Failure::ResumedBad(e))
            }
            Err(e) => return Err(e.into()),
        }
        summary.verify_seconds = Some(ran.data_end.elapsed().as_secs_f64());
    }
    Ok(summary)
}

/// The data channel's protection. With `PROT P` in force on both control connections the channel is TLS: the
/// destination (passive) is the TLS server as usual, and `SSCN ON <fingerprint>` makes the source, which
/// connects, the TLS client, checking the destination's certificate by the SHA-256 we saw on our own (verified)
/// control connection to it. A source that refuses SSCN fails the copy: data never goes in cleartext between
/// two servers that both speak TLS. If only one end has `PROT P`, it gets `PROT C` (the other cannot do TLS)
/// and a notice says the data channel is cleartext.
async fn protect_channel(
    s: &mut Control,
    d: &mut Control,
    notices: &mut Vec<String>,
) -> Result<(), ClientError> {
    match (s.data_tls().is_some(), d.data_tls().is_some()) {
        (true, true) => {
            let pin = d.peer_fingerprint().ok_or_else(|| {
                at(
                    End::Destination,
                    d,
                    "no certificate seen on the control connection",
                )
            })?;
            let hex: String = pin.iter().map(|b| format!("{b:02x}")).collect();
            if let Err(e) = cmd(s, End::Source, &format!("SSCN ON {hex}")).await {
                return Err(ClientError::Invalid(format!(
                    "{e}: the source cannot be the TLS client of a server-to-server data channel (SSCN), so the \
                     copy would travel in cleartext; refusing (use --tls off to allow that)"
                )));
            }
            Ok(())
        }
        (true, false) | (false, true) => {
            let (c, end, other) = if s.data_tls().is_some() {
                (s, End::Source, End::Destination)
            } else {
                (d, End::Destination, End::Source)
            };
            cmd(c, end, "PROT C").await?;
            c.set_data_tls(false);
            notices.push(format!(
                "the {} server has no TLS: the server-to-server data channel is cleartext",
                other.name()
            ));
            Ok(())
        }
        (false, false) => Ok(()),
    }
}

/// TYPE I, MODE, buffer sizes, parallelism, PASV/EPSV on the destination, PORT/EPRT on the source, ALLO
/// (`stripes`: SPAS on the destination, SPOR on the source when it names several stripes, see the module docs).
/// Returns the buffer command the source accepted.
async fn tcp_setup(
    s: &mut Control,
    d: &mut Control,
    (mode, streams, stripes): (TransferMode, u32, bool),
    tcp_buffer: Option<u64>,
    size: Option<u64>,
    notices: &mut Vec<String>,
) -> Result<Option<String>, ClientError> {
    let mode_line = format!("MODE {}", mode.letter());
    for (c, end) in [(&mut *s, End::Source), (&mut *d, End::Destination)] {
        cmd(c, end, "TYPE I").await?;
        cmd(c, end, &mode_line).await?;
    }
    let mut accepted = None;
    if let Some(b) = tcp_buffer {
        for (c, end, verb) in [
            (&mut *s, End::Source, "SITE RETRBUFSIZE"),
            (&mut *d, End::Destination, "SITE STORBUFSIZE"),
        ] {
            let line = format!("{verb} {b}");
            let mut quiet = Vec::new();
            let ok = if soft(c, end, &line, &mut quiet).await? {
                Some(line)
            } else {
                let sbuf = format!("SBUF {b}");
                soft(c, end, &sbuf, notices).await?.then_some(sbuf)
            };
            if end == End::Source {
                accepted = ok;
            }
        }
    }
    if mode == TransferMode::Extended {
        let line = format!("OPTS RETR Parallelism={streams},{streams},{streams};");
        soft(s, End::Source, &line, notices).await?;
    }
    let striped = match stripes {
        true => striped_passive(s, d, notices).await?,
        false => None,
    };
    // A destination whose SPAS names hosts other than itself is a cluster, and so, as a rule, is the source of a
    // striped copy: its data comes from movers whose hosts we cannot name (a Globus frontend never tells them),
    // and naming the source's control host would make the destination's movers refuse them. Such a destination
    // accepts the source's movers only under its `--third-party all` (docs/striping.md).
    let cluster = striped.as_ref().is_some_and(|a| {
        a.len() > 1
            || a.iter()
                .any(|x| x.ip().to_canonical() != d.peer().ip().to_canonical())
    });
    if !cluster {
        name_sender(s, d, notices).await?;
    }
    let port = match striped {
        Some(addrs) if addrs.len() > 1 => spor_command(&addrs),
        Some(addrs) => port_command(addrs[0]),
        None => port_command(passive(d).await?),
    };
    if let Err(e) = cmd(s, End::Source, &port).await {
        return Err(ClientError::Invalid(format!(
            "{e} (a third-party copy needs the source server to accept `{port}`, the destination's data address)"
        )));
    }
    if let Some(n) = size {
        soft(d, End::Destination, &format!("ALLO {n}"), notices).await?;
    }
    Ok(accepted)
}

/// [`tcp_setup`] in one round trip per end, both ends at once, for two drsftp servers without buffer sizes to
/// set (no SBUF fallback to wait for): `TYPE I`, `MODE`, `OPTS RETR` on the source; `TYPE I`, `MODE`, `ALLO`
/// and `SPAS` (or `PEER` and `PASV`) on the destination (`Op::Commands`); then `SPOR`/`PORT` on the source.
/// Refusals mean what they mean in [`tcp_setup`]: TYPE and MODE fail the copy, the rest are notices, and a
/// refused `SPAS` falls back to `PEER` and `PASV`.
async fn tcp_setup_batched(
    s: &mut Control,
    d: &mut Control,
    (mode, streams, stripes): (TransferMode, u32, bool),
    size: Option<u64>,
    notices: &mut Vec<String>,
) -> Result<(), ClientError> {
    let mode_line = format!("MODE {}", mode.letter());
    let mut src = vec!["TYPE I".to_string(), mode_line.clone()];
    if mode == TransferMode::Extended {
        src.push(format!(
            "OPTS RETR Parallelism={streams},{streams},{streams};"
        ));
    }
    let spas = stripes && d.session().features().has("SPAS") && s.session().features().has("SPOR");
    let mut dst = vec!["TYPE I".to_string(), mode_line];
    dst.extend(size.map(|n| format!("ALLO {n}")));
    if !spas && d.session().features().has("PEER") {
        // Not striped, so not a cluster: the sender is the source's own host (see `name_sender`).
        dst.push(format!("PEER {}", s.peer().ip().to_canonical()));
    }
    dst.push(if spas { "SPAS" } else { "PASV" }.to_string());
    let (rs, rd) = tokio::join!(
        s.run(Op::Commands(src.clone())),
        d.run(Op::Commands(dst.clone()))
    );
    let replies = |c: &Control, end: End, r: Result<Outcome, ClientError>| match r {
        Ok(Outcome::Replies(v)) => Ok(v),
        Ok(other) => Err(at(end, c, format!("unexpected outcome {other:?}"))),
        Err(e) => Err(at(end, c, e)),
    };
    let rs = replies(s, End::Source, rs)?;
    let mut rd = replies(d, End::Destination, rd)?;
    let last = rd.pop().filter(|_| rd.len() + 1 == dst.len());
    for (c, end, lines, got) in [
        (&*s, End::Source, &src, &rs),
        (&*d, End::Destination, &dst, &rd),
    ] {
        for (line, r) in lines.iter().zip(got) {
            if r.is_ok() {
                continue;
            }
            if line.starts_with("TYPE") || line.starts_with("MODE") {
                let e = drsftp_proto::client::ClientError::Refused {
                    command: line.clone(),
                    reply: r.clone(),
                };
                return Err(at(end, c, e));
            }
            notices.push(format!("{} server refused `{line}`: {r}", end.name()));
        }
    }
    let last = last.ok_or_else(|| at(End::Destination, d, "fewer replies than commands"))?;
    let peer = d.peer().ip();
    let wild = |a: SocketAddr| {
        if a.ip().is_unspecified() {
            SocketAddr::new(peer, a.port())
        } else {
            a
        }
    };
    let striped = match spas {
        false => None,
        true => match parse_spas(&last) {
            Some(a) => Some(a.into_iter().map(wild).collect::<Vec<_>>()),
            None if last.is_ok() => {
                return Err(at(End::Destination, d, format!("cannot parse `{last}`")))
            }
            None => {
                notices.push(format!(
                    "destination server refused `SPAS` (not striping): {last}"
                ));
                None
            }
        },
    };
    let port = match striped {
        Some(addrs) => {
            // One stripe on the destination's own host is no cluster: it takes the source's host by PEER.
            let cluster = addrs.len() > 1
                || addrs
                    .iter()
                    .any(|x| x.ip().to_canonical() != peer.to_canonical());
            if !cluster {
                name_sender(s, d, notices).await?;
            }
            if addrs.len() > 1 {
                spor_command(&addrs)
            } else {
                port_command(addrs[0])
            }
        }
        None if spas => {
            name_sender(s, d, notices).await?;
            port_command(passive(d).await?)
        }
        None => port_command(match parse_pasv(&last) {
            Some(a) => wild(a),
            None => passive(d).await?,
        }),
    };
    if let Err(e) = cmd(s, End::Source, &port).await {
        return Err(ClientError::Invalid(format!(
            "{e} (a third-party copy needs the source server to accept `{port}`, the destination's data address)"
        )));
    }
    Ok(())
}

/// `PEER <source address>` on a destination whose FEAT lists `PEER`: a drsftp server accepts passive data
/// connections only from its control peer (us) otherwise, and the source server connects from its own address
/// (its control address as we reach it). Refused (`504`, the destination's third-party policy) is only a notice:
/// the copy still works where source and client share an address, and fails clearly at the data connection if not.
async fn name_sender(
    s: &Control,
    d: &mut Control,
    notices: &mut Vec<String>,
) -> Result<(), ClientError> {
    if !d.session().features().has("PEER") {
        return Ok(());
    }
    let line = format!("PEER {}", s.peer().ip().to_canonical());
    soft(d, End::Destination, &line, notices).await?;
    Ok(())
}

/// `SPAS` on a destination that lists it, for a source that lists SPOR: the destination's stripes (wildcard
/// hosts made its control address). `None` (PASV follows) if either does not offer them or SPAS is refused; a
/// reply that names no valid stripe fails the copy.
async fn striped_passive(
    s: &Control,
    d: &mut Control,
    notices: &mut Vec<String>,
) -> Result<Option<Vec<SocketAddr>>, ClientError> {
    if !(d.session().features().has("SPAS") && s.session().features().has("SPOR")) {
        return Ok(None);
    }
    let peer = d.peer().ip();
    let r = match d.run(Op::Command("SPAS".into())).await {
        Ok(Outcome::Reply(r)) => r,
        Err(e) if e.reply_code().is_some() => {
            notices.push(format!(
                "destination server refused `SPAS` (not striping): {e}"
            ));
            return Ok(None);
        }
        Err(e) => return Err(at(End::Destination, d, e)),
        Ok(other) => {
            return Err(at(
                End::Destination,
                d,
                format!("unexpected outcome {other:?}"),
            ))
        }
    };
    let addrs =
        parse_spas(&r).ok_or_else(|| at(End::Destination, d, format!("cannot parse `{r}`")))?;
    Ok(Some(
        addrs
            .into_iter()
            .map(|a| {
                if a.ip().is_unspecified() {
                    SocketAddr::new(peer, a.port())
                } else {
                    a
                }
            })
            .collect(),
    ))
}

/// PASV on the destination (EPSV when PASV is refused or not IPv4); a wildcard host means its control address.
async fn passive(d: &mut Control) -> Result<SocketAddr, ClientError> {
    let peer = d.peer().ip();
    let pasv = match d.run(Op::Command("PASV".into())).await {
        Ok(Outcome::Reply(r)) => parse_pasv(&r),
        Err(e) if e.reply_code().is_some() => None,
        Err(e) => return Err(at(End::Destination, d, e)),
        Ok(_) => None,
    };
    let addr = match pasv {
        Some(a) => a,
        None => {
            let r = cmd(d, End::Destination, "EPSV").await?;
            parse_epsv(&r, peer)
                .ok_or_else(|| at(End::Destination, d, format!("cannot parse `{r}`")))?
        }
    };
    Ok(if addr.ip().is_unspecified() {
        SocketAddr::new(peer, addr.port())
    } else {
        addr
    })
}

/// OPTS BLAST on both (one MTU), BPAS on the destination, BPAS with its address on the source, BPRT with the
/// source's address and transfer id on the destination, ALLO.
async fn blast_setup(
    s: &mut Control,
    d: &mut Control,
    mut req: BlastRequest,
    size: u64,
) -> Result<(), ClientError> {
    for (c, end) in [(&mut *s, End::Source), (&mut *d, End::Destination)] {
        cmd(c, end, "TYPE I").await?;
    }
    let mtu = |c: &Control, end: End, r: &Reply| {
        parse_opts_mtu(r).ok_or_else(|| at(end, c, format!("cannot parse `{r}`")))
    };
    let rs = cmd(s, End::Source, &opts_line(&req)).await?;
    let rd = cmd(d, End::Destination, &opts_line(&req)).await?;
    let (ms, md) = (mtu(s, End::Source, &rs)?, mtu(d, End::Destination, &rd)?);
    if ms != md {
        // Each server clamps to its own maximum: agree on the smaller packet size.
        req.mtu = ms.min(md);
        let rs = cmd(s, End::Source, &opts_line(&req)).await?;
        let rd = cmd(d, End::Destination, &opts_line(&req)).await?;
        let (ms, md) = (mtu(s, End::Source, &rs)?, mtu(d, End::Destination, &rd)?);
        if ms != md {
            return Err(ClientError::Invalid(format!(
                "the servers do not agree on a blast MTU (source {ms}, destination {md})"
            )));
        }
    }
    let bad = |c: &Control, end: End, r: &Reply| at(end, c, format!("cannot parse `{r}`"));
    let r = cmd(d, End::Destination, "BPAS").await?;
    let (addr_d, _) =
        parse_bpas_reply(&r, Some(d.peer().ip())).ok_or_else(|| bad(d, End::Destination, &r))?;
    let r = cmd(s, End::Source, &bpas_line(addr_d)).await?;
    let (addr_s, id) =
        parse_bpas_reply(&r, Some(s.peer().ip())).ok_or_else(|| bad(s, End::Source, &r))?;
    cmd(d, End::Destination, &bprt_line(addr_s, id)).await?;
    cmd(d, End::Destination, &format!("ALLO {size}")).await?;
    Ok(())
}

/// Best-effort DELE of the destination (a failed or unverified copy must not look like a good one).
pub(super) async fn delete(d: &mut Control, path: &str) {
    if d.session().is_dead() || d.session().is_busy() {
        return;
    }
    match d.run(Op::Command(format!("DELE {path}"))).await {
        Ok(_) => tracing::info!("deleted the destination {path}"),
        Err(e) => tracing::debug!("DELE {path}: {e}"),
    }
}
