//! A component's requests to the MCP client during a call (WIT `toolhost:tool/client`, 0.3.0):
//! checked against the tool's grant (`capabilities.client`), bounded in number and size, then
//! handed to whoever made the call ([`toolhost_core::Client`]). Every refusal is an error text
//! the guest reads, naming the rule; the wait for the answer counts against the call's deadline
//! (the call's future is bounded by it).

use serde_json::Value;
use toolhost_core::{Client, Elicited, Root, SamplingAnswer, SamplingRequest};

use super::capabilities::{ClientGrant, ClientRequest};

/// Where a call's client requests go, and how many it has sent.
pub(super) struct ClientRelay {
    client: Option<Client>,
    grant: ClientGrant,
    sent: u32,
}

/// Requests one call may send, of both kinds together: a tool that asks more is looping.
pub const MAX_REQUESTS_PER_CALL: u32 = 16;
/// Longest elicitation message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 4096;
/// Largest requested schema, in bytes of JSON text.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Largest sampling request (messages and system prompt), in bytes of text.
pub const MAX_SAMPLING_BYTES: usize = 1 << 20;
/// Largest answer handed back to the guest, in bytes (an elicitation's JSON, a sampled text).
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

impl ClientRelay {
    pub fn new(client: Option<Client>, grant: ClientGrant) -> Self {
        Self { client, grant, sent: 0 }
    }

    /// The client, when this request may go to it: granted, a client there, under the count.
    fn admit(&mut self, kind: ClientRequest) -> Result<Client, String> {
        if !self.grant.allows(kind) {
            return Err(format!(
                "{} is not granted: the tool's config must list it in capabilities.client ([elicitation, sampling, roots])",
                kind.name()
            ));
        }
        let Some(client) = self.client.clone() else {
            return Err(format!(
                "no client to ask: {} needs a call made through an MCP client (toolhost serve) or an embedder that \
                 supplies one",
                kind.name()
            ));
        };
        if self.sent >= MAX_REQUESTS_PER_CALL {
            return Err(format!("at most {MAX_REQUESTS_PER_CALL} client requests per call"));
        }
        self.sent += 1;
        Ok(client)
    }

    /// `client.elicit` (`key`: the component's own key, `elicit-as`): `schema` is JSON text of an
    /// object schema.
    pub async fn elicit(&mut self, key: Option<String>, message: String, schema: &str) -> Result<Elicited, String> {
        check_key(key.as_deref())?;
        let schema = check_elicitation(&message, schema)?;
        let client = self.admit(ClientRequest::Elicitation)?;
        let answer = client.elicit_as(key, message, schema).await.map_err(|e| format!("elicitation failed: {e}"))?;
        let size = answer.content.as_ref().map_or(0, |c| c.to_string().len());
        if size > MAX_ANSWER_BYTES {
            return Err(format!("the client's answer is {size} bytes, over the limit of {MAX_ANSWER_BYTES}"));
        }
        Ok(answer)
    }

    /// `client.create-message` (`key`: `create-message-as`).
    pub async fn create_message(
        &mut self,
        key: Option<String>,
        request: SamplingRequest,
    ) -> Result<SamplingAnswer, String> {
        check_key(key.as_deref())?;
        check_sampling(&request)?;
        let client = self.admit(ClientRequest::Sampling)?;
        let mut answer = client.create_message_as(key, request).await.map_err(|e| format!("sampling failed: {e}"))?;
        answer.text.truncate(toolhost_core::floor_char_boundary(&answer.text, MAX_ANSWER_BYTES));
        Ok(answer)
    }

    /// `client.list-roots`: at most [`MAX_ROOTS`], each URI at most 4096 bytes.
    pub async fn list_roots(&mut self, key: Option<String>) -> Result<Vec<Root>, String> {
        check_key(key.as_deref())?;
        let client = self.admit(ClientRequest::Roots)?;
        let roots = client.list_roots(key).await.map_err(|e| format!("roots/list failed: {e}"))?;
        if roots.len() > MAX_ROOTS {
            return Err(format!("the client listed {} roots, over the limit of {MAX_ROOTS}", roots.len()));
        }
        if let Some(r) = roots.iter().find(|r| r.uri.len() > 4096 || r.name.as_ref().is_some_and(|n| n.len() > 4096)) {
            return Err(format!(
                "a root's URI or name is {} bytes, over the limit of 4096",
                r.uri.len().max(r.name.as_ref().map_or(0, String::len))
            ));
        }
        Ok(roots)
    }
}

/// Most roots handed to a component.
pub const MAX_ROOTS: usize = 1000;

/// A component's key for a question: 1-64 characters of `A-Z a-z 0-9 _ - .`.
fn check_key(key: Option<&str>) -> Result<(), String> {
    let Some(key) = key else { return Ok(()) };
    let ok = (1..=64).contains(&key.len())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        let shown: String = key.chars().take(64).collect();
        Err(format!("invalid key '{shown}': use 1-64 characters of A-Z a-z 0-9 _ - ."))
    }
}

/// The message and schema of an elicitation, checked; the schema parsed.
fn check_elicitation(message: &str, schema: &str) -> Result<Value, String> {
    let chars = message.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(format!("the message is {chars} characters, over the limit of {MAX_MESSAGE_CHARS}"));
    }
    if schema.len() > MAX_SCHEMA_BYTES {
        return Err(format!("the requested schema is {} bytes, over the limit of {MAX_SCHEMA_BYTES}", schema.len()));
    }
    let value: Value = serde_json::from_str(schema).map_err(|e| format!("the requested schema is not JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err("the requested schema must be a JSON object".into());
    };
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the requested schema must have \"type\": \"object\"".into());
    }
    match object.get("properties") {
        Some(Value::Object(props)) => {
            // MCP's form mode asks for flat objects: each property a primitive (string, number,
            // integer, boolean) or an enum of them; nested objects are not shown by clients.
            for (name, p) in props {
                let Some(p) = p.as_object() else {
                    return Err(format!("property '{name}' of the requested schema is not a schema object"));
                };
                if p.get("type").and_then(Value::as_str) == Some("object") || p.contains_key("properties") {
                    return Err(format!(
                        "property '{name}' of the requested schema is an object; elicitation asks for flat values \
                         (string, number, integer, boolean, enum)"
                    ));
                }
            }
        }
        Some(_) => return Err("\"properties\" of the requested schema must be an object".into()),
        None => return Err("the requested schema has no \"properties\"".into()),
    }
    Ok(value)
}

fn check_sampling(r: &SamplingRequest) -> Result<(), String> {
    if r.messages.is_empty() {
        return Err("a sampling request needs at least one message".into());
    }
    if r.max_tokens == 0 {
        return Err("max-tokens must be above 0".into());
    }
    let size = r.messages.iter().map(|m| m.text.len()).sum::<usize>() + r.system_prompt.as_ref().map_or(0, String::len);
    if size > MAX_SAMPLING_BYTES {
        return Err(format!("the sampling request is {size} bytes of text, over the limit of {MAX_SAMPLING_BYTES}"));
    }
    if r.temperature.is_some_and(|t| !t.is_finite() || t < 0.0) {
        return Err("temperature must be a finite number, 0 or more".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicitation_schemas_are_checked() {
        let ok = r#"{"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer","default":3}}}"#;
        assert!(check_elicitation("q", ok).is_ok());
        for (schema, why) in [
            ("[1]", "must be a JSON object"),
            ("{", "not JSON"),
            (r#"{"type":"string"}"#, "\"type\": \"object\""),
            (r#"{"type":"object"}"#, "no \"properties\""),
            (r#"{"type":"object","properties":[]}"#, "must be an object"),
            (r#"{"type":"object","properties":{"a":1}}"#, "property 'a'"),
            (r#"{"type":"object","properties":{"a":{"type":"object"}}}"#, "flat values"),
        ] {
            let e = check_elicitation("q", schema).unwrap_err();
            assert!(e.contains(why), "{schema}: {e}");
        }
        let long = "x".repeat(MAX_MESSAGE_CHARS + 1);
        assert!(check_elicitation(&long, ok).unwrap_err().contains("over the limit of 4096"));
        let big = format!(r#"{{"type":"object","properties":{{}},"description":"{}"}}"#, "x".repeat(MAX_SCHEMA_BYTES));
        assert!(check_elicitation("q", &big).unwrap_err().contains("bytes, over the limit"));
    }

    #[test]
    fn requests_need_a_grant_and_a_client_and_stay_under_the_count() {
        let mut relay = ClientRelay::new(None, ClientGrant::default());
        let e = relay.admit(ClientRequest::Elicitation).unwrap_err();
        assert!(e.contains("elicitation is not granted") && e.contains("capabilities.client"), "{e}");
        let mut relay = ClientRelay::new(None, ClientGrant { elicitation: true, sampling: false, roots: false });
        let e = relay.admit(ClientRequest::Elicitation).unwrap_err();
        assert!(e.starts_with("no client to ask"), "{e}");
        assert!(relay.admit(ClientRequest::Sampling).unwrap_err().contains("sampling is not granted"));
        assert!(relay.admit(ClientRequest::Roots).unwrap_err().contains("roots is not granted"));
    }

    #[test]
    fn keys_are_short_and_plain() {
        for ok in [None, Some("user_name"), Some("a"), Some("step-1.v2")] {
            assert!(check_key(ok).is_ok(), "{ok:?}");
        }
        let long = "k".repeat(65);
        for bad in ["", "a b", "ünï", "x/y", &long] {
            assert!(check_key(Some(bad)).unwrap_err().starts_with("invalid key"), "{bad}");
        }
    }
}
