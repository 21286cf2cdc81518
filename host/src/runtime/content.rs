//! What a component may return as content, and how it becomes the host's `ContentPart`s: at most
//! [`MAX_CONTENT_BLOCKS`] blocks, all of them together within the tool's `output_bytes`, images and
//! audio under a MIME type of their kind, resource links to web URIs only, embedded resources
//! under a URI that is not the host's own nor a local file. A result outside these
//! bounds is refused with an error naming the block and the rule; media is base64-encoded, as MCP
//! carries it.

use base64::Engine;
use toolhost_core::ContentPart;

use super::call_error::ComponentCallError;
use super::wit::v0_4::toolhost::tool::types::{self, ContentBlock};

/// Blocks one result may have. A result is read by a model: past this many blocks it is a
/// component trying to make the host allocate (each block costs the host more than the guest).
pub const MAX_CONTENT_BLOCKS: usize = 1024;

/// Longest resource-link URI accepted, in bytes (browsers and proxies commonly stop near 8 KiB;
/// a link a model passes on should be far shorter).
pub const MAX_URI_BYTES: usize = 4096;

/// Schemes a resource link may have. A link is shown to a user and may be opened by their
/// client: `file:` would point it at the user's own files (or, on Windows, at a remote share that
/// collects credentials), `javascript:`/`data:` run or render content the component chose.
/// Web links are what a tool has to offer; the thread resources `toolhost serve` exposes will
/// add their own scheme here.
pub const LINK_SCHEMES: [&str; 2] = ["https", "http"];

/// Schemes an embedded resource's URI may not have: `toolhost:` names the thread's own files
/// (`toolhost serve`'s resources), which a component must not pass off as its own contents;
/// `file:` a user's local file; the others are run or rendered by clients.
pub const REFUSED_RESOURCE_SCHEMES: [&str; 5] = ["toolhost", "file", "javascript", "data", "vbscript"];

/// A result the host accepted.
pub struct Accepted {
    /// The blocks as content parts, media base64-encoded.
    pub content: Vec<ContentPart>,
    /// The component marked the result as an error.
    pub is_error: bool,
    /// The state update, unchecked (the tool checks it against the thread).
    pub update: Option<types::StateUpdate>,
}

/// Check a component's result against the bounds and convert its blocks.
pub fn accept(r: types::ToolResult, output_bytes: u64) -> Result<Accepted, ComponentCallError> {
    if r.content.len() > MAX_CONTENT_BLOCKS {
        return Err(ComponentCallError::InvalidContent(format!(
            "{} content blocks, over the limit of {MAX_CONTENT_BLOCKS}",
            r.content.len()
        )));
    }
    // Sizes before anything is copied or encoded.
    let todos = r.update.as_ref().and_then(|u| u.todos.as_ref()).map_or(0, String::len);
    let size = r.content.iter().map(block_size).fold(todos as u64, u64::saturating_add);
    if size > output_bytes {
        return Err(ComponentCallError::OutputTooLarge { size, limit: output_bytes });
    }
    let mut content = Vec::with_capacity(r.content.len());
    for (i, block) in r.content.into_iter().enumerate() {
        content.push(convert(i + 1, block).map_err(ComponentCallError::InvalidContent)?);
    }
    Ok(Accepted { content, is_error: r.is_error, update: r.update })
}

/// What a block adds to the result's size: every byte the component sent in it.
fn block_size(b: &ContentBlock) -> u64 {
    let n = match b {
        ContentBlock::Text(t) => t.len(),
        ContentBlock::Image(m) | ContentBlock::Audio(m) => m.bytes.len() + m.mime_type.len(),
        ContentBlock::ResourceLink(l) => {
            l.uri.len()
                + l.name.len()
                + l.mime_type.as_ref().map_or(0, String::len)
                + l.description.as_ref().map_or(0, String::len)
        }
        ContentBlock::EmbeddedResource(r) => {
            r.uri.len()
                + r.mime_type.as_ref().map_or(0, String::len)
                + match &r.contents {
                    types::ResourceContents::Text(t) => t.len(),
                    types::ResourceContents::Blob(b) => b.len(),
                }
        }
    };
    n as u64
}

/// Block `n` (1-based, for the error) as a content part.
fn convert(n: usize, block: ContentBlock) -> Result<ContentPart, String> {
    let media = |kind: &str, what: &str, m: types::Media| -> Result<(String, String), String> {
        match mime_type(&m.mime_type) {
            Some((top, full)) if top == kind => Ok((base64::engine::general_purpose::STANDARD.encode(&m.bytes), full)),
            _ => Err(format!(
                "content block {n}, {what}, with MIME type {:?}; it must be {kind}/<subtype>",
                shorten(&m.mime_type)
            )),
        }
    };
    Ok(match block {
        ContentBlock::Text(text) => ContentPart::Text { text },
        ContentBlock::Image(m) => {
            let (data, mime_type) = media("image", "an image", m)?;
            ContentPart::Image { data, mime_type }
        }
        ContentBlock::Audio(m) => {
            let (data, mime_type) = media("audio", "an audio clip", m)?;
            ContentPart::Audio { data, mime_type }
        }
        ContentBlock::ResourceLink(l) => {
            check_link_uri(&l.uri)
                .map_err(|why| format!("content block {n}, a resource link to {:?}: {why}", shorten(&l.uri)))?;
            let mime_type = match l.mime_type {
                None => None,
                Some(m) => match mime_type(&m) {
                    Some((_, full)) => Some(full),
                    None => {
                        return Err(format!(
                            "content block {n}, a resource link, with MIME type {:?}; it must be type/subtype",
                            shorten(&m)
                        ))
                    }
                },
            };
            ContentPart::ResourceLink { uri: l.uri, name: l.name, mime_type, description: l.description }
        }
        ContentBlock::EmbeddedResource(r) => {
            check_resource_uri(&r.uri)
                .map_err(|why| format!("content block {n}, an embedded resource named {:?}: {why}", shorten(&r.uri)))?;
            let mut resource = serde_json::Map::new();
            resource.insert("uri".into(), r.uri.into());
            if let Some(m) = r.mime_type {
                let Some((_, full)) = mime_type(&m) else {
                    return Err(format!(
                        "content block {n}, an embedded resource, with MIME type {:?}; it must be type/subtype",
                        shorten(&m)
                    ));
                };
                resource.insert("mimeType".into(), full.into());
            }
            match r.contents {
                types::ResourceContents::Text(t) => resource.insert("text".into(), t.into()),
                types::ResourceContents::Blob(b) => {
                    resource.insert("blob".into(), base64::engine::general_purpose::STANDARD.encode(&b).into())
                }
            };
            // MCP's embedded resource content: `{"type": "resource", "resource": {…}}`.
            ContentPart::Resource { resource: serde_json::Value::Object(resource) }
        }
    })
}

/// A value quoted in an error, cut so that a hostile component cannot make the error huge.
fn shorten(s: &str) -> String {
    const MAX: usize = 120;
    if s.chars().count() <= MAX {
        return s.to_string();
    }
    let mut out: String = s.chars().take(MAX).collect();
    out.push('…');
    out
}

/// `(top-level type, whole type)`, both lowercase, when `m` is `type/subtype` made of RFC 6838
/// restricted names (no parameters: MCP's `mimeType` carries none).
fn mime_type(m: &str) -> Option<(String, String)> {
    let (top, sub) = m.split_once('/')?;
    let restricted = |s: &str| {
        (1..=127).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    (restricted(top) && restricted(sub)).then(|| (top.to_ascii_lowercase(), m.to_ascii_lowercase()))
}

/// Whether `uri` may name an embedded resource: an absolute URI of RFC 3986 (ASCII; anything
/// else percent-encoded) of at most [`MAX_URI_BYTES`], whose scheme is not one of
/// [`REFUSED_RESOURCE_SCHEMES`] and whose authority, if any, carries no user info.
pub fn check_resource_uri(uri: &str) -> Result<(), String> {
    let (scheme, rest) = uri_scheme(uri, "an embedded resource's URI must be absolute (scheme:…)")?;
    if REFUSED_RESOURCE_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!(
            "scheme '{scheme}:' is refused for an embedded resource ({} are)",
            REFUSED_RESOURCE_SCHEMES.map(|s| format!("{s}:")).join(", ")
        ));
    }
    if let Some(after) = rest.strip_prefix("//") {
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        if after[..end].contains('@') {
            return Err("it carries user info (user@host), which can disguise the real host".into());
        }
    }
    Ok(())
}

/// The scheme of `uri` (lowercase) and what follows its ':', when `uri` is an absolute URI of
/// RFC 3986 characters of at most [`MAX_URI_BYTES`]; `no_scheme` is the error when it has none.
fn uri_scheme<'a>(uri: &'a str, no_scheme: &str) -> Result<(String, &'a str), String> {
    if uri.is_empty() {
        return Err("it is empty".into());
    }
    if uri.len() > MAX_URI_BYTES {
        return Err(format!("it is longer than {MAX_URI_BYTES} bytes"));
    }
    let bytes = uri.as_bytes();
    for (i, c) in uri.char_indices() {
        let allowed = c.is_ascii_alphanumeric() || "-._~:/?#[]@!$&'()*+,;=%".contains(c);
        if !allowed {
            return Err(format!("it contains {c:?}, which a URI cannot (RFC 3986: percent-encode it)"));
        }
        if c == '%'
            && !(bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
        {
            return Err("it has a '%' that is not followed by two hex digits".into());
        }
    }
    let Some((scheme, rest)) = uri.split_once(':') else {
        return Err(format!("it has no scheme; {no_scheme}"));
    };
    let well_formed = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !well_formed {
        return Err(format!("it has no scheme; {no_scheme}"));
    }
    Ok((scheme.to_ascii_lowercase(), rest))
}

/// Whether `uri` may be a resource link: an absolute URI of RFC 3986 (ASCII; anything else
/// percent-encoded) with a scheme of [`LINK_SCHEMES`], a host, no user info, and at most
/// [`MAX_URI_BYTES`]. The error says which rule it breaks.
pub fn check_link_uri(uri: &str) -> Result<(), String> {
    let (scheme, rest) = uri_scheme(uri, &format!("a link must be an absolute {} URI", LINK_SCHEMES.join(" or ")))?;
    if scheme == "file" {
        return Err("file: URIs are refused: a link must not point a client at local files".into());
    }
    if !LINK_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!("scheme '{scheme}:' is refused (allowed: {})", LINK_SCHEMES.join(", ")));
    }
    let Some(after) = rest.strip_prefix("//") else {
        return Err("it has no host (scheme://host/…)".into());
    };
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, tail) = after.split_at(end);
    if authority.contains('@') {
        return Err("it carries user info (user@host), which can disguise the real host".into());
    }
    let literal = authority.starts_with('[');
    let (host, port) = if let Some(literal) = authority.strip_prefix('[') {
        let Some((inside, after)) = literal.split_once(']') else {
            return Err("its IP literal has no closing ']'".into());
        };
        if inside.is_empty() || !inside.chars().all(|c| c.is_ascii_hexdigit() || ":.".contains(c)) {
            return Err("its IP literal is not an IPv6 address".into());
        }
        let port = match after {
            "" => None,
            a => Some(a.strip_prefix(':').ok_or("its host is malformed")?),
        };
        (inside, port)
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("it has no host (scheme://host/…)".into());
    }
    if !literal && host.contains(['[', ']', ':']) {
        return Err("its host is malformed".into());
    }
    if let Some(p) = port {
        if p.len() > 5 || !p.chars().all(|c| c.is_ascii_digit()) {
            return Err("its port is not a number".into());
        }
    }
    if tail.contains(['[', ']']) {
        return Err("'[' and ']' may only enclose an IP literal host".into());
    }
    if tail.matches('#').count() > 1 {
        return Err("it has more than one '#'".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(bytes: &[u8], mime: &str) -> types::Media {
        types::Media { bytes: bytes.to_vec(), mime_type: mime.into() }
    }

    fn link(uri: &str) -> ContentBlock {
        ContentBlock::ResourceLink(types::ResourceLink {
            uri: uri.into(),
            name: "n".into(),
            mime_type: None,
            description: None,
        })
    }

    fn result(content: Vec<ContentBlock>) -> types::ToolResult {
        types::ToolResult { content, is_error: false, update: None }
    }

    fn refusal(content: Vec<ContentBlock>, limit: u64) -> String {
        match accept(result(content), limit) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn blocks_become_parts() {
        let a = accept(
            result(vec![
                ContentBlock::Text("t".into()),
                ContentBlock::Image(media(b"\x89PNG", "image/PNG")),
                ContentBlock::Audio(media(b"RIFF", "audio/wav")),
                ContentBlock::ResourceLink(types::ResourceLink {
                    uri: "https://example.com/a?b=c#d".into(),
                    name: "a".into(),
                    mime_type: Some("text/html".into()),
                    description: Some("d".into()),
                }),
            ]),
            1000,
        )
        .ok()
        .unwrap();
        assert_eq!(
            a.content,
            vec![
                ContentPart::Text { text: "t".into() },
                ContentPart::Image { data: "iVBORw==".into(), mime_type: "image/png".into() },
                ContentPart::Audio { data: "UklGRg==".into(), mime_type: "audio/wav".into() },
                ContentPart::ResourceLink {
                    uri: "https://example.com/a?b=c#d".into(),
                    name: "a".into(),
                    mime_type: Some("text/html".into()),
                    description: Some("d".into()),
                },
            ]
        );
    }

    #[test]
    fn every_byte_counts_against_the_limit() {
        // 4 + (3 + 9) = 16 bytes: at the limit passes, one under fails.
        let blocks = || vec![ContentBlock::Text("abcd".into()), ContentBlock::Image(media(b"abc", "image/png"))];
        assert!(accept(result(blocks()), 16).is_ok());
        assert_eq!(refusal(blocks(), 15), "returned 16 bytes of output, over its limit of 15 bytes");
        let many = vec![ContentBlock::Text(String::new()); MAX_CONTENT_BLOCKS + 1];
        assert_eq!(refusal(many, 1 << 20), "returned 1025 content blocks, over the limit of 1024");
    }

    #[test]
    fn media_must_be_of_its_kind() {
        for (block, kind) in [
            (ContentBlock::Image(media(b"x", "text/html")), "an image"),
            (ContentBlock::Image(media(b"x", "image")), "an image"),
            (ContentBlock::Image(media(b"x", "image/png; charset=x")), "an image"),
            (ContentBlock::Image(media(b"x", "image/")), "an image"),
            (ContentBlock::Audio(media(b"x", "image/png")), "an audio clip"),
        ] {
            let e = refusal(vec![ContentBlock::Text("a".into()), block], 1000);
            assert!(e.starts_with(&format!("returned content block 2, {kind}, with MIME type")), "{e}");
        }
    }

    #[test]
    fn links_must_be_web_uris() {
        for ok in [
            "https://example.com",
            "http://example.com:8080/a/b?c=d&e=%20#frag",
            "HTTPS://Example.COM/x",
            "https://[2001:db8::1]:443/",
            "https://xn--bcher-kva.example/",
        ] {
            assert_eq!(check_link_uri(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            ("file:///etc/passwd", "file: URIs are refused"),
            ("FILE://host/share", "file: URIs are refused"),
            ("javascript:alert(1)", "scheme 'javascript:' is refused"),
            ("data:text/html,x", "scheme 'data:' is refused"),
            ("/mnt/user-data/outputs/a.png", "no scheme"),
            ("https:example.com", "no host"),
            ("https:///path", "no host"),
            ("https://user:pw@example.com/", "user info"),
            ("https://example.com@evil.com/", "user info"),
            ("https://exa mple.com/", "contains ' '"),
            ("https://example.com/\u{202e}", "contains"),
            ("https://bücher.example/", "contains 'ü'"),
            ("https://example.com/<system>", "contains '<'"),
            ("https://example.com/%zz", "two hex digits"),
            ("https://example.com:port/", "port"),
            ("https://[zz]/", "IPv6"),
            ("https://example.com/a#b#c", "more than one '#'"),
        ] {
            let e = check_link_uri(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(check_link_uri(&format!("https://a/{}", "x".repeat(MAX_URI_BYTES))).unwrap_err().contains("longer"));
        let e = refusal(vec![link("file:///etc/passwd")], 1000);
        assert!(e.starts_with("returned content block 1, a resource link to \"file:///etc/passwd\": file:"), "{e}");
    }

    #[test]
    fn embedded_resources_carry_text_or_base64_under_an_allowed_uri() {
        let embedded = |uri: &str, mime: Option<&str>, contents: types::ResourceContents| {
            ContentBlock::EmbeddedResource(types::EmbeddedResource {
                uri: uri.into(),
                mime_type: mime.map(str::to_string),
                contents,
            })
        };
        let a = accept(
            result(vec![
                embedded("test://embedded-resource", Some("text/plain"), types::ResourceContents::Text("hi".into())),
                embedded("urn:x:1", None, types::ResourceContents::Blob(b"\x89PNG".to_vec())),
            ]),
            1000,
        )
        .ok()
        .unwrap();
        assert_eq!(
            a.content,
            vec![
                ContentPart::Resource {
                    resource: serde_json::json!({"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "hi"})
                },
                ContentPart::Resource { resource: serde_json::json!({"uri": "urn:x:1", "blob": "iVBORw=="}) },
            ]
        );
        // uri (24) + mime (10) + text (2) = 36 bytes.
        let one = || {
            vec![embedded("test://embedded-resource", Some("text/plain"), types::ResourceContents::Text("hi".into()))]
        };
        assert!(accept(result(one()), 36).is_ok());
        assert!(refusal(one(), 35).contains("36 bytes"));
        for (uri, why) in [
            ("toolhost:///mnt/user-data/outputs/a.txt", "scheme 'toolhost:' is refused"),
            ("TOOLHOST:///mnt/user-data/outputs/a.txt", "scheme 'toolhost:' is refused"),
            ("file:///etc/passwd", "scheme 'file:' is refused"),
            ("javascript:alert(1)", "scheme 'javascript:' is refused"),
            ("/mnt/user-data/outputs/a.txt", "no scheme"),
            ("https://user@example.com/", "user info"),
            ("test://a b", "contains ' '"),
        ] {
            let e = refusal(vec![embedded(uri, None, types::ResourceContents::Text("x".into()))], 1000);
            assert!(
                e.starts_with("returned content block 1, an embedded resource named") && e.contains(why),
                "{uri}: {e}"
            );
        }
        let e = refusal(vec![embedded("test://a", Some("text"), types::ResourceContents::Text("x".into()))], 1000);
        assert!(e.contains("with MIME type \"text\"; it must be type/subtype"), "{e}");
    }

    #[test]
    fn a_quoted_value_is_cut() {
        let e = refusal(vec![link(&format!("javascript:{}", "a".repeat(3000)))], 1 << 20);
        assert!(e.len() < 400, "{e}");
    }
}
