//! A striped frontend (`drsftp serve --movers`, issue 23): this server keeps the control session (logins,
//! listings over the control channel, SIZE, CKSM, renames: the movers share its storage) but moves no data.
//! Each client session holds one ordinary FTP control session per data mover, logged in with the mover account,
//! and drives it with standard commands only: `PASV` for each stripe of the client's `SPAS` (one mover for
//! `PASV`), `PEER` for who may connect, `PORT`/`SPOR` for the client's addresses, `REST` ranges plus
//! `RETR`/`ERET` for a mover's share of a send, `ESTO A <offset>` for a share of a striped receive, `111`/`112`
//! markers back. Why not a private protocol: a mover is then a plain `drsftp serve` whose every command is
//! already tested (and fuzzed), its in-band DRS, restart and data timeouts work unchanged, and any GridFTP
//! server that takes these commands could serve as a mover.
//!
//! A striped receive (`SPAS` with several movers, then `STOR`) lands in one hidden part file that every mover
//! writes its blocks into; only when every mover ended with `226` and the union of their range markers is one
//! run from offset 0 (of the announced size, if `ALLO` gave one) is it renamed into place. A mover that fails
//! or dies fails the transfer with `451` naming it, the other movers' control sessions are dropped (which aborts
//! their transfers) and the part file is removed; a rerun (or `REST` with the ranges the client holds) completes
//! it. A send is divided over the movers by the client's layout (`OPTS RETR StripeLayout`), coarsened so a
//! mover's `REST` line stays short; the movers' own data timeouts bound a stalled stripe.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::client::{parse_pasv, parse_perf_marker, parse_range_marker, Reply, ReplyReader};
use drsftp_proto::ranges::RangeSet;
use drsftp_proto::server::{
    DataEndpoint, Mode, Payload, StripeLayout, TransferPlan, TransferResult,
};
use drsftp_storage::{Storage, WriteMode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::timeout;

use crate::data::Progress;
use crate::tls::{MaybeTls, TlsClient};

#[path = "frontend_cksm.rs"]
mod cksm;
#[path = "frontend_cmds.rs"]
mod cmds;
use cmds::{
    check_user_path, common_setup, host_port, mover_path, part_name, protection, rest_text,
};

/// The data movers of a frontend and the account it logs in to them with.
#[derive(Clone)]
pub struct Movers {
    /// Control addresses, in stripe order.
    pub addrs: Vec<SocketAddr>,
    /// Mover account.
    pub user: String,
    /// Its password (never printed).
    pub password: String,
    /// TLS to the movers (a frontend with `--tls-cert`): `AUTH TLS` before the login, accepting only a mover
    /// holding the frontend's own certificate, and `PROT P` passed on so client and mover talk TLS directly.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for Movers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Movers")
            .field("addrs", &self.addrs)
            .field("user", &self.user)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

/// How long a mover may take to answer a command that is not a transfer.
const CMD_TIMEOUT: Duration = Duration::from_secs(30);

/// Most ranges one mover's share of a send may have, so its `REST` line stays well within the mover's
/// command-line limit (`--mover` raises it to [`MOVER_MAX_LINE`]).
const MAX_MOVER_PIECES: u64 = 1024;

/// The longest command line a mover accepts: a `REST` of [`MAX_MOVER_PIECES`] ranges of 20-digit numbers.
pub const MOVER_MAX_LINE: usize = 64 * 1024;

/// One control session to a mover.
struct Link {
    sock: MaybeTls,
    reader: ReplyReader,
    addr: SocketAddr,
}

impl Link {
    async fn open(addr: SocketAddr, m: &Movers) -> Result<Link, String> {
        let sock = timeout(CMD_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| format!("mover {addr}: connect timed out"))?
            .map_err(|e| format!("mover {addr}: {e}"))?;
        let _ = sock.set_nodelay(true);
        let mut l = Link {
            sock: MaybeTls::Plain(sock),
            reader: ReplyReader::new(),
            addr,
        };
        let hello = l.reply(Some(CMD_TIMEOUT)).await?;
        if hello.code != 220 {
            return Err(format!("mover {addr}: {hello}"));
        }
        if let Some(cfg) = &m.tls {
            // The password and every command after it go over TLS; a mover without TLS is an error, never a
            // cleartext fallback.
            l.cmd("AUTH TLS", None).await?;
            let Link { sock, reader, addr } = l;
            let tcp = sock.into_plain().expect("cleartext until now");
            let tls = TlsClient::new(cfg.clone(), &addr.ip().to_string())
                .map_err(|e| format!("mover {addr}: {e}"))?;
            let sock = tls
                .connect(tcp)
                .await
                .map_err(|e| format!("mover {addr}: TLS: {e}"))?;
            l = Link { sock, reader, addr };
        }
        let r = l.cmd(&format!("USER {}", m.user), None).await?;
        if r.code == 331 {
            l.cmd(&format!("PASS {}", m.password), Some("PASS ****"))
                .await?;
        } else if r.code != 230 {
            return Err(format!("mover {addr}: USER: {r}"));
        }
        if m.tls.is_some() {
            l.cmd("PBSZ 0", None).await?;
        }
        l.cmd("TYPE I", None).await?;
        Ok(l)
    }

    /// The next reply; `None`: no time limit (a transfer's final reply).
    async fn reply(&mut self, limit: Option<Duration>) -> Result<Reply, String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.reader.next_reply() {
                Ok(Some(r)) => return Ok(r),
                Ok(None) => {}
                Err(e) => return Err(format!("mover {}: {e}", self.addr)),
            }
            let read = self.sock.read(&mut buf);
            let n = match limit {
                Some(d) => timeout(d, read)
                    .await
                    .map_err(|_| format!("mover {}: no reply within {d:?}", self.addr))?,
                None => read.await,
            }
            .map_err(|e| format!("mover {}: {e}", self.addr))?;
            if n == 0 {
                return Err(format!("mover {} closed its control connection", self.addr));
            }
            self.reader.push(&buf[..n]);
        }
    }

    async fn send(&mut self, line: &str) -> Result<(), String> {
        self.sock
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .map_err(|e| format!("mover {}: {e}", self.addr))
    }

    /// Sends `line` and wants a 2xx or 3xx reply; `shown` replaces the line in errors (a password).
    async fn cmd(&mut self, line: &str, shown: Option<&str>) -> Result<Reply, String> {
        self.send(line).await?;
        let r = self.reply(Some(CMD_TIMEOUT)).await?;
        if r.is_error() || r.is_preliminary() {
            return Err(format!(
                "mover {}: {} -> {r}",
                self.addr,
                shown.unwrap_or(line)
            ));
        }
        Ok(r)
    }
}

/// A session's frontend state: its control sessions to the movers (opened once the client logs in, or on first
/// use, kept while they work) and how many movers listen for the client's last PASV/SPAS.
pub(crate) struct Frontend {
    movers: Arc<Movers>,
    links: Arc<Mutex<Vec<Option<Link>>>>,
    passive: usize,
    /// The logged-in user's root in the served tree (`/alice`); movers get paths beneath it.
    root: Option<String>,
}

impl Frontend {
    pub(crate) fn new(movers: Arc<Movers>) -> Frontend {
        let links = (0..movers.addrs.len()).map(|_| None).collect();
        Frontend {
            movers,
            links: Arc::new(Mutex::new(links)),
            passive: 0,
            root: None,
        }
    }

    /// The user logged in: `root` is their tree's place in the served one (`None`: all of it).
    pub(crate) fn set_root(&mut self, root: Option<String>) {
        self.root = root;
    }

    /// Opens the control sessions to every mover in the background, once the client has logged in: a mover's
    /// login (its argon2 check) then overlaps the client's own set-up round trips instead of delaying `SPAS`, or
    /// the first byte of a send. Does nothing if the links are in use; a mover that cannot be reached now is
    /// tried again, and reported, where it is needed.
    pub(crate) fn warm(&self) {
        let Ok(mut links) = self.links.clone().try_lock_owned() else {
            return;
        };
        let movers = self.movers.clone();
        tokio::spawn(async move {
            let mut tasks = tokio::task::JoinSet::new();
            for (i, slot) in links.iter_mut().enumerate() {
                if slot.is_none() {
                    let m = movers.clone();
                    tasks.spawn(async move { (i, Link::open(m.addrs[i], &m).await) });
                }
            }
            while let Some(j) = tasks.join_next().await {
                match j {
                    Ok((i, Ok(l))) => links[i] = Some(l),
                    Ok((_, Err(e))) => tracing::debug!("frontend: warming up: {e}"),
                    Err(_) => {}
                }
            }
        });
    }

    /// `Action::Listen` on a frontend: `PASV` on the first `count` movers; their listeners' addresses.
    pub(crate) async fn listen(&mut self, count: usize) -> Result<Vec<SocketAddr>, String> {
        self.passive = 0;
        if count > self.movers.addrs.len() {
            return Err(format!(
                "{count} stripes asked, {} movers",
                self.movers.addrs.len()
            ));
        }
        // Every mover at once (login if need be, then PASV): set-up costs one mover's round trips, not N.
        let mut links = self.links.lock().await;
        let mut tasks = tokio::task::JoinSet::new();
        for (i, slot) in links.iter_mut().enumerate().take(count) {
            let (mut slot, m) = (slot.take(), self.movers.clone());
            tasks.spawn(async move {
                let r = pasv(&mut slot, m.addrs[i], &m).await;
                (i, slot, r)
            });
        }
        let mut out = vec![None; count];
        let mut failed = None;
        while let Some(j) = tasks.join_next().await {
            let (i, slot, r) = j.map_err(|e| e.to_string())?;
            match r {
                Ok(a) => {
                    out[i] = Some(a);
                    links[i] = slot;
                }
                Err(e) => {
                    tracing::warn!("frontend: {e}");
                    failed.get_or_insert(i);
                }
            }
        }
        if let Some(i) = failed {
            return Err(format!("data mover {i} unavailable"));
        }
        self.passive = count;
        Ok(out.into_iter().flatten().collect())
    }

    /// Runs `plan` on the movers. The links in use are taken for the transfer and put back only after
    /// success, so an aborted or failed transfer leaves no control session in an unknown state.
    pub(crate) fn transfer(
        &self,
        plan: TransferPlan,
        storage: Arc<dyn Storage>,
        progress: Arc<Progress>,
    ) -> impl std::future::Future<Output = TransferResult> + Send + 'static {
        let (movers, links, passive) = (self.movers.clone(), self.links.clone(), self.passive);
        let root = self.root.clone().unwrap_or_else(|| "/".into());
        async move {
            match run(plan, &movers, &links, passive, &root, storage, progress).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!("frontend transfer: {e}");
                    TransferResult::Failed {
                        code: 451,
                        message: format!("Striped transfer failed: {e}"),
                    }
                }
            }
        }
    }
}

async fn pasv(slot: &mut Option<Link>, addr: SocketAddr, m: &Movers) -> Result<SocketAddr, String> {
    if slot.is_none() {
        *slot = Some(Link::open(addr, m).await?);
    }
    let link = slot.as_mut().expect("just opened");
    let r = link.cmd("PASV", None).await?;
    parse_pasv(&r).ok_or_else(|| format!("mover {addr}: PASV reply {r}"))
}

/// What one mover does for a transfer.
struct Share {
    mover: usize,
    /// Commands before the transfer command (each wants 2xx/3xx).
    setup: Vec<String>,
    /// The transfer command.
    command: String,
    /// A send: the bytes of its share (senders report no markers).
    sends: Option<u64>,
}

/// What a transfer needs after its movers are done.
enum Finish {
    Nothing,
    /// A striped receive: check the ranges, then rename `part` to `path` (or remove it).
    Commit {
        part: String,
        path: String,
        offset: u64,
        expected: Option<u64>,
    },
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, drsftp_storage::StorageError> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// The shares of a send: `ranges` (file offsets) of `path`, section from `wire_sub`.
#[allow(clippy::too_many_arguments)]
async fn send_shares(
    plan: &TransferPlan,
    path: &str,
    remote: &str,
    ranges: &[Range<u64>],
    wire_sub: u64,
    to_eof: bool,
    storage: &Arc<dyn Storage>,
    targets: Targets,
    movers: usize,
) -> Result<Vec<Share>, String> {
    let p = path.to_string();
    let st = storage.clone();
    let len = blocking(move || st.stat(&p)).await?.size;
    let mut set = RangeSet::new();
    for r in ranges {
        let end = if to_eof { len } else { r.end.min(len) };
        if r.start < end {
            set.insert(r.start..end);
        }
    }
    // The section the mover's command names: the whole file for RETR, `ERET P wire_sub len` otherwise.
    let section_end = if plan.verb == "ERET" {
        set.ranges().last().map_or(wire_sub, |r| r.end)
    } else {
        len
    };
    let section = wire_sub..section_end.max(wire_sub);
    let (stripes, addr_of): (usize, Vec<Vec<SocketAddr>>) = match targets {
        Targets::Passive => (1, vec![vec![]]),
        Targets::Active(addrs) => {
            let s = addrs.len().min(movers).max(1);
            let mut per = vec![vec![]; s];
            for (j, a) in addrs.iter().enumerate() {
                per[j % s].push(*a);
            }
            (s, per)
        }
    };
    // Coarsen the layout so no mover's share (hence its REST line) has more than MAX_MOVER_PIECES ranges.
    let span = section.end - section.start;
    let layout = match plan.layout {
        StripeLayout::Blocked { block_size } => StripeLayout::Blocked {
            block_size: block_size
                .max(span.div_ceil((stripes as u64).saturating_mul(MAX_MOVER_PIECES)))
                .max(1),
        },
        l => l,
    };
    let mut out = vec![];
    for (i, addrs) in addr_of.into_iter().enumerate() {
        let share: RangeSet = layout.share(set.ranges(), stripes, i).into_iter().collect();
        let held = RangeSet::from_iter([section.clone()]).difference(&share);
        let mut setup = common_setup(plan);
        match addrs.as_slice() {
            [] => {}
            [a] => setup.push(format!("PORT {}", host_port(*a)?)),
            many => {
                let hp = many
                    .iter()
                    .map(|a| host_port(*a))
                    .collect::<Result<Vec<_>, _>>()?;
                setup.push(format!("SPOR {}", hp.join(" ")));
            }
        }
        if !held.is_empty() {
            let rel: RangeSet = held
                .iter()
                .map(|r| r.start - wire_sub..r.end - wire_sub)
                .collect();
            match plan.mode {
                Mode::Extended => setup.push(format!("REST {}", rest_text(&rel))),
                // Stream mode: one mover, resumed from where the first range to send starts.
                Mode::Stream => {
                    let from = share.ranges().first().map_or(span, |r| r.start - wire_sub);
                    if from > 0 {
                        setup.push(format!("REST {from}"));
                    }
                }
            }
        }
        let command = if plan.verb == "ERET" {
            format!("ERET P {wire_sub} {span} {remote}")
        } else {
            format!("RETR {remote}")
        };
        out.push(Share {
            mover: i,
            setup,
            command,
            sends: Some(share.covered()),
        });
    }
    Ok(out)
}

/// Where a plan's data connections go.
enum Targets {
    /// The movers' listeners from the last PASV/SPAS.
    Passive,
    /// The client's PORT/SPOR addresses.
    Active(Vec<SocketAddr>),
}

async fn run(
    plan: TransferPlan,
    movers: &Movers,
    links: &Mutex<Vec<Option<Link>>>,
    passive: usize,
    root: &str,
    storage: Arc<dyn Storage>,
    progress: Arc<Progress>,
) -> Result<TransferResult, String> {
    if plan.protect && movers.tls.is_none() {
        return Ok(TransferResult::Failed {
            code: 534,
            message: "PROT P through this frontend needs TLS to its movers (--tls-cert).".into(),
        });
    }
    let (user_path, receive) = match &plan.payload {
        Payload::SendFile { path, .. } | Payload::SendListing { path, .. } => {
            (path.as_str(), false)
        }
        Payload::RecvFile { path, .. } => (path.as_str(), true),
        Payload::SendBytes(_) => ("/", false),
    };
    let remote = match mover_path(root, user_path) {
        Ok(r) => r,
        Err(refused) => return Ok(refused),
    };
    if !matches!(plan.payload, Payload::SendBytes(_)) {
        if let Err(refused) = check_user_path(&storage, user_path, receive).await {
            return Ok(refused);
        }
    }
    let n = movers.addrs.len();
    let targets = match &plan.endpoint {
        DataEndpoint::Passive if passive > 0 => Targets::Passive,
        DataEndpoint::Active(a) => Targets::Active(a.clone()),
        _ => {
            return Ok(TransferResult::Failed {
                code: 425,
                message: "No data connection: send PASV, SPAS, PORT or SPOR first.".into(),
            })
        }
    };
    let peer_cmd = match (&targets, plan.data_peer) {
        (Targets::Passive, Some(ip)) => Some(format!("PEER {ip}")),
        _ => None,
    };
    let mut finish = Finish::Nothing;
    let mut shares = match (&plan.payload, &targets) {
        (
            Payload::SendFile {
                path,
                ranges,
                to_eof,
                wire_sub,
            },
            t,
        ) => {
            if matches!(t, Targets::Passive) && passive > 1 {
                return Ok(TransferResult::Failed {
                    code: 425,
                    message: "SPAS is for uploads (GFD.20); downloads use SPOR or PASV.".into(),
                });
            }
            let t = match t {
                Targets::Passive => Targets::Passive,
                Targets::Active(a) => Targets::Active(a.clone()),
            };
            send_shares(
                &plan, path, &remote, ranges, *wire_sub, *to_eof, &storage, t, n,
            )
            .await?
        }
        (
            Payload::RecvFile {
                path,
                write_mode,
                offset,
                expected,
                // Kept partial uploads (SITE PARTIAL) are not carried to the movers: a failed striped upload is
                // removed whole and a rerun starts from 0.
                keep: _,
            },
            t,
        ) => {
            let stripes = match t {
                Targets::Passive => passive,
                Targets::Active(_) => 1,
            };
            let port = match t {
                Targets::Active(a) => vec![format!("PORT {}", host_port(a[0])?)],
                Targets::Passive => vec![],
            };
            let target = if stripes > 1 && *write_mode == WriteMode::Replace {
                let part = part_name(path);
                let on_movers = match mover_path(root, &part) {
                    Ok(p) => p,
                    Err(refused) => return Ok(refused),
                };
                finish = Finish::Commit {
                    part,
                    path: path.clone(),
                    offset: *offset,
                    expected: *expected,
                };
                on_movers
            } else {
                remote.clone()
            };
            (0..stripes)
                .map(|i| {
                    let mut setup = common_setup(&plan);
                    setup.extend(port.iter().cloned());
                    let command = match (stripes, write_mode) {
                        (1, WriteMode::Replace) => {
                            if let Some(e) = expected {
                                setup.push(format!("ALLO {e}"));
                            }
                            format!("STOR {target}")
                        }
                        _ => format!("ESTO A {offset} {target}"),
                    };
                    Share {
                        mover: i,
                        setup,
                        command,
                        sends: None,
                    }
                })
                .collect()
        }
        (Payload::SendListing { .. }, t) => {
            let mut setup = vec!["MODE S".to_string()];
            if let Targets::Active(a) = t {
                setup.push(format!("PORT {}", host_port(a[0])?));
            }
            vec![Share {
                mover: 0,
                setup,
                command: format!("{} {remote}", plan.verb),
                sends: None,
            }]
        }
        (Payload::SendBytes(_), _) => {
            return Ok(TransferResult::Failed {
                code: 425,
                message: "Not available through a striped frontend; use MLSD or LIST.".into(),
            })
        }
    };
    let prot = movers
        .tls
        .as_ref()
        .map(|_| protection(plan.protect, plan.tls_client, plan.tls_peer_pin));
    for s in &mut shares {
        if let Some(p) = &peer_cmd {
            s.setup.insert(0, p.clone());
        }
        if let Some(p) = &prot {
            // Every transfer says its protection: a kept control session may have run another.
            s.setup.splice(0..0, p.iter().cloned());
        }
    }
    let stripes = shares.len();
    // Take the links this transfer uses; a failure or abort drops them (the movers then abort too).
    let mut taken = vec![];
    {
        let mut all = links.lock().await;
        for s in &shares {
            let link = match all[s.mover].take() {
                Some(l) => l,
                None => Link::open(movers.addrs[s.mover], movers).await?,
            };
            taken.push(link);
        }
    }
    let mut guard = PartGuard(match &finish {
        Finish::Commit { part, .. } => Some((storage.clone(), part.clone())),
        _ => None,
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (share, link)) in shares.into_iter().zip(taken).enumerate() {
        let progress = progress.clone();
        tasks.spawn(async move { drive(i, stripes, share, link, progress).await });
    }
    let mut back = vec![];
    let mut total = (0u64, 0usize);
    while let Some(j) = tasks.join_next().await {
        match j.map_err(|e| e.to_string())? {
            Ok((mover, link, bytes, streams)) => {
                total = (total.0 + bytes, total.1 + streams);
                back.push((mover, link));
            }
            Err(e) => {
                // Dropping the other tasks closes their control sessions: those movers abort.
                drop(tasks);
                if let Finish::Commit { part, .. } = finish {
                    let _ = blocking(move || storage.remove(&part)).await;
                }
                return Err(e);
            }
        }
    }
    {
        let mut all = links.lock().await;
        for (mover, link) in back {
            all[mover] = Some(link);
        }
    }
    if let Finish::Commit {
        part,
        path,
        offset,
        expected,
    } = finish
    {
        let got = progress.ranges();
        let end = got.ranges().last().map_or(offset, |r| r.end);
        let holes = !got.gaps(offset..end).is_empty();
        let short = expected.is_some_and(|e| end - offset < e);
        if holes || short {
            let _ = blocking(move || storage.remove(&part)).await;
            return Ok(TransferResult::Failed {
                code: 451,
                message: format!("Striped upload incomplete: received {got}"),
            });
        }
        blocking(move || storage.rename(&part, &path)).await?;
        guard.0 = None;
        total.0 = end - offset;
    }
    Ok(TransferResult::Ok {
        bytes: total.0,
        streams: total.1.max(stripes),
    })
}

/// Removes a striped receive's part file unless disarmed: the transfer future is dropped when the client hangs
/// up mid-way, and a part file must not outlive a failed upload.
struct PartGuard(Option<(Arc<dyn Storage>, String)>);

impl Drop for PartGuard {
    fn drop(&mut self) {
        if let Some((storage, part)) = self.0.take() {
            // Drop cannot wait: the removal runs on the blocking pool.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn_blocking(move || storage.remove(&part));
            }
        }
    }
}

/// One mover's part: setup, the command, markers into `progress` (stripe `i` of `n`) until its final reply.
async fn drive(
    i: usize,
    n: usize,
    share: Share,
    mut link: Link,
    progress: Arc<Progress>,
) -> Result<(usize, Link, u64, usize), String> {
    for c in &share.setup {
        link.cmd(c, None).await?;
    }
    link.send(&share.command).await?;
    let mut bytes = 0;
    loop {
        let r = link.reply(None).await?;
        match r.code {
            111 => {
                if let Some(rs) = parse_range_marker(&r) {
                    progress.add_ranges(&rs);
                }
            }
            112 => {
                if let Some(m) = parse_perf_marker(&r) {
                    bytes = m.stripe_bytes;
                    progress.set_stripe(i, n, bytes);
                }
            }
            c if c < 200 => {}
            c if c < 300 => {
                bytes = share.sends.unwrap_or(bytes);
                progress.set_stripe(i, n, bytes);
                return Ok((share.mover, link, bytes, 1));
            }
            _ => return Err(format!("mover {} ({}): {r}", share.mover, link.addr)),
        }
    }
}
