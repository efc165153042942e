//! `drsftp serve`: run the GridFTP server on a directory until Ctrl-C / SIGTERM, then shut down cleanly
//! (running transfers are aborted and their part files removed; sessions get `421`).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use drsftp_io::data::DataOpts;
use drsftp_io::server::{self, ServerParams};
use drsftp_proto::server::{ServerConfig, ThirdParty};
use drsftp_storage::FsStorage;
use drsftp_tune::BufferPolicy;

use super::units_arg;

/// Serve DIR over GridFTP (FTP with MODE E, parallel streams, ERET/ESTO, CKSM, SBUF, the UDP blast channel).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Control-channel address to listen on (GridFTP's usual port is 2811; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:2811")]
    pub listen: String,
    /// Directory served as `/`. Nothing outside it is reachable (`..`, absolute paths and symlinks pointing out
    /// are refused).
    #[arg(long)]
    pub root: PathBuf,
    /// Accept anonymous logins (user `anonymous` or `ftp`, any password).
    #[arg(long)]
    pub anonymous: bool,
    /// Accept this login, as USER:PASSWORD (repeatable).
    #[arg(long = "user", value_name = "USER:PASSWORD")]
    pub users: Vec<String>,
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
    /// Print the bound control address as `listening <addr>` on stdout (for scripts using port 0).
    #[arg(long)]
    pub print_addr: bool,
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
    #[arg(long, value_enum, default_value_t = ThirdPartyArg::Auth, value_name = "WHO")]
    pub third_party: ThirdPartyArg,
    /// After binding the listener and opening --root, switch the whole process to this user (name or uid) and its
    /// groups for good, so the server reaches only what that account may. Needs root; root itself is refused.
    #[arg(long, value_name = "USER")]
    pub run_as: Option<String>,
}

/// `--third-party` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThirdPartyArg {
    /// Never: only the client's own host may receive or send data (third-party only within one host).
    None,
    /// Sessions logged in with --user (not anonymous) may name other hosts (not loopback, link-local,
    /// multicast or this server's own addresses).
    Auth,
    /// Every session, anonymous ones included, and any address, loopback, link-local and the server's own
    /// included (open servers on trusted networks, labs).
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

fn parse_users(list: &[String]) -> Result<Vec<(String, String)>> {
    list.iter()
        .map(|u| {
            u.split_once(':')
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .with_context(|| format!("--user {u:?}: expected USER:PASSWORD"))
        })
        .collect()
}

/// Run the server until interrupted.
pub fn run(args: Args) -> Result<()> {
    let users = parse_users(&args.users)?;
    if !args.anonymous && users.is_empty() {
        bail!("nobody could log in: pass --anonymous and/or --user USER:PASSWORD");
    }
    let addr: SocketAddr = args
        .listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {}", args.listen))?
        .next()
        .with_context(|| format!("--listen {}: no address", args.listen))?;
    let storage =
        FsStorage::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
    let params = ServerParams {
        session: ServerConfig {
            anonymous: args.anonymous,
            users,
            data_interface: args.data_interface,
            default_parallelism: args.default_parallelism.max(1),
            blast: !args.no_blast,
            blast_max_rate: args.blast_max_rate.unwrap_or(0),
            third_party: args.third_party.into(),
            ..ServerConfig::default()
        },
        data: DataOpts {
            buffer: args.buffer,
            block_size: args.block_size.clamp(4096, 64 << 20) as usize,
            congestion: args.congestion.clone(),
            ..DataOpts::default()
        },
        storage: Arc::new(storage),
    };
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let (listener, bound) = server::bind(addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        // The privileged work is done (port bound, root directory open as an fd): drop before the accept loop
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
        eprintln!(
            "drsftp: serving {} on ftp://{bound}/ ({}buffers {}, third-party {})",
            args.root.display(),
            if args.anonymous { "anonymous, " } else { "" },
            args.buffer,
            ThirdParty::from(args.third_party)
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("drsftp: shutting down");
        let _ = shutdown.send(true);
        task.await??;
        // Give sessions a moment to send 421 and drop their part files.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        Ok(())
    })
}
