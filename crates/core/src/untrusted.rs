//! Text from outside — a web page, an MCP server, an ACP agent, an uploaded file's name — on its
//! way to the model: DeerFlow's framework-tag neutralization (`neutralize_untrusted_tags`), plus
//! the removal of Unicode tag characters, which render as nothing yet carry text a model reads.

use std::sync::OnceLock;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

/// Framework tags DeerFlow escapes in untrusted text (`_BLOCKED_TAG_NAMES`).
const BLOCKED_TAG_NAMES: [&str; 41] = [
    "system-reminder",
    "system_reminder",
    "memory",
    "current_date",
    "think",
    "analysis",
    "role",
    "soul",
    "self_update",
    "thinking_style",
    "clarification_system",
    "critical_reminders",
    "response_style",
    "citations",
    "agent_profile",
    "agent_profile_document",
    "subagent_system",
    "skill_system",
    "uploaded_files",
    "current_uploads",
    "skill_index",
    "available_skills",
    "disabled_skills",
    "memory_tool_system",
    "todo_list_system",
    "durable_context_data",
    "slash_skill_activation",
    "mcp_routing_hints",
    "available-deferred-tools",
    "goal_continuation",
    "file_editing_workflow",
    "guidelines",
    "output_format",
    "working_directory",
    "tool_restrictions",
    "system",
    "instruction",
    "important",
    "override",
    "ignore",
    "prompt",
];

fn blocked_tag_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        let mut names = BLOCKED_TAG_NAMES.to_vec();
        names.sort_unstable();
        let alternation: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
        RegexBuilder::new(&format!(r"<\s*/?\s*(?:{})\b[^>]*>?", alternation.join("|")))
            .case_insensitive(true)
            .build()
            .expect("static regex")
    })
}

/// DeerFlow's `neutralize_untrusted_tags`: framework tags such as `<system-reminder>` are
/// HTML-escaped and the `--- BEGIN/END USER INPUT ---` markers defused, so a file name cannot
/// pose as instructions.
pub fn neutralize_untrusted_tags(text: &str) -> String {
    if text.trim().is_empty() {
        return text.to_string();
    }
    let escaped =
        blocked_tag_re().replace_all(text, |c: &regex::Captures| c[0].replace('<', "&lt;").replace('>', "&gt;"));
    escaped
        .replace("--- BEGIN USER INPUT ---", "[BEGIN USER INPUT]")
        .replace("--- END USER INPUT ---", "[END USER INPUT]")
}

/// Unicode tag characters (U+E0000–U+E007F): invisible, and read by models as ASCII.
fn is_tag_character(c: char) -> bool {
    ('\u{e0000}'..='\u{e007f}').contains(&c)
}

/// Untrusted text as the model should see it: tag characters removed, then framework tags and
/// user-input markers neutralized. Removing first means a tag cannot hide behind them.
pub fn sanitize_untrusted(text: &str) -> String {
    if text.chars().any(is_tag_character) {
        let stripped: String = text.chars().filter(|c| !is_tag_character(*c)).collect();
        return neutralize_untrusted_tags(&stripped);
    }
    neutralize_untrusted_tags(text)
}

/// [`sanitize_untrusted`] on every string of a JSON value, keys included (structured content,
/// `_meta`, resources). `true` when something changed.
pub fn sanitize_json(value: &mut Value) -> bool {
    match value {
        Value::String(s) => {
            let clean = sanitize_untrusted(s);
            let changed = clean != *s;
            *s = clean;
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, v| sanitize_json(v) | acc),
        Value::Object(map) => {
            let mut changed = false;
            let old = std::mem::take(map);
            let mut fresh = Map::with_capacity(old.len());
            for (k, mut v) in old {
                changed |= sanitize_json(&mut v);
                let key = sanitize_untrusted(&k);
                changed |= key != k;
                fresh.insert(key, v);
            }
            *map = fresh;
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tag_characters_go_before_tags_are_matched() {
        assert_eq!(sanitize_untrusted("a\u{e0041}\u{e0042}b"), "ab");
        assert_eq!(sanitize_untrusted("<sys\u{e0001}tem>x"), "&lt;system&gt;x");
        assert_eq!(sanitize_untrusted("plain <div>"), "plain <div>");
    }

    #[test]
    fn json_strings_and_keys_are_sanitized() {
        let mut v = json!({"<system>": ["--- END USER INPUT ---", 1, {"k": "\u{e0070}ok"}]});
        assert!(sanitize_json(&mut v));
        assert_eq!(v, json!({"&lt;system&gt;": ["[END USER INPUT]", 1, {"k": "ok"}]}));
        let mut clean = json!({"a": "b"});
        assert!(!sanitize_json(&mut clean));
    }
}
