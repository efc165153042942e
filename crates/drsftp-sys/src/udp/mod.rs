//! UDP batching for the blast transport: `sendmmsg`/`recvmmsg`, UDP GSO (`UDP_SEGMENT` control message) and GRO
//! (`UDP_GRO`) where the kernel has them, with fallbacks, plus the precise wait (`ppoll`, nanosecond timeout) and
//! timer slack a pacing loop needs.
//!
//! * [`BatchSender`] sends a run of datagrams to one destination. Equal-size runs (the last may be shorter) go out
//!   as GSO super-datagrams of up to [`GSO_MAX_SEGMENTS`] segments, one `sendmsg` each; anything else, or a socket
//!   whose route cannot segment (the kernel answers `EIO` when the device lacks checksum offload, e.g. a TUN without
//!   a virtio-net header, and `EINVAL` for a segment above the path MTU), uses one `sendmmsg` for the batch. The
//!   first such refusal switches GSO off for that sender for good, and the batch is resent without it.
//! * [`RecvBatch`] receives up to N messages with one non-blocking `recvmmsg`. With GRO on ([`enable_gro`]) one
//!   message may carry several datagrams of the same sender coalesced by the kernel; the `UDP_GRO` control message
//!   gives their size and [`RecvBatch::datagrams`] splits them again. `SO_RXQ_OVFL` ([`enable_drop_counter`]) makes
//!   the kernel report how many datagrams it dropped because the socket buffer was full.
//! * [`wait`] blocks until the socket is readable/writable or a timeout with nanosecond resolution expires (tokio's
//!   timer has a 1 ms tick, too coarse to pace 80 000 packets/s); [`set_timer_slack`] shortens the thread's timer
//!   slack so such timeouts are honoured within microseconds.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;

/// Most segments the kernel accepts in one GSO send (`UDP_MAX_SEGMENTS`, 64 on every kernel with GSO).
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Most payload bytes of one GSO send (the super-datagram must fit one IPv4 packet).
pub const GSO_MAX_BYTES: usize = 65_507;
/// Largest datagram GRO can hand over in one message.
pub const GRO_MAX_BYTES: usize = 65_535;
/// Most messages per `sendmmsg` call (the kernel's `UIO_MAXIOV`).
const MMSG_MAX: usize = 1024;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn cvt_size(rc: isize) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: fd is a live descriptor borrowed for the call; we pass a pointer to a c_int and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(rc).map(drop)
}

fn get_int(fd: BorrowedFd<'_>, level: libc::c_int, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: fd is live; v/len point to writable storage of the advertised size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            &mut v as *mut libc::c_int as *mut libc::c_void,
            &mut len,
        )
    };
    cvt(rc).map(|_| v)
}

/// True if the kernel knows UDP GSO (`getsockopt(SOL_UDP, UDP_SEGMENT)` succeeds, Linux ≥ 4.18). Whether a given
/// route can segment is only known when a send is tried; [`BatchSender`] falls back by itself.
pub fn gso_supported(fd: impl AsFd) -> bool {
    get_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
}

/// Turns UDP GRO on for a receiving socket (Linux ≥ 5.0). Returns false (and changes nothing) if the kernel
/// refuses; [`RecvBatch`] works either way.
pub fn enable_gro(fd: impl AsFd) -> bool {
    set_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_GRO, 1).is_ok()
}

/// Asks the kernel to report, with every received datagram, how many it dropped on this socket for lack of
/// buffer space (`SO_RXQ_OVFL`). Returns false if refused.
pub fn enable_drop_counter(fd: impl AsFd) -> bool {
    set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1).is_ok()
}

/// Asks the kernel to stamp every received datagram with its arrival time (`SO_TIMESTAMPNS`, CLOCK_REALTIME),
/// reported by [`RecvBatch::datagrams_timed`]. A receiver thread that reads in batches, or late, then still
/// knows when each datagram arrived. Returns false if refused.
pub fn enable_timestamps(fd: impl AsFd) -> bool {
    set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok()
}

/// Sets the calling thread's timer slack (how late the kernel may fire its timers) to `ns` nanoseconds.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    nix::sys::prctl::set_timerslack(ns).map_err(io::Error::from)
}

/// Readiness reported by [`wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ready {
    pub readable: bool,
    pub writable: bool,
}

/// Blocks until `fd` is readable (if `read`), writable (if `write`), or `timeout` has passed (`None` = no
/// limit). Nanosecond timeout resolution (`ppoll`); `EINTR` counts as a timeout.
pub fn wait(
    fd: impl AsFd,
    read: bool,
    write: bool,
    timeout: Option<Duration>,
) -> io::Result<Ready> {
    let mut flags = PollFlags::empty();
    if read {
        flags |= PollFlags::POLLIN;
    }
    if write {
        flags |= PollFlags::POLLOUT;
    }
    let mut fds = [PollFd::new(fd.as_fd(), flags)];
    match ppoll(&mut fds, timeout.map(TimeSpec::from_duration), None) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok(Ready::default()),
        Err(e) => return Err(e.into()),
    }
    let got = fds[0].revents().unwrap_or(PollFlags::empty());
    let err = got.intersects(PollFlags::POLLERR | PollFlags::POLLHUP);
    Ok(Ready {
        readable: got.contains(PollFlags::POLLIN) || (read && err),
        writable: got.contains(PollFlags::POLLOUT) || (write && err),
    })
}

/// A socket address in the C layout, for `msg_name`.
struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    fn new(a: &SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all-zero is a valid (unspecified) value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from(*v4.ip()).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: v6.flowinfo().to_be(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: v6.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }
}

/// Reads a `sockaddr_storage` filled in by the kernel.
fn parse_addr(s: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is long enough.
            let sin = unsafe { &*(s as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &*(s as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

fn would_block(e: &io::Error) -> bool {
    // ENOBUFS: the device queue is full for now; like EAGAIN, try again later.
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Counters of a [`BatchSender`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendStats {
    /// `sendmsg` calls carrying a GSO super-datagram, and the datagrams they carried.
    pub gso_calls: u64,
    pub gso_datagrams: u64,
    /// `sendmmsg` calls and the datagrams they carried.
    pub mmsg_calls: u64,
    pub mmsg_datagrams: u64,
}

/// Sends runs of datagrams with GSO when it works and `sendmmsg` otherwise. See the module docs.
#[derive(Debug, Clone)]
pub struct BatchSender {
    gso: bool,
    /// Why GSO was switched off, if it was.
    gso_off_reason: Option<String>,
    stats: SendStats,
}

impl BatchSender {
    /// A sender for `fd`; GSO is tried when `want_gso` and the kernel knows it.
    pub fn new(fd: impl AsFd, want_gso: bool) -> BatchSender {
        let gso = want_gso && gso_supported(fd);
        BatchSender {
            gso,
            gso_off_reason: (!gso).then(|| {
                if want_gso {
                    "kernel has no UDP_SEGMENT".to_string()
                } else {
                    "disabled".to_string()
                }
            }),
            stats: SendStats::default(),
        }
    }

    /// True while GSO sends are used.
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Why GSO is not used, if it is not.
    pub fn gso_off_reason(&self) -> Option<&str> {
        self.gso_off_reason.as_deref()
    }

    pub fn stats(&self) -> &SendStats {
        &self.stats
    }

    /// Sends the datagrams laid out back to back in `buf` (datagram i is `lens[i]` bytes) to `dest`. Returns how
    /// many were sent, from the first; fewer than `lens.len()` when the socket buffer filled up. `WouldBlock` if
    /// none could be sent. Other errors are the socket's.
    pub fn send(
        &mut self,
        fd: impl AsFd,
        dest: &SocketAddr,
        buf: &[u8],
        lens: &[usize],
    ) -> io::Result<usize> {
        let fd = fd.as_fd();
        let total: usize = lens.iter().sum();
        if total > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "datagram lengths exceed the buffer",
            ));
        }
        let addr = RawAddr::new(dest);
        let mut sent = 0;
        let mut off = 0;
        while sent < lens.len() {
            let r = if self.gso && lens.len() - sent > 1 {
                let n = gso_run(&lens[sent..]);
                if n > 1 {
                    let bytes: usize = lens[sent..sent + n].iter().sum();
                    match send_gso(fd, &addr, &buf[off..off + bytes], lens[sent]) {
                        Ok(()) => {
                            self.stats.gso_calls += 1;
                            self.stats.gso_datagrams += n as u64;
                            Ok(n)
                        }
                        Err(e)
                            if matches!(
                                e.raw_os_error(),
                                Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT)
                            ) =>
                        {
                            self.gso = false;
                            self.gso_off_reason =
                                Some(format!("the route refused a GSO send: {e}"));
                            continue;
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    self.mmsg(fd, &addr, &buf[off..], &lens[sent..])
                }
            } else {
                self.mmsg(fd, &addr, &buf[off..], &lens[sent..])
            };
            match r {
                Ok(n) => {
                    off += lens[sent..sent + n].iter().sum::<usize>();
                    sent += n;
                }
                Err(e) if would_block(&e) && sent > 0 => break,
                Err(e) if would_block(&e) => return Err(io::ErrorKind::WouldBlock.into()),
                Err(e) => return Err(e),
            }
        }
        Ok(sent)
    }

    /// One `sendmmsg` for up to [`MMSG_MAX`] of `lens`.
    fn mmsg(
        &mut self,
        fd: BorrowedFd<'_>,
        addr: &RawAddr,
        buf: &[u8],
        lens: &[usize],
    ) -> io::Result<usize> {
        let n = lens.len().min(MMSG_MAX);
        let mut iovs: Vec<libc::iovec> = Vec::with_capacity(n);
        let mut off = 0;
        for &l in &lens[..n] {
            iovs.push(libc::iovec {
                iov_base: buf[off..].as_ptr() as *mut libc::c_void,
                iov_len: l,
            });
            off += l;
        }
        // SAFETY: mmsghdr is plain old data; zero is a valid initial value for every field.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
            m.msg_hdr.msg_name = &addr.storage as *const _ as *mut libc::c_void;
            m.msg_hdr.msg_namelen = addr.len;
            m.msg_hdr.msg_iov = iov as *mut libc::iovec;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: every header points at a live iovec over `buf` (read-only use by the kernel) and at `addr`,
        // all of which outlive the call; n ≤ UIO_MAXIOV.
        let rc = unsafe {
            libc::sendmmsg(
                fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        let sent = cvt(rc)? as usize;
        self.stats.mmsg_calls += 1;
        self.stats.mmsg_datagrams += sent as u64;
        Ok(sent)
    }
}

/// Length of the GSO-able run at the start of `lens`: equal sizes (the last may be shorter), at most
/// [`GSO_MAX_SEGMENTS`] and [`GSO_MAX_BYTES`].
fn gso_run(lens: &[usize]) -> usize {
    let seg = lens[0];
    if seg == 0 {
        return 1;
    }
    let cap = GSO_MAX_SEGMENTS.min(GSO_MAX_BYTES / seg);
    let mut n = 0;
    for &l in lens.iter().take(cap) {
        if l > seg {
            break;
        }
        n += 1;
        if l < seg {
            break;
        }
    }
    n.max(1)
}

/// One `sendmsg` of `buf` to `addr`, segmented by the kernel into `seg`-byte datagrams (`UDP_SEGMENT` cmsg).
fn send_gso(fd: BorrowedFd<'_>, addr: &RawAddr, buf: &[u8], seg: usize) -> io::Result<()> {
    let seg16 = u16::try_from(seg).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // u64-aligned storage for one cmsghdr carrying a u16.
    let mut cbuf = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&cbuf));
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; zero is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &addr.storage as *const _ as *mut libc::c_void;
    msg.msg_namelen = addr.len;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = space as _;
    // SAFETY: msg_control points at `space` writable, aligned bytes, so CMSG_FIRSTHDR is non-null and the header
    // plus its u16 payload fit; all pointers in msg outlive the sendmsg call.
    let rc = unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_UDP;
        (*c).cmsg_type = libc::UDP_SEGMENT;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut u16, seg16);
        libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT)
    };
    let n = cvt_size(rc)?;
    if n != buf.len() {
        return Err(io::Error::other(format!(
            "GSO send took {n} of {} bytes",
            buf.len()
        )));
    }
    Ok(())
}

/// Room for the control messages of one received datagram (UDP_GRO int, SO_RXQ_OVFL u32, SO_TIMESTAMPNS
/// timespec: 24 + 24 + 32 bytes), u64-aligned.
const CMSG_WORDS: usize = 16;

#[derive(Debug, Clone, Copy)]
struct Meta {
    len: usize,
    from: Option<SocketAddr>,
    /// GRO segment size (0 = one datagram).
    seg: usize,
    /// Kernel arrival time (since the Unix epoch), with SO_TIMESTAMPNS on.
    at: Option<Duration>,
}

/// Buffers for one `recvmmsg` of up to `slots` messages. See the module docs.
pub struct RecvBatch {
    buf: Vec<u8>,
    slot: usize,
    meta: Vec<Meta>,
    n: usize,
    names: Vec<libc::sockaddr_storage>,
    ctrl: Vec<[u64; CMSG_WORDS]>,
    /// Latest SO_RXQ_OVFL count seen.
    drops: u64,
    truncated: u64,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.meta.len())
            .field("slot", &self.slot)
            .field("n", &self.n)
            .field("drops", &self.drops)
            .finish()
    }
}

impl RecvBatch {
    /// `slots` messages of up to `slot_bytes` each (use [`GRO_MAX_BYTES`] with GRO on).
    pub fn new(slots: usize, slot_bytes: usize) -> RecvBatch {
        let slots = slots.clamp(1, MMSG_MAX);
        RecvBatch {
            buf: vec![0; slots * slot_bytes],
            slot: slot_bytes,
            meta: vec![
                Meta {
                    len: 0,
                    from: None,
                    seg: 0,
                    at: None,
                };
                slots
            ],
            n: 0,
            // SAFETY: sockaddr_storage is plain old data; zero is valid.
            names: (0..slots).map(|_| unsafe { std::mem::zeroed() }).collect(),
            ctrl: vec![[0; CMSG_WORDS]; slots],
            drops: 0,
            truncated: 0,
        }
    }

    /// Receives what is queued on `fd` without blocking: the number of messages (each one or, with GRO, several
    /// datagrams). `WouldBlock` when nothing is queued.
    pub fn recv(&mut self, fd: impl AsFd) -> io::Result<usize> {
        let slots = self.meta.len();
        let mut iovs: Vec<libc::iovec> = self
            .buf
            .chunks_exact_mut(self.slot)
            .map(|c| libc::iovec {
                iov_base: c.as_mut_ptr() as *mut libc::c_void,
                iov_len: c.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain old data; zero is valid.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..slots).map(|_| unsafe { std::mem::zeroed() }).collect();
        for i in 0..slots {
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut self.names[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.ctrl[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = std::mem::size_of::<[u64; CMSG_WORDS]>() as _;
        }
        // SAFETY: every header points at this batch's own buffers (one slot, one name, one control area each),
        // which live as long as `self` and are not otherwise borrowed during the call.
        let rc = unsafe {
            libc::recvmmsg(
                fd.as_fd().as_raw_fd(),
                msgs.as_mut_ptr(),
                slots as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let n = cvt(rc)? as usize;
        for (i, m) in msgs.iter().enumerate().take(n) {
            let h = &m.msg_hdr;
            let mut seg = 0usize;
            let mut at = None;
            // SAFETY: the kernel filled msg_control/msg_controllen for this message; the CMSG_* macros walk only
            // within that area, and each payload is read unaligned with its documented type.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(h);
                while !c.is_null() {
                    let data = libc::CMSG_DATA(c);
                    match ((*c).cmsg_level, (*c).cmsg_type) {
                        (libc::SOL_UDP, libc::UDP_GRO) => {
                            seg = std::ptr::read_unaligned(data as *const libc::c_int).max(0)
                                as usize;
                        }
                        (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => {
                            self.drops = std::ptr::read_unaligned(data as *const u32) as u64;
                        }
                        (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                            let ts = std::ptr::read_unaligned(data as *const libc::timespec);
                            if ts.tv_sec >= 0 && (0..1_000_000_000).contains(&ts.tv_nsec) {
                                at = Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
                            }
                        }
                        _ => {}
                    }
                    c = libc::CMSG_NXTHDR(h, c);
                }
            }
            if h.msg_flags & libc::MSG_TRUNC != 0 {
                self.truncated += 1;
            }
            self.meta[i] = Meta {
                len: (m.msg_len as usize).min(self.slot),
                from: parse_addr(&self.names[i], h.msg_namelen),
                seg,
                at,
            };
        }
        self.n = n;
        Ok(n)
    }

    /// The datagrams of the last [`recv`](Self::recv), with their senders, GRO messages split into their
    /// segments.
    pub fn datagrams(&self) -> impl Iterator<Item = (Option<SocketAddr>, &[u8])> + '_ {
        self.datagrams_timed().map(|(from, _, d)| (from, d))
    }

    /// Like [`datagrams`](Self::datagrams), with each datagram's kernel arrival time since the Unix epoch
    /// (`None` without [`enable_timestamps`]). The segments of one GRO message share their message's time.
    pub fn datagrams_timed(
        &self,
    ) -> impl Iterator<Item = (Option<SocketAddr>, Option<Duration>, &[u8])> + '_ {
        self.meta[..self.n]
            .iter()
            .enumerate()
            .flat_map(move |(i, m)| {
                let data = &self.buf[i * self.slot..i * self.slot + m.len];
                let seg = if m.seg == 0 || m.seg >= m.len {
                    m.len.max(1)
                } else {
                    m.seg
                };
                data.chunks(seg).map(move |d| (m.from, m.at, d))
            })
    }

    /// Datagrams the kernel dropped on this socket for lack of buffer space, as last reported (cumulative; needs
    /// [`enable_drop_counter`]).
    pub fn socket_drops(&self) -> u64 {
        self.drops
    }

    /// Messages cut short because they did not fit a slot.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }
}

#[cfg(test)]
mod tests;
