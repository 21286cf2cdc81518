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
        port_ok
            && match &self.host {
                HostPattern::Exact(h) => h == host,
                HostPattern::Below(d) => {
                    host.len() > d.len() + 1 && host.ends_with(d.as_str()) && {
                        let cut = host.len() - d.len();
                        host.as_bytes()[cut - 1] == b'.'
                    }
                }
            }
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
}

impl NetGrant {
    /// The grant of a `network:` list (its entries were checked when the config was read).
    pub fn new(rules: Vec<HostRule>, allow_private: bool) -> Self {
        Self { rules, allow_private, any_public_https: false }
    }

    /// HTTPS to any public host (port 443); private, loopback, link-local and metadata
    /// addresses stay refused.
    pub fn any_public_https() -> Self {
        Self { rules: Vec::new(), allow_private: false, any_public_https: true }
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

/// Why an address may not be reached without `allow_private_addresses`, if it may not.
pub fn forbidden_address(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        return Some("cloud metadata");
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

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    // Addresses that carry an IPv4 address are judged by it: mapped, NAT64, 6to4.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return forbidden_v4(Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8));
    }
    if s[0] == 0x2002 {
        return forbidden_v4(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8));
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("cloud metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() || s[0..6] == [0, 0, 0, 0, 0, 0] {
        // `::` and the deprecated IPv4-compatible block.
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
    /// Every address is private, loopback, metadata, …: each with the reason.
    #[error("every address is refused: {}", .0.join(", "))]
    Prohibited(Vec<String>),
}

/// Resolve `host` once and keep the addresses that may be reached: all of them with
/// `allow_private`, else only public ones. The caller connects to these addresses and never
/// resolves again, so a second answer (DNS rebinding) cannot slip past the check.
pub async fn resolve_checked(
    host: &str,
    port: u16,
    allow_private: bool,
    deadline: tokio::time::Instant,
) -> Result<Vec<SocketAddr>, ResolveError> {
    let candidates: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port)))
            .await
            .map_err(|_| ResolveError::Timeout)?
            .map_err(ResolveError::Dns)?
            .collect(),
    };
    check_addresses(candidates, allow_private)
}

/// Keep the addresses a grant may reach: all of them with `allow_private`, else the public ones.
/// None left: `NotFound` when there were none, `Prohibited` with each refused address and why.
pub fn check_addresses(candidates: Vec<SocketAddr>, allow_private: bool) -> Result<Vec<SocketAddr>, ResolveError> {
    let mut vetted = Vec::new();
    let mut refused = Vec::new();
    for addr in candidates {
        match forbidden_address(addr.ip()) {
            Some(why) if !allow_private => refused.push(format!("{} ({why})", addr.ip())),
            _ => vetted.push(addr),
        }
    }
    match (vetted.is_empty(), refused.is_empty()) {
        (false, _) => Ok(vetted),
        (true, true) => Err(ResolveError::NotFound),
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
