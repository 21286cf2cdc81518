//! Multi round-trip requests (SEP-2322, "MRTR"), how a `tools/call` of the 2026-07-28 revision
//! asks the client: that revision lets a server send no requests of its own, so a component's
//! question (WIT `client.elicit`, `client.create-message`) cannot go out on a session. Instead:
//!
//! 1. The call runs with the answers the client has given so far. A question with an answer
//!    gets it; a question without one is noted, and the component reads an error saying the
//!    answer comes in the next round (it may go on and ask more: they all go out together).
//! 2. When a round leaves questions unanswered, what the call returned is dropped and the client
//!    gets an `InputRequiredResult`: the questions as `inputRequests`, and a `requestState`
//!    carrying the answers used so far.
//! 3. The client answers (`inputResponses`) and sends the call again with the state; the call
//!    runs again from the start, and so on until a round asks nothing new.
//!
//! A question's key is its kind and a digest of the request (`elicitation-3fa1…`), so an answer
//! always goes to the question it was given for, whatever order a later round asks in.
//!
//! The state is sealed (HMAC-SHA256, rmcp's [`RequestStateCodec`]) and bound to the thread, the
//! tool and its arguments, and expires: a state that was altered, that belongs to another call,
//! or that is older than [`STATE_TTL`] is refused with `-32602`. The key comes from
//! [`STATE_KEY_ENV`] (give every replica the same one), else it is drawn at start.
//!
//! A component runs again each round, so what it does before its questions happens once per
//! round: ask first, then act.
//!
//! A call running as an MCP task asks the same way, whatever the protocol: its task waits in
//! `input_required` with the questions, `tasks/update` brings the answers, and the call runs
//! again with them (the task keeps the answers itself; no state goes to the client).

// Sampling is deprecated by the 2026-07-28 revision (SEP-2577) but still one of the three input
// requests SEP-2322 allows; rmcp marks its types.
#![allow(deprecated)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    ClientCapabilities, CreateMessageRequest, ElicitRequest, InputRequest, InputRequests, InputResponses,
    ListRootsRequest, ListRootsResult, RequestStateCodec, SealOptions,
};
use rmcp::ErrorData as McpError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolhost_core::{ClientRequests, Elicited, Root, SamplingAnswer, SamplingRequest};

use super::client::{elicit_params, elicited, not_offered, roots_of, sampled, sampling_params};

/// The environment variable holding the key that seals `requestState` (at least 32 bytes).
/// Replicas behind one load balancer need the same key, as a client's next round may reach
/// another replica.
pub const STATE_KEY_ENV: &str = "TOOLHOST_REQUEST_STATE_KEY";
/// How long a client has to answer a round.
pub const STATE_TTL: Duration = Duration::from_secs(15 * 60);
/// Rounds one call may take: a component that asks something new every time is looping.
pub const MAX_ROUNDS: u32 = 10;
/// Largest sealed state: the answers a call carries from round to round.
pub const MAX_STATE_BYTES: usize = 512 * 1024;

/// Seals and opens `requestState`.
pub struct StateSeal {
    codec: RequestStateCodec,
}

/// What `requestState` carries.
#[derive(Serialize, Deserialize, Default)]
struct Carried {
    /// Rounds so far.
    round: u32,
    /// The answers the call used, by key.
    answers: BTreeMap<String, Value>,
}

impl StateSeal {
    /// A seal with `key` (the value of [`STATE_KEY_ENV`] the front end read), else a fresh
    /// random one.
    pub fn from_key(key: Option<String>) -> Result<Self, String> {
        match key {
            Some(key) => Self::with_key(key.into_bytes()),
            None => {
                use ring::rand::SecureRandom as _;
                let mut key = [0u8; 32];
                ring::rand::SystemRandom::new()
                    .fill(&mut key)
                    .map_err(|_| "the system random number generator failed".to_string())?;
                Self::with_key(key.to_vec())
            }
        }
    }

    /// A seal with `key`; refused below [`RequestStateCodec::MIN_KEY_LENGTH`] bytes.
    pub fn with_key(key: Vec<u8>) -> Result<Self, String> {
        let codec = RequestStateCodec::try_new(key).map_err(|e| format!("{STATE_KEY_ENV}: {e}"))?;
        Ok(Self { codec })
    }

    fn seal(&self, carried: &Carried, call: &[u8]) -> Result<String, String> {
        let payload = serde_json::to_vec(carried).map_err(|e| e.to_string())?;
        let sealed = self.codec.seal_with(&payload, &SealOptions::new().associated_data(call).ttl(STATE_TTL));
        if sealed.len() > MAX_STATE_BYTES {
            return Err(format!(
                "the answers this call gathered come to {} bytes of requestState, over the limit of {MAX_STATE_BYTES}",
                sealed.len()
            ));
        }
        Ok(sealed)
    }

    fn open(&self, state: &str, call: &[u8]) -> Result<Carried, McpError> {
        let refused = |why: String| {
            McpError::invalid_params(
                format!("requestState is refused: {why} (it must come unchanged from this call's last round)"),
                None,
            )
        };
        if state.len() > MAX_STATE_BYTES {
            return Err(refused(format!("{} bytes, over the limit of {MAX_STATE_BYTES}", state.len())));
        }
        let payload = self.codec.open_with(state, call).map_err(|e| refused(e.to_string()))?;
        serde_json::from_slice(&payload).map_err(|e| refused(format!("unreadable: {e}")))
    }
}

/// What binds a state to one call: the thread the client named (if it named one), the tool and
/// its arguments.
pub fn call_binding(thread: Option<&str>, tool: &str, args: &Value) -> Vec<u8> {
    let mut h = Sha256::new();
    let thread = thread.map_or(Vec::new(), |t| [b"thread:", t.as_bytes()].concat());
    for part in [&thread[..], tool.as_bytes(), args.to_string().as_bytes()] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.finalize().to_vec()
}

/// One round of a call: the answers it may use and the questions it leaves open.
pub struct Round {
    number: u32,
    answers: BTreeMap<String, Value>,
    capabilities: ClientCapabilities,
    asked: Mutex<Asked>,
}

#[derive(Default)]
struct Asked {
    /// Questions without an answer yet, by key.
    open: InputRequests,
    /// Keys whose answers this round used.
    used: BTreeSet<String>,
}

/// What a round ended with.
pub enum RoundEnd {
    /// Every question had its answer: the call's own result stands.
    Complete,
    /// Questions are open: they and the sealed state go to the client.
    InputRequired {
        /// The open questions, by key.
        requests: InputRequests,
        /// The sealed `requestState` for the next round.
        state: String,
    },
    /// The call cannot go on this way (too many rounds, too much state): the error goes to the
    /// client as the tool's error.
    Failed(String),
}

impl Round {
    /// The round a request starts: its `requestState` opened (the answers of earlier rounds) and
    /// its `inputResponses` added. Every response must be a JSON object (an elicitation, sampling
    /// or roots result); keys no question has are ignored.
    pub fn start(
        seal: &StateSeal,
        call: &[u8],
        state: Option<&str>,
        responses: Option<InputResponses>,
        capabilities: ClientCapabilities,
    ) -> Result<Arc<Self>, McpError> {
        let carried = match state {
            Some(s) => seal.open(s, call)?,
            None => Carried::default(),
        };
        let mut answers = carried.answers;
        answers.extend(checked_responses(responses.unwrap_or_default())?);
        Ok(Arc::new(Self { number: carried.round + 1, answers, capabilities, asked: Mutex::default() }))
    }

    /// A round with these answers and no state (a task keeps its answers itself).
    pub fn with_answers(answers: BTreeMap<String, Value>, capabilities: ClientCapabilities) -> Arc<Self> {
        Arc::new(Self { number: 1, answers, capabilities, asked: Mutex::default() })
    }

    /// The questions this round left open, and the keys of the answers it used.
    pub fn take_asked(&self) -> (InputRequests, BTreeSet<String>) {
        let asked = std::mem::take(&mut *self.asked.lock().unwrap_or_else(|p| p.into_inner()));
        (asked.open, asked.used)
    }

    /// The client the call's component asks during this round.
    pub fn client(self: &Arc<Self>) -> toolhost_core::Client {
        toolhost_core::Client::new(RoundClient(self.clone()))
    }

    /// How the round ended; the state carries the answers it used.
    pub fn end(&self, seal: &StateSeal, call: &[u8]) -> RoundEnd {
        let (open, used) = self.take_asked();
        if open.is_empty() {
            return RoundEnd::Complete;
        }
        if self.number >= MAX_ROUNDS {
            return RoundEnd::Failed(format!(
                "the tool asked the client for input in {MAX_ROUNDS} rounds without finishing; it asks something new \
                 each time it runs"
            ));
        }
        let answers = used.iter().filter_map(|k| Some((k.clone(), self.answers.get(k)?.clone()))).collect();
        match seal.seal(&Carried { round: self.number, answers }, call) {
            Ok(state) => RoundEnd::InputRequired { requests: open, state },
            Err(e) => RoundEnd::Failed(e),
        }
    }

    /// The answer to `request` when the client gave one; otherwise the question is noted. Its
    /// key is the component's (`key`), else the kind and a digest of the request.
    fn answer(&self, kind: &str, key: Option<String>, request: InputRequest) -> Result<(String, Value), String> {
        let key = match key {
            Some(key) => key,
            None => {
                let json =
                    serde_json::to_vec(&request).map_err(|e| format!("cannot encode the {kind} request: {e}"))?;
                format!("{kind}-{}", &hex::encode(Sha256::digest(&json))[..16])
            }
        };
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        match self.answers.get(&key) {
            Some(answer) => {
                asked.used.insert(key.clone());
                Ok((key, answer.clone()))
            }
            None => {
                asked.open.insert(key, request);
                Err(format!(
                    "no answer yet: the {kind} request goes to the client when this round ends (protocol 2026-07-28 \
                     asks in the call's result), and the tool runs again with the answer"
                ))
            }
        }
    }
}

/// A client's `inputResponses`, each checked to be a JSON object (an elicitation, sampling or
/// roots result); `-32602` naming the first that is not.
pub fn checked_responses(responses: InputResponses) -> Result<InputResponses, McpError> {
    if let Some((key, value)) = responses.iter().find(|(_, v)| !v.is_object()) {
        return Err(McpError::invalid_params(
            format!(
                "inputResponses[\"{}\"] is {}; each answer must be an object (an elicitation, sampling or roots \
                 result)",
                super::jsonrpc::cap_text(key, super::jsonrpc::ECHO_MAX_BYTES),
                super::jsonrpc::kind(value)
            ),
            None,
        ));
    }
    Ok(responses)
}

/// A round as the component's client.
struct RoundClient(Arc<Round>);

#[async_trait]
impl ClientRequests for RoundClient {
    async fn elicit(&self, message: String, requested_schema: Value) -> Result<Elicited, String> {
        self.elicit_as(None, message, requested_schema).await
    }

    async fn create_message(&self, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        self.create_message_as(None, request).await
    }

    async fn elicit_as(
        &self,
        key: Option<String>,
        message: String,
        requested_schema: Value,
    ) -> Result<Elicited, String> {
        let offered = self.0.capabilities.elicitation.is_some();
        let request = || Ok(InputRequest::Elicitation(ElicitRequest::new(elicit_params(message, requested_schema)?)));
        self.ask("elicitation", "an elicitation", offered, key, request).map(elicited)
    }

    async fn create_message_as(&self, key: Option<String>, request: SamplingRequest) -> Result<SamplingAnswer, String> {
        let offered = self.0.capabilities.sampling.is_some();
        let request = || Ok(InputRequest::CreateMessage(CreateMessageRequest::new(sampling_params(request))));
        self.ask("sampling", "a sampling", offered, key, request).map(sampled)
    }

    async fn list_roots(&self, key: Option<String>) -> Result<Vec<Root>, String> {
        let offered = self.0.capabilities.roots.is_some();
        let request = || Ok(InputRequest::ListRoots(ListRootsRequest::default()));
        self.ask::<ListRootsResult>("roots", "a roots", offered, key, request).map(roots_of)
    }
}

impl RoundClient {
    /// One question of `kind`: refused when the client did not declare the capability, else
    /// its answer read as a `T` (`a_kind` names it in the error), or noted for the round's end.
    fn ask<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        a_kind: &str,
        offered: bool,
        key: Option<String>,
        request: impl FnOnce() -> Result<InputRequest, String>,
    ) -> Result<T, String> {
        if !offered {
            return Err(not_offered(kind));
        }
        let (key, answer) = self.0.answer(kind, key, request()?)?;
        serde_json::from_value(answer).map_err(|e| format!("the client's answer to {key} is not {a_kind} result: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seal() -> StateSeal {
        StateSeal::with_key(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap()
    }

    fn caps() -> ClientCapabilities {
        serde_json::from_value(json!({"elicitation": {}, "sampling": {}})).unwrap()
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
    }

    #[tokio::test]
    async fn a_question_goes_out_then_its_answer_comes_back_through_the_state() {
        let (seal, call) = (seal(), call_binding(Some("t"), "tool", &json!({})));
        let round = Round::start(&seal, &call, None, None, caps()).unwrap();
        let e = round.client().elicit("Name?".into(), schema()).await.unwrap_err();
        assert!(e.starts_with("no answer yet"), "{e}");
        let RoundEnd::InputRequired { requests, state } = round.end(&seal, &call) else { panic!("no input required") };
        let (key, request) = requests.iter().next().unwrap();
        assert!(key.starts_with("elicitation-") && key.len() == "elicitation-".len() + 16, "{key}");
        assert_eq!(serde_json::to_value(request).unwrap()["params"]["message"], "Name?");

        // Round 2: the answer, with the state.
        let answers = BTreeMap::from([(key.clone(), json!({"action": "accept", "content": {"name": "Alice"}}))]);
        let round = Round::start(&seal, &call, Some(&state), Some(answers), caps()).unwrap();
        let got = round.client().elicit("Name?".into(), schema()).await.unwrap();
        assert_eq!(got.content, Some(json!({"name": "Alice"})));
        // A second question: round 3 must still know the first answer, from the state alone.
        assert!(round.client().elicit("Colour?".into(), schema()).await.is_err());
        let RoundEnd::InputRequired { requests, state: state2 } = round.end(&seal, &call) else { panic!() };
        assert_eq!(requests.len(), 1);
        assert_ne!(state, state2);
        let round = Round::start(&seal, &call, Some(&state2), None, caps()).unwrap();
        assert!(round.client().elicit("Name?".into(), schema()).await.is_ok());
        assert!(matches!(round.end(&seal, &call), RoundEnd::Complete));
    }

    #[test]
    fn a_state_that_was_altered_or_belongs_to_another_call_is_refused() {
        let (seal, call) = (seal(), call_binding(Some("t"), "tool", &json!({"a": 1})));
        let state = seal.seal(&Carried { round: 1, answers: BTreeMap::new() }, &call).unwrap();
        assert!(Round::start(&seal, &call, Some(&state), None, caps()).is_ok());
        for (bad, other) in [
            (format!("{state}-TAMPERED"), call.clone()),
            (state.clone(), call_binding(Some("t"), "tool", &json!({"a": 2}))),
            (state.clone(), call_binding(Some("other-thread"), "tool", &json!({"a": 1}))),
            (state.clone(), call_binding(None, "tool", &json!({"a": 1}))),
            (state.clone(), call_binding(Some("t"), "other_tool", &json!({"a": 1}))),
        ] {
            let e = Round::start(&seal, &other, Some(&bad), None, caps()).err().unwrap();
            assert_eq!(e.code.0, -32602);
            assert!(e.message.starts_with("requestState is refused"), "{}", e.message);
        }
        // Another key (another server without the shared key) cannot open it either.
        let stranger = StateSeal::with_key(b"another-key-another-key-another-key!".to_vec()).unwrap();
        assert!(Round::start(&stranger, &call, Some(&state), None, caps()).is_err());
        assert!(StateSeal::with_key(b"short".to_vec()).err().unwrap().contains(STATE_KEY_ENV));
    }

    #[tokio::test]
    async fn answers_must_be_objects_and_capabilities_are_respected() {
        let (seal, call) = (seal(), call_binding(Some("t"), "tool", &json!({})));
        let bad = BTreeMap::from([("user_name".to_string(), json!(12345))]);
        let e = Round::start(&seal, &call, None, Some(bad), caps()).err().unwrap();
        assert!(e.message.contains("inputResponses[\"user_name\"] is a number"), "{}", e.message);
        // Only sampling declared: an elicitation is refused at once and never goes out.
        let only_sampling: ClientCapabilities = serde_json::from_value(json!({"sampling": {}})).unwrap();
        let round = Round::start(&seal, &call, None, None, only_sampling).unwrap();
        let e = round.client().elicit("Name?".into(), schema()).await.unwrap_err();
        assert!(e.contains("does not offer elicitation"), "{e}");
        let request = SamplingRequest {
            messages: vec![toolhost_core::SamplingMessage { role: toolhost_core::Role::User, text: "Hi".into() }],
            system_prompt: None,
            max_tokens: 10,
            temperature: None,
        };
        assert!(round.client().create_message(request).await.is_err());
        let RoundEnd::InputRequired { requests, .. } = round.end(&seal, &call) else { panic!() };
        assert_eq!(requests.keys().map(|k| k.split('-').next().unwrap()).collect::<Vec<_>>(), ["sampling"]);
        // An answer of the wrong shape reaches the component as an error naming the key.
        let key = requests.keys().next().unwrap().clone();
        let wrong = BTreeMap::from([(key.clone(), json!({"action": "accept"}))]);
        let round = Round::start(&seal, &call, None, Some(wrong), caps()).unwrap();
        let request = SamplingRequest {
            messages: vec![toolhost_core::SamplingMessage { role: toolhost_core::Role::User, text: "Hi".into() }],
            system_prompt: None,
            max_tokens: 10,
            temperature: None,
        };
        let e = round.client().create_message(request).await.unwrap_err();
        assert!(e.contains(&key) && e.contains("not a sampling result"), "{e}");
    }

    #[tokio::test]
    async fn a_call_that_keeps_asking_stops_after_the_last_round() {
        let (seal, call) = (seal(), call_binding(Some("t"), "tool", &json!({})));
        let mut state: Option<String> = None;
        for n in 1..=MAX_ROUNDS {
            let round = Round::start(&seal, &call, state.as_deref(), None, caps()).unwrap();
            assert!(round.client().elicit(format!("Question {n}?"), schema()).await.is_err());
            match round.end(&seal, &call) {
                RoundEnd::InputRequired { state: s, .. } => state = Some(s),
                RoundEnd::Failed(e) => {
                    assert_eq!(n, MAX_ROUNDS);
                    assert!(e.contains("in 10 rounds"), "{e}");
                    return;
                }
                RoundEnd::Complete => panic!("complete"),
            }
        }
        panic!("never stopped");
    }
}
