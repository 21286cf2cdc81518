//! `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`: what names a component in a registry.

use crate::{valid_digest, OciError};

/// A component in a registry: a tag, a digest, or both (then the digest is what is loaded and
/// the tag is only a name for people).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]` (a bracketed IPv6 literal allowed).
    pub registry: String,
    /// `a/b/c`, lower case.
    pub repository: String,
    /// The tag (`latest` when neither a tag nor a digest is given).
    pub tag: Option<String>,
    /// The manifest's digest, `sha256:HEX`, when pinned.
    pub digest: Option<String>,
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Split a `use:` value `oci://…[:tool]` into the reference and the tool name. The first `:`
/// after the last `/` starts the tag, a `:` after the tag (or after the digest) the tool.
pub fn split_use(text: &str) -> Result<(Reference, Option<String>), OciError> {
    let bad = |why: &str| OciError::BadReference { reference: text.to_string(), why: why.to_string() };
    let rest = text.strip_prefix("oci://").ok_or_else(|| bad("it must start with oci://"))?;
    let (registry, path) = rest.split_once('/').ok_or_else(|| bad("expected oci://REGISTRY/REPOSITORY:TAG"))?;
    check_registry(registry).map_err(|w| bad(&w))?;
    let (name_tag, digest, tool) = match path.split_once('@') {
        Some((name_tag, after)) => {
            let (digest, tool) = match after.strip_prefix("sha256:").map(|h| h.split_once(':')) {
                Some(Some((hex, tool))) => (format!("sha256:{hex}"), Some(tool)),
                Some(None) => (after.to_string(), None),
                None => return Err(bad("only sha256 digests are supported (@sha256:HEX)")),
            };
            let digest = digest.to_ascii_lowercase();
            if !valid_digest(&digest) {
                return Err(bad("a digest is sha256: and 64 hex digits"));
            }
            (name_tag, Some(digest), tool)
        }
        None => (path, None, None),
    };
    let last_slash = name_tag.rfind('/').map(|i| i + 1).unwrap_or(0);
    let (repository, tag, tool) = match name_tag[last_slash..].split_once(':') {
        Some((_, after)) => {
            let repo = &name_tag[..last_slash + name_tag[last_slash..].find(':').unwrap_or(0)];
            match (after.split_once(':'), digest.is_some()) {
                (Some(_), true) => return Err(bad("the tool name goes after the digest")),
                (Some((tag, t)), false) => (repo, Some(tag), Some(t)),
                (None, _) => (repo, Some(after), tool),
            }
        }
        None => (name_tag, None, tool),
    };
    check_repository(repository).map_err(|w| bad(&w))?;
    if let Some(t) = tag {
        check_tag(t).map_err(|w| bad(&w))?;
    }
    if let Some(t) = tool {
        if t.is_empty() || t.contains('/') || t.contains(':') {
            return Err(bad("the tool name after ':' must be non-empty and contain no '/' or ':'"));
        }
    }
    let tag = match (tag, &digest) {
        (Some(t), _) => Some(t.to_string()),
        (None, Some(_)) => None,
        (None, None) => Some("latest".to_string()),
    };
    let r = Reference { registry: registry.to_string(), repository: repository.to_string(), tag, digest };
    Ok((r, tool.map(str::to_string)))
}

impl std::str::FromStr for Reference {
    type Err = OciError;

    /// A reference without a tool suffix.
    fn from_str(s: &str) -> Result<Self, OciError> {
        match split_use(s)? {
            (r, None) => Ok(r),
            (_, Some(t)) => Err(OciError::BadReference {
                reference: s.to_string(),
                why: format!("unexpected ':{t}' after the reference"),
            }),
        }
    }
}

impl Reference {
    /// What the manifest is fetched by: the digest when pinned, else the tag.
    pub fn manifest_key(&self) -> &str {
        self.digest.as_deref().or(self.tag.as_deref()).unwrap_or("latest")
    }

    /// The host name without the port or brackets (`localhost`, `127.0.0.1`, `::1`).
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// Whether the registry is on this machine's loopback (where plain HTTP is used).
    pub fn is_loopback(&self) -> bool {
        let h = self.host();
        h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
    }

    /// The same reference, pinned to `digest`.
    pub fn pinned(&self, digest: &str) -> Reference {
        Reference { digest: Some(digest.to_string()), ..self.clone() }
    }
}

/// `host` of `host[:port]` or of `[v6]:port`.
pub(crate) fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

fn check_registry(r: &str) -> Result<(), String> {
    let (host, port) = if let Some(rest) = r.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or("an IPv6 registry is written [ADDR]:PORT")?;
        if h.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("'{h}' is not an IPv6 address"));
        }
        (h, after.strip_prefix(':'))
    } else {
        match r.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (r, None),
        }
    };
    if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':') {
        return Err(format!("'{r}' is not a registry host[:port]"));
    }
    if let Some(p) = port {
        if p.parse::<u16>().is_err() {
            return Err(format!("'{p}' is not a port"));
        }
    }
    Ok(())
}

fn check_repository(repo: &str) -> Result<(), String> {
    let component_ok = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && c.as_bytes()[0].is_ascii_alphanumeric()
            && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric()
    };
    if repo.is_empty() || repo.len() > 255 || !repo.split('/').all(component_ok) {
        return Err(format!(
            "'{repo}' is not a repository name (lower-case letters, digits, '.', '_', '-', separated by '/')"
        ));
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<(), String> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.as_bytes()[0] == b'_')
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("'{tag}' is not a tag (letters, digits, '.', '_', '-'; at most 128)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d() -> String {
        format!("sha256:{}", "ab".repeat(32))
    }

    #[test]
    fn parses_tags_digests_and_tools() {
        let (r, t) = split_use("oci://127.0.0.1:5000/tools/hello:1.0").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str(), r.tag.as_deref(), r.digest.as_deref(), t),
            ("127.0.0.1:5000", "tools/hello", Some("1.0"), None, None)
        );
        let (r, t) = split_use("oci://127.0.0.1:5000/tools/hello:1.0:greet").unwrap();
        assert_eq!((r.tag.as_deref(), t.as_deref()), (Some("1.0"), Some("greet")));
        let (r, t) = split_use(&format!("oci://localhost:5000/hello:v1@{}:greet", d())).unwrap();
        assert_eq!((r.tag.as_deref(), r.digest.clone(), t.as_deref()), (Some("v1"), Some(d()), Some("greet")));
        let (r, t) = split_use(&format!("oci://ghcr.io/a/b@{}", d())).unwrap();
        assert_eq!((r.tag.as_deref(), r.digest.clone(), t), (None, Some(d()), None));
        let (r, _) = split_use("oci://ghcr.io/a/b").unwrap();
        assert_eq!(r.tag.as_deref(), Some("latest"));
        let (r, _) = split_use("oci://[::1]:5000/x:y").unwrap();
        assert!(r.is_loopback() && r.host() == "::1");
        assert_eq!(r.to_string(), "oci://[::1]:5000/x:y");
        assert!(!split_use("oci://ghcr.io/a:b").unwrap().0.is_loopback());
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "oci://ghcr.io",
            "oci://ghcr.io/UPPER:1",
            "oci://ghcr.io/a:b@sha256:abc",
            "oci://ghcr.io/a@md5:abcd",
            "oci://ghcr.io/a:b:c:d",
            "oci://gh cr.io/a:b",
            "oci://ghcr.io:99999/a:b",
            "oci://ghcr.io/a/../b:c",
            "oci://ghcr.io/a:-bad",
            "http://ghcr.io/a:b",
        ] {
            assert!(split_use(bad).is_err(), "{bad} accepted");
        }
        let e = split_use("oci://ghcr.io/a@sha256:abc").unwrap_err().to_string();
        assert!(e.contains("oci://ghcr.io/a@sha256:abc") && e.contains("64 hex"), "{e}");
    }
}
