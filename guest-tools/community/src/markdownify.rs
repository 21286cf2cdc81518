//! HTML → Markdown, rule for rule as python-markdownify 1.2.2 with its default options (what
//! DeerFlow's `Article.to_markdown` calls): setext `=`/`-` for h1/h2, `*` bullets, fenced `<pre>`,
//! pipe tables, `*` and `_` escaped in text. The HTML is parsed with html5ever (dom_query) into a
//! small arena that answers the sibling and parent questions markdownify asks of BeautifulSoup.

use dom_query::{Document, NodeRef};

#[derive(Debug)]
enum Kind {
    Document,
    Element {
        name: String,
        attrs: Vec<(String, String)>,
    },
    Text(String),
    /// Comments, doctypes, processing instructions: never converted.
    Other,
}

#[derive(Debug)]
struct Node {
    kind: Kind,
    parent: Option<usize>,
    children: Vec<usize>,
    /// Position among the parent's children.
    pos: usize,
}

struct Tree {
    nodes: Vec<Node>,
}

/// Deepest nesting converted; deeper content is flattened to its text, so a hostile page cannot
/// exhaust the stack.
const MAX_DEPTH: usize = 512;

impl Tree {
    fn parse(html: &str) -> Self {
        let doc = Document::fragment(html);
        let mut tree = Tree { nodes: vec![Node { kind: Kind::Document, parent: None, children: vec![], pos: 0 }] };
        // html5ever puts a fragment's nodes under an `html` element.
        let root = doc.root();
        let tops: Vec<NodeRef> = match root.children().into_iter().find(|c| c.node_name().as_deref() == Some("html")) {
            Some(html) => html.children(),
            None => root.children(),
        };
        for c in tops {
            tree.add(&c, 0, 1);
        }
        tree
    }

    fn add(&mut self, n: &NodeRef, parent: usize, depth: usize) {
        let kind = if n.is_text() {
            Kind::Text(n.text().to_string())
        } else if n.is_element() {
            if depth > MAX_DEPTH {
                Kind::Text(n.text().to_string())
            } else {
                let name = n.node_name().map(|s| s.to_lowercase()).unwrap_or_default();
                let attrs = n.attrs().iter().map(|a| (a.name.local.to_string(), a.value.to_string())).collect();
                Kind::Element { name, attrs }
            }
        } else {
            Kind::Other
        };
        let descend = matches!(kind, Kind::Element { .. });
        let id = self.nodes.len();
        let pos = self.nodes[parent].children.len();
        self.nodes.push(Node { kind, parent: Some(parent), children: vec![], pos });
        self.nodes[parent].children.push(id);
        if descend {
            for c in n.children() {
                self.add(&c, id, depth + 1);
            }
        }
    }

    fn name(&self, id: usize) -> Option<&str> {
        match &self.nodes[id].kind {
            Kind::Element { name, .. } => Some(name),
            Kind::Document => Some("[document]"),
            _ => None,
        }
    }

    fn attr(&self, id: usize, key: &str) -> Option<&str> {
        match &self.nodes[id].kind {
            Kind::Element { attrs, .. } => attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str()),
            _ => None,
        }
    }

    fn prev(&self, id: usize) -> Option<usize> {
        let n = &self.nodes[id];
        let p = n.parent?;
        n.pos.checked_sub(1).map(|i| self.nodes[p].children[i])
    }

    fn next(&self, id: usize) -> Option<usize> {
        let n = &self.nodes[id];
        let p = n.parent?;
        self.nodes[p].children.get(n.pos + 1).copied()
    }

    fn is_tag(&self, id: usize) -> bool {
        matches!(self.nodes[id].kind, Kind::Element { .. })
    }

    fn ancestors(&self, id: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.nodes[id].parent, move |p| self.nodes[*p].parent)
    }

    /// Descendant elements named one of `names`, in document order (bs4's `find_all`).
    fn find_all(&self, id: usize, names: &[&str]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = self.nodes[id].children.iter().rev().copied().collect();
        while let Some(c) = stack.pop() {
            if self.name(c).is_some_and(|n| names.contains(&n)) {
                out.push(c);
            }
            stack.extend(self.nodes[c].children.iter().rev());
        }
        out
    }
}

fn is_heading(name: &str) -> bool {
    name.strip_prefix('h').is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
}

fn heading_level(name: &str) -> usize {
    let digits: String = name[1..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<usize>().unwrap_or(6)
}

fn remove_inside(tree: &Tree, id: Option<usize>) -> bool {
    let Some(name) = id.and_then(|i| tree.name(i)) else { return false };
    is_heading(name)
        || matches!(
            name,
            "p" | "blockquote"
                | "article"
                | "div"
                | "section"
                | "ol"
                | "ul"
                | "li"
                | "dl"
                | "dt"
                | "dd"
                | "table"
                | "thead"
                | "tbody"
                | "tfoot"
                | "tr"
                | "td"
                | "th"
        )
}

fn remove_outside(tree: &Tree, id: Option<usize>) -> bool {
    remove_inside(tree, id) || id.and_then(|i| tree.name(i)) == Some("pre")
}

/// Python's `str.strip()` family.
fn strip(s: &str) -> &str {
    s.trim_matches(char::is_whitespace)
}
fn strip_set<'a>(s: &'a str, set: &[char]) -> &'a str {
    s.trim_matches(|c| set.contains(&c))
}
const SPACE_SET: [char; 4] = [' ', '\t', '\r', '\n'];

/// The parent context markdownify passes down.
#[derive(Clone, Default)]
struct Tags {
    names: Vec<String>,
}

impl Tags {
    fn has(&self, t: &str) -> bool {
        self.names.iter().any(|n| n == t)
    }
    fn with(&self, more: &[&str]) -> Tags {
        let mut names = self.names.clone();
        names.extend(more.iter().map(|s| s.to_string()));
        Tags { names }
    }
}

/// `markdownify.markdownify(html)` with default options.
pub fn markdownify(html: &str) -> String {
    let tree = Tree::parse(html);
    process_tag(&tree, 0, &Tags::default())
}

fn block_content(tree: &Tree, id: usize) -> bool {
    match &tree.nodes[id].kind {
        Kind::Element { .. } => true,
        Kind::Text(t) => !strip(t).is_empty(),
        _ => false,
    }
}

fn next_block_sibling(tree: &Tree, id: usize) -> Option<usize> {
    let mut cur = tree.next(id);
    while let Some(c) = cur {
        if block_content(tree, c) {
            return Some(c);
        }
        cur = tree.next(c);
    }
    None
}

fn process_tag(tree: &Tree, id: usize, parent_tags: &Tags) -> String {
    let inside = remove_inside(tree, Some(id));
    let name = tree.name(id).unwrap_or("").to_string();
    let children: Vec<usize> = tree.nodes[id]
        .children
        .iter()
        .copied()
        .filter(|&c| match &tree.nodes[c].kind {
            Kind::Element { .. } => true,
            Kind::Text(t) => {
                if !strip(t).is_empty() {
                    true
                } else if inside && (tree.prev(c).is_none() || tree.next(c).is_none()) {
                    false
                } else {
                    !(remove_outside(tree, tree.prev(c)) || remove_outside(tree, tree.next(c)))
                }
            }
            _ => false,
        })
        .collect();
    let mut extra: Vec<&str> = vec![name.as_str()];
    if is_heading(&name) || name == "td" || name == "th" {
        extra.push("_inline");
    }
    if matches!(name.as_str(), "pre" | "code" | "kbd" | "samp") {
        extra.push("_noformat");
    }
    let child_tags = parent_tags.with(&extra);
    let strings: Vec<String> = children
        .iter()
        .map(|&c| match tree.nodes[c].kind {
            Kind::Text(_) => process_text(tree, c, &child_tags),
            _ => process_tag(tree, c, &child_tags),
        })
        .filter(|s| !s.is_empty())
        .collect();
    let in_pre = name == "pre" || tree.ancestors(id).any(|a| tree.name(a) == Some("pre"));
    let text = if in_pre {
        strings.concat()
    } else {
        let mut parts: Vec<String> = vec![String::new()];
        for s in &strings {
            let lead_n = s.len() - s.trim_start_matches('\n').len();
            let (mut leading, rest) = s.split_at(lead_n);
            let content = rest.trim_end_matches('\n');
            let trailing = &rest[content.len()..];
            let collapsed;
            if !parts.last().is_some_and(|p| p.is_empty()) && !leading.is_empty() {
                let prev = parts.pop().unwrap_or_default();
                collapsed = "\n".repeat(prev.len().max(leading.len()).min(2));
                leading = &collapsed;
            }
            parts.push(leading.to_string());
            parts.push(content.to_string());
            parts.push(trailing.to_string());
        }
        parts.concat()
    };
    convert(tree, id, &name, text, parent_tags)
}

fn process_text(tree: &Tree, id: usize, parent_tags: &Tags) -> String {
    let Kind::Text(raw) = &tree.nodes[id].kind else { return String::new() };
    let mut text = raw.clone();
    if !parent_tags.has("pre") {
        text = collapse_whitespace(&text);
    }
    if !parent_tags.has("_noformat") {
        text = text.replace('*', "\\*").replace('_', "\\_");
    }
    let parent = tree.nodes[id].parent;
    let (prev, next) = (tree.prev(id), tree.next(id));
    if remove_outside(tree, prev) || (remove_inside(tree, parent) && prev.is_none()) {
        text = text.trim_start_matches(SPACE_SET).to_string();
    }
    if remove_outside(tree, next) || (remove_inside(tree, parent) && next.is_none()) {
        text = text.trim_end().to_string();
    }
    text
}

/// `re_newline_whitespace.sub('\n', …)` then `re_whitespace.sub(' ', …)`.
fn collapse_whitespace(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if matches!(chars[i], '\t' | ' ' | '\r' | '\n') {
            let start = i;
            while i < chars.len() && matches!(chars[i], '\t' | ' ' | '\r' | '\n') {
                i += 1;
            }
            let run = &chars[start..i];
            if run.iter().any(|c| matches!(c, '\r' | '\n')) {
                out.push('\n');
            } else {
                out.push(' ');
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// `chomp(text)`: (prefix, suffix, stripped).
fn chomp(text: &str) -> (&'static str, &'static str, &str) {
    let prefix = if text.starts_with(' ') { " " } else { "" };
    let suffix = if text.ends_with(' ') { " " } else { "" };
    (prefix, suffix, strip(text))
}

fn inline(text: &str, markup: &str, parent_tags: &Tags) -> String {
    if parent_tags.has("_noformat") {
        return text.to_string();
    }
    let (prefix, suffix, t) = chomp(text);
    if t.is_empty() {
        return String::new();
    }
    format!("{prefix}{markup}{t}{markup}{suffix}")
}

/// `re_line_with_content.sub(f, text)`: `f` applied to every line.
fn each_line(text: &str, f: impl Fn(&str) -> String) -> String {
    text.split('\n').map(f).collect::<Vec<_>>().join("\n")
}

fn colspan(tree: &Tree, id: usize) -> usize {
    match tree.attr(id, "colspan") {
        Some(v) if !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) => {
            v.parse::<usize>().unwrap_or(1000).clamp(1, 1000)
        }
        _ => 1,
    }
}

fn convert(tree: &Tree, id: usize, name: &str, text: String, parent_tags: &Tags) -> String {
    let inline_ctx = parent_tags.has("_inline");
    match name {
        "[document]" => text.trim_matches('\n').to_string(),
        "a" => {
            if parent_tags.has("_noformat") {
                return text;
            }
            let (prefix, suffix, t) = chomp(&text);
            if t.is_empty() {
                return String::new();
            }
            let href = tree.attr(id, "href");
            let title = tree.attr(id, "title").filter(|t| !t.is_empty());
            if let Some(h) = href {
                if t.replace("\\_", "_") == h && title.is_none() {
                    return format!("<{h}>");
                }
            }
            let title_part = title.map(|t| format!(" \"{}\"", t.replace('"', "\\\""))).unwrap_or_default();
            match href {
                Some(h) if !h.is_empty() => format!("{prefix}[{t}]({h}{title_part}){suffix}"),
                _ => t.to_string(),
            }
        }
        "b" | "strong" => inline(&text, "**", parent_tags),
        "em" | "i" => inline(&text, "*", parent_tags),
        "del" | "s" => inline(&text, "~~", parent_tags),
        "sub" | "sup" => inline(&text, "", parent_tags),
        "blockquote" => {
            let t = strip_set(&text, &SPACE_SET);
            if inline_ctx {
                return format!(" {t} ");
            }
            if t.is_empty() {
                return "\n".into();
            }
            format!("\n{}\n\n", each_line(t, |l| if l.is_empty() { ">".into() } else { format!("> {l}") }))
        }
        "br" => {
            if inline_ctx {
                " ".into()
            } else {
                "  \n".into()
            }
        }
        "code" | "kbd" | "samp" => {
            if parent_tags.has("_noformat") {
                return text;
            }
            let (prefix, suffix, t) = chomp(&text);
            if t.is_empty() {
                return String::new();
            }
            let mut longest = 0;
            let mut run = 0;
            for c in t.chars() {
                run = if c == '`' { run + 1 } else { 0 };
                longest = longest.max(run);
            }
            let delim = "`".repeat(longest + 1);
            let body = if longest > 0 { format!(" {t} ") } else { t.to_string() };
            format!("{prefix}{delim}{body}{delim}{suffix}")
        }
        "div" | "article" | "section" | "dl" => {
            if inline_ctx {
                return format!(" {} ", strip(&text));
            }
            let t = strip(&text);
            if t.is_empty() {
                String::new()
            } else {
                format!("\n\n{t}\n\n")
            }
        }
        "dd" => {
            let t = strip(&text);
            if inline_ctx {
                return format!(" {t} ");
            }
            if t.is_empty() {
                return "\n".into();
            }
            let indented = each_line(t, |l| if l.is_empty() { String::new() } else { format!("    {l}") });
            let mut chars = indented.chars();
            chars.next();
            format!(":{}\n", chars.as_str())
        }
        "dt" => {
            let t = strip(&text);
            let t: String = t.split(['\t', ' ', '\r', '\n']).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
            if inline_ctx {
                return format!(" {t} ");
            }
            if t.is_empty() {
                return "\n".into();
            }
            format!("\n\n{t}\n")
        }
        "hr" => "\n\n---\n\n".into(),
        "img" => {
            let alt = tree.attr(id, "alt").unwrap_or("");
            let src = tree.attr(id, "src").unwrap_or("");
            let title = tree.attr(id, "title").unwrap_or("");
            if inline_ctx {
                return alt.to_string();
            }
            let title_part =
                if title.is_empty() { String::new() } else { format!(" \"{}\"", title.replace('"', "\\\"")) };
            format!("![{alt}]({src}{title_part})")
        }
        "video" => {
            if inline_ctx {
                return text;
            }
            let mut src = tree.attr(id, "src").unwrap_or("").to_string();
            if src.is_empty() {
                if let Some(s) = tree.find_all(id, &["source"]).into_iter().find(|s| tree.attr(*s, "src").is_some()) {
                    src = tree.attr(s, "src").unwrap_or("").to_string();
                }
            }
            let poster = tree.attr(id, "poster").unwrap_or("");
            match (src.is_empty(), poster.is_empty()) {
                (false, false) => format!("[![{text}]({poster})]({src})"),
                (false, true) => format!("[{text}]({src})"),
                (true, false) => format!("![{text}]({poster})"),
                (true, true) => text,
            }
        }
        "ul" | "ol" => {
            let before_paragraph =
                next_block_sibling(tree, id).is_some_and(|n| !matches!(tree.name(n), Some("ul" | "ol")));
            if parent_tags.has("li") {
                return format!("\n{}", text.trim_end());
            }
            format!("\n\n{text}{}", if before_paragraph { "\n" } else { "" })
        }
        "li" => {
            let t = strip(&text);
            if t.is_empty() {
                return "\n".into();
            }
            let parent = tree.nodes[id].parent;
            let bullet = if parent.and_then(|p| tree.name(p)) == Some("ol") {
                let p = parent.unwrap_or(0);
                let start = tree
                    .attr(p, "start")
                    .filter(|s| !s.is_empty() && s.chars().all(char::is_numeric))
                    .and_then(|s| s.parse::<i64>().ok())
                    .unwrap_or(1);
                let before = tree.nodes[p].children[..tree.nodes[id].pos]
                    .iter()
                    .filter(|&&s| tree.name(s) == Some("li"))
                    .count();
                format!("{}.", start + before as i64)
            } else {
                let depth =
                    std::iter::once(id).chain(tree.ancestors(id)).filter(|&a| tree.name(a) == Some("ul")).count();
                let bullets = ['*', '+', '-'];
                let depth = depth.saturating_sub(1);
                bullets[depth % bullets.len()].to_string()
            };
            let bullet = format!("{bullet} ");
            let width = bullet.chars().count();
            let pad = " ".repeat(width);
            let indented = each_line(t, |l| if l.is_empty() { String::new() } else { format!("{pad}{l}") });
            let rest: String = indented.chars().skip(width).collect();
            format!("{bullet}{rest}\n")
        }
        "p" => {
            if inline_ctx {
                return format!(" {} ", strip_set(&text, &SPACE_SET));
            }
            let t = strip_set(&text, &SPACE_SET);
            if t.is_empty() {
                String::new()
            } else {
                format!("\n\n{t}\n\n")
            }
        }
        "pre" => {
            if text.is_empty() {
                return String::new();
            }
            let head = text.len() - text.trim_start_matches([' ', '\n']).len();
            // re_pre_lstrip = ^[ \n]*\n : only up to the last newline of the leading run.
            let start = text[..head].rfind('\n').map(|i| i + 1).unwrap_or(0);
            let t = text[start..].trim_end_matches([' ', '\n']);
            format!("\n\n```\n{t}\n```\n\n")
        }
        "q" => format!("\"{text}\""),
        "script" | "style" => String::new(),
        "table" => format!("\n\n{}\n\n", strip(&text)),
        "caption" => format!("{}\n\n", strip(&text)),
        "figcaption" => format!("\n\n{}\n\n", strip(&text)),
        "td" | "th" => format!(" {}{}", strip(&text).replace('\n', " "), " |".repeat(colspan(tree, id))),
        "tr" => convert_tr(tree, id, &text),
        n if is_heading(n) => {
            if inline_ctx {
                return text;
            }
            let n = heading_level(n).clamp(1, 6);
            let t = strip(&text);
            if n <= 2 {
                let t = t.trim_end();
                if t.is_empty() {
                    return String::new();
                }
                let line = if n == 1 { "=" } else { "-" };
                return format!("\n\n{t}\n{}\n\n", line.repeat(t.chars().count()));
            }
            let t: String = t.split(['\t', ' ', '\r', '\n']).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ");
            format!("\n\n{} {t}\n\n", "#".repeat(n))
        }
        _ => text,
    }
}

fn convert_tr(tree: &Tree, id: usize, text: &str) -> String {
    let cells = tree.find_all(id, &["td", "th"]);
    let prev_tag = {
        let mut cur = tree.prev(id);
        while let Some(c) = cur {
            if tree.is_tag(c) {
                break;
            }
            cur = tree.prev(c);
        }
        cur
    };
    let is_first_row = prev_tag.is_none();
    let parent = tree.nodes[id].parent.unwrap_or(0);
    let parent_name = tree.name(parent).unwrap_or("");
    let is_headrow = cells.iter().all(|&c| tree.name(c) == Some("th"))
        || (parent_name == "thead" && tree.find_all(parent, &["tr"]).len() == 1);
    let grand = tree.nodes[parent].parent;
    let head_missing =
        is_first_row && (parent_name != "tbody" || grand.is_some_and(|g| tree.find_all(g, &["thead"]).is_empty()));
    let full: usize = cells.iter().map(|&c| colspan(tree, c)).sum();
    let parent_first = {
        let mut cur = tree.prev(parent);
        while let Some(c) = cur {
            if tree.is_tag(c) {
                break;
            }
            cur = tree.prev(c);
        }
        cur.is_none()
    };
    let mut overline = String::new();
    let mut underline = String::new();
    if is_headrow && is_first_row {
        underline = format!("| {} |\n", vec!["---"; full].join(" | "));
    } else if head_missing || (is_first_row && (parent_name == "table" || (parent_name == "tbody" && parent_first))) {
        overline = format!("| {} |\n", vec![""; full].join(" | "));
        overline += &format!("| {} |\n", vec!["---"; full].join(" | "));
    }
    format!("{overline}|{text}\n{underline}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basics_match_markdownify() {
        assert_eq!(markdownify("<p>a <b>b</b> <em> c </em></p>"), "a **b**  *c*");
        assert_eq!(markdownify("<h1>T</h1><h2>Sub</h2><h3>x  y</h3>"), "T\n=\n\nSub\n---\n\n### x y");
        assert_eq!(markdownify("<ul><li>a</li><li>b<ul><li>c</li></ul></li></ul>"), "* a\n* b\n  + c");
        assert_eq!(markdownify("<ol start=\"3\"><li>a</li><li>b</li></ol>"), "3. a\n4. b");
        assert_eq!(markdownify("<pre><code>x\n  y\n</code></pre>"), "```\nx\n  y\n```");
        assert_eq!(markdownify("<p>snake_case *x*</p>"), "snake\\_case \\*x\\*");
        assert_eq!(markdownify("<a href=\"https://a.b\">https://a.b</a>"), "<https://a.b>");
        assert_eq!(markdownify("<blockquote>q\n\nr</blockquote>"), "> q\n> r");
        assert_eq!(markdownify("<p>x<br>y</p>"), "x  \ny");
        assert_eq!(markdownify("<code>a`b</code>"), "`` a`b ``");
        assert_eq!(
            markdownify("<table><tr><td>a</td><td colspan=\"2\">b</td></tr></table>"),
            "|  |  |  |\n| --- | --- | --- |\n| a | b | |"
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let html = "<div>".repeat(5000) + "x" + &"</div>".repeat(5000);
        assert_eq!(markdownify(&html), "x");
    }
}
