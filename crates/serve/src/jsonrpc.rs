//! Every JSON-RPC message a client sends (a stdio line, an HTTP body) is screened here before
//! rmcp sees it, so that input rmcp would drop without a word or misfile gets the error the
//! JSON-RPC spec asks for: -32700 for what cannot be parsed, -32600 for what is not a request,
//! -32602 for a method we serve with params that do not fit it. Replies carry the request's `id`
//! whenever one can be read, even out of input that does not parse as a whole.

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{json, Value};

/// JSON-RPC: the message is not valid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the message is not a request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: the request's params do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;

/// An error text echoes at most this many bytes of what the client sent (a 5 MiB argument
/// must not come back whole).
pub const ECHO_MAX_BYTES: usize = 200;

/// The largest message accepted on either transport: rmcp's stdio default, so what is accepted
/// over HTTP is accepted over stdio.
pub const MAX_MESSAGE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// What to do with one incoming message.
#[derive(Debug)]
pub enum Screened {
    /// Hand it to rmcp.
    Pass(Box<ClientJsonRpcMessage>),
    /// Answer it with this JSON-RPC error response; rmcp never sees it.
    Reply(ErrorReply),
    /// A notification or response that is not valid: JSON-RPC has no reply for it.
    Drop(ErrorReply),
}

/// A JSON-RPC error response.
/// A JSON-RPC error reply to a message rmcp never sees.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorReply {
    /// The request's id, when one could be read (else null).
    pub id: Value,
    /// The JSON-RPC error code.
    pub code: i64,
    /// What was wrong.
    pub message: String,
}

impl ErrorReply {
    fn new(id: Option<Value>, code: i64, message: impl Into<String>) -> Self {
        Self { id: id.unwrap_or(Value::Null), code, message: message.into() }
    }

    /// The reply as a JSON-RPC message.
    pub fn to_json(&self) -> Value {
        json!({"jsonrpc": "2.0", "id": self.id, "error": {"code": self.code, "message": self.message}})
    }

    /// The response as one line of bytes, without the newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.to_json().to_string().into_bytes()
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), saying how much was left out.
pub fn cap_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let end = toolhost_core::floor_char_boundary(text, max);
    format!("{}… ({} more bytes)", &text[..end], text.len() - end)
}

/// Methods the 2026-07-28 revision removed: a request for one under that protocol is answered
/// `-32601`, over HTTP (the `MCP-Protocol-Version` header names the protocol) as over stdio (the
/// request's `_meta["io.modelcontextprotocol/protocolVersion"]` does).
const REMOVED_IN_2026: [&str; 5] =
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// The refusal of a request for a method protocol `version` does not have; `None` when the
/// version is unknown or has `initialize`, or the body is not such a request. `version`
/// `None`: the request's own `_meta` names it (stdio).
pub fn removed_method(version: Option<&str>, body: &[u8]) -> Option<ErrorReply> {
    #[derive(serde::Deserialize)]
    struct Head {
        method: String,
        id: Option<Value>,
        params: Option<Value>,
    }
    let head: Head = serde_json::from_slice(body).ok()?;
    let method = REMOVED_IN_2026.into_iter().find(|m| *m == head.method)?;
    let version = match version {
        Some(v) => v.to_string(),
        None => {
            head.params.as_ref()?.get("_meta")?.get("io.modelcontextprotocol/protocolVersion")?.as_str()?.to_string()
        }
    };
    let known = rmcp::model::ProtocolVersion::KNOWN_VERSIONS.iter().find(|v| v.as_str() == version)?;
    if known.has_initialize() {
        return None;
    }
    Some(ErrorReply {
        id: head.id.unwrap_or(Value::Null),
        code: -32601,
        message: format!("Method not found: {method} is not part of protocol {version}"),
    })
}

/// Screen one message (a whole stdio line without its newline, or an HTTP body).
pub fn screen(raw: &[u8]) -> Screened {
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    // The common case costs one parse: a well-formed message that rmcp files correctly.
    if let Ok(msg) = serde_json::from_slice::<ClientJsonRpcMessage>(raw) {
        match &msg {
            JsonRpcMessage::Request(r) => match &r.request {
                ClientRequest::CustomRequest(c) if served_method(&c.method) => {}
                _ => return Screened::Pass(Box::new(msg)),
            },
            _ => return Screened::Pass(Box::new(msg)),
        }
    }
    let value: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            // Too deep, a lone surrogate, not JSON at all: the id may still be readable, and a
            // client waiting for it is better off with an answer than with silence.
            return Screened::Reply(ErrorReply::new(recover_id(raw), PARSE_ERROR, format!("Parse error: {e}")));
        }
    };
    let Value::Object(obj) = &value else {
        let what = if value.is_array() { "a batch (JSON array); batches are not supported" } else { "not an object" };
        return Screened::Reply(ErrorReply::new(
            None,
            INVALID_REQUEST,
            format!("Invalid Request: the message is {what}"),
        ));
    };
    let id = obj.get("id").filter(|id| valid_id(id)).cloned();
    let Some(method) = obj.get("method") else {
        // A response (to an elicitation, say) that rmcp cannot read: nothing to answer.
        return Screened::Drop(ErrorReply::new(id, INVALID_REQUEST, "Invalid Request: not a valid JSON-RPC response"));
    };
    let is_request = obj.contains_key("id");
    let invalid = |message: String| {
        let reply = ErrorReply::new(id.clone(), INVALID_REQUEST, format!("Invalid Request: {message}"));
        if is_request {
            Screened::Reply(reply)
        } else {
            Screened::Drop(reply)
        }
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("`jsonrpc` must be \"2.0\"".into());
    }
    let Some(method) = method.as_str() else {
        return invalid("`method` must be a string".into());
    };
    if is_request && id.is_none() {
        return invalid("`id` must be a string or an integer".into());
    }
    if let Some(problem) = params_problem(method, obj.get("params")) {
        let message = format!("Invalid params for {}: {problem}", cap_text(method, ECHO_MAX_BYTES));
        let reply = ErrorReply::new(id, INVALID_PARAMS, message);
        return if is_request { Screened::Reply(reply) } else { Screened::Drop(reply) };
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value) {
        Ok(msg) => Screened::Pass(Box::new(msg)),
        Err(e) => invalid(cap_text(&e.to_string(), ECHO_MAX_BYTES)),
    }
}

/// The methods this server answers, whose params rmcp types: with params that do not fit,
/// rmcp would take the request for an unknown method (-32601).
fn served_method(method: &str) -> bool {
    matches!(method, "initialize" | "ping" | "tools/list" | "tools/call")
}

fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// Why `params` do not fit `method`, for the methods this server answers.
fn params_problem(method: &str, params: Option<&Value>) -> Option<String> {
    let object = |p: Option<&Value>| match p {
        None | Some(Value::Object(_)) => None,
        Some(other) => Some(format!("`params` must be an object, got {}", kind(other))),
    };
    match method {
        "tools/call" => {
            let Some(params) = params else {
                return Some("`params` is missing; it must name the tool (`name`)".into());
            };
            let Value::Object(p) = params else {
                return object(Some(params));
            };
            match p.get("name") {
                None => return Some("`name` (the tool to call) is missing".into()),
                Some(Value::String(_)) => {}
                Some(other) => return Some(format!("`name` must be a string, got {}", kind(other))),
            }
            match p.get("arguments") {
                None | Some(Value::Null) | Some(Value::Object(_)) => {}
                Some(other) => return Some(format!("`arguments` must be an object, got {}", kind(other))),
            }
            meta_problem(p.get("_meta"))
                .or_else(|| typed_problem::<rmcp::model::CallToolRequestParams>(params, "tools/call"))
        }
        "tools/list" => object(params).or_else(|| {
            let p = params?;
            match p.get("cursor") {
                None | Some(Value::Null) | Some(Value::String(_)) => {}
                Some(other) => return Some(format!("`cursor` must be a string, got {}", kind(other))),
            }
            meta_problem(p.get("_meta"))
                .or_else(|| typed_problem::<rmcp::model::PaginatedRequestParams>(p, "tools/list"))
        }),
        "initialize" => match params {
            None => Some("`params` is missing".into()),
            Some(p @ Value::Object(_)) => typed_problem::<rmcp::model::InitializeRequestParams>(p, "initialize"),
            Some(other) => object(Some(other)),
        },
        "ping" => object(params),
        _ => None,
    }
}

fn meta_problem(meta: Option<&Value>) -> Option<String> {
    match meta {
        None | Some(Value::Null) | Some(Value::Object(_)) => None,
        Some(other) => Some(format!("`_meta` must be an object, got {}", kind(other))),
    }
}

/// rmcp's own reading of the params, as a last check; its message can quote the input, so it
/// is capped.
fn typed_problem<T: serde::de::DeserializeOwned>(params: &Value, method: &str) -> Option<String> {
    match T::deserialize(params) {
        Ok(_) => None,
        Err(e) => Some(format!("{method} params: {}", cap_text(&e.to_string(), ECHO_MAX_BYTES))),
    }
}

/// What a JSON value is, as an error names it ("a number").
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The `id` of a top-level JSON object read without parsing the whole text: input nested too
/// deep to parse, or with a string no parser accepts, still says which request it was.
fn recover_id(raw: &[u8]) -> Option<Value> {
    let start = raw.iter().position(|b| !b.is_ascii_whitespace())?;
    if raw[start] != b'{' {
        return None;
    }
    let mut depth = 0usize;
    let mut i = start;
    while i < raw.len() {
        match raw[i] {
            b'"' => {
                let end = string_end(raw, i)?;
                if depth == 1 && &raw[i + 1..end - 1] == b"id" {
                    let colon = skip_ws(raw, end);
                    if raw.get(colon) == Some(&b':') {
                        return scalar_id(raw, skip_ws(raw, colon + 1));
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index just past the string starting at `raw[start] == b'"'`.
fn string_end(raw: &[u8], start: usize) -> Option<usize> {
    let mut j = start + 1;
    while j < raw.len() {
        match raw[j] {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
    None
}

fn skip_ws(raw: &[u8], mut i: usize) -> usize {
    while raw.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

fn scalar_id(raw: &[u8], at: usize) -> Option<Value> {
    let end = match raw.get(at)? {
        b'"' => string_end(raw, at)?,
        b'-' | b'0'..=b'9' => {
            at + raw[at..].iter().take_while(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')).count()
        }
        _ => return None,
    };
    serde_json::from_slice::<Value>(&raw[at..end]).ok().filter(valid_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(raw: &str) -> ErrorReply {
        match screen(raw.as_bytes()) {
            Screened::Reply(r) => r,
            other => panic!("{raw}: expected a reply, got {other:?}"),
        }
    }

    #[test]
    fn well_formed_messages_pass() {
        for ok in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello","arguments":{"name":"x"}}}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"hello"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method","params":{"a":[1]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
        ] {
            assert!(matches!(screen(ok.as_bytes()), Screened::Pass(_)), "{ok}");
        }
    }

    #[test]
    fn bad_tools_call_params_are_invalid_params_with_the_id() {
        for (raw, needle) in [
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#, "`params` is missing"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#, "`name`"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":5}}"#, "`name` must be a string"),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"hello","arguments":"x"}}"#,
                "`arguments` must be an object, got a string",
            ),
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":[1]}"#, "`params` must be an object"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":5}"#, "`params` must be an object"),
            (r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#, "initialize params"),
        ] {
            let r = reply(raw);
            assert_eq!((r.code, &r.id), (INVALID_PARAMS, &json!(7)), "{raw}: {r:?}");
            assert!(r.message.contains(needle), "{raw}: {}", r.message);
        }
    }

    #[test]
    fn unparsable_input_is_a_parse_error_with_whatever_id_can_be_read() {
        let r = reply("{not json");
        assert_eq!((r.code, r.id), (PARSE_ERROR, Value::Null));
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let r = reply(&deep);
        assert_eq!((r.code, r.id), (PARSE_ERROR, json!(41)), "{}", r.message);
        let r = reply(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a\ud800"},"id":"s-1"}"#);
        assert_eq!((r.code, r.id), (PARSE_ERROR, json!("s-1")), "{}", r.message);
        // An id that is itself unreadable, or one nested below the top level, is not taken.
        assert_eq!(reply(r#"{"x":{"id":5},"y":[1"#).id, Value::Null);
        assert_eq!(reply(r#"{"id":1.5,"y":[1"#).id, Value::Null);
        assert_eq!(reply(r#"{"id":"a\"b","y":[1"#).id, json!("a\"b"));
    }

    #[test]
    fn what_is_not_a_request_is_an_invalid_request() {
        for (raw, id) in [
            ("[]", Value::Null),
            ("5", Value::Null),
            (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Value::Null),
            (r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#, json!(9)),
            (r#"{"jsonrpc":"2.0","id":9,"method":7}"#, json!(9)),
            (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, Value::Null),
            (r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#, Value::Null),
        ] {
            let r = reply(raw);
            assert_eq!((r.code, &r.id), (INVALID_REQUEST, &id), "{raw}: {r:?}");
        }
        // Notifications and responses get no reply, whatever is wrong with them.
        for raw in [
            r#"{"jsonrpc":"1.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":5}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":5,"error":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
        ] {
            assert!(!matches!(screen(raw.as_bytes()), Screened::Reply(_)), "{raw}");
        }
    }

    #[test]
    fn echoed_input_is_capped() {
        let huge = "x".repeat(5 << 20);
        let raw = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{huge}","arguments":{{}},"task":"{huge}"}}}}"#
        );
        if let Screened::Reply(r) = screen(raw.as_bytes()) {
            assert!(r.message.len() < 1000, "{}", r.message.len());
        }
        let raw =
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":"{huge}"}}}}"#);
        let r = reply(&raw);
        assert!(r.message.len() < 1000 && r.code == INVALID_PARAMS, "{}", r.message.len());
        assert_eq!(cap_text("héllo", 2), "h… (5 more bytes)");
        assert_eq!(cap_text("abc", 3), "abc");
    }
}
