//! Server-wide limits shared by all sessions: how many control connections may be open (overall and per client
//! address) — held by an RAII [`SessionSlot`] so a session that ends in any way, panics and aborts included,
//! gives its slot back — and a per-address count of recent failed logins that stops one address from guessing
//! passwords over many connections. Both maps are bounded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Limits of a server (see `drsftp serve --help` for what the defaults protect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    /// Control connections open at once; more get `421 Too many sessions, try again later.`
    pub max_sessions: usize,
    /// Control connections open at once from one address.
    pub max_sessions_per_ip: usize,
    /// Failed logins from one address within `failure_window` after which its logins are refused (`421`).
    pub max_failures_per_ip: u32,
    /// How long a failed login counts against its address.
    pub failure_window: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_sessions: 256,
            max_sessions_per_ip: 16,
            max_failures_per_ip: 10,
            failure_window: Duration::from_secs(600),
        }
    }
}

/// Password verifications that may run at once: one per core.
fn login_slots() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Most addresses the failure map remembers; beyond it, expired then oldest entries are dropped (an attacker
/// with many addresses can push entries out, but then each address has its own small budget anyway).
const MAX_TRACKED: usize = 4096;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain counters: still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Open sessions, overall and per address.
#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The session counters and the failure map of one server.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The limits at start-up; `live` replaces them after a reload.
    limits: ServerLimits,
    live: Arc<super::ops::Live>,
    sessions: Arc<Mutex<Counts>>,
    failures: Mutex<HashMap<IpAddr, (u32, Instant)>>,
    logins: Arc<tokio::sync::Semaphore>,
}

/// One open session's place in the counters; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct SessionSlot {
    sessions: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        let mut c = lock(&self.sessions);
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_ip.remove(&self.ip);
            }
        }
    }
}

impl Shared {
    /// The limits in force now (a reload may have replaced the start-up ones).
    fn limits(&self) -> ServerLimits {
        self.live.limits().unwrap_or(self.limits)
    }

    pub(crate) fn new(limits: ServerLimits, live: Arc<super::ops::Live>) -> Shared {
        Shared {
            limits,
            live,
            sessions: Arc::default(),
            failures: Mutex::default(),
            logins: Arc::new(tokio::sync::Semaphore::new(login_slots())),
        }
    }

    /// Permits for password verifications: take one before running argon2 and hold it until the result is in.
    /// Verification is CPU-bound, so more at once than cores would not finish sooner, only hold more memory.
    pub(crate) fn login_slots(&self) -> Arc<tokio::sync::Semaphore> {
        Arc::clone(&self.logins)
    }

    /// A slot for a new session from `ip`, or `None` when a limit is reached.
    pub(crate) fn open_session(&self, ip: IpAddr) -> Option<SessionSlot> {
        let ip = ip.to_canonical();
        let limits = self.limits();
        let mut c = lock(&self.sessions);
        let here = c.per_ip.get(&ip).copied().unwrap_or(0);
        if c.total >= limits.max_sessions || here >= limits.max_sessions_per_ip {
            return None;
        }
        c.total += 1;
        *c.per_ip.entry(ip).or_insert(0) += 1;
        Some(SessionSlot {
            sessions: self.sessions.clone(),
            ip,
        })
    }

    /// Sessions open now.
    #[cfg(test)]
    pub(crate) fn open_sessions(&self) -> usize {
        lock(&self.sessions).total
    }

    /// True if `ip` has had too many failed logins recently.
    pub(crate) fn login_blocked(&self, ip: IpAddr, now: Instant) -> bool {
        let ip = ip.to_canonical();
        let limits = self.limits();
        let f = lock(&self.failures);
        f.get(&ip).is_some_and(|&(n, last)| {
            n >= limits.max_failures_per_ip
                && now.saturating_duration_since(last) < limits.failure_window
        })
    }

    /// Counts a failed login from `ip`. The count restarts once `failure_window` has passed since the last one.
    pub(crate) fn login_failed(&self, ip: IpAddr, now: Instant) {
        let ip = ip.to_canonical();
        let window = self.limits().failure_window;
        let mut f = lock(&self.failures);
        if !f.contains_key(&ip) && f.len() >= MAX_TRACKED {
            f.retain(|_, &mut (_, last)| now.saturating_duration_since(last) < window);
            if f.len() >= MAX_TRACKED {
                if let Some(oldest) = f.iter().min_by_key(|(_, &(_, last))| last).map(|(k, _)| *k) {
                    f.remove(&oldest);
                }
            }
        }
        let e = f.entry(ip).or_insert((0, now));
        if now.saturating_duration_since(e.1) >= window {
            e.0 = 0;
        }
        e.0 = e.0.saturating_add(1);
        e.1 = now;
    }

    /// A successful login from `ip` clears its failures (a user who mistyped is not locked out later).
    pub(crate) fn login_succeeded(&self, ip: IpAddr) {
        lock(&self.failures).remove(&ip.to_canonical());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_and_given_back() {
        let s = Shared::new(
            ServerLimits {
                max_sessions: 3,
                max_sessions_per_ip: 2,
                ..ServerLimits::default()
            },
            Arc::default(),
        );
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = s.open_session(a).unwrap();
        let _a2 = s.open_session(a).unwrap();
        assert!(s.open_session(a).is_none(), "per address");
        let _b1 = s.open_session(b).unwrap();
        assert!(s.open_session(b).is_none(), "overall");
        drop(a1);
        assert!(s.open_session(b).is_some());
        // A slot moved into a task that panics is given back too.
        let slot = s.open_session("10.0.0.3".parse().unwrap());
        let r = std::thread::spawn(move || {
            let _slot = slot;
            panic!("session panicked");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(s.open_sessions(), 2);
    }

    #[test]
    fn a_reload_changes_the_limits_of_new_sessions_only() {
        let live: Arc<super::super::ops::Live> = Arc::default();
        let s = Shared::new(
            ServerLimits {
                max_sessions: 1,
                ..ServerLimits::default()
            },
            live.clone(),
        );
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let first = s.open_session(ip).unwrap();
        assert!(s.open_session(ip).is_none());
        live.set_limits(ServerLimits {
            max_sessions: 2,
            ..ServerLimits::default()
        });
        let second = s.open_session(ip).unwrap();
        assert!(s.open_session(ip).is_none());
        drop((first, second));
    }

    /// Many sessions sending PASS at once run at most one argon2 verification per core: the next waits for a
    /// permit (each verification holds ~19 MiB, so this bounds login memory to cores × 19 MiB).
    #[tokio::test]
    async fn password_checks_run_at_most_one_per_core() {
        let s = Shared::new(ServerLimits::default(), Arc::default());
        let slots = s.login_slots();
        let held: Vec<_> = (0..login_slots())
            .map(|_| Arc::clone(&slots).try_acquire_owned().unwrap())
            .collect();
        let waiting = tokio::spawn(Arc::clone(&slots).acquire_owned());
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a check beyond one per core waits");
        drop(held);
        let _granted = waiting.await.unwrap().unwrap();
        assert_eq!(slots.available_permits(), login_slots() - 1);
    }

    #[test]
    fn failures_block_an_address_for_a_window() {
        let s = Shared::new(
            ServerLimits {
                max_failures_per_ip: 3,
                failure_window: Duration::from_secs(60),
                ..ServerLimits::default()
            },
            Arc::default(),
        );
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let t = Instant::now();
        for _ in 0..3 {
            assert!(!s.login_blocked(ip, t));
            s.login_failed(ip, t);
        }
        assert!(s.login_blocked(ip, t));
        assert!(!s.login_blocked("10.0.0.2".parse().unwrap(), t));
        assert!(!s.login_blocked(ip, t + Duration::from_secs(61)));
        // The map stays bounded.
        for i in 0..(MAX_TRACKED as u32 + 10) {
            s.login_failed(IpAddr::from(i.to_be_bytes()), t);
        }
        assert!(lock(&s.failures).len() <= MAX_TRACKED);
    }
}
