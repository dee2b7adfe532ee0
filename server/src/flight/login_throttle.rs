//! Throttling of failed logins, per user name and per peer address.
//!
//! ```text
//!   login ──► user or peer locked? ── yes ──► Unauthenticated "too many failed logins …; retry in N s"
//!               │ no                          (the password is not even checked)
//!               ▼
//!             password checked ── wrong ──► failure counted for the user and for the peer:
//!               │                            the user's `max_failed` within `window`, or the
//!               │                            peer's 4 × that, locks it for `lockout`
//!               ▼ right
//!             the user's failures forgotten
//! ```
//!
//! A locked name also locks out its rightful owner for `lockout`: the price of slowing a
//! password guesser to `max_failed` guesses per `lockout`. The peer limit stops one address
//! from guessing across many names. Failures older than `window` are forgotten.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long failures count towards a lock.
const WINDOW: Duration = Duration::from_secs(300);

/// Entries kept per map at most; beyond it, unlocked entries are dropped first (a flood of
/// made-up names must not grow memory without bound).
const MAX_ENTRIES: usize = 10_000;

/// A login refused before its password is checked: who is locked and for how long still.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Locked {
    /// The user name has failed too often.
    #[error("too many failed logins for user {user}; retry in {} s", .retry_in.as_secs().max(1))]
    User {
        /// The name logged in with.
        user: String,
        /// Until the lock ends.
        retry_in: Duration,
    },
    /// The peer address has failed too often, across names.
    #[error("too many failed logins from {peer}; retry in {} s", .retry_in.as_secs().max(1))]
    Peer {
        /// The client's address.
        peer: IpAddr,
        /// Until the lock ends.
        retry_in: Duration,
    },
}

/// Failed logins of one user name or peer.
#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    since: Instant,
    locked_until: Option<Instant>,
}

/// The throttle (module docs). `max_failed == 0` turns it off.
#[derive(Debug)]
pub struct LoginThrottle {
    max_failed: u32,
    lockout: Duration,
    users: Mutex<HashMap<String, Failures>>,
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginThrottle {
    /// Locks a user after `max_failed` failures (a peer after 4 × that) within 5 minutes, for
    /// `lockout`.
    pub fn new(max_failed: u32, lockout: Duration) -> Self {
        Self {
            max_failed,
            lockout,
            users: Mutex::default(),
            peers: Mutex::default(),
        }
    }

    /// [`Locked`] when `user` (none for a token that names no user before it verifies) or
    /// `peer` is locked now (the user is checked first).
    pub fn check(&self, user: Option<&str>, peer: Option<IpAddr>) -> Result<(), Locked> {
        let now = Instant::now();
        if let Some(user) = user
            && let Some(retry_in) = locked(&self.users, user, now)
        {
            return Err(Locked::User {
                user: user.to_string(),
                retry_in,
            });
        }
        if let Some(peer) = peer
            && let Some(retry_in) = locked(&self.peers, &peer, now)
        {
            return Err(Locked::Peer { peer, retry_in });
        }
        Ok(())
    }

    /// Counts a failed login of `user` (if it names one) from `peer`.
    pub fn failed(&self, user: Option<&str>, peer: Option<IpAddr>) {
        if self.max_failed == 0 {
            return;
        }
        let now = Instant::now();
        if let Some(user) = user {
            count(
                &self.users,
                user.to_string(),
                self.max_failed,
                self.lockout,
                now,
            );
        }
        if let Some(peer) = peer {
            count(
                &self.peers,
                peer,
                self.max_failed.saturating_mul(4),
                self.lockout,
                now,
            );
        }
    }

    /// Forgets the failures of `user` after a successful login (the peer's stay: it may be
    /// guessing other names).
    pub fn succeeded(&self, user: &str) {
        self.users.lock().expect("login throttle").remove(user);
    }
}

/// How much longer `key` is locked, if it is.
fn locked<K: Hash + Eq + ?Sized, Q: Hash + Eq + std::borrow::Borrow<K>>(
    map: &Mutex<HashMap<Q, Failures>>,
    key: &K,
    now: Instant,
) -> Option<Duration> {
    let map = map.lock().expect("login throttle");
    let until = map.get(key)?.locked_until?;
    (until > now).then(|| until - now)
}

/// Adds a failure of `key`; locks it when it reaches `max` within [`WINDOW`].
fn count<K: Hash + Eq>(
    map: &Mutex<HashMap<K, Failures>>,
    key: K,
    max: u32,
    lockout: Duration,
    now: Instant,
) {
    let mut map = map.lock().expect("login throttle");
    if map.len() >= MAX_ENTRIES {
        map.retain(|_, f| f.locked_until.is_some_and(|u| u > now));
    }
    let entry = map.entry(key).or_insert(Failures {
        count: 0,
        since: now,
        locked_until: None,
    });
    let expired = entry.locked_until.is_some_and(|u| u <= now);
    if expired || now.duration_since(entry.since) > WINDOW {
        *entry = Failures {
            count: 0,
            since: now,
            locked_until: None,
        };
    }
    entry.count += 1;
    if entry.count >= max {
        entry.locked_until = Some(now + lockout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_is_locked_after_max_failures_and_a_peer_after_four_times_that() {
        let t = LoginThrottle::new(3, Duration::from_secs(60));
        let peer: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        for _ in 0..2 {
            t.failed(Some("alice"), peer);
        }
        assert!(t.check(Some("alice"), peer).is_ok());
        t.failed(Some("alice"), peer);
        let e = t.check(Some("alice"), peer).unwrap_err();
        assert!(
            matches!(&e, Locked::User { user, .. } if user == "alice"),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("too many failed logins for user alice; retry in "),
            "{e}"
        );
        // Another name from the same peer is still let through, until the peer's own limit.
        assert!(t.check(Some("bob"), peer).is_ok());
        for i in 0..9 {
            t.failed(Some(&format!("guess{i}")), peer);
        }
        let e = t.check(Some("bob"), peer).unwrap_err();
        assert!(
            matches!(e, Locked::Peer { peer: p, .. } if Some(p) == peer),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("too many failed logins from 10.0.0.1; retry in ")
        );
        assert!(
            t.check(Some("bob"), Some("10.0.0.2".parse().unwrap()))
                .is_ok()
        );
    }

    #[test]
    fn success_forgets_failures_and_a_lock_expires() {
        let t = LoginThrottle::new(2, Duration::from_millis(50));
        t.failed(Some("alice"), None);
        t.succeeded("alice");
        t.failed(Some("alice"), None);
        assert!(t.check(Some("alice"), None).is_ok());
        t.failed(Some("alice"), None);
        assert!(t.check(Some("alice"), None).is_err());
        std::thread::sleep(Duration::from_millis(60));
        assert!(t.check(Some("alice"), None).is_ok());
        let off = LoginThrottle::new(0, Duration::from_secs(60));
        for _ in 0..100 {
            off.failed(Some("alice"), None);
        }
        assert!(off.check(Some("alice"), None).is_ok());
    }
}
