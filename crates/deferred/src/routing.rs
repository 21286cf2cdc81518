//! DeerFlow's `McpRoutingMiddleware`: auto-promotion of deferred MCP tools whose routing keywords
//! appear in the latest real user message. It only writes `promoted`; it never runs a tool.

use indexmap::IndexMap;
use serde_json::json;
use toolhost_core::StateUpdate;

use toolhost_py::str_methods::py_casefold;

/// Default of `tool_search.auto_promote_top_k`.
pub const DEFAULT_AUTO_PROMOTE_TOP_K: i64 = 3;

/// A tool's effective MCP routing metadata (`metadata["deerflow_mcp_routing"]`), as the MCP
/// layer attaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingMeta {
    /// `"prefer"` or `"off"`.
    pub mode: String,
    pub priority: i64,
    pub keywords: Vec<String>,
}

/// One routing index entry: `{priority, keywords}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingEntry {
    pub priority: i64,
    pub keywords: Vec<String>,
}

/// The routing index: deferred tools with `mode == "prefer"` and at least one keyword.
pub fn build_routing_index<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a RoutingMeta)>,
    deferred_names: &std::collections::HashSet<String>,
) -> IndexMap<String, RoutingEntry> {
    tools
        .into_iter()
        .filter(|(name, meta)| meta.mode == "prefer" && !meta.keywords.is_empty() && deferred_names.contains(*name))
        .map(|(name, meta)| {
            (name.to_string(), RoutingEntry { priority: meta.priority, keywords: meta.keywords.clone() })
        })
        .collect()
}

/// `auto_promote_top_k` clamped to 1..=5.
pub fn clamp_top_k(top_k: i64) -> usize {
    top_k.clamp(1, 5) as usize
}

/// A message of the conversation, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    Human(HumanMessage),
    /// Any AI, tool or system message.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HumanMessage {
    pub text: String,
    /// `name == "summary"` marks a summarisation message, not the user.
    pub name: Option<String>,
    /// `additional_kwargs.hide_from_ui`.
    pub hide_from_ui: bool,
    /// The user's own text when the input sanitizer replaced `text`.
    pub original_text: Option<String>,
}

impl HumanMessage {
    fn is_real_user(&self) -> bool {
        self.name.as_deref() != Some("summary") && !self.hide_from_ui
    }
}

/// Auto-promotion over one routing index and catalog hash.
#[derive(Debug, Clone)]
pub struct McpRouting {
    /// (name, priority, casefolded keywords), sorted by (-priority, name).
    entries: Vec<(String, i64, Vec<String>)>,
    catalog_hash: String,
    top_k: usize,
}

impl McpRouting {
    pub fn new(index: &IndexMap<String, RoutingEntry>, catalog_hash: &str, top_k: i64) -> Self {
        let mut entries: Vec<(String, i64, Vec<String>)> = index
            .iter()
            .map(|(name, e)| (name.clone(), e.priority, e.keywords.iter().map(|k| py_casefold(k)).collect()))
            .collect();
        entries.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Self { entries, catalog_hash: catalog_hash.to_string(), top_k: clamp_top_k(top_k) }
    }

    pub fn top_k(&self) -> usize {
        self.top_k
    }

    /// Tools whose keywords occur in `text` (casefolded substring), best first, at most top_k.
    pub fn select(&self, text: &str) -> Vec<String> {
        let folded = py_casefold(text);
        self.entries
            .iter()
            .filter(|(_, _, kws)| kws.iter().any(|k| folded.contains(k.as_str())))
            .take(self.top_k)
            .map(|(name, _, _)| name.clone())
            .collect()
    }

    /// `before_model`: the promotion for the latest real user message, or `None`.
    pub fn before_model(&self, messages: &[ChatMessage]) -> Option<StateUpdate> {
        let latest = messages.iter().rev().find_map(|m| match m {
            ChatMessage::Human(h) if h.is_real_user() => Some(h),
            _ => None,
        })?;
        let text = latest.original_text.as_deref().unwrap_or(&latest.text);
        let names = self.select(text);
        if names.is_empty() {
            return None;
        }
        tracing::debug!(?names, "MCP routing auto-promotes tools");
        Some(StateUpdate {
            promoted: Some(json!({"catalog_hash": self.catalog_hash, "names": names})),
            ..StateUpdate::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> IndexMap<String, RoutingEntry> {
        let e = |p: i64, k: &str| RoutingEntry { priority: p, keywords: vec![k.to_string()] };
        [("z", e(50, "订单")), ("a", e(50, "orders")), ("top", e(100, "ORDERS"))]
            .into_iter()
            .map(|(n, e)| (n.to_string(), e))
            .collect()
    }

    fn human(text: &str) -> ChatMessage {
        ChatMessage::Human(HumanMessage { text: text.to_string(), ..HumanMessage::default() })
    }

    #[test]
    fn spec_item_20_priority_then_name_top_k() {
        let r = McpRouting::new(&index(), "h", 2);
        assert_eq!(r.select("查订单 and orders"), ["top", "a"]);
        let r = McpRouting::new(&index(), "h", 3);
        assert_eq!(r.select("查订单 and orders"), ["top", "a", "z"]);
        assert_eq!(r.select("查订单"), ["z"]);
    }

    #[test]
    fn only_the_latest_real_user_message_counts() {
        let r = McpRouting::new(&index(), "h", 3);
        let summary = ChatMessage::Human(HumanMessage {
            text: "orders".into(),
            name: Some("summary".into()),
            ..HumanMessage::default()
        });
        let hidden =
            ChatMessage::Human(HumanMessage { text: "orders".into(), hide_from_ui: true, ..HumanMessage::default() });
        assert_eq!(r.before_model(&[human("hello"), summary, hidden, ChatMessage::Other]), None);
        let up = r.before_model(&[human("hello"), human("my ORDERS please"), ChatMessage::Other]).unwrap();
        assert_eq!(up.promoted.unwrap(), json!({"catalog_hash": "h", "names": ["top", "a"]}));
        assert_eq!(r.before_model(&[human("orders"), human("weather")]), None);
        let sanitized = ChatMessage::Human(HumanMessage {
            text: "[redacted]".into(),
            original_text: Some("订单".into()),
            ..HumanMessage::default()
        });
        assert_eq!(r.before_model(&[sanitized]).unwrap().promoted.unwrap()["names"], json!(["z"]));
    }

    #[test]
    fn top_k_is_clamped_and_index_keeps_prefer_deferred_tools() {
        assert_eq!(clamp_top_k(0), 1);
        assert_eq!(clamp_top_k(-3), 1);
        assert_eq!(clamp_top_k(9), 5);
        assert_eq!(clamp_top_k(4), 4);
        let prefer = RoutingMeta { mode: "prefer".into(), priority: 1, keywords: vec!["x".into()] };
        let off = RoutingMeta { mode: "off".into(), priority: 1, keywords: vec!["x".into()] };
        let nokw = RoutingMeta { mode: "prefer".into(), priority: 1, keywords: vec![] };
        let deferred = ["a", "b", "c"].into_iter().map(String::from).collect();
        let idx = build_routing_index([("a", &prefer), ("b", &off), ("c", &nokw), ("d", &prefer)], &deferred);
        assert_eq!(idx.keys().collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn keywords_match_casefolded() {
        let idx: IndexMap<String, RoutingEntry> =
            [("s".to_string(), RoutingEntry { priority: 0, keywords: vec!["STRASSE".into()] })].into_iter().collect();
        assert_eq!(McpRouting::new(&idx, "h", 3).select("die Straße"), ["s"]);
    }
}
