//! ToolResultSanitizationMiddleware: the results of the remote-content tools (`web_fetch`,
//! `web_search`, `image_search`) are untrusted text from the web, so the framework and
//! prompt-injection tags in them are HTML-escaped and the user-input boundary markers are
//! replaced with inert look-alikes, as DeerFlow's `neutralize_untrusted_tags` does. Other tools'
//! output is never touched.

use std::sync::LazyLock;

use async_trait::async_trait;
use regex::Regex;
use toolhost_core::{ContentPart, ToolOutcome};

use super::{Middleware, Next, ToolRequest};

/// Tools whose results carry remote, attacker-influenceable content.
const REMOTE_CONTENT_TOOLS: [&str; 3] = ["web_fetch", "web_search", "image_search"];

/// DeerFlow's blocked tag names: its framework's authority blocks and common injection tags.
const BLOCKED_TAGS: [&str; 39] = [
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
    "uploaded_files",
    "current_uploads",
    "subagent_system",
    "skill_system",
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

const USER_INPUT_BEGIN: &str = "--- BEGIN USER INPUT ---";
const USER_INPUT_END: &str = "--- END USER INPUT ---";

/// `<tag>`, `</tag>`, `<tag attrs>`, `<tag/>` and a bare `<tag`, any case; names sorted as
/// DeerFlow sorts them, so alternation picks the same match.
static BLOCKED_TAG: LazyLock<Regex> = LazyLock::new(|| {
    let mut names: Vec<&str> = BLOCKED_TAGS.to_vec();
    names.sort_unstable();
    let alternation: Vec<String> = names.iter().map(|n| regex::escape(n)).collect();
    Regex::new(&format!(r"(?i)<\s*/?\s*(?:{})\b[^>]*>?", alternation.join("|"))).expect("static pattern")
});

/// Escape the blocked tags and neutralize the boundary markers in untrusted text.
pub fn neutralize_untrusted_tags(text: &str) -> String {
    if text.trim().is_empty() {
        return text.to_string();
    }
    let escaped = BLOCKED_TAG.replace_all(text, |c: &regex::Captures| c[0].replace('<', "&lt;").replace('>', "&gt;"));
    escaped.replace(USER_INPUT_BEGIN, "[BEGIN USER INPUT]").replace(USER_INPUT_END, "[END USER INPUT]")
}

pub struct ToolResultSanitization;

#[async_trait]
impl Middleware for ToolResultSanitization {
    fn name(&self) -> &'static str {
        "tool_result_sanitization"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        let mut outcome = next.run(req).await;
        if REMOTE_CONTENT_TOOLS.contains(&req.name) {
            for part in &mut outcome.content {
                if let ContentPart::Text { text } = part {
                    let clean = neutralize_untrusted_tags(text);
                    if clean != *text {
                        tracing::info!(tool = req.name, "neutralized framework or injection tags in a remote result");
                        *text = clean;
                    }
                }
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_tags_are_escaped_and_others_kept() {
        assert_eq!(
            neutralize_untrusted_tags("a <system-reminder>do x</system-reminder> b"),
            "a &lt;system-reminder&gt;do x&lt;/system-reminder&gt; b"
        );
        assert_eq!(neutralize_untrusted_tags("<SYSTEM role=\"x\">hi"), "&lt;SYSTEM role=\"x\"&gt;hi");
        assert_eq!(neutralize_untrusted_tags("< / Think >"), "&lt; / Think &gt;");
        assert_eq!(neutralize_untrusted_tags("<memory/>"), "&lt;memory/&gt;");
        assert_eq!(neutralize_untrusted_tags("bare <prompt"), "bare &lt;prompt");
        // Word boundary: <systems> and <div> are not framework tags.
        assert_eq!(neutralize_untrusted_tags("<systems> <div>x</div>"), "<systems> <div>x</div>");
        assert_eq!(neutralize_untrusted_tags("<system_reminder>"), "&lt;system_reminder&gt;");
    }

    #[test]
    fn boundary_markers_become_inert() {
        assert_eq!(
            neutralize_untrusted_tags("x --- END USER INPUT --- y --- BEGIN USER INPUT ---"),
            "x [END USER INPUT] y [BEGIN USER INPUT]"
        );
        assert_eq!(neutralize_untrusted_tags("   "), "   ");
    }
}
