//! Striped sends (issue 23, GFD.20): a RETR after `SPOR` naming several addresses treats each address as one
//! receiving stripe. Receivers here are hand-made MODE E readers on 127.0.0.1, .2 and .3 (one host each), so
//! the test sees exactly what each stripe gets: its share under the layout from `OPTS RETR`, over its own
//! `Parallelism` connections, and exactly one EOF announcing that stripe's connection count (before the fix
//! only the first connection overall sent EOF, with the total, and the other stripes waited forever).

use std::net::SocketAddr;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use drsftp_io::server::{self, Shutdown};
use drsftp_proto::mode_e::{desc, Header, HEADER_LEN};
use drsftp_proto::server::ThirdParty;
use drsftp_testkit::ctl::{port_arg, Ctl};
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::fs_params;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::timeout;

/// What one receiving stripe saw.
#[derive(Debug, Default)]
struct Stripe {
    connections: usize,
    /// The EOD count of every EOF received (GFD.20: exactly one per stripe).
    eofs: Vec<u64>,
    eods: u64,
    blocks: Vec<(u64, Vec<u8>)>,
}

/// Reads one MODE E connection to its EOD: its blocks, and the EOF count if it carried EOF.
async fn read_conn(mut s: TcpStream) -> (Vec<(u64, Vec<u8>)>, Option<u64>) {
    let mut blocks = vec![];
    loop {
        let mut h = [0u8; HEADER_LEN];
        s.read_exact(&mut h).await.expect("a header");
        let h = Header::decode(&h);
        let mut data = vec![0u8; h.count as usize];
        if !h.has(desc::EOF) {
            s.read_exact(&mut data).await.expect("a payload");
            if !data.is_empty() {
                blocks.push((h.offset, data));
            }
        }
        if h.has(desc::EOD) {
            return (blocks, h.has(desc::EOF).then_some(h.offset));
        }
    }
}

/// One stripe's receiver: accepts connections on `l` until it has as many EODs as its EOF announced.
async fn receive(l: TcpListener) -> Stripe {
    let mut st = Stripe::default();
    let mut conns = JoinSet::new();
    loop {
        if let Some(&n) = st.eofs.first() {
            if st.eods >= n {
                return st;
            }
        }
        tokio::select! {
            a = l.accept() => {
                st.connections += 1;
                conns.spawn(read_conn(a.expect("accept").0));
            }
            Some(r) = conns.join_next() => {
                let (blocks, eof) = r.expect("reader");
                st.eods += 1;
                st.blocks.extend(blocks);
                st.eofs.extend(eof);
            }
        }
    }
}

/// A server whose anonymous sessions may name any data address (`--third-party all`: the receivers are on
/// other loopback addresses than the client).
async fn start(root: &Path) -> (SocketAddr, Shutdown) {
    let mut p = fs_params(root);
    p.session.third_party = ThirdParty::All;
    let (addr, shutdown, _task) = server::spawn("127.0.0.1:0".parse().unwrap(), p)
        .await
        .expect("server");
    (addr, shutdown)
}

/// RETR `name` to receivers on 127.0.0.1, .2 and .3 after `opts`; what each stripe saw, in SPOR order.
async fn striped_retr(srv: SocketAddr, opts: &str, name: &str) -> Vec<Stripe> {
    let mut c = Ctl::login(srv).await;
    assert!(c.cmd("MODE E").await.starts_with("200"));
    let r = c.cmd(&format!("OPTS RETR {opts}")).await;
    assert!(r.starts_with("200"), "{r}");
    let mut addrs = vec![];
    let mut rx = JoinSet::new();
    for ip in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        let l = TcpListener::bind(format!("{ip}:0")).await.unwrap();
        addrs.push(port_arg(l.local_addr().unwrap()));
        let i = rx.len();
        rx.spawn(async move { (i, receive(l).await) });
    }
    let r = c.cmd(&format!("SPOR {}", addrs.join(" "))).await;
    assert!(r.starts_with("200"), "{r}");
    c.send(&format!("RETR {name}")).await;
    let r = c.reply().await;
    assert!(r.starts_with("125") || r.starts_with("150"), "{r}");
    let mut got: Vec<Option<Stripe>> = vec![None, None, None];
    while let Some(j) = timeout(Duration::from_secs(30), rx.join_next())
        .await
        .expect("every stripe gets its EOF and all its EODs within 30 s")
    {
        let (i, s) = j.unwrap();
        got[i] = Some(s);
    }
    let done = c.final_reply().await;
    assert!(done.starts_with("226"), "{done}");
    got.into_iter().map(Option::unwrap).collect()
}

/// The file rebuilt from every stripe's blocks (each byte exactly once).
fn rebuild(stripes: &[Stripe], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut seen = 0;
    for (off, d) in stripes.iter().flat_map(|s| &s.blocks) {
        out[*off as usize..*off as usize + d.len()].copy_from_slice(d);
        seen += d.len();
    }
    assert_eq!(seen, len, "every byte exactly once");
    out
}

/// The merged byte ranges a stripe received.
fn ranges(s: &Stripe) -> Vec<Range<u64>> {
    let mut r: Vec<Range<u64>> = s
        .blocks
        .iter()
        .map(|(o, d)| *o..*o + d.len() as u64)
        .collect();
    r.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = vec![];
    for x in r {
        match out.last_mut() {
            Some(l) if l.end == x.start => l.end = x.end,
            _ => out.push(x),
        }
    }
    out
}

#[tokio::test]
async fn spor_gives_each_stripe_its_blocked_share_and_its_own_eof() {
    let dir = tempfile::tempdir().unwrap();
    let len = 3 * 1024 * 1024 + 12345;
    let data = random_bytes(len, 23);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let (srv, _stop) = start(dir.path()).await;
    let block = 256 * 1024u64;
    let st = striped_retr(
        srv,
        &format!("StripeLayout=Blocked;BlockSize={block};Parallelism=2,2,2;"),
        "f",
    )
    .await;
    for (i, s) in st.iter().enumerate() {
        assert_eq!(
            s.eofs,
            vec![2],
            "stripe {i}: one EOF counting its 2 connections"
        );
        assert_eq!((s.connections, s.eods), (2, 2), "stripe {i}");
        for r in ranges(s) {
            // Each received run lies within blocks dealt round-robin to this stripe.
            for b in r.start / block..r.end.div_ceil(block) {
                assert_eq!(b % 3, i as u64, "stripe {i} got block {b}");
            }
        }
    }
    assert!(rebuild(&st, len) == data);
}

#[tokio::test]
async fn spor_gives_each_stripe_one_partition() {
    let dir = tempfile::tempdir().unwrap();
    let len = 2 * 1024 * 1024 + 7;
    let data = random_bytes(len, 24);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let (srv, _stop) = start(dir.path()).await;
    let st = striped_retr(srv, "StripeLayout=Partitioned;Parallelism=1;", "f").await;
    let each = (len as u64).div_ceil(3);
    for (i, s) in st.iter().enumerate() {
        assert_eq!(s.eofs, vec![1], "stripe {i}");
        let lo = each * i as u64;
        let hi = (each * (i as u64 + 1)).min(len as u64);
        assert_eq!(ranges(s), vec![lo..hi], "stripe {i}: one contiguous share");
    }
    assert!(rebuild(&st, len) == data);
}

#[tokio::test]
async fn an_empty_file_still_ends_every_stripe() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    let (srv, _stop) = start(dir.path()).await;
    let st = striped_retr(srv, "Parallelism=1;", "empty").await;
    for (i, s) in st.iter().enumerate() {
        assert_eq!((s.eofs.clone(), s.blocks.len()), (vec![1], 0), "stripe {i}");
    }
}

#[tokio::test]
async fn spor_to_other_hosts_follows_the_third_party_policy() {
    let dir = tempfile::tempdir().unwrap();
    // The default policy: anonymous sessions may name only their own address, whatever the verb.
    let (addr, _stop, _task) = server::spawn("127.0.0.1:0".parse().unwrap(), fs_params(dir.path()))
        .await
        .unwrap();
    let mut c = Ctl::login(addr).await;
    let r = c.cmd("SPOR 127,0,0,1,200,1 127,0,0,2,200,2").await;
    assert!(r.starts_with("504"), "{r}");
    assert!(c
        .cmd("SPOR 127,0,0,1,200,1 127,0,0,1,200,2")
        .await
        .starts_with("200"));
}
