//! The subagent's chat model: a `models:` entry of config.yaml read as DeerFlow's
//! `langchain_openai:ChatOpenAI` reads it (`model`, `base_url` / `openai_api_base` / `api_base`,
//! `api_key` with `$VAR` already expanded, `max_tokens`, `temperature`, `request_timeout`), and
//! one OpenAI chat-completions call: function tools in, `tool_calls`, `finish_reason` and `usage`
//! out, streamed (SSE) or not.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::status::TokenUsage;

/// A model reply larger than this is refused: a hostile or broken endpoint cannot make the host
/// buffer without bound.
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

/// The `use:` classes whose endpoint speaks OpenAI chat completions.
const OPENAI_COMPATIBLE: [&str; 4] = [
    "langchain_openai:ChatOpenAI",
    "deerflow.models.patched_deepseek:PatchedChatDeepSeek",
    "langchain_deepseek:ChatDeepSeek",
    "deerflow.models.patched_openai:PatchedChatOpenAI",
];

/// One configured model as the subagent loop drives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatModel {
    /// The config name (`models[].name`).
    pub name: String,
    /// The provider's model id (`model`).
    pub model: String,
    /// Without the trailing `/chat/completions`.
    pub base_url: String,
    pub api_key: Option<String>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub request_timeout: Option<Duration>,
    pub streaming: bool,
}

impl ChatModel {
    /// Read a `models:` entry. `env` looks up `OPENAI_API_KEY` / `OPENAI_BASE_URL`, which
    /// ChatOpenAI falls back to when the entry has no key or base URL.
    pub fn from_entry(entry: &Map<String, Value>, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, String> {
        let s = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string).filter(|v| !v.is_empty());
        let name = s("name").unwrap_or_default();
        let use_ = s("use").unwrap_or_default();
        if !OPENAI_COMPATIBLE.contains(&use_.as_str()) && !use_.ends_with(":ChatOpenAI") {
            return Err(format!(
                "model '{name}' uses '{use_}', which is not an OpenAI-compatible chat model; toolhost's subagent loop speaks OpenAI chat completions only (use: langchain_openai:ChatOpenAI with base_url)"
            ));
        }
        if entry.get("use_responses_api").and_then(Value::as_bool) == Some(true) {
            return Err(format!("model '{name}' sets use_responses_api: the OpenAI Responses API is not supported by toolhost's subagent loop"));
        }
        let model =
            s("model").or_else(|| s("model_name")).ok_or_else(|| format!("model '{name}' has no 'model' field"))?;
        let is_openai = use_ == "langchain_openai:ChatOpenAI";
        let base_url = s("base_url")
            .or_else(|| s("openai_api_base"))
            .or_else(|| s("api_base"))
            .or_else(|| if is_openai { env("OPENAI_BASE_URL").or_else(|| env("OPENAI_API_BASE")) } else { None })
            .or_else(|| is_openai.then(|| "https://api.openai.com/v1".to_string()))
            .ok_or_else(|| format!("model '{name}' has no 'base_url'"))?;
        let api_key =
            s("api_key")
                .or_else(|| s("openai_api_key"))
                .or_else(|| if is_openai { env("OPENAI_API_KEY") } else { None });
        let num = |k: &str| entry.get(k).and_then(Value::as_f64);
        let timeout = num("request_timeout").or_else(|| num("timeout")).filter(|t| t.is_finite() && *t > 0.0);
        Ok(Self {
            name,
            model,
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
            max_tokens: entry.get("max_tokens").and_then(Value::as_u64),
            temperature: num("temperature"),
            request_timeout: timeout.map(|t| Duration::from_secs_f64(t.min(86_400.0))),
            streaming: entry.get("streaming").and_then(Value::as_bool).unwrap_or(false),
        })
    }
}

/// A tool call the model asked for; `arguments` is the raw JSON text it sent.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// One assistant turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssistantTurn {
    pub content: String,
    pub tool_calls: Vec<ToolCallRequest>,
    pub finish_reason: Option<String>,
    pub usage: Option<TokenUsage>,
}

impl AssistantTurn {
    /// The turn as a chat message to send back.
    pub fn to_message(&self) -> Value {
        let mut m = json!({"role": "assistant", "content": self.content});
        if !self.tool_calls.is_empty() {
            m["tool_calls"] = Value::Array(
                self.tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                    .collect(),
            );
        }
        m
    }
}

/// A failed model call; the text is what `Task failed. Error: …` shows.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

/// An OpenAI chat-completions client for one model.
#[derive(Clone)]
pub struct ChatClient {
    http: reqwest::Client,
    model: ChatModel,
}

impl ChatClient {
    /// A client for `model`. The HTTP client (its connection pool and TLS roots, whose loading
    /// costs milliseconds) is built once per process and shared; the model's `request_timeout`
    /// is applied to each request.
    pub fn new(model: ChatModel) -> Result<Self, ModelError> {
        static SHARED: std::sync::OnceLock<Result<reqwest::Client, String>> = std::sync::OnceLock::new();
        let http = SHARED
            .get_or_init(|| {
                reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))
            })
            .clone()
            .map_err(ModelError)?;
        Ok(Self { http, model })
    }

    pub fn model(&self) -> &ChatModel {
        &self.model
    }

    /// One chat-completions call with `messages` and the function `tools`.
    pub async fn complete(&self, messages: &[Value], tools: &[Value]) -> Result<AssistantTurn, ModelError> {
        let m = &self.model;
        let mut body = json!({"model": m.model, "messages": messages});
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools.to_vec());
        }
        if let Some(t) = m.max_tokens {
            body["max_tokens"] = json!(t);
        }
        if let Some(t) = m.temperature {
            body["temperature"] = json!(t);
        }
        if m.streaming {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let url = format!("{}/chat/completions", m.base_url);
        let mut req = self.http.post(&url).json(&body);
        if let Some(t) = m.request_timeout {
            req = req.timeout(t);
        }
        if let Some(k) = &m.api_key {
            req = req.bearer_auth(k);
        }
        let mut resp = req.send().await.map_err(|e| ModelError(format!("Connection error: {}", error_chain(&e))))?;
        let status = resp.status();
        let sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| ModelError(format!("error reading the model response: {}", error_chain(&e))))?
        {
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(ModelError(format!("the model response exceeds {MAX_RESPONSE_BYTES} bytes; refused")));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            // openai-python's APIStatusError text.
            let excerpt: String = text.chars().take(2000).collect();
            return Err(ModelError(format!("Error code: {} - {excerpt}", status.as_u16())));
        }
        if sse {
            parse_sse(&text)
        } else {
            let v: Value =
                serde_json::from_str(&text).map_err(|e| ModelError(format!("the model response is not JSON: {e}")))?;
            parse_completion(&v)
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

fn usage_of(v: &Value) -> Option<TokenUsage> {
    let u = v.get("usage").filter(|u| u.is_object())?;
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let input = n("prompt_tokens")?;
    let output = n("completion_tokens").unwrap_or(0);
    Some(TokenUsage {
        input_tokens: input,
        output_tokens: output,
        total_tokens: n("total_tokens").unwrap_or(input + output),
    })
}

/// `message_content_to_text`: a string, or the text parts of a content list.
fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| {
                p.as_str().map(str::to_string).or_else(|| p.get("text").and_then(Value::as_str).map(str::to_string))
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// A non-streamed `chat.completion` object.
pub fn parse_completion(v: &Value) -> Result<AssistantTurn, ModelError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(ModelError(format!("the model returned an error: {err}")));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ModelError("the model response has no choices".into()))?;
    let msg = choice.get("message").ok_or_else(|| ModelError("the model response has no message".into()))?;
    let mut tool_calls = Vec::new();
    for (i, tc) in msg.get("tool_calls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let f = tc.get("function");
        tool_calls.push(ToolCallRequest {
            id: tc.get("id").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| format!("call_{i}")),
            name: f.and_then(|f| f.get("name")).and_then(Value::as_str).unwrap_or_default().to_string(),
            arguments: match f.and_then(|f| f.get("arguments")) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        });
    }
    Ok(AssistantTurn {
        content: content_text(msg.get("content")),
        tool_calls,
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_string),
        usage: usage_of(v),
    })
}

/// A streamed reply: `data:` lines of `chat.completion.chunk` objects, deltas joined.
pub fn parse_sse(text: &str) -> Result<AssistantTurn, ModelError> {
    let mut turn = AssistantTurn::default();
    let mut calls: Vec<ToolCallRequest> = Vec::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim) else { continue };
        if data == "[DONE]" {
            break;
        }
        let v: Value =
            serde_json::from_str(data).map_err(|e| ModelError(format!("a streamed chunk is not JSON: {e}")))?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            return Err(ModelError(format!("the model returned an error: {err}")));
        }
        if let Some(u) = usage_of(&v) {
            turn.usage = Some(u);
        }
        let Some(choice) = v.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else { continue };
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            turn.finish_reason = Some(r.to_string());
        }
        let Some(delta) = choice.get("delta") else { continue };
        turn.content.push_str(&content_text(delta.get("content")));
        for tc in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = tc.get("index").and_then(Value::as_u64).unwrap_or(calls.len() as u64) as usize;
            if index > 1024 {
                return Err(ModelError("a streamed tool call index is out of range".into()));
            }
            while calls.len() <= index {
                calls.push(ToolCallRequest {
                    id: format!("call_{}", calls.len()),
                    name: String::new(),
                    arguments: String::new(),
                });
            }
            let call = &mut calls[index];
            if let Some(id) = tc.get("id").and_then(Value::as_str) {
                call.id = id.to_string();
            }
            if let Some(f) = tc.get("function") {
                if let Some(n) = f.get("name").and_then(Value::as_str) {
                    call.name.push_str(n);
                }
                if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                    call.arguments.push_str(a);
                }
            }
        }
    }
    turn.tool_calls = calls;
    Ok(turn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn reads_deerflow_model_entries() {
        let none = |_: &str| None;
        let m = ChatModel::from_entry(
            &entry(json!({"name": "gpt", "use": "langchain_openai:ChatOpenAI", "model": "gpt-4", "api_key": "k", "base_url": "http://127.0.0.1:9/v1/", "max_tokens": 10, "request_timeout": 5.0})),
            &none,
        )
        .unwrap();
        assert_eq!(
            (m.base_url.as_str(), m.api_key.as_deref(), m.max_tokens),
            ("http://127.0.0.1:9/v1", Some("k"), Some(10))
        );
        let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "envkey".to_string());
        let m = ChatModel::from_entry(
            &entry(json!({"name": "o", "use": "langchain_openai:ChatOpenAI", "model": "gpt-4"})),
            &env,
        )
        .unwrap();
        assert_eq!((m.base_url.as_str(), m.api_key.as_deref()), ("https://api.openai.com/v1", Some("envkey")));
        let e = ChatModel::from_entry(
            &entry(json!({"name": "c", "use": "langchain_anthropic:ChatAnthropic", "model": "x"})),
            &none,
        )
        .unwrap_err();
        assert!(e.contains("not an OpenAI-compatible chat model"), "{e}");
        let e = ChatModel::from_entry(
            &entry(json!({"name": "d", "use": "langchain_deepseek:ChatDeepSeek", "model": "x"})),
            &none,
        )
        .unwrap_err();
        assert_eq!(e, "model 'd' has no 'base_url'");
    }

    #[test]
    fn parses_replies() {
        let t = parse_completion(&json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"/x\"}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}})).unwrap();
        assert_eq!(t.tool_calls[0].name, "read_file");
        assert_eq!(t.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(t.usage.unwrap().total_tokens, 7);
        let s = "data: {\"choices\":[{\"delta\":{\"content\":\"He\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"llo\",\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"ls\",\"arguments\":\"{\\\"pa\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"th\\\": \\\"/\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n";
        let t = parse_sse(s).unwrap();
        assert_eq!(t.content, "Hello");
        assert_eq!(
            t.tool_calls,
            vec![ToolCallRequest { id: "a".into(), name: "ls".into(), arguments: "{\"path\": \"/\"}".into() }]
        );
        assert_eq!(t.usage.unwrap().total_tokens, 3);
        assert!(parse_completion(&json!({"choices": []})).is_err());
    }
}
