//! URLs the way DeerFlow's Python reads them: `urllib.parse` splitting and query encoding,
//! `ipaddress` address classes, and the two SSRF guards of `deerflow.community`:
//! `url_safety.validate_public_http_url` (fetch/capture targets, resolves the host) and the
//! image-search providers' `_safe_public_url` (looks at the string only).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `urlparse(u)`: (scheme, netloc, rest) where rest is path, query and fragment.
fn split(u: &str) -> (&str, &str, &str) {
    let (scheme, after) = match u.split_once(':') {
        Some((s, a))
            if !s.is_empty()
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            (s, a)
        }
        _ => ("", u),
    };
    match after.strip_prefix("//") {
        Some(rest) => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            (scheme, &rest[..end], &rest[end..])
        }
        None => (scheme, "", after),
    }
}

/// `urlparse(u).scheme`, lower-cased.
pub fn scheme(u: &str) -> String {
    split(u).0.to_ascii_lowercase()
}

/// `urlparse(u).netloc`.
pub fn netloc(u: &str) -> &str {
    split(u).1
}

/// Where `urlparse` raises `ValueError("Invalid IPv6 URL")`: an unbalanced bracket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidIpv6Url;

/// `urlparse(u).hostname`: lower-cased, without user info, port or IPv6 brackets; `None` when
/// empty.
pub fn hostname(u: &str) -> Result<Option<String>, InvalidIpv6Url> {
    let netloc = split(u).1;
    if netloc.contains('[') != netloc.contains(']') {
        return Err(InvalidIpv6Url);
    }
    let host = netloc.rsplit_once('@').map(|(_, h)| h).unwrap_or(netloc);
    let host = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.split(':').next().unwrap_or("")
    };
    Ok((!host.is_empty()).then(|| host.to_lowercase()))
}

/// The host of an http(s) URL, for comparisons; `None` without one.
pub fn host_of(u: &str) -> Option<String> {
    hostname(u).ok().flatten()
}

/// (host, port, path with query) as urllib3 prints them in errors.
pub fn parts(u: &str) -> (String, u16, String) {
    let (scheme, netloc, rest) = split(u);
    let default = if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
    let port = netloc
        .rsplit_once(':')
        .filter(|(h, _)| !h.ends_with(']') || netloc.starts_with('['))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(default);
    let path = rest.split('#').next().unwrap_or("");
    let path = if path.is_empty() { "/".to_string() } else { path.to_string() };
    (host_of(u).unwrap_or_default(), port, path)
}

/// `urljoin(base, location)` for the forms a `Location` header takes.
pub fn join(base: &str, location: &str) -> String {
    let location = location.trim();
    if !split(location).0.is_empty() {
        return location.to_string();
    }
    let (scheme, netloc, rest) = split(base);
    if let Some(l) = location.strip_prefix("//") {
        return format!("{scheme}://{l}");
    }
    if location.starts_with('/') {
        return format!("{scheme}://{netloc}{location}");
    }
    let path = rest.split(['?', '#']).next().unwrap_or("");
    if location.starts_with('?') {
        return format!("{scheme}://{netloc}{path}{location}");
    }
    let dir = match path.rfind('/') {
        Some(i) => &path[..=i],
        None => "/",
    };
    format!("{scheme}://{netloc}{dir}{location}")
}

/// `urllib.parse.urlencode(pairs)`: `quote_plus` on keys and values.
pub fn urlencode(pairs: &[(&str, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{}={}", quote_plus(k), quote_plus(v))).collect::<Vec<_>>().join("&")
}

/// `urllib.parse.quote_plus(s)`.
pub fn quote_plus(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b' ' => out.push('+'),
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => out.push(b as char),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Python 3.12's `ipaddress` classes, the ones DeerFlow's guards ask about.
pub trait PyAddr {
    fn py_is_private(&self) -> bool;
    fn py_is_reserved(&self) -> bool;
    fn py_is_global(&self) -> bool;
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    (u32::from(ip) & mask) == (u32::from(Ipv4Addr::from(net)) & mask)
}

fn in_v6(ip: Ipv6Addr, net: Ipv6Addr, bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
    (u128::from(ip) & mask) == (u128::from(net) & mask)
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap_or(Ipv6Addr::UNSPECIFIED)
}

impl PyAddr for IpAddr {
    fn py_is_private(&self) -> bool {
        match *self {
            IpAddr::V4(ip) => [
                ([0, 0, 0, 0], 8),
                ([10, 0, 0, 0], 8),
                ([127, 0, 0, 0], 8),
                ([169, 254, 0, 0], 16),
                ([172, 16, 0, 0], 12),
                ([192, 0, 0, 0], 29),
                ([192, 0, 0, 170], 31),
                ([192, 0, 2, 0], 24),
                ([192, 168, 0, 0], 16),
                ([198, 18, 0, 0], 15),
                ([198, 51, 100, 0], 24),
                ([203, 0, 113, 0], 24),
                ([240, 0, 0, 0], 4),
                ([255, 255, 255, 255], 32),
            ]
            .iter()
            .any(|(n, b)| in_v4(ip, *n, *b)),
            IpAddr::V6(ip) => [
                ("::1", 128),
                ("::", 128),
                ("::ffff:0:0", 96),
                ("100::", 64),
                ("2001::", 23),
                ("2001:2::", 48),
                ("2001:db8::", 32),
                ("2001:10::", 28),
                ("fc00::", 7),
                ("fe80::", 10),
            ]
            .iter()
            .any(|(n, b)| in_v6(ip, v6(n), *b)),
        }
    }

    fn py_is_reserved(&self) -> bool {
        match *self {
            IpAddr::V4(ip) => in_v4(ip, [240, 0, 0, 0], 4),
            IpAddr::V6(ip) => [
                ("::", 8),
                ("100::", 8),
                ("200::", 7),
                ("400::", 6),
                ("800::", 5),
                ("1000::", 4),
                ("4000::", 3),
                ("6000::", 3),
                ("8000::", 3),
                ("a000::", 3),
                ("c000::", 3),
                ("e000::", 4),
                ("f000::", 5),
                ("f800::", 6),
                ("fe00::", 9),
            ]
            .iter()
            .any(|(n, b)| in_v6(ip, v6(n), *b)),
        }
    }

    fn py_is_global(&self) -> bool {
        match *self {
            IpAddr::V4(ip) => !in_v4(ip, [100, 64, 0, 0], 10) && !self.py_is_private(),
            IpAddr::V6(_) => !self.py_is_private(),
        }
    }
}

/// `url_safety.is_blocked_address`.
pub fn is_blocked_address(ip: IpAddr) -> bool {
    let link_local = match ip {
        IpAddr::V4(v) => v.is_link_local(),
        IpAddr::V6(v) => in_v6(v, v6("fe80::"), 10),
    };
    ip.py_is_private()
        || ip.is_loopback()
        || link_local
        || ip.py_is_reserved()
        || ip.is_multicast()
        || ip.is_unspecified()
}

/// `ipaddress.ip_address(host)`: strict dotted quads (no leading zeros) or IPv6.
pub fn ip_literal(host: &str) -> Option<IpAddr> {
    if host.contains(':') {
        return host.split('%').next().and_then(|h| h.parse::<Ipv6Addr>().ok()).map(IpAddr::V6);
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() != 4 || parts.iter().any(|p| p.is_empty() || p.len() > 3 || (p.len() > 1 && p.starts_with('0'))) {
        return None;
    }
    host.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// The image-search providers' `_decode_ipv4`: `inet_aton`'s lenient forms (`2130706433`,
/// `0x7f000001`, `0177.0.0.1`, `127.1`).
pub fn decode_ipv4(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        if part.is_empty() {
            return None;
        }
        let v = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            u64::from_str_radix(hex, 16).ok()?
        } else if part.starts_with('0') && part.len() > 1 {
            u64::from_str_radix(&part[1..], 8).ok()?
        } else {
            if !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse::<u64>().ok()?
        };
        values.push(v);
    }
    let (last, leading) = values.split_last()?;
    if leading.iter().any(|v| *v > 0xff) {
        return None;
    }
    let max_last = (1u64 << (8 * (4 - leading.len()))) - 1;
    if *last > max_last {
        return None;
    }
    let mut result: u64 = 0;
    for v in leading {
        result = (result << 8) | v;
    }
    result = (result << (8 * (4 - leading.len()))) | last;
    u32::try_from(result).ok().map(Ipv4Addr::from)
}

/// The IPv4 address an IPv6 literal carries (mapped, 6to4, NAT64, IPv4-compatible).
fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let n = u128::from(ip);
    if ip.segments()[0] == 0x2002 {
        return Some(Ipv4Addr::from(((n >> 80) & 0xffff_ffff) as u32));
    }
    if in_v6(ip, v6("64:ff9b::"), 96) {
        return Some(Ipv4Addr::from((n & 0xffff_ffff) as u32));
    }
    if n >> 32 == 0 && n > 1 {
        return Some(Ipv4Addr::from((n & 0xffff_ffff) as u32));
    }
    None
}

/// Which provider's `_safe_public_url` (Brave also checks IPv4 inside IPv6 literals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageGuard {
    Serper,
    Brave,
}

/// `_safe_public_url(value)`: the URL when it is a public http(s) URL by its text alone, else "".
pub fn safe_public_url(value: Option<&serde_json::Value>, guard: ImageGuard) -> String {
    let Some(serde_json::Value::String(s)) = value else { return String::new() };
    let url = s.trim();
    let Ok(host) = hostname(url) else { return String::new() };
    if !matches!(scheme(url).as_str(), "http" | "https") || netloc(url).is_empty() {
        return String::new();
    }
    let Some(host) = host else { return String::new() };
    let host = host.trim_end_matches('.');
    if host.is_empty() || host == "localhost" || host.ends_with(".localhost") {
        return String::new();
    }
    let ip = match ip_literal(host) {
        Some(ip) => ip,
        None => match decode_ipv4(host) {
            Some(v4) => IpAddr::V4(v4),
            None => return url.to_string(),
        },
    };
    if let (ImageGuard::Brave, IpAddr::V6(v)) = (guard, ip) {
        if let Some(inner) = embedded_ipv4(v) {
            if !IpAddr::V4(inner).py_is_global() {
                return String::new();
            }
        }
    }
    if ip.py_is_global() {
        url.to_string()
    } else {
        String::new()
    }
}

/// `_is_url_present(value)`.
pub fn is_url_present(value: Option<&serde_json::Value>) -> bool {
    matches!(value, Some(serde_json::Value::String(s)) if !s.trim().is_empty())
}

/// `url_safety.validate_public_http_url`: `Some("Error: …")` when the URL must not be fetched.
/// `resolve` returns the addresses of a host name (empty when it does not resolve).
pub fn validate_public_http_url(
    url: &str,
    allow_private_addresses: bool,
    action: &str,
    resolve: &dyn Fn(&str) -> Vec<IpAddr>,
) -> Option<String> {
    let bad_netloc = hostname(url).is_err();
    if !matches!(scheme(url).as_str(), "http" | "https") || netloc(url).is_empty() || bad_netloc {
        return Some("Error: Only http:// and https:// URLs are supported".into());
    }
    if allow_private_addresses {
        return None;
    }
    let Ok(Some(host)) = hostname(url) else { return Some("Error: URL host could not be parsed".into()) };
    let normalized = host.trim().trim_end_matches('.').to_lowercase();
    if normalized == "localhost" || normalized == "metadata.google.internal" {
        return Some(format!("Error: Refusing to {action} a private or loopback address"));
    }
    let candidates = match ip_literal(&normalized) {
        Some(ip) => vec![ip],
        None => {
            let found = resolve(&host);
            if found.is_empty() {
                return Some("Error: URL host could not be resolved".into());
            }
            found
        }
    };
    if candidates.into_iter().any(is_blocked_address) {
        return Some(format!("Error: Refusing to {action} a private, loopback, or metadata address"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn urlparse_pieces() {
        assert_eq!(hostname("https://User@API.Example.com:8443/x").unwrap().as_deref(), Some("api.example.com"));
        assert_eq!(hostname("http://[::1]:80/").unwrap().as_deref(), Some("::1"));
        assert!(hostname("http://[::1/").is_err());
        assert_eq!(parts("https://h.test/a?b=1#f"), ("h.test".into(), 443, "/a?b=1".into()));
        assert_eq!(join("https://a.test/x/y?z", "/n"), "https://a.test/n");
        assert_eq!(join("https://a.test/x/y", "n"), "https://a.test/x/n");
        assert_eq!(join("https://a.test/x", "//b.test/p"), "https://b.test/p");
        assert_eq!(urlencode(&[("q", "brave api".into()), ("x", "a/b&c".into())]), "q=brave+api&x=a%2Fb%26c");
    }

    #[test]
    fn image_guard_matches_deerflow_cases() {
        let g = |u: &str| safe_public_url(Some(&json!(u)), ImageGuard::Serper);
        assert_eq!(g("https://example.com/ferris.png"), "https://example.com/ferris.png");
        for bad in [
            "http://192.168.1.10/secret.png",
            "http://127.0.0.1/a.png",
            "http://localhost/b.png",
            "http://2130706433/x.png",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "ftp://example.com/x",
            "http://100.64.0.1/",
            "http://[::1]/",
        ] {
            assert_eq!(g(bad), "", "{bad}");
        }
        assert_eq!(safe_public_url(Some(&json!("http://[::ffff:127.0.0.1]/")), ImageGuard::Brave), "");
        assert_eq!(safe_public_url(Some(&json!(5)), ImageGuard::Brave), "");
    }

    #[test]
    fn fetch_guard_matches_deerflow_messages() {
        let none = |_: &str| Vec::new();
        let public = |_: &str| vec!["93.184.215.14".parse().unwrap()];
        let v = |u: &str, r: &dyn Fn(&str) -> Vec<IpAddr>| validate_public_http_url(u, false, "fetch", r);
        assert_eq!(
            v("http://169.254.169.254/latest/meta-data/", &none).unwrap(),
            "Error: Refusing to fetch a private, loopback, or metadata address"
        );
        assert_eq!(
            v("http://localhost:9000/", &none).unwrap(),
            "Error: Refusing to fetch a private or loopback address"
        );
        assert_eq!(v("ftp://example.com/", &none).unwrap(), "Error: Only http:// and https:// URLs are supported");
        assert_eq!(v("https://example.com/x", &none).unwrap(), "Error: URL host could not be resolved");
        assert_eq!(v("https://example.com/x", &public), None);
        assert_eq!(validate_public_http_url("http://10.0.0.1/", true, "fetch", &none), None);
        assert_eq!(
            validate_public_http_url("http://10.0.0.1/", false, "capture", &none).unwrap(),
            "Error: Refusing to capture a private, loopback, or metadata address"
        );
    }
}
