//! Outbound network policy, one copy for every way out of the host: a component's `wasi:http`
//! requests (`host/src/runtime/net.rs`) and a host-bash command's HTTPS proxy
//! (`toolhost-hostbash`'s `proxy`). It owns the grant entries (`api.example.com`,
//! `*.example.com`, `host:8443`), the refusal of private, loopback and metadata addresses, the
//! resolution of a name to addresses that passed that check, and the texts that explain a refusal.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Port a rule without one allows: HTTPS's.
pub const HTTPS_PORT: u16 = 443;

/// Port a plain-HTTP rule without one allows.
pub const HTTP_PORT: u16 = 80;

/// Which ports a rule allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortRule {
    /// `host`: 443 only (80 for an `http://` entry).
    Default,
    /// `host:8443`.
    Exact(u16),
    /// `host:*`.
    Any,
}

/// Which hosts a rule allows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// `api.example.com`, or an IP literal.
    Exact(String),
    /// `*.example.com`: any name below example.com, not example.com itself.
    Below(String),
}

/// One entry of a `network:` grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    host: HostPattern,
    port: PortRule,
    /// An `http://` entry: plain HTTP to this host, for a self-hosted service that has no TLS.
    /// It allows plain HTTP only; HTTPS to the same host needs its own entry.
    plain: bool,
    /// The entry as the config wrote it, for messages.
    written: String,
}

impl HostRule {
    /// Parse a grant entry: `host`, `*.domain`, `host:port`, `host:*`, `[v6]:port`; an `https://`
    /// prefix and a trailing `/` are accepted. `http://host[:port]` grants plain HTTP to one
    /// exact host (a self-hosted service without TLS; no wildcards, no `:*`). Anything else is
    /// refused with the reason.
    pub fn parse(entry: &str) -> Result<Self, String> {
        let raw = entry.trim();
        let lower = raw.to_ascii_lowercase();
        let plain = lower.starts_with("http://");
        let rest = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://")).unwrap_or(&lower);
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err("an empty host name".to_string());
        }
        if rest.contains(['/', '?', '#', '@', ' ']) {
            return Err(format!("'{raw}': expected a host name (with an optional :port), not a URL"));
        }
        let (host, port) =
            split_host_port(rest).ok_or_else(|| format!("'{raw}': not a host name with an optional :port"))?;
        let port = match port {
            None => PortRule::Default,
            Some("*") => PortRule::Any,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => PortRule::Exact(n),
                _ => return Err(format!("'{raw}': port '{p}' is not a number from 1 to 65535 or '*'")),
            },
        };
        let host = if host == "*" {
            return Err(format!("'{raw}': a bare '*' would allow every host; list the hosts the tool needs"));
        } else if let Some(domain) = host.strip_prefix("*.") {
            if !is_dns_name(domain) || !domain.contains('.') {
                return Err(format!("'{raw}': '*.' must be followed by a domain such as example.com"));
            }
            HostPattern::Below(domain.to_string())
        } else if host.parse::<IpAddr>().is_ok() || is_dns_name(host) {
            HostPattern::Exact(host.to_string())
        } else {
            return Err(format!("'{raw}': '{host}' is not a valid host name"));
        };
        if plain && (matches!(host, HostPattern::Below(_)) || port == PortRule::Any) {
            return Err(format!(
                "'{raw}': plain HTTP is granted to one exact host and port at a time (no '*'); list each self-hosted service"
            ));
        }
        Ok(Self { host, port, plain, written: raw.to_string() })
    }

    /// Whether this is an `http://` (plain HTTP) entry.
    pub fn is_plain_http(&self) -> bool {
        self.plain
    }

    /// The entry as the config wrote it.
    pub fn written(&self) -> &str {
        &self.written
    }

    /// Whether this entry allows HTTPS to `host` (as [`normalize_host`] returns it) on `port`.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        !self.plain && self.matches(host, port, HTTPS_PORT)
    }

    /// Whether this entry allows plain HTTP to `host` on `port` (an `http://` entry).
    pub fn allows_plain(&self, host: &str, port: u16) -> bool {
        self.plain && self.matches(host, port, HTTP_PORT)
    }

    fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        let port_ok = match self.port {
            PortRule::Default => port == default_port,
            PortRule::Exact(p) => port == p,
            PortRule::Any => true,
        };
        port_ok && self.matches_host(host)
    }

    /// Whether this entry's host pattern covers `host`, whatever the port and scheme.
    pub fn matches_host(&self, host: &str) -> bool {
        match &self.host {
            HostPattern::Exact(h) => h == host,
            HostPattern::Below(d) => {
                host.len() > d.len() + 1 && host.ends_with(d.as_str()) && {
                    let cut = host.len() - d.len();
                    host.as_bytes()[cut - 1] == b'.'
                }
            }
        }
    }

    /// Whether this entry names `host` exactly (not through `*.`).
    fn names_exactly(&self, host: &str) -> bool {
        matches!(&self.host, HostPattern::Exact(h) if h == host)
    }
}

/// `host[:port]` with IPv6 literals in brackets; the host without brackets.
pub fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<Ipv6Addr>().ok()?;
        return match after {
            "" => Some((v6, None)),
            a => Some((v6, Some(a.strip_prefix(':')?))),
        };
    }
    match s.rsplit_once(':') {
        Some((h, _)) if h.contains(':') => None, // a bare IPv6 literal needs brackets
        Some((h, p)) => Some((h, Some(p))),
        None => Some((s, None)),
    }
}

fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A host as a request names it, in the form rules match: without IPv6 brackets, without a
/// trailing dot, lower case.
pub fn normalize_host(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// What may be reached: the grant's entries and whether private addresses are allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetGrant {
    rules: Vec<HostRule>,
    allow_private: bool,
    /// HTTPS (port 443) to any host whose addresses pass the private-address check: the
    /// default of a confined MCP server or ACP agent, which has no list of its own.
    any_public_https: bool,
    /// Whether a component may have any name resolved (`resolve-host`), not only the names its
    /// entries cover. See [`NetGrant::with_any_name_lookups`].
    any_name_lookups: bool,
}

impl NetGrant {
    /// The grant of a `network:` list (its entries were checked when the config was read).
    pub fn new(rules: Vec<HostRule>, allow_private: bool) -> Self {
        Self { rules, allow_private, any_public_https: false, any_name_lookups: false }
    }

    /// HTTPS to any public host (port 443); private, loopback, link-local and metadata
    /// addresses stay refused.
    pub fn any_public_https() -> Self {
        Self { rules: Vec::new(), allow_private: false, any_public_https: true, any_name_lookups: false }
    }

    /// Let [`may_look_up`](Self::may_look_up) answer any name. Each lookup is a DNS query whose
    /// name the tool chooses, so this opens a small channel out through the resolver; it is for
    /// a tool that must check a URL another service will fetch (DeerFlow's `url_safety` check in
    /// browserless, crawl4ai and fastcrw resolves the URL's host), not for ordinary tools.
    pub fn with_any_name_lookups(mut self, any: bool) -> Self {
        self.any_name_lookups = any;
        self
    }

    /// Whether any name may be looked up (see [`with_any_name_lookups`](Self::with_any_name_lookups)).
    pub fn any_name_lookups(&self) -> bool {
        self.any_name_lookups
    }

    /// Whether a tool may have `host` (as [`normalize_host`] returns it) resolved for it: a name
    /// some entry covers, on any port, by the same matching as requests. A lookup is itself a
    /// message to whoever serves the name's zone, so a name outside the grant is never asked.
    pub fn may_look_up(&self, host: &str) -> bool {
        self.any_name_lookups || self.rules.iter().any(|r| r.matches_host(host))
    }

    /// Whether an entry names `host` exactly and `host` is a cloud metadata address or one of
    /// [`METADATA_NAMES`]: the only way (with `allow_private_addresses`) to reach metadata.
    /// A `*.` entry, or a name that merely resolves to a metadata address, never grants it.
    pub fn grants_metadata(&self, host: &str) -> bool {
        let named = match host.parse::<IpAddr>() {
            Ok(ip) => is_metadata(ip),
            Err(_) => METADATA_NAMES.contains(&host),
        };
        named && self.rules.iter().any(|r| r.names_exactly(host))
    }

    /// Keep the addresses of `host` this grant may reach (see [`check_addresses`]); metadata
    /// addresses only when [`grants_metadata`](Self::grants_metadata) says so.
    pub fn check_addresses(&self, host: &str, candidates: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, ResolveError> {
        vet(candidates, self.allow_private, self.allow_private && self.grants_metadata(host))
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && !self.any_public_https
    }

    pub fn allow_private(&self) -> bool {
        self.allow_private
    }

    /// Whether HTTPS to `host` on `port` is granted.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        (self.any_public_https && port == HTTPS_PORT) || self.rules.iter().any(|r| r.allows(host, port))
    }

    /// Whether plain HTTP to `host` on `port` is granted (an `http://` entry).
    pub fn allows_plain(&self, host: &str, port: u16) -> bool {
        self.rules.iter().any(|r| r.allows_plain(host, port))
    }

    /// The grant as the config wrote it, for messages.
    pub fn describe(&self) -> String {
        let mut written: Vec<&str> = self.rules.iter().map(|r| r.written.as_str()).collect();
        if self.any_public_https {
            written.insert(0, "any public host, HTTPS");
        }
        format!("[{}]", written.join(", "))
    }
}

/// The reason [`forbidden_address`] gives for a cloud metadata address. Metadata is refused
/// even with `allow_private_addresses`, unless the grant names it ([`NetGrant::grants_metadata`]).
pub const METADATA: &str = "cloud metadata";

/// Host names of cloud metadata services (GCP's, AWS's, Tencent's). Naming one exactly in a
/// grant (with `allow_private_addresses`) is what lets a tool reach the metadata addresses it
/// resolves to.
pub const METADATA_NAMES: &[&str] =
    &["metadata.google.internal", "metadata.goog", "instance-data.ec2.internal", "metadata.tencentyun.com"];

/// Cloud metadata and credential endpoints: AWS, GCP, Azure, Oracle, OpenStack and most others
/// (169.254.169.254), AWS ECS task credentials (169.254.170.2), EKS Pod Identity
/// (169.254.170.23), Tencent (169.254.0.23), Alibaba (100.100.100.200).
const METADATA_V4: [Ipv4Addr; 5] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(169, 254, 0, 23),
    Ipv4Addr::new(100, 100, 100, 200),
];

/// AWS's IPv6 instance metadata (fd00:ec2::254) and EKS Pod Identity (fd00:ec2::23).
const METADATA_V6: [Ipv6Addr; 2] =
    [Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254), Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)];

/// Why an address may not be reached without `allow_private_addresses`, if it may not
/// ([`METADATA`] for a cloud metadata address, which needs more than that setting).
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

/// Whether `ip` is a cloud metadata address, also when an IPv6 address carries it
/// (`::ffff:169.254.169.254`, `64:ff9b::a9fe:a9fe`).
pub fn is_metadata(ip: IpAddr) -> bool {
    forbidden_address(ip) == Some(METADATA)
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if METADATA_V4.contains(&ip) {
        return Some(METADATA);
    }
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_unspecified() || o[0] == 0 {
        Some("unspecified")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("shared (CGNAT)")
    } else if ip.is_multicast() || ip.is_broadcast() {
        Some("multicast or broadcast")
    } else if o[0] >= 240 || (o[0] == 192 && o[1] == 0 && o[2] == 0) || (o[0] == 198 && (o[1] & 0xfe) == 18) {
        Some("reserved")
    } else if ip.is_documentation() {
        Some("documentation")
    } else {
        None
    }
}

/// The IPv4 address in 16 bits `hi` and 16 bits `lo`.
fn v4_of(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}

/// The IPv4 addresses an IPv6 address carries, and what an address of that block is when they
/// are all public (`None`: judged by them alone). A packet to such an address may be delivered
/// to the IPv4 address by a translator, a tunnel or the kernel itself, so it gets the IPv4 rules.
fn embedded_v4(ip: Ipv6Addr) -> Option<(Vec<Ipv4Addr>, Option<&'static str>)> {
    let s = ip.segments();
    match s {
        // ::ffff:a.b.c.d (IPv4-mapped) and ::ffff:0:a.b.c.d (IPv4-translated, RFC 2765).
        [0, 0, 0, 0, 0, 0xffff, hi, lo] | [0, 0, 0, 0, 0xffff, 0, hi, lo] => Some((vec![v4_of(hi, lo)], None)),
        // 64:ff9b::/96, NAT64's well-known prefix (RFC 6052).
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some((vec![v4_of(hi, lo)], None)),
        // 64:ff9b:1::/48, NAT64 for one network (RFC 8215): never global. The IPv4 address sits
        // where the network's prefix length puts it: the last 32 bits (a /96) or bits 48-87 (a
        // /48, around the reserved octet); each layout that holds one is judged (all zero bits
        // hold none), and the block is private anyway.
        [0x64, 0xff9b, 1, a, b, c, hi, lo] => {
            let layouts = [v4_of(hi, lo), v4_of(a, ((b & 0xff) << 8) | (c >> 8))];
            Some((layouts.into_iter().filter(|v4| !v4.is_unspecified()).collect(), Some("private (local-use NAT64)")))
        }
        // 2002::/16, 6to4 (RFC 3056): the IPv4 address of the tunnel's end.
        [0x2002, hi, lo, ..] => Some((vec![v4_of(hi, lo)], None)),
        // 2001::/32, Teredo (RFC 4380): the server's address, and the client's, inverted.
        [0x2001, 0, server_hi, server_lo, _, _, hi, lo] => {
            Some((vec![v4_of(!hi, !lo), v4_of(server_hi, server_lo)], None))
        }
        // ::/96 less :: and ::1, IPv4-compatible (deprecated by RFC 4291): no use on the Internet.
        [0, 0, 0, 0, 0, 0, hi, lo] if !(hi == 0 && lo <= 1) => {
            Some((vec![v4_of(hi, lo)], Some("deprecated IPv4-compatible")))
        }
        _ => None,
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // An address that carries an IPv4 address is judged by it; metadata first, so a refusal
    // names the rule that needs an explicit grant.
    if let Some((v4s, block)) = embedded_v4(ip) {
        let verdicts: Vec<_> = v4s.into_iter().filter_map(forbidden_v4).collect();
        return verdicts.iter().copied().find(|&w| w == METADATA).or(verdicts.first().copied()).or(block);
    }
    if METADATA_V6.contains(&ip) {
        Some(METADATA)
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private (unique local)")
    } else if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        Some("documentation")
    } else {
        None
    }
}

/// Why a name could not be turned into addresses that may be reached.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("DNS lookup timed out")]
    Timeout,
    #[error("DNS lookup failed: {0}")]
    Dns(std::io::Error),
    #[error("the name has no address")]
    NotFound,
    /// Every address is private, loopback, link-local, …: each with the reason.
    #[error("every address is refused: {}", .0.join(", "))]
    Prohibited(Vec<String>),
    /// Every refused address is cloud metadata, which `allow_private_addresses` alone does not
    /// open: each with the reason.
    #[error(
        "every address is refused: {}; cloud metadata is reached only with allow_private_addresses and a grant entry naming the address or a metadata host name exactly",
        .0.join(", ")
    )]
    Metadata(Vec<String>),
}

/// Resolve `host` once and keep the addresses that may be reached: with `allow_private` all but
/// cloud metadata, else only public ones. The caller connects to these addresses and never
/// resolves again, so a second answer (DNS rebinding) cannot slip past the check. A grant that
/// may name metadata explicitly uses [`NetGrant::resolve`] instead.
pub async fn resolve_checked(
    host: &str,
    port: u16,
    allow_private: bool,
    deadline: tokio::time::Instant,
) -> Result<Vec<SocketAddr>, ResolveError> {
    check_addresses(lookup(host, port, deadline).await?, allow_private)
}

impl NetGrant {
    /// [`resolve_checked`] under this grant: the same, except that metadata addresses are kept
    /// for a host the grant names as metadata ([`NetGrant::grants_metadata`]).
    pub async fn resolve(
        &self,
        host: &str,
        port: u16,
        deadline: tokio::time::Instant,
    ) -> Result<Vec<SocketAddr>, ResolveError> {
        self.check_addresses(host, lookup(host, port, deadline).await?)
    }
}

/// The addresses of `host`: an IP literal as is, else the system resolver's answer.
async fn lookup(host: &str, port: u16, deadline: tokio::time::Instant) -> Result<Vec<SocketAddr>, ResolveError> {
    Ok(match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| ResolveError::Timeout)?
            .map_err(ResolveError::Dns)?
            .collect(),
    })
}

/// Keep the addresses a grant may reach: with `allow_private` all but cloud metadata, else the
/// public ones. None left: `NotFound` when there were none, else `Metadata` or `Prohibited`
/// with each refused address and why.
pub fn check_addresses(candidates: Vec<SocketAddr>, allow_private: bool) -> Result<Vec<SocketAddr>, ResolveError> {
    vet(candidates, allow_private, false)
}

/// The one address check: `metadata` says whether cloud metadata addresses may be kept too
/// (only ever with `allow_private`).
fn vet(candidates: Vec<SocketAddr>, allow_private: bool, metadata: bool) -> Result<Vec<SocketAddr>, ResolveError> {
    let mut vetted = Vec::new();
    let mut refused = Vec::new();
    let mut all_metadata = true;
    for addr in candidates {
        let allowed = match forbidden_address(addr.ip()) {
            None => true,
            Some(METADATA) => allow_private && metadata,
            Some(_) => allow_private,
        };
        if allowed {
            vetted.push(addr);
        } else {
            let why = forbidden_address(addr.ip()).unwrap_or_default();
            all_metadata &= why == METADATA;
            refused.push(format!("{} ({why})", addr.ip()));
        }
    }
    match (vetted.is_empty(), refused.is_empty()) {
        (false, _) => Ok(vetted),
        (true, true) => Err(ResolveError::NotFound),
        (true, false) if all_metadata => Err(ResolveError::Metadata(refused)),
        (true, false) => Err(ResolveError::Prohibited(refused)),
    }
}

/// The refusal of a name that resolves only to addresses a grant without
/// `allow_private_addresses` may not reach. `setting` names where that key would go, e.g.
/// "the tool has" or "sandbox.bash_network has".
pub fn private_address_refusal(target: &str, refused: &[String], setting: &str) -> String {
    format!(
        "{target}: resolves to {}, which is refused unless {setting} allow_private_addresses: true",
        refused.join(", ")
    )
}

/// The refusal of a name that resolves only to cloud metadata addresses
/// ([`ResolveError::Metadata`]). `setting` as for [`private_address_refusal`].
pub fn metadata_refusal(target: &str, refused: &[String], setting: &str) -> String {
    format!(
        "{target}: resolves to {}, which is refused unless {setting} allow_private_addresses: true and a grant entry naming that address or a metadata host name ({}) exactly; a '*.' entry or another name resolving to it never grants it",
        refused.join(", "),
        METADATA_NAMES[0]
    )
}

/// The refusal of a host and port no grant entry allows. `whose` names the grant, e.g.
/// "this tool's network grant".
pub fn not_granted_refusal(target: &str, whose: &str, grant: &NetGrant) -> String {
    format!("{target}: not in {whose} {}", grant.describe())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(entries: &[&str]) -> NetGrant {
        NetGrant::new(entries.iter().map(|e| HostRule::parse(e).unwrap()).collect(), false)
    }

    #[test]
    fn rules_match_host_and_port() {
        let g = grant(&[
            "api.tavily.com",
            "*.example.com",
            "localhost:8443",
            "https://r.jina.ai/",
            "svc.test:*",
            "[::1]:9000",
        ]);
        assert!(g.allows("api.tavily.com", 443));
        assert!(!g.allows("api.tavily.com", 8443), "a rule without a port is 443 only");
        assert!(!g.allows("evil.api.tavily.com", 443));
        assert!(!g.allows("tavily.com", 443));
        assert!(g.allows("a.example.com", 443) && g.allows("a.b.example.com", 443));
        assert!(!g.allows("example.com", 443), "*. does not include the domain itself");
        assert!(!g.allows("badexample.com", 443));
        assert!(g.allows("localhost", 8443) && !g.allows("localhost", 443));
        assert!(g.allows("r.jina.ai", 443));
        assert!(g.allows("svc.test", 1) && g.allows("svc.test", 65535));
        assert!(g.allows("::1", 9000));
    }

    #[test]
    fn plain_http_entries_grant_plain_http_only() {
        let g = NetGrant::new(
            ["http://searxng.local:8080", "http://crawl4ai.local", "api.example.com"]
                .iter()
                .map(|e| HostRule::parse(e).unwrap())
                .collect(),
            true,
        );
        assert!(g.allows_plain("searxng.local", 8080) && !g.allows_plain("searxng.local", 80));
        assert!(g.allows_plain("crawl4ai.local", 80) && !g.allows_plain("crawl4ai.local", 443));
        // An http:// entry is not an HTTPS grant, and an HTTPS entry is not a plain one.
        assert!(!g.allows("searxng.local", 8080) && !g.allows("crawl4ai.local", 443));
        assert!(g.allows("api.example.com", 443) && !g.allows_plain("api.example.com", 80));
        assert!(!g.allows_plain("api.example.com", 443));
    }

    #[test]
    fn bad_rules_are_named() {
        for (entry, needle) in [
            ("http://*.example.com", "one exact host"),
            ("http://svc.test:*", "one exact host"),
            ("https://api.example.com/v1/search", "not a URL"),
            ("*", "every host"),
            ("*.com", "must be followed by a domain"),
            ("host:99999", "port '99999'"),
            ("host:abc", "port 'abc'"),
            ("bad host", "not a URL"),
            ("exa$mple.com", "not a valid host name"),
            ("::1", "not a host name"),
            ("", "empty"),
        ] {
            let err = HostRule::parse(entry).unwrap_err();
            assert!(err.contains(needle), "{entry}: {err}");
        }
    }

    #[test]
    fn private_ranges_are_refused() {
        for (ip, why) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.100.100.200", "cloud metadata"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast or broadcast"),
            ("255.255.255.255", "multicast or broadcast"),
            ("240.0.0.1", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00::1", "private (unique local)"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
            ("2002:c0a8:0101::1", "private"),
            ("ff02::1", "multicast"),
        ] {
            assert_eq!(forbidden_address(ip.parse().unwrap()), Some(why), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            assert_eq!(forbidden_address(ip.parse().unwrap()), None, "{ip}");
        }
    }

    /// Every IPv6 form that carries an IPv4 address gets the IPv4 rules, metadata included.
    #[test]
    fn ipv6_carrying_ipv4_is_judged_by_it() {
        for (ip, why) in [
            // IPv4-mapped and IPv4-translated.
            ("::ffff:169.254.169.254", METADATA),
            ("::ffff:0:7f00:1", "loopback"),
            // NAT64, well-known prefix and local-use prefix (the /96 and the /48 layout).
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b:1::a9fe:a9fe", METADATA),
            ("64:ff9b:1::a00:1", "private"),
            ("64:ff9b:1:7f00:0:100::", "loopback"),
            ("64:ff9b:1:a9fe:a9:fe00::", METADATA),
            ("64:ff9b:1::808:808", "private (local-use NAT64)"),
            // IPv4-compatible.
            ("::7f00:1", "loopback"),
            ("::a9fe:a9fe", METADATA),
            ("::808:808", "deprecated IPv4-compatible"),
            // 6to4.
            ("2002:a9fe:a9fe::1", METADATA),
            ("2002:7f00:1::", "loopback"),
            // Teredo: the client's address is stored inverted (127.0.0.1 -> 80ff:fffe).
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),
            ("2001:0:a9fe:a9fe:8000:63bf:f7f7:f7f7", METADATA),
            // AWS's IPv6 metadata and Pod Identity endpoints.
            ("fd00:ec2::254", METADATA),
            ("fd00:ec2::23", METADATA),
            ("169.254.170.2", METADATA),
        ] {
            assert_eq!(forbidden_address(ip.parse().unwrap()), Some(why), "{ip}");
        }
        // Public IPv4 inside them stays public (controls for the rules above).
        for ip in ["64:ff9b::808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "::ffff:0:808:808"] {
            assert_eq!(forbidden_address(ip.parse().unwrap()), None, "{ip}");
        }
        assert!(is_metadata("::ffff:169.254.169.254".parse().unwrap()) && !is_metadata("10.0.0.1".parse().unwrap()));
    }

    fn grant_of(entries: &[&str], allow_private: bool) -> NetGrant {
        NetGrant::new(entries.iter().map(|e| HostRule::parse(e).unwrap()).collect(), allow_private)
    }

    fn addrs(ips: &[&str]) -> Vec<SocketAddr> {
        ips.iter().map(|ip| SocketAddr::new(ip.parse().unwrap(), 443)).collect()
    }

    /// The verdict for each address, as a literal target and as the answer for a name, with
    /// `allow_private_addresses` off and on: metadata stays refused either way.
    #[test]
    fn metadata_is_refused_even_with_allow_private() {
        let metadata = ["169.254.169.254", "fd00:ec2::254", "::ffff:169.254.169.254", "64:ff9b:1::a9fe:a9fe"];
        let private = ["::ffff:10.0.0.1", "64:ff9b::7f00:1"];
        for allow_private in [false, true] {
            let g = grant_of(&["api.example.com", "*.example.org"], allow_private);
            for ip in metadata {
                // The literal, and a granted name (exact or through '*.') that resolves to it.
                for host in [ip, "api.example.com", "a.example.org"] {
                    match g.check_addresses(host, addrs(&[ip])) {
                        Err(ResolveError::Metadata(refused)) => assert_eq!(refused, [format!("{ip} ({METADATA})")]),
                        other => panic!("{host} -> {ip}, allow_private {allow_private}: {other:?}"),
                    }
                }
            }
            for ip in private {
                let verdict = g.check_addresses("api.example.com", addrs(&[ip]));
                match (allow_private, verdict) {
                    (false, Err(ResolveError::Prohibited(_))) => {}
                    (true, Ok(kept)) => assert_eq!(kept, addrs(&[ip])),
                    (_, other) => panic!("{ip}, allow_private {allow_private}: {other:?}"),
                }
            }
            // A public answer beside a metadata one: only the public address is kept.
            let kept = g.check_addresses("api.example.com", addrs(&["169.254.169.254", "8.8.8.8"])).unwrap();
            assert_eq!(kept, addrs(&["8.8.8.8"]));
        }
        // The free function (host bash's proxy) never keeps metadata.
        assert!(matches!(check_addresses(addrs(&["169.254.169.254"]), true), Err(ResolveError::Metadata(_))));
        assert!(check_addresses(addrs(&["10.0.0.1"]), true).is_ok());
    }

    /// Metadata is reached only with allow_private_addresses and an entry naming it exactly.
    #[test]
    fn metadata_is_granted_only_by_name() {
        let named = grant_of(
            &["http://169.254.169.254", "[fd00:ec2::254]:80", "metadata.google.internal", "*.ec2.internal"],
            true,
        );
        assert_eq!(named.check_addresses("169.254.169.254", addrs(&["169.254.169.254"])).unwrap().len(), 1);
        assert_eq!(named.check_addresses("fd00:ec2::254", addrs(&["fd00:ec2::254"])).unwrap().len(), 1);
        assert_eq!(named.check_addresses("metadata.google.internal", addrs(&["169.254.169.254"])).unwrap().len(), 1);
        // A wildcard covering a metadata name is not naming it; nor is another literal.
        assert!(!named.grants_metadata("instance-data.ec2.internal"));
        assert!(named.check_addresses("instance-data.ec2.internal", addrs(&["169.254.169.254"])).is_err());
        assert!(named.check_addresses("169.254.170.2", addrs(&["169.254.170.2"])).is_err());
        // The same names without allow_private_addresses: still refused, the text names both keys.
        let no_private = grant_of(&["169.254.169.254"], false);
        let Err(ResolveError::Metadata(refused)) =
            no_private.check_addresses("169.254.169.254", addrs(&["169.254.169.254"]))
        else {
            panic!("metadata without allow_private_addresses must be refused");
        };
        let text = metadata_refusal("https://169.254.169.254:443", &refused, "the tool has");
        assert!(text.contains("169.254.169.254 (cloud metadata)"), "{text}");
        assert!(text.contains("allow_private_addresses: true and a grant entry naming"), "{text}");
        assert!(text.contains("metadata.google.internal"), "{text}");
    }

    /// Names a tool may have resolved: those its entries cover, on any port.
    #[test]
    fn lookups_follow_the_grant() {
        let g = grant_of(&["api.tavily.com", "*.example.com", "http://svc.local:8080"], false);
        assert!(g.may_look_up("api.tavily.com") && g.may_look_up("a.example.com") && g.may_look_up("svc.local"));
        for outside in ["secret-data.attacker.test", "example.com", "tavily.com", "x.api.tavily.com"] {
            assert!(!g.may_look_up(outside), "{outside}");
        }
        let any = g.clone().with_any_name_lookups(true);
        assert!(any.may_look_up("secret-data.attacker.test") && any.any_name_lookups());
    }

    #[test]
    fn hosts_normalize_like_rules() {
        assert_eq!(normalize_host("API.Tavily.com."), "api.tavily.com");
        assert_eq!(normalize_host("[::1]"), "::1");
    }

    #[tokio::test]
    async fn resolution_keeps_only_checked_addresses() {
        let far = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        match resolve_checked("127.0.0.1", 8443, false, far).await {
            Err(ResolveError::Prohibited(refused)) => assert_eq!(refused, ["127.0.0.1 (loopback)"]),
            other => panic!("loopback must be refused without allow_private: {other:?}"),
        }
        let ok = resolve_checked("127.0.0.1", 8443, true, far).await.unwrap();
        assert_eq!(ok, ["127.0.0.1:8443".parse::<SocketAddr>().unwrap()]);
        // `localhost` resolves through the system resolver (/etc/hosts here) to loopback only.
        match resolve_checked("localhost", 443, false, far).await {
            Err(ResolveError::Prohibited(refused)) => assert!(refused.iter().all(|r| r.contains("loopback"))),
            other => panic!("localhost must be refused without allow_private: {other:?}"),
        }
        let text = private_address_refusal("https://x:1", &["127.0.0.1 (loopback)".into()], "the tool has");
        assert_eq!(
            text,
            "https://x:1: resolves to 127.0.0.1 (loopback), which is refused unless the tool has allow_private_addresses: true"
        );
    }
}
