//! `drsftp serve`: run the GridFTP server on a directory until Ctrl-C / SIGTERM, then shut down cleanly
//! (running transfers are aborted and their part files removed; sessions get `421`). Settings may come from a
//! TOML file (`--config`, see `serve_config`); SIGHUP re-reads it with the users file, applies the users and
//! session limits to new logins and connections and reopens the transfer log, without touching running sessions.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use drsftp_io::data::{DataOpts, ZeroCopy};
use drsftp_io::server::{
    self, DataPorts, Metrics, ServerLimits, ServerOps, ServerParams, TransferLog, Users, UsersFile,
};
use drsftp_proto::server::{ServerConfig, ThirdParty, TlsPolicy};
use drsftp_storage::FsStorage;
use drsftp_tune::BufferPolicy;

use super::{serve_config, units_arg};

/// Serve DIR over GridFTP (FTP with MODE E, parallel streams, ERET/ESTO, CKSM, SBUF, the UDP blast channel).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Control-channel address to listen on (GridFTP's usual port is 2811; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:2811")]
    pub listen: String,
    /// Read settings from this TOML file: each key is a long flag of `drsftp serve` with the same value syntax
    /// (`root = "/srv/data"`, `data-ports = "50000-51000"`, `max-sessions = 256`, `anonymous = true`,
    /// `user = ["a:b"]`). Flags on the command line win over the file; an unknown key is an error. SIGHUP
    /// re-reads it (users, limits; the transfer log is reopened); other changes need a restart.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective configuration (command line over --config over defaults) as TOML, without secrets,
    /// and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Directory served as `/`. Nothing outside it is reachable (`..`, absolute paths and symlinks pointing out
    /// are refused). Required, here or in --config.
    #[arg(long, required_unless_present = "config")]
    pub root: Option<PathBuf>,
    /// Accept anonymous logins (user `anonymous` or `ftp`, any password). Anonymous sessions are read-only
    /// (STOR, APPE, ESTO, DELE, RNFR/RNTO, MKD, RMD get `550 Permission denied: read-only session.`) unless
    /// --anonymous-write.
    #[arg(long)]
    pub anonymous: bool,
    /// Let anonymous sessions change the tree (uploads, deletes, renames, directories).
    #[arg(long, requires = "anonymous")]
    pub anonymous_write: bool,
    /// Users file (TOML: name, argon2id hash, optional root inside --root, read_only), written by
    /// `drsftp passwd`. Refused if group- or world-writable.
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Accept this login, as USER:PASSWORD (repeatable). Deprecated: the password is visible in `ps`; use
    /// --users with a file written by `drsftp passwd`.
    #[arg(long = "user", value_name = "USER:PASSWORD")]
    pub user: Vec<String>,
    /// Most control connections open at once; more get `421 Too many sessions, try again later.` and are
    /// closed at once.
    #[arg(long, default_value_t = ServerLimits::default().max_sessions)]
    pub max_sessions: usize,
    /// Most control connections open at once from one client address.
    #[arg(long, default_value_t = ServerLimits::default().max_sessions_per_ip)]
    pub max_sessions_per_ip: usize,
    /// Failed logins from one address (within 10 minutes) after which its logins get `421` until the 10 minutes
    /// since its last failure have passed. Each connection also gets 3 attempts, answered after 0.5 s, 1 s, 2 s.
    #[arg(long, default_value_t = ServerLimits::default().max_failures_per_ip)]
    pub max_login_failures_per_ip: u32,
    /// Close a connection that has not logged in within this time (`421`).
    #[arg(long, default_value = "30s", value_parser = units_arg::duration)]
    pub login_timeout: Duration,
    /// Close a logged-in session idle (no command, no transfer) for this long (`421`).
    #[arg(long, default_value = "15m", value_parser = units_arg::duration)]
    pub idle_timeout: Duration,
    /// Address advertised in PASV/SPAS replies (default: the address the client connected to).
    #[arg(long, value_name = "IP")]
    pub data_interface: Option<IpAddr>,
    /// Data-socket buffers: `kernel` (Linux autotuning), `drs` (user-space Dynamic Right-Sizing) or a fixed size
    /// such as `4M`. A client's SBUF / SITE RETRBUFSIZE overrides it per transfer. Default drs: it matches kernel
    /// autotuning's throughput with ~1/3.5 of its receive memory, and keeps working where tcp_rmem[2] is below
    /// the BDP.
    #[arg(long, default_value = "drs")]
    pub buffer: BufferPolicy,
    /// MODE E block size when sending.
    #[arg(long, default_value = "256K", value_parser = units_arg::size)]
    pub block_size: u64,
    /// Streams used for a MODE E send when the client sent no `OPTS RETR Parallelism`.
    #[arg(long, default_value_t = 1)]
    pub default_parallelism: u32,
    /// TCP congestion control for data sockets (TCP_CONGESTION), e.g. `cubic` or `bbr`. Lets a socket use an
    /// algorithm the host does not default to (as root any loaded one; otherwise one listed in
    /// net.ipv4.tcp_allowed_congestion_control). Default: the host's.
    #[arg(long, value_name = "NAME")]
    pub congestion: Option<String>,
    /// Do not offer the UDP blast data channel (FEAT BLAST, OPTS BLAST, BPAS; docs/blast.md). It is on by default;
    /// clients that do not ask for it never see it.
    #[arg(long)]
    pub no_blast: bool,
    /// Cap on blast sending rates, e.g. 500mbit (bits; an upper-case B is bytes: 100MBps = 800 Mbit/s): what the
    /// server sends, and announced to clients for what they send. Default: no cap.
    #[arg(long, value_name = "RATE", value_parser = units_arg::rate)]
    pub blast_max_rate: Option<u64>,
    /// Print the bound control address as `listening <addr>` on stdout (for scripts using port 0), then, with
    /// --metrics, `metrics <addr>`.
    #[arg(long)]
    pub print_addr: bool,
    /// Bind every passive data listener (PASV, EPSV, SPAS, and the UDP ports of BPAS) in this port range, for a
    /// firewall that opens only these, e.g. 50000-51000. When every port is in use the command gets `425`.
    /// Default: any free port.
    #[arg(long, value_name = "LOW-HIGH", value_parser = data_ports)]
    pub data_ports: Option<(u16, u16)>,
    /// Append one JSON line per file transfer to FILE (time, user, peer, command, path, bytes, seconds, streams,
    /// transport, buffer policy, checksum, reply code, result). Written by its own thread; reopened on SIGHUP
    /// (log rotation).
    #[arg(long, value_name = "FILE")]
    pub transfer_log: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (sessions, failed logins, transfers by result, bytes,
    /// throughput histogram, data-buffer bytes, blast loss). No user names, paths or addresses appear there;
    /// bind it on loopback or a management network, e.g. 127.0.0.1:9721.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// End a transfer that moves no data for this long with 426 (its part file is removed): a stalled download
    /// or upload, or a data connection that never arrives (also the wait for passive connections), e.g. 60s or
    /// 2m. 0 disables it.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = units_arg::duration)]
    pub data_timeout: std::time::Duration,
    /// Resumable uploads (`drsftp copy` asks with SITE PARTIAL; docs/resume.md): how many failed uploads one
    /// user's area keeps for a rerun to continue. They are hidden from every listing and command, and the
    /// oldest go first when a new one would pass this count or --partials-max-bytes. 0 keeps none.
    #[arg(long, default_value_t = drsftp_storage::KeptLimits::default().max_files, value_name = "N")]
    pub partials_max: usize,
    /// The most disk (allocated bytes) one user's kept partial uploads may take together, e.g. 64G.
    #[arg(long, default_value = "64G", value_name = "SIZE", value_parser = units_arg::size)]
    pub partials_max_bytes: u64,
    /// A kept partial upload not continued for this long is removed (at the user's next upload), e.g. 24h.
    #[arg(long, default_value = "24h", value_name = "DURATION", value_parser = units_arg::duration)]
    pub partials_max_age: std::time::Duration,
    /// Who may point data connections at a host other than their own (PORT/EPRT/SPOR, `BPAS <addr>`, BPRT).
    /// Plain FTP servers refuse that (reply 504) to stop "FTP bounce" attacks, where a client makes the server
    /// connect to, and send data to, a third machine (port scans, spoofed traffic from the server's address,
    /// RFC 2577). GridFTP third-party copies (`drsftp copy ftp://A/x ftp://B/y`, globus-url-copy between two
    /// servers) need exactly that: the client tells server A to connect to server B's data port, so the
    /// address is foreign whenever A and B are different hosts. Globus gridftp-server allows third-party
    /// transfers by default. Ports below 1024 are refused in every case, and unless `all` a foreign address is
    /// never loopback, link-local, multicast, unspecified, broadcast (or their IPv4-mapped forms) or this
    /// server's own address: a third-party receiver is another host, and those would aim the server at
    /// services only it or its link can reach. A client's own address (even 127.0.0.1) is always allowed.
    /// Passive data connections (PASV/EPSV/SPAS) are accepted only from the client's own address; others are
    /// closed unread (no data-port hijacking). For a third-party copy the client names the sending server's
    /// address first with the PEER command (drsftp's client does so when FEAT lists PEER), which the same
    /// policy allows or refuses. Clients that do not send PEER (globus-url-copy between two servers) need
    /// `all`, under which passive connections come from any host unless PEER named one.
    #[arg(long, value_enum, default_value_t = ThirdPartyArg::Auth, value_name = "WHO")]
    pub third_party: ThirdPartyArg,
    /// After binding the listener and opening --root, switch the whole process to this user (name or uid) and its
    /// groups for good, so the server reaches only what that account may. Needs root; root itself is refused.
    #[arg(long, value_name = "USER")]
    pub run_as: Option<String>,
    /// Offer explicit FTPS (RFC 4217: FEAT `AUTH TLS`, `PBSZ`, `PROT`) with this certificate chain (PEM).
    /// Needs --tls-key. The data connections of `PROT P` clients are TLS too (stream mode and MODE E), and
    /// their UDP blast datagrams AEAD-sealed with keys from the TLS session (docs/blast.md).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Refuse cleartext: USER/PASS before `AUTH TLS` get 530, `PROT C` gets 536 and transfers before
    /// `PROT P` get 521, so neither passwords nor data cross the network unprotected.
    #[arg(long, requires = "tls_cert")]
    pub tls_required: bool,
    /// Run as a striped frontend (docs/striping.md): this server keeps the control session but moves no data;
    /// each transfer runs on these data movers (`drsftp serve --mover` on each, sharing this --root), driven
    /// with standard FTP commands. SPAS answers one address per mover, SPOR sends each mover its share; PASV
    /// uses the first mover; EPSV is refused (it can name only a port on this host). Needs --movers-login.
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        value_delimiter = ',',
        requires = "movers_login"
    )]
    pub movers: Vec<String>,
    /// The mover account the frontend logs in with: a file holding `USER:PASSWORD` on one line, readable by
    /// its owner only (refused otherwise).
    #[arg(long, value_name = "FILE")]
    pub movers_login: Option<PathBuf>,
    /// Run as a data mover of the striped frontend(s) at these addresses: control connections from any other
    /// address get `421` before a command is read, anonymous logins are off (the frontend logs in with an
    /// account from --users), and data addresses the frontend names are accepted as it names them (it has
    /// already checked them against its own client).
    #[arg(long, value_name = "FRONTEND_IP,...", value_delimiter = ',', conflicts_with_all = ["movers", "anonymous"])]
    pub mover: Vec<IpAddr>,
}

/// `--third-party` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThirdPartyArg {
    /// Never: only the client's own host may receive or send data (third-party only within one host).
    None,
    /// Sessions logged in as a user (--users or --user; not anonymous) may name other hosts (not loopback,
    /// link-local, multicast or this server's own addresses).
    Auth,
    /// Every session, anonymous ones included, any address (loopback, link-local and the server's own
    /// included), and passive data connections from any host unless PEER named one (open servers on trusted
    /// networks, labs, globus-url-copy third-party copies).
    All,
}

impl From<ThirdPartyArg> for ThirdParty {
    fn from(a: ThirdPartyArg) -> ThirdParty {
        match a {
            ThirdPartyArg::None => ThirdParty::None,
            ThirdPartyArg::Auth => ThirdParty::Auth,
            ThirdPartyArg::All => ThirdParty::All,
        }
    }
}

/// `--data-ports LOW-HIGH`.
fn data_ports(s: &str) -> Result<(u16, u16), String> {
    s.parse::<DataPorts>()
        .map(|p| p.bounds())
        .map_err(|e| e.to_string())
}

/// Resolve `--listen`/`--metrics` (a name or an address; IPv6 in brackets: `[::1]:2811`).
fn socket_addr(flag: &str, s: &str) -> Result<SocketAddr> {
    s.to_socket_addrs()
        .with_context(|| format!("{flag} {s}"))?
        .next()
        .with_context(|| format!("{flag} {s}: no address"))
}

fn limits_of(args: &Args) -> ServerLimits {
    ServerLimits {
        max_sessions: args.max_sessions.max(1),
        max_sessions_per_ip: args.max_sessions_per_ip.max(1),
        max_failures_per_ip: args.max_login_failures_per_ip.max(1),
        ..ServerLimits::default()
    }
}

/// The accounts from --users and --user (hashed now, so nothing compares plain passwords later).
fn load_users(args: &Args, base: &FsStorage) -> Result<Users> {
    let mut users = Users::new();
    if let Some(path) = &args.users {
        let file = UsersFile::load(path)?;
        users.add_file(&file, base)?;
    }
    for u in &args.user {
        let (name, password) = u
            .split_once(':')
            .with_context(|| format!("--user {:?}: expected USER:PASSWORD", u.split(':').next()))?;
        eprintln!(
            "drsftp: warning: --user puts {name}'s password on the command line, where `ps` shows it to every \
             local user; write a users file with `drsftp passwd` and use --users"
        );
        users.add_password(name, password)?;
    }
    Ok(users)
}

/// `--movers` and the account of `--movers-login`.
fn movers_of(args: &Args) -> Result<Option<Arc<server::Movers>>> {
    if args.movers.is_empty() {
        return Ok(None);
    }
    let addrs = args
        .movers
        .iter()
        .map(|m| socket_addr("--movers", m))
        .collect::<Result<Vec<_>>>()?;
    let path = args
        .movers_login
        .as_deref()
        .context("--movers needs --movers-login FILE")?;
    let meta =
        std::fs::metadata(path).with_context(|| format!("--movers-login {}", path.display()))?;
    if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o077 != 0 {
        bail!(
            "--movers-login {}: readable by others; chmod 600 it",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--movers-login {}", path.display()))?;
    let (user, password) = text
        .trim_end_matches(['\r', '\n'])
        .split_once(':')
        .with_context(|| format!("--movers-login {}: expected USER:PASSWORD", path.display()))?;
    Ok(Some(Arc::new(server::Movers {
        addrs,
        user: user.to_string(),
        password: password.to_string(),
        // The movers hold this frontend's certificate: it is the only one accepted from them.
        tls: args
            .tls_cert
            .as_deref()
            .map(drsftp_io::tls::pinned_to)
            .transpose()?,
    })))
}

/// What a reload (SIGHUP) needs: the command line to merge the config file under again, and the served tree
/// users' roots are opened beneath.
struct Reload {
    cli: clap::ArgMatches,
    storage: Arc<FsStorage>,
    ops: ServerOps,
}

impl Reload {
    /// Re-reads --config and the users file; applies users and limits to what comes next, reopens the
    /// transfer log. On any error nothing changes (the server keeps its current settings).
    async fn run(&self) -> Result<()> {
        let (args, _, _) = serve_config::resolve(&self.cli)?;
        let storage = self.storage.clone();
        let users = tokio::task::spawn_blocking(move || {
            let users = load_users(&args, &storage)?;
            if !args.anonymous && users.is_empty() {
                bail!("nobody could log in with the new settings");
            }
            Ok((users, limits_of(&args)))
        })
        .await??;
        let (users, limits) = users;
        let n = users.len();
        self.ops.live.set_users(Arc::new(users));
        self.ops.live.set_limits(limits);
        if let Some(log) = &self.ops.transfer_log {
            log.reopen();
        }
        tracing::info!(target: "audit", event = "reload", users = n, max_sessions = limits.max_sessions);
        eprintln!("drsftp: reloaded: {n} user(s), limits {limits:?}");
        Ok(())
    }
}

/// Run the server until interrupted. `cli` holds the command line's own matches (which flags it set).
pub fn run(args: Args, cli: &clap::ArgMatches) -> Result<()> {
    let (args, matches, _config) = match args.config {
        Some(_) => serve_config::resolve(cli)?,
        None => (args, cli.clone(), None),
    };
    if args.print_config {
        print!("{}", serve_config::print(&matches));
        return Ok(());
    }
    let root = args
        .root
        .clone()
        .context("--root (or root in --config) is required")?;
    let addr = socket_addr("--listen", &args.listen)?;
    let metrics_addr = args
        .metrics
        .as_deref()
        .map(|m| socket_addr("--metrics", m))
        .transpose()?;
    let storage =
        Arc::new(FsStorage::new(&root).with_context(|| format!("--root {}", root.display()))?);
    let tls_server = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(drsftp_io::tls::server_config(cert, key)?),
        _ => None,
    };
    let tls = match (&tls_server, args.tls_required) {
        (None, _) => TlsPolicy::Off,
        (Some(_), false) => TlsPolicy::Offered,
        (Some(_), true) => TlsPolicy::Required,
    };
    let users = load_users(&args, &storage)?;
    if !args.mover.is_empty() && users.is_empty() {
        bail!("--mover needs the frontend's account: --users FILE (or --user)");
    }
    let movers = movers_of(&args)?;
    if !args.anonymous && users.is_empty() {
        bail!("nobody could log in: pass --anonymous, --users FILE and/or --user USER:PASSWORD");
    }
    let transfer_log = args
        .transfer_log
        .as_deref()
        .map(|p| TransferLog::open(p).with_context(|| format!("--transfer-log {}", p.display())))
        .transpose()?;
    let ops = ServerOps {
        data_ports: args
            .data_ports
            .map(|(lo, hi)| Arc::new(DataPorts::new(lo, hi))),
        transfer_log,
        metrics: metrics_addr.map(|_| Arc::new(Metrics::new())),
        ..ServerOps::default()
    };
    let params = ServerParams {
        session: ServerConfig {
            anonymous: args.anonymous,
            anonymous_write: args.anonymous_write,
            login_timeout: args.login_timeout,
            idle_timeout: args.idle_timeout,
            data_interface: args.data_interface,
            default_parallelism: args.default_parallelism.max(1),
            blast: !args.no_blast,
            blast_max_rate: args.blast_max_rate.unwrap_or(0),
            // A mover takes the data addresses its frontend checked against the frontend's own client.
            third_party: if args.mover.is_empty() {
                args.third_party.into()
            } else {
                ThirdParty::All
            },
            // A frontend's movers time their own data out (426), and no data passes here to time.
            data_timeout: if movers.is_some() {
                std::time::Duration::ZERO
            } else {
                args.data_timeout
            },
            tls,
            kept: drsftp_storage::KeptLimits {
                max_files: args.partials_max,
                max_bytes: args.partials_max_bytes,
                max_age: args.partials_max_age,
            },
            data_nodes: movers.as_ref().map_or(0, |m| m.addrs.len()),
            max_line: if args.mover.is_empty() {
                ServerConfig::default().max_line
            } else {
                server::MOVER_MAX_LINE
            },
            ..ServerConfig::default()
        },
        data: DataOpts {
            buffer: args.buffer,
            block_size: args.block_size.clamp(4096, 64 << 20) as usize,
            congestion: args.congestion.clone(),
            tls_server,
            zero_copy: ZeroCopy::from_env(),
            ..DataOpts::default()
        },
        storage: storage.clone(),
        users: Arc::new(users),
        limits: limits_of(&args),
        ops: ops.clone(),
        movers,
        control_from: args.mover.clone(),
    };
    let reload = Reload {
        cli: cli.clone(),
        storage,
        ops: ops.clone(),
    };
    // Memory freed by logins (argon2id, ~19 MiB each) and transfers goes back to the kernel instead of staying in
    // glibc's arenas, so RSS stays bounded over many sessions (drsftp_sys::malloc, docs/bench/loopback.md).
    if !drsftp_sys::malloc::pin_mmap_threshold() {
        tracing::debug!("could not pin the allocator's mmap threshold");
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        // Handlers first: a SIGHUP sent as soon as the address is printed must reload, not kill.
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        let (listener, bound) = server::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let metrics_listener = match metrics_addr {
            Some(a) => Some(
                tokio::net::TcpListener::bind(a)
                    .await
                    .with_context(|| format!("--metrics: cannot listen on {a}"))?,
            ),
            None => None,
        };
        // The privileged work is done (ports bound, root directory open as an fd): drop before the accept loop
        // starts, so no session is ever served as root.
        if let Some(user) = &args.run_as {
            let id = drsftp_sys::privs::drop_privileges(user)
                .with_context(|| format!("--run-as {user}"))?;
            eprintln!("drsftp: running as {user} (uid {}, gid {})", id.uid, id.gid);
        }
        let (shutdown, stop) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(server::serve(listener, params, stop));
        if args.print_addr {
            println!("listening {bound}");
        }
        let _metrics_task = match (metrics_listener, &ops.metrics) {
            (Some(l), Some(m)) => {
                let a = l.local_addr()?;
                if args.print_addr {
                    println!("metrics {a}");
                }
                eprintln!("drsftp: metrics on http://{a}/metrics");
                // Ends with the runtime when the server stops.
                Some(tokio::spawn(drsftp_io::server::metrics::serve(
                    l,
                    m.clone(),
                )))
            }
            _ => None,
        };
        eprintln!(
            "drsftp: serving {} on ftp://{bound}/ ({}{}buffers {}, third-party {}{})",
            root.display(),
            match (args.anonymous, args.anonymous_write) {
                (true, true) => "anonymous read-write, ",
                (true, false) => "anonymous read-only, ",
                _ => "",
            },
            match tls {
                TlsPolicy::Off => "",
                TlsPolicy::Offered => "TLS offered, ",
                TlsPolicy::Required => "TLS required, ",
            },
            args.buffer,
            ThirdParty::from(args.third_party),
            args.data_ports
                .map_or(String::new(), |(lo, hi)| format!(", data ports {lo}-{hi}")),
        );
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = hup.recv() => {
                    if let Err(e) = reload.run().await {
                        eprintln!("drsftp: reload failed, settings unchanged: {e:#}");
                    }
                }
            }
        }
        eprintln!("drsftp: shutting down");
        let _ = shutdown.send(true);
        task.await??;
        // Give sessions a moment to send 421 and drop their part files.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        Ok(())
    })
}
