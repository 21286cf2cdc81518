//! Which TCP connections `serve --http` keeps. Every connection holds a file descriptor, and
//! one that never sends a complete request costs the attacker nothing, so the door caps them
//! globally and per client address, and a connection is *unproven* until one of its requests
//! passes the token check. Unproven connections may hold only `max - reserved` slots and are the
//! ones shed (oldest first) when a cap is reached, so a pile of half-open connections can neither
//! exhaust the process's descriptors nor keep an authenticated client out.

use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// A client as the caps count it: an IPv4 address, or an IPv6 address's /64 (one host is
/// usually handed a whole /64, so counting single IPv6 addresses would cap nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The key of a peer address (`::ffff:a.b.c.d` counts as `a.b.c.d`).
    pub fn of(ip: IpAddr) -> Self {
        match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let s = v6.segments();
                Self(IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0)))
            }
            v4 => Self(v4),
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

/// The caps, as [`ConnectionLimits::new`] derives them from the `serve:` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max: usize,
    /// Connections one client may hold.
    pub per_client: usize,
    /// Slots only proven connections may fill; below `max`.
    pub reserved: usize,
}

/// Descriptors left for everything but connections (components, MCP servers' pipes, thread
/// files, the state store): at most this many, at most half of the limit.
const OTHER_FDS: u64 = 256;

impl ConnectionLimits {
    /// `max` lowered to what `fd_limit` (the process's `RLIMIT_NOFILE`, `None`: unlimited) can
    /// hold beside the rest of the host; unset shares are a quarter (per client) and an eighth
    /// (reserved) of it. Returns the limits and, when `max` was lowered, why.
    pub fn new(
        max: usize,
        per_client: Option<usize>,
        reserved: Option<usize>,
        fd_limit: Option<u64>,
    ) -> (Self, Option<String>) {
        let budget = fd_limit.map(|n| n.saturating_sub(OTHER_FDS.min(n / 2)));
        let (max, lowered) = match budget {
            Some(b) if (max as u64) > b => {
                let b = usize::try_from(b).unwrap_or(usize::MAX).max(2);
                let why = format!(
                    "toolhost.serve.max_connections lowered from {max} to {b}: the process may open {} files \
                     (ulimit -n) and keeps {} for the rest of the host",
                    fd_limit.unwrap_or_default(),
                    fd_limit.unwrap_or_default().saturating_sub(b as u64)
                );
                (b, Some(why))
            }
            _ => (max.max(2), None),
        };
        let per_client = per_client.unwrap_or(max.div_ceil(4)).clamp(1, max);
        let reserved = reserved.unwrap_or(max / 8).min(max - 1);
        (Self { max, per_client, reserved }, lowered)
    }
}

/// The process's current `RLIMIT_NOFILE`; `None` when unlimited.
pub fn fd_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Why a connection was not admitted (every slot it could use is held by a proven connection).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The server's cap.
    #[error(
        "Server busy: {max} connections are open, the most this server keeps (toolhost.serve.max_connections); \
         retry later"
    )]
    Full {
        /// The cap.
        max: usize,
    },
    /// The client's share.
    #[error(
        "Too many connections from {client}: it has {per_client} open, the most one client address keeps \
         (toolhost.serve.max_connections_per_client); close one or retry later"
    )]
    ClientFull {
        /// The client.
        client: ClientKey,
        /// Its share.
        per_client: usize,
    },
}

/// The books of every open connection.
#[derive(Debug)]
pub struct Connections {
    limits: ConnectionLimits,
    books: Mutex<Books>,
}

#[derive(Debug, Default)]
struct Books {
    next: u64,
    live: HashMap<u64, Entry>,
    /// Unproven connections by age (ids grow).
    unproven: BTreeSet<u64>,
    clients: HashMap<ClientKey, ClientBooks>,
}

#[derive(Debug)]
struct Entry {
    client: ClientKey,
    shed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct ClientBooks {
    open: usize,
    unproven: BTreeSet<u64>,
}

impl Books {
    /// Take `id` off the books; `shed`: tell its connection to close.
    fn remove(&mut self, id: u64, shed: bool) {
        let Some(entry) = self.live.remove(&id) else { return };
        self.unproven.remove(&id);
        if let Some(c) = self.clients.get_mut(&entry.client) {
            c.open -= 1;
            c.unproven.remove(&id);
            if c.open == 0 {
                self.clients.remove(&entry.client);
            }
        }
        if shed {
            // A permit is stored if the connection is not waiting yet.
            entry.shed.notify_one();
        }
    }
}

impl Connections {
    /// Books for these caps.
    pub fn new(limits: ConnectionLimits) -> Arc<Self> {
        Arc::new(Self { limits, books: Mutex::new(Books::default()) })
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        // The books hold counts only; a panic elsewhere leaves them usable.
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admit a new connection from `ip`, shedding the oldest unproven connection (the client's
    /// own when its share is full) to make room; refused only when the slots it needs are all
    /// held by proven connections.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Refusal> {
        let client = ClientKey::of(ip);
        let ConnectionLimits { max, per_client, reserved } = self.limits;
        let mut b = self.books();
        if b.clients.get(&client).is_some_and(|c| c.open >= per_client) {
            match b.clients.get(&client).and_then(|c| c.unproven.first().copied()) {
                Some(oldest) => b.remove(oldest, true),
                None => return Err(Refusal::ClientFull { client, per_client }),
            }
        }
        if b.live.len() >= max {
            match b.unproven.first().copied() {
                Some(oldest) => b.remove(oldest, true),
                None => return Err(Refusal::Full { max }),
            }
        }
        // The newcomer is unproven too: keep the reserve free of them.
        if b.unproven.len() >= max - reserved {
            if let Some(oldest) = b.unproven.first().copied() {
                b.remove(oldest, true);
            }
        }
        let id = b.next;
        b.next += 1;
        let shed = Arc::new(Notify::new());
        b.live.insert(id, Entry { client, shed: shed.clone() });
        b.unproven.insert(id);
        let c = b.clients.entry(client).or_default();
        c.open += 1;
        c.unproven.insert(id);
        Ok(Ticket { id, client, shed, connections: self.clone() })
    }

    /// (open, unproven) connections.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        let b = self.books();
        (b.live.len(), b.unproven.len())
    }
}

/// A connection's place on the books, given up when dropped.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    client: ClientKey,
    shed: Arc<Notify>,
    connections: Arc<Connections>,
}

impl Ticket {
    /// Who holds it.
    pub fn client(&self) -> ClientKey {
        self.client
    }

    /// One of the connection's requests passed the token check: it is no longer shed for
    /// newcomers and may use the reserved slots.
    pub fn prove(&self) {
        let mut b = self.connections.books();
        if b.unproven.remove(&self.id) {
            if let Some(c) = b.clients.get_mut(&self.client) {
                c.unproven.remove(&self.id);
            }
        }
    }

    /// Resolves when the connection was shed to make room for another.
    pub async fn shed(&self) {
        self.shed.notified().await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.connections.books().remove(self.id, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn books(max: usize, per_client: usize, reserved: usize) -> Arc<Connections> {
        Connections::new(ConnectionLimits { max, per_client, reserved })
    }

    fn is_shed(t: &Ticket) -> bool {
        futures::FutureExt::now_or_never(t.shed()).is_some()
    }

    #[test]
    fn a_full_client_sheds_its_own_oldest_unproven_connection_then_is_refused() {
        let c = books(10, 2, 0);
        let a1 = c.admit(ip("127.0.0.1")).unwrap();
        let a2 = c.admit(ip("127.0.0.1")).unwrap();
        let other = c.admit(ip("127.0.0.2")).unwrap();
        let a3 = c.admit(ip("127.0.0.1")).unwrap();
        assert!(is_shed(&a1) && !is_shed(&a2) && !is_shed(&other) && !is_shed(&a3));
        assert_eq!(c.counts(), (3, 3));
        a2.prove();
        a3.prove();
        let e = c.admit(ip("127.0.0.1")).unwrap_err();
        assert_eq!(e, Refusal::ClientFull { client: ClientKey::of(ip("127.0.0.1")), per_client: 2 });
        assert!(e.to_string().contains("127.0.0.1") && e.to_string().contains("max_connections_per_client"));
        // Dropping a proven connection frees its slot.
        drop(a2);
        assert!(c.admit(ip("127.0.0.1")).is_ok());
        drop(a1);
        assert_eq!(c.counts().0, 2, "a shed ticket dropped later is not counted twice");
    }

    #[test]
    fn unproven_connections_never_take_the_reserve_and_proven_ones_are_never_shed() {
        let c = books(4, 4, 2);
        let p = c.admit(ip("10.0.0.1")).unwrap();
        p.prove();
        let u1 = c.admit(ip("10.0.0.2")).unwrap();
        let u2 = c.admit(ip("10.0.0.3")).unwrap();
        // A third unproven one would enter the reserve: the oldest unproven goes.
        let u3 = c.admit(ip("10.0.0.4")).unwrap();
        assert!(is_shed(&u1) && !is_shed(&u2) && !is_shed(&u3) && !is_shed(&p));
        assert_eq!(c.counts(), (3, 2));
        u2.prove();
        u3.prove();
        let q = c.admit(ip("10.0.0.5")).unwrap();
        q.prove();
        // Full of proven connections: refused, nobody shed.
        assert_eq!(c.admit(ip("10.0.0.6")).unwrap_err(), Refusal::Full { max: 4 });
        assert!(!is_shed(&p) && !is_shed(&u2) && !is_shed(&u3) && !is_shed(&q));
    }

    #[test]
    fn ipv6_clients_are_counted_per_64_and_mapped_ipv4_as_ipv4() {
        assert_eq!(ClientKey::of(ip("2001:db8:1:2::1")), ClientKey::of(ip("2001:db8:1:2:ffff::9")));
        assert_ne!(ClientKey::of(ip("2001:db8:1:2::1")), ClientKey::of(ip("2001:db8:1:3::1")));
        assert_eq!(ClientKey::of(ip("::ffff:127.0.0.1")), ClientKey::of(ip("127.0.0.1")));
        assert_eq!(ClientKey::of(ip("2001:db8:1:2::1")).to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn limits_fit_the_file_limit_and_default_their_shares() {
        let (l, why) = ConnectionLimits::new(1024, None, None, None);
        assert_eq!((l, why), (ConnectionLimits { max: 1024, per_client: 256, reserved: 128 }, None));
        let (l, why) = ConnectionLimits::new(1024, Some(8), Some(0), Some(1_048_576));
        assert_eq!((l, why), (ConnectionLimits { max: 1024, per_client: 8, reserved: 0 }, None));
        // A 1024-file process keeps 256 for the rest of the host.
        let (l, why) = ConnectionLimits::new(1024, None, None, Some(1024));
        assert_eq!(l, ConnectionLimits { max: 768, per_client: 192, reserved: 96 });
        let why = why.unwrap();
        assert!(why.contains("from 1024 to 768") && why.contains("ulimit -n"), "{why}");
        // A tiny limit keeps half for the rest; configured shares are clamped to the new max.
        let (l, _) = ConnectionLimits::new(1024, Some(500), Some(900), Some(128));
        assert_eq!(l, ConnectionLimits { max: 64, per_client: 64, reserved: 63 });
    }
}
