//! DeerFlow's `ReadabilityExtractor` and `Article.to_markdown` (`deerflow/utils/readability.py`):
//! the page's article found by Readability (dom_smoothie, a port of Mozilla's Readability.js,
//! which is what readabilipy runs under node), then turned into Markdown by markdownify's rules.

use crate::markdownify::markdownify;

/// Pages larger than this are cut before parsing: the article of a multi-megabyte page is
/// found in its first part, and the DOM of the whole would not fit the component's memory.
pub const MAX_HTML_BYTES: usize = 4 << 20;

/// Deepest element nesting handed to Readability. Its scoring walks ancestors, so its time grows
/// with the square of the depth; real pages stay far below this, a hostile one is treated as a
/// page without an article instead of running into the call's timeout.
pub const MAX_NESTING: usize = 256;

/// Elements whose end tag HTML lets a page leave out: they do not nest when left open, so the
/// cheap count below skips them.
const OPTIONAL_END: [&str; 16] = [
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "thead", "tbody", "tfoot", "colgroup", "html",
    "head", "body",
];

/// Elements without content.
const VOID: [&str; 14] =
    ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"];

/// A linear count of open elements in the raw HTML, stopping once it passes `MAX_NESTING` times
/// 16: the HTML parser itself slows down with depth, so a page built to nest thousands of
/// elements is turned away before it is parsed. The exact check on the tree follows.
fn nests_too_deep(html: &str) -> bool {
    let bytes = html.as_bytes();
    let limit = MAX_NESTING * 16;
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(off) = memchr_lt(&bytes[i..]) {
        i += off + 1;
        let closing = bytes.get(i) == Some(&b'/');
        let start = if closing { i + 1 } else { i };
        let end = bytes[start..].iter().position(|b| !b.is_ascii_alphanumeric()).map_or(bytes.len(), |p| start + p);
        if end == start {
            continue;
        }
        let name = html[start..end].to_ascii_lowercase();
        if OPTIONAL_END.contains(&name.as_str()) || VOID.contains(&name.as_str()) {
            continue;
        }
        if closing {
            depth = depth.saturating_sub(1);
        } else {
            let self_closing =
                bytes[end..].iter().position(|b| *b == b'>').is_some_and(|p| p > 0 && bytes[end + p - 1] == b'/');
            if !self_closing {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
        }
    }
    false
}

fn memchr_lt(b: &[u8]) -> Option<usize> {
    b.iter().position(|c| *c == b'<')
}

fn too_deep(doc: &dom_query::Document) -> bool {
    let mut stack = vec![(doc.root(), 0usize)];
    while let Some((n, depth)) = stack.pop() {
        if depth > MAX_NESTING {
            return true;
        }
        stack.extend(n.children_it(false).filter(|c| c.is_element()).map(|c| (c, depth + 1)));
    }
    false
}

/// `Article(title, html_content)` as `extract_article` builds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Article {
    pub title: String,
    pub html_content: String,
}

/// `ReadabilityExtractor().extract_article(html)`.
pub fn extract_article(html: &str) -> Article {
    let mut cut = html.len().min(MAX_HTML_BYTES);
    while !html.is_char_boundary(cut) {
        cut -= 1;
    }
    // readabilipy hands Readability.js the page with surrounding whitespace trimmed.
    let html = html[..cut].trim();
    let parsed = if nests_too_deep(html) {
        None
    } else {
        let doc = dom_query::Document::from(html);
        if too_deep(&doc) {
            None
        } else {
            dom_smoothie::Readability::with_document(doc, None, None).ok().and_then(|mut r| r.parse().ok())
        }
    };
    let (title, content) = match parsed {
        Some(a) => (a.title, a.content.to_string()),
        None => (String::new(), String::new()),
    };
    let html_content =
        if content.trim().is_empty() { "No content could be extracted from this page".to_string() } else { content };
    let title = if title.trim().is_empty() { "Untitled".to_string() } else { title };
    Article { title, html_content }
}

impl Article {
    /// `to_markdown(including_title=True)`.
    pub fn to_markdown(&self) -> String {
        let mut md = format!("# {}\n\n", self.title);
        if self.html_content.trim().is_empty() {
            md.push_str("*No content available*\n");
        } else {
            md.push_str(&markdownify(&self.html_content));
        }
        md
    }
}

/// `extract_article(html).to_markdown()[:4096]`, what the HTML-fetching `web_fetch` tools return.
pub fn page_markdown(html: &str, max_chars: usize) -> String {
    let md = extract_article(html).to_markdown();
    crate::py::take_chars(&md, max_chars).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_page_reads_like_deerflow() {
        assert_eq!(page_markdown("", 4096), "# Untitled\n\nNo content could be extracted from this page");
    }

    #[test]
    fn hostile_pages_do_not_crash() {
        let deep = "<div>".repeat(20_000) + "text" + &"</div>".repeat(20_000);
        let md = page_markdown(&deep, 4096);
        assert!(md.starts_with("# "), "{md}");
        let junk = "<<<>>>&&&;;<p<p<p</x></y>\u{0}\u{feff}".repeat(50);
        assert!(page_markdown(&junk, 4096).starts_with("# "));
    }
}
