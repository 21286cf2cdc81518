//! `ask_clarification` and DeerFlow's ClarificationMiddleware
//! (`H/agents/middlewares/clarification_middleware.py`): the tool body never runs in DeerFlow;
//! the middleware turns the call into the question text for the user plus a structured
//! `human_input` payload, and ends the run. [`intercept`] is that middleware step.

use async_trait::async_trait;
use regex::Regex;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use toolhost_core::state::py_str;
use toolhost_core::{CallContext, Tool, ToolOutcome, ToolSpec};

use crate::builtin_spec;

pub const NAME: &str = "ask_clarification";

/// Field types a form may use; anything else degrades to `text`.
const FORM_FIELD_TYPES: [&str; 7] = ["text", "textarea", "number", "select", "multi_select", "checkbox", "date"];
const OPTION_FIELD_TYPES: [&str; 2] = ["select", "multi_select"];
/// Names that collide with JavaScript `Object.prototype` members in the frontend's value map.
const RESERVED_FIELD_NAMES: [&str; 13] = [
    "__proto__",
    "constructor",
    "prototype",
    "toString",
    "toLocaleString",
    "valueOf",
    "hasOwnProperty",
    "isPrototypeOf",
    "propertyIsEnumerable",
    "__defineGetter__",
    "__defineSetter__",
    "__lookupGetter__",
    "__lookupSetter__",
];
const MAX_FORM_FIELDS: usize = 16;
const MAX_FIELD_OPTIONS: usize = 24;
const MAX_FIELD_TEXT_CHARS: usize = 200;
const MAX_FORM_SERIALIZED_BYTES: usize = 16_384;

const DISABLED_MESSAGE: &str = "Clarification is disabled in this context — the human is not present to answer \
synchronously. Do not ask for confirmation. Proceed with your best judgment, carry out the requested action, and \
state any assumptions you made in your final response.";

/// What the middleware produces for one `ask_clarification` call: DeerFlow's
/// `ToolMessage(id=message_id, content=text, name="ask_clarification",
/// artifact={"human_input": human_input})` and whether the run ends (`goto=END`).
#[derive(Debug, Clone, PartialEq)]
pub struct Clarification {
    /// `clarification:{tool_call_id}` (or a digest of the text when there is no call id).
    pub message_id: String,
    /// The question as the user and the model read it.
    pub text: String,
    /// The structured UI payload; `None` when clarification is disabled.
    pub human_input: Option<Value>,
    /// `true` unless clarification is disabled: the run stops and waits for the user.
    pub end_run: bool,
}

impl Clarification {
    /// As a tool outcome: the text as content, `end_run`, and the artifact
    /// `{"human_input": …}` in `structured`.
    pub fn into_outcome(self) -> ToolOutcome {
        let mut outcome = ToolOutcome::text(self.text);
        outcome.end_run = self.end_run;
        outcome.structured = self.human_input.map(|payload| json!({ "human_input": payload }));
        outcome
    }
}

/// ClarificationMiddleware's `wrap_tool_call` for an `ask_clarification` call: format the
/// question, build the `human_input` payload and end the run; with `disable_clarification` set,
/// answer with DeerFlow's "proceed on your own judgment" message instead and keep running.
/// Never fails: malformed options or fields degrade exactly as DeerFlow's do.
pub fn intercept(tool_call_id: &str, args: &Value, disable_clarification: bool) -> Clarification {
    if disable_clarification {
        tracing::info!("ask_clarification suppressed (disable_clarification set); instructing agent to proceed");
        return Clarification {
            message_id: stable_message_id(tool_call_id, "proceed-without-clarification"),
            text: DISABLED_MESSAGE.to_string(),
            human_input: None,
            end_run: false,
        };
    }
    tracing::info!("Intercepted clarification request");
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    let fields = normalize_fields(args.get("fields"));
    let text = format_clarification_message(args, &fields);
    let message_id = stable_message_id(tool_call_id, &text);
    let payload = build_human_input_payload(args, tool_call_id, &message_id, &fields);
    Clarification { message_id, text, human_input: Some(payload), end_run: true }
}

/// ClarificationMiddleware's `after_model` (`_strip_sibling_tool_calls`, DeerFlow's fix for its
/// issue #4906 in pull requests #4908/#4934 — not in f1f4af99, so a toolhost deviation; the turn
/// stage applies it): when a model turn batches `ask_clarification` with other calls, only the
/// clarification calls run (the model re-issues the rest after the user answers). Returns the indices of the calls to
/// keep, given the turn's tool names in order. A pure-clarification turn, a turn without one,
/// or a run with clarification disabled keeps every call.
pub fn calls_to_keep(tool_names: &[&str], disable_clarification: bool) -> Vec<usize> {
    let clarifications: Vec<usize> =
        tool_names.iter().enumerate().filter(|(_, n)| **n == NAME).map(|(i, _)| i).collect();
    if disable_clarification || clarifications.is_empty() || clarifications.len() == tool_names.len() {
        return (0..tool_names.len()).collect();
    }
    tracing::info!(
        dropped = tool_names.len() - clarifications.len(),
        "Dropped sibling tool call(s) batched with ask_clarification so the interrupt is authoritative"
    );
    clarifications
}

fn stable_message_id(tool_call_id: &str, formatted: &str) -> String {
    if !tool_call_id.is_empty() {
        return format!("clarification:{tool_call_id}");
    }
    let digest = Sha256::digest(formatted.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("clarification:{}", &hex[..16])
}

fn xml_tag_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"</?[A-Za-z_][\w:.-]*(?:\s[^<>]*?)?\s*/?>").expect("static regex"))
}

/// `_normalize_options`: JSON strings parsed (an unparsable string is one option), dict payloads
/// flattened to their scalar leaves, XML-like tags stripped, trimmed, blanks and repeats dropped.
pub fn normalize_options(raw: Option<&Value>) -> Vec<String> {
    let parsed;
    let mut options = match raw {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v) => {
                parsed = v;
                Some(&parsed)
            }
            Err(_) => return clean_options(&[Value::String(s.clone())]),
        },
        other => other,
    };
    if let Some(Value::Null) = options {
        options = None;
    }
    match options {
        None => Vec::new(),
        Some(Value::Object(_)) => {
            let mut flat = Vec::new();
            flatten_scalars(options.unwrap_or(&Value::Null), &mut flat);
            clean_options(&flat)
        }
        Some(Value::Array(items)) => clean_options(items),
        Some(other) => clean_options(std::slice::from_ref(other)),
    }
}

fn flatten_scalars(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => m.values().for_each(|x| flatten_scalars(x, out)),
        Value::Array(a) => a.iter().for_each(|x| flatten_scalars(x, out)),
        Value::Null => {}
        scalar => out.push(scalar.clone()),
    }
}

fn clean_options(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let text = xml_tag_re().replace_all(&py_str(item), "").trim().to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// `_normalize_bool`: models send booleans as strings or numbers too.
fn normalize_bool(raw: Option<&Value>) -> bool {
    match raw {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => s.trim().to_lowercase() == "true",
        _ => false,
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `_normalize_fields`: validates a form atomically. Any structural problem (not a list, more
/// than 16 fields, a non-object entry, a missing, reserved, duplicate or over-long name, an
/// over-long label, option or placeholder, more than 24 options, a serialized form over 16 KiB)
/// drops the whole form (`[]`); unknown types and option-less selects become `text`.
pub fn normalize_fields(raw: Option<&Value>) -> Vec<Value> {
    let parsed;
    let fields = match raw {
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(_) => return Vec::new(),
        },
        Some(v) => v,
        None => return Vec::new(),
    };
    let Some(entries) = fields.as_array() else { return Vec::new() };
    if entries.len() > MAX_FORM_FIELDS {
        return Vec::new();
    }
    let mut normalized: Vec<Value> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for entry in entries {
        let Some(entry) = entry.as_object() else { return Vec::new() };
        let name = match entry.get("name") {
            Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
            _ => return Vec::new(),
        };
        if RESERVED_FIELD_NAMES.contains(&name.as_str()) || seen.contains(&name) || chars(&name) > MAX_FIELD_TEXT_CHARS
        {
            return Vec::new();
        }
        seen.push(name.clone());
        let label = match entry.get("label") {
            Some(Value::String(l)) if !l.trim().is_empty() => l.trim().to_string(),
            _ => name.clone(),
        };
        if chars(&label) > MAX_FIELD_TEXT_CHARS {
            return Vec::new();
        }
        let mut field_type = match entry.get("type") {
            Some(Value::String(t)) if FORM_FIELD_TYPES.contains(&t.as_str()) => t.clone(),
            _ => "text".to_string(),
        };
        let is_option_type = OPTION_FIELD_TYPES.contains(&field_type.as_str());
        let options = if is_option_type { normalize_options(entry.get("options")) } else { Vec::new() };
        if options.len() > MAX_FIELD_OPTIONS || options.iter().any(|o| chars(o) > MAX_FIELD_TEXT_CHARS) {
            return Vec::new();
        }
        if is_option_type && options.is_empty() {
            field_type = "text".to_string();
        }
        let mut field = Map::new();
        field.insert("name".into(), Value::String(name.clone()));
        field.insert("label".into(), Value::String(label));
        field.insert("type".into(), Value::String(field_type.clone()));
        field.insert("required".into(), Value::Bool(normalize_bool(entry.get("required"))));
        if OPTION_FIELD_TYPES.contains(&field_type.as_str()) {
            let opts = options
                .iter()
                .enumerate()
                .map(|(i, o)| json!({"id": format!("{name}-option-{}", i + 1), "label": o, "value": o}))
                .collect();
            field.insert("options".into(), Value::Array(opts));
        }
        if let Some(Value::String(p)) = entry.get("placeholder") {
            let p = p.trim();
            if !p.is_empty() {
                if chars(p) > MAX_FIELD_TEXT_CHARS {
                    return Vec::new();
                }
                field.insert("placeholder".into(), Value::String(p.to_string()));
            }
        }
        normalized.push(Value::Object(field));
    }
    if toolhost_py::json::dumps(&Value::Array(normalized.clone())).len() > MAX_FORM_SERIALIZED_BYTES {
        return Vec::new();
    }
    normalized
}

/// `str(args.get(key, default))` as DeerFlow formats it.
fn arg_str(args: &Map<String, Value>, key: &str, default: &str) -> String {
    args.get(key).map(py_str).unwrap_or_else(|| default.to_string())
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Bool(true)) => true,
    }
}

/// `_format_clarification_message`: type icon, context then question, then the numbered form
/// fields (which take precedence) or options.
pub fn format_clarification_message(args: &Map<String, Value>, fields: &[Value]) -> String {
    let question = arg_str(args, "question", "");
    let clarification_type = arg_str(args, "clarification_type", "missing_info");
    let icon = match clarification_type.as_str() {
        "ambiguous_requirement" => "🤔",
        "approach_choice" => "🔀",
        "risk_confirmation" => "⚠️",
        "suggestion" => "💡",
        _ => "❓",
    };
    let mut parts: Vec<String> = Vec::new();
    if truthy(args.get("context")) {
        parts.push(format!("{icon} {}", arg_str(args, "context", "")));
        parts.push(format!("\n{question}"));
    } else {
        parts.push(format!("{icon} {question}"));
    }
    let options = normalize_options(args.get("options"));
    if !fields.is_empty() {
        parts.push(String::new());
        for (i, field) in fields.iter().enumerate() {
            let mut line = format!("  {}. {}", i + 1, field["label"].as_str().unwrap_or_default());
            if field["required"].as_bool().unwrap_or(false) {
                line.push_str(" (required)");
            }
            if let Some(opts) = field.get("options").and_then(Value::as_array).filter(|o| !o.is_empty()) {
                let labels: Vec<&str> = opts.iter().filter_map(|o| o["label"].as_str()).collect();
                line.push_str(&format!(" — options: {}", labels.join(" / ")));
                if field["type"] == "multi_select" {
                    line.push_str(" (multiple allowed)");
                }
            }
            parts.push(line);
        }
        parts.push(String::new());
        parts.push("Please reply with a value for each field.".to_string());
    } else if !options.is_empty() {
        parts.push(String::new());
        for (i, option) in options.iter().enumerate() {
            parts.push(format!("  {}. {option}", i + 1));
        }
    }
    parts.join("\n")
}

/// `_build_human_input_payload`: version 1 (`free_text` / `choice_with_other`) or version 2
/// (`form`), with option ids `option-N` and the call's ids.
pub fn build_human_input_payload(
    args: &Map<String, Value>,
    tool_call_id: &str,
    request_id: &str,
    fields: &[Value],
) -> Value {
    let options = normalize_options(args.get("options"));
    let (version, input_mode) = if !fields.is_empty() {
        (2, "form")
    } else if !options.is_empty() {
        (1, "choice_with_other")
    } else {
        (1, "free_text")
    };
    let question = if truthy(args.get("question")) { arg_str(args, "question", "") } else { String::new() };
    let mut payload = Map::new();
    payload.insert("version".into(), json!(version));
    payload.insert("kind".into(), json!("human_input_request"));
    payload.insert("source".into(), json!("ask_clarification"));
    payload.insert("request_id".into(), json!(request_id));
    payload.insert("clarification_type".into(), json!(arg_str(args, "clarification_type", "missing_info")));
    payload.insert("question".into(), json!(question));
    payload.insert("input_mode".into(), json!(input_mode));
    if !tool_call_id.is_empty() {
        payload.insert("tool_call_id".into(), json!(tool_call_id));
    }
    if let Some(context) = args.get("context") {
        let value = if context.is_null() { Value::Null } else { Value::String(py_str(context)) };
        payload.insert("context".into(), value);
    }
    if input_mode == "form" {
        payload.insert("fields".into(), Value::Array(fields.to_vec()));
    } else if !options.is_empty() {
        let opts = options
            .iter()
            .enumerate()
            .map(|(i, o)| json!({"id": format!("option-{}", i + 1), "label": o, "value": o}))
            .collect();
        payload.insert("options".into(), Value::Array(opts));
    }
    Value::Object(payload)
}

/// The `ask_clarification` tool. Its own body is DeerFlow's placeholder; the behaviour lives in
/// [`intercept`], which `call` applies too so the tool is right even if the host pipeline did
/// not intercept it first.
pub struct AskClarificationTool {
    spec: ToolSpec,
    disable_clarification: bool,
}

impl AskClarificationTool {
    pub fn new(disable_clarification: bool) -> Self {
        Self { spec: builtin_spec(NAME), disable_clarification }
    }
}

#[async_trait]
impl Tool for AskClarificationTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        intercept(&ctx.tool_call_id, &args, self.disable_clarification).into_outcome()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: Value) -> Clarification {
        intercept("call-9", &args, false)
    }

    /// Cases whose expected output came from running DeerFlow's own middleware methods
    /// (`data/gen_clarification_vectors.py`).
    #[test]
    fn matches_deerflow_middleware_vectors() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/clarification_vectors.json");
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() > 10);
        for case in cases {
            let call_id = case["tool_call_id"].as_str().unwrap();
            let c = intercept(call_id, &case["args"], false);
            let expected = &case["expected"];
            assert_eq!(c.message_id, expected["id"], "{call_id}");
            assert_eq!(c.text, expected["content"], "{call_id}");
            let outcome = c.into_outcome();
            assert_eq!(outcome.structured.as_ref(), Some(&expected["artifact"]), "{call_id}");
            assert_eq!(
                outcome.structured.unwrap().to_string(),
                expected["artifact"].to_string(),
                "{call_id}: key order"
            );
        }
    }

    #[test]
    fn free_text_question() {
        let c = run(json!({"question": "Which file?", "clarification_type": "missing_info"}));
        assert_eq!(c.text, "❓ Which file?");
        assert_eq!(c.message_id, "clarification:call-9");
        assert!(c.end_run);
        assert_eq!(
            c.human_input.unwrap(),
            json!({"version": 1, "kind": "human_input_request", "source": "ask_clarification",
                   "request_id": "clarification:call-9", "clarification_type": "missing_info",
                   "question": "Which file?", "input_mode": "free_text", "tool_call_id": "call-9"})
        );
    }

    #[test]
    fn options_are_cleaned_and_numbered() {
        let c = run(json!({
            "question": "Pick one", "clarification_type": "approach_choice", "context": "Two ways exist",
            "options": "[\" <b>Fast</b> \", \"Safe\", \"\", \"Fast\", 3]"
        }));
        assert_eq!(c.text, "🔀 Two ways exist\n\nPick one\n\n  1. Fast\n  2. Safe\n  3. 3");
        let payload = c.human_input.unwrap();
        assert_eq!(payload["input_mode"], "choice_with_other");
        assert_eq!(payload["context"], "Two ways exist");
        assert_eq!(payload["options"][1], json!({"id": "option-2", "label": "Safe", "value": "Safe"}));
        // A string that is not JSON is one option; a dict is flattened to its leaves.
        assert_eq!(normalize_options(Some(&json!("just one"))), ["just one"]);
        assert_eq!(normalize_options(Some(&json!({"o": [{"v": "a"}, "b", null, true]}))), ["a", "b", "True"]);
    }

    #[test]
    fn form_fields_render_and_take_precedence() {
        let c = run(json!({
            "question": "Deploy settings", "clarification_type": "risk_confirmation", "options": ["ignored"],
            "fields": [
                {"name": "env", "label": "Environment", "type": "select", "options": ["prod", "staging"], "required": "true"},
                {"name": "tags", "type": "multi_select", "options": ["a", "b"]},
                {"name": "note", "type": "weird", "placeholder": "  say why  "},
                {"name": "kind", "type": "select"}
            ]
        }));
        assert_eq!(
            c.text,
            "⚠️ Deploy settings\n\n  1. Environment (required) — options: prod / staging\n  2. tags — options: a / b (multiple allowed)\n  3. note\n  4. kind\n\nPlease reply with a value for each field."
        );
        let payload = c.human_input.unwrap();
        assert_eq!(payload["version"], 2);
        assert_eq!(payload["input_mode"], "form");
        assert!(payload.get("options").is_none());
        assert_eq!(payload["fields"][0]["options"][0], json!({"id": "env-option-1", "label": "prod", "value": "prod"}));
        assert_eq!(
            payload["fields"][2],
            json!({"name": "note", "label": "note", "type": "text", "required": false, "placeholder": "say why"})
        );
        assert_eq!(payload["fields"][3]["type"], "text");
    }

    #[test]
    fn structural_errors_drop_the_whole_form() {
        let long = "x".repeat(201);
        let many: Vec<Value> = (0..17).map(|i| json!({"name": format!("f{i}")})).collect();
        let opts: Vec<String> = (0..25).map(|i| format!("o{i}")).collect();
        let big: Vec<Value> = (0..16).map(|i| json!({"name": format!("f{i}"), "label": "l".repeat(200), "placeholder": "p".repeat(200), "type": "select", "options": ["y".repeat(200), "z".repeat(200)]})).collect();
        for bad in [
            json!(many),
            json!([{"name": "ok"}, "not an object"]),
            json!([{"label": "no name"}]),
            json!([{"name": "  "}]),
            json!([{"name": "constructor"}]),
            json!([{"name": "a"}, {"name": "a"}]),
            json!([{"name": long.clone()}]),
            json!([{"name": "a", "label": long.clone()}]),
            json!([{"name": "a", "placeholder": long.clone()}]),
            json!([{"name": "a", "type": "select", "options": opts}]),
            json!([{"name": "a", "type": "select", "options": [long.clone()]}]),
            json!(big),
            json!("not json"),
            json!({"name": "a"}),
        ] {
            assert!(normalize_fields(Some(&bad)).is_empty(), "{bad}");
        }
        let c = run(
            json!({"question": "Q", "clarification_type": "missing_info", "fields": [{"name": "__proto__"}], "options": ["A"]}),
        );
        assert_eq!(c.human_input.unwrap()["input_mode"], "choice_with_other");
        // Fields may also arrive as a JSON string.
        assert_eq!(normalize_fields(Some(&json!("[{\"name\": \"n\"}]"))).len(), 1);
    }

    #[test]
    fn disabled_clarification_keeps_the_run_going() {
        let c = intercept("c1", &json!({"question": "Sure?", "clarification_type": "risk_confirmation"}), true);
        assert!(!c.end_run);
        assert!(c.human_input.is_none());
        assert!(c.text.starts_with("Clarification is disabled in this context — the human is not present"));
        assert_eq!(c.message_id, "clarification:c1");
    }

    #[test]
    fn siblings_of_a_clarification_are_dropped() {
        assert_eq!(calls_to_keep(&["bash", NAME, "ls", NAME], false), [1, 3]);
        assert_eq!(calls_to_keep(&["bash", NAME], true), [0, 1]);
        assert_eq!(calls_to_keep(&["bash", "ls"], false), [0, 1]);
        assert_eq!(calls_to_keep(&[NAME], false), [0]);
        assert!(calls_to_keep(&[], false).is_empty());
    }

    #[test]
    fn missing_call_id_uses_a_digest() {
        let c = intercept("", &json!({"question": "Q?"}), false);
        assert!(c.message_id.starts_with("clarification:") && c.message_id.len() == "clarification:".len() + 16);
        assert!(c.human_input.unwrap().get("tool_call_id").is_none());
    }

    #[tokio::test]
    async fn tool_call_ends_the_run_with_the_payload() {
        let (_dir, ctx) = crate::testutil::thread();
        let tool = AskClarificationTool::new(false);
        let out = tool.call(&ctx, json!({"question": "Q?", "clarification_type": "suggestion"})).await;
        assert!(out.end_run && !out.is_error());
        assert_eq!(out.text_content(), "💡 Q?");
        assert_eq!(out.structured.unwrap()["human_input"]["request_id"], "clarification:call-1");
    }
}
