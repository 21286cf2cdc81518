//! Test-only component (like `hostile`, built into the guest dir, never bundled): the server test
//! tools of the official MCP conformance suite (`@modelcontextprotocol/conformance`), with the
//! names, schemas and results its scenarios check. `tests/mcp_conformance.rs` serves them with
//! `toolhost serve --http`, so the suite exercises the host's real content mapping (WIT content
//! blocks → MCP content, embedded resources included), progress (`host.progress` →
//! `notifications/progress`), log lines (`host.log` → `notifications/message`), the error flag,
//! and requests back to the client (`client.elicit` → `elicitation/create`,
//! `client.create-message` → `sampling/createMessage`, granted by the test's config).
//!
//! The `test_input_required_result_*` tools ask the client the same way; over protocol
//! 2026-07-28 the host turns their questions into an `InputRequiredResult` and runs them again
//! with the answers (SEP-2322), so they are written as any asking component is: ask, and use
//! the answers. Tools the suite names that need a host feature toolhost leaves out are left out
//! rather than faked; the expected-failures file `tests/mcp-expected-failures.yaml` says why.

use serde_json::{json, Value};
use toolhost_sdk::{tool, Block, Context, ElicitAction, Output, Role};

/// No arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// A 1×1 red PNG.
const RED_PIXEL_PNG: [u8; 69] = [
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x02, 0x00, 0x00, 0x00, 0x90, 0x77, 0x53, 0xde, 0x00, 0x00, 0x00, 0x0c, 0x49,
    0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xf8, 0xcf, 0xc0, 0x00, 0x00, 0x03, 0x01, 0x01, 0x00, 0xf7, 0x03, 0x41, 0x43,
    0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// A WAV file: 8 kHz, 8-bit mono PCM, `samples` of silence (8-bit PCM is unsigned: 0x80 is zero).
fn silent_wav(samples: u32) -> Vec<u8> {
    let mut w = Vec::with_capacity(44 + samples as usize);
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes()); // sample rate
    w.extend_from_slice(&8000u32.to_le_bytes()); // byte rate
    w.extend_from_slice(&1u16.to_le_bytes()); // block align
    w.extend_from_slice(&8u16.to_le_bytes()); // bits per sample
    w.extend_from_slice(b"data");
    w.extend_from_slice(&samples.to_le_bytes());
    w.resize(44 + samples as usize, 0x80);
    w
}

fn simple_text(_: &Context, _: NoArgs) -> Output {
    Output::text("This is a simple text response for testing.")
}

fn image_content(_: &Context, _: NoArgs) -> Output {
    Output::image(RED_PIXEL_PNG.to_vec(), "image/png")
}

fn audio_content(_: &Context, _: NoArgs) -> Output {
    Output::audio(silent_wav(800), "audio/wav")
}

/// Text, an image and an embedded JSON resource.
fn multiple_content_types(_: &Context, _: NoArgs) -> Output {
    Output::text("Multiple content types test:")
        .with_block(Block::image(RED_PIXEL_PNG.to_vec(), "image/png"))
        .with_block(Block::resource_text(
            "test://mixed-content-resource",
            Some("application/json"),
            r#"{"test":"data","value":123}"#,
        ))
}

fn embedded_resource(_: &Context, _: NoArgs) -> Output {
    Output::default().with_block(Block::resource_text(
        "test://embedded-resource",
        Some("text/plain"),
        "This is an embedded resource content.",
    ))
}

/// `test_elicitation`: the message to show the user.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ElicitArgs {
    /// The message to show the user.
    message: String,
}

/// Ask the client's user with `schema`; the answer (or why there is none) as the result.
fn ask(message: &str, schema: Value, prefix: &str) -> Output {
    match toolhost_sdk::elicit(message, &schema) {
        Ok(a) => {
            let action = match a.action {
                ElicitAction::Accept => "accept",
                ElicitAction::Decline => "decline",
                ElicitAction::Cancel => "cancel",
            };
            let content = a.content.map_or("null".to_string(), |c| c.to_string());
            Output::text(format!("{prefix}action={action}, content={content}"))
        }
        Err(e) => Output::error(format!("Elicitation failed: {e}")),
    }
}

fn elicitation(_: &Context, a: ElicitArgs) -> Output {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });
    ask(&a.message, schema, "User response: ")
}

/// SEP-1034: a default for every primitive type.
fn elicitation_defaults(_: &Context, _: NoArgs) -> Output {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active"
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": true}
        },
        "required": []
    });
    ask("Test client default value handling - please accept with defaults", schema, "Elicitation completed: ")
}

/// SEP-1330: the five enum forms.
fn elicitation_enums(_: &Context, _: NoArgs) -> Output {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}
                ]
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"}
                    ]
                }
            }
        },
        "required": []
    });
    ask("Choose from the enum fields", schema, "Elicitation completed: ")
}

/// `test_sampling`: the prompt for the client's model.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the LLM.
    prompt: String,
}

fn sampling(_: &Context, a: SamplingArgs) -> Output {
    match toolhost_sdk::create_message(&[(Role::User, &a.prompt)], None, 100) {
        Ok(answer) => Output::text(format!("LLM response: {}", answer.text)),
        Err(e) => Output::error(format!("Sampling failed: {e}")),
    }
}

/// An elicitation's accepted answer, field `field` as text; asked under `key` when given.
fn answer_field(message: &str, schema: Value, field: &str) -> Result<String, String> {
    answer_field_as(None, message, schema, field)
}

fn answer_field_as(key: Option<&str>, message: &str, schema: Value, field: &str) -> Result<String, String> {
    let a = match key {
        Some(key) => toolhost_sdk::elicit_as(key, message, &schema)?,
        None => toolhost_sdk::elicit(message, &schema)?,
    };
    if a.action != ElicitAction::Accept {
        return Err(format!("the user did not answer ({:?})", a.action));
    }
    Ok(a.content.as_ref().and_then(|c| c.get(field)).map_or("null".to_string(), |v| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }))
}

/// A form with one required property.
fn one_field(field: &str, kind: &str) -> Value {
    json!({"type": "object", "properties": {field: {"type": kind}}, "required": [field]})
}

/// SEP-2322: the user's name (under the key the suite names), then a greeting.
fn input_required_elicitation(_: &Context, _: NoArgs) -> Output {
    match answer_field_as(Some("user_name"), "What is your name?", one_field("name", "string"), "name") {
        Ok(name) => Output::text(format!("Hello, {name}!")),
        Err(e) => Output::error(format!("Elicitation failed: {e}")),
    }
}

/// SEP-2322: one question for the client's model.
fn input_required_sampling(_: &Context, _: NoArgs) -> Output {
    match toolhost_sdk::create_message(&[(Role::User, "What is the capital of France?")], None, 100) {
        Ok(answer) => Output::text(format!("LLM response: {}", answer.text)),
        Err(e) => Output::error(format!("Sampling failed: {e}")),
    }
}

/// SEP-2322: a confirmation; the host checked the echoed state before this runs with the answer.
fn input_required_confirm(_: &Context, _: NoArgs) -> Output {
    match answer_field("Please confirm", one_field("ok", "boolean"), "ok") {
        Ok(ok) => Output::text(format!("state-ok: confirmed={ok}")),
        Err(e) => Output::error(format!("Elicitation failed: {e}")),
    }
}

/// SEP-2322: a name, a greeting from the model and the client's roots, asked together in one
/// round (every question is asked before any answer is needed).
fn input_required_multiple(_: &Context, _: NoArgs) -> Output {
    let name = answer_field_as(Some("user_name"), "What is your name?", one_field("name", "string"), "name");
    let greeting = toolhost_sdk::create_message_as("greeting", &[(Role::User, "Generate a greeting")], None, 50);
    let roots = toolhost_sdk::list_roots(Some("client_roots"));
    match (name, greeting, roots) {
        (Ok(name), Ok(g), Ok(roots)) => Output::text(format!("{} {name} ({} roots)", g.text, roots.len())),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Output::error(format!("Input failed: {e}")),
    }
}

/// SEP-2322: the client's roots, named in the result.
fn input_required_list_roots(_: &Context, _: NoArgs) -> Output {
    match toolhost_sdk::list_roots(Some("client_roots")) {
        Ok(roots) => {
            let uris: Vec<String> = roots.into_iter().map(|r| r.uri).collect();
            Output::text(format!("Roots: {}", uris.join(", ")))
        }
        Err(e) => Output::error(format!("roots/list failed: {e}")),
    }
}

/// SEP-2322: two rounds, the second question asked only once the first is answered.
fn input_required_multi_round(_: &Context, _: NoArgs) -> Output {
    let asked = answer_field("Step 1: What is your name?", one_field("name", "string"), "name").and_then(|name| {
        let color = answer_field("Step 2: What is your favorite color?", one_field("color", "string"), "color")?;
        Ok((name, color))
    });
    match asked {
        Ok((name, color)) => Output::text(format!("Hello, {name}! Your favorite color is {color}.")),
        Err(e) => Output::error(format!("Elicitation failed: {e}")),
    }
}

/// SEP-2322: asks the user and the model; the host only lets through what the client declared.
fn input_required_capabilities(_: &Context, _: NoArgs) -> Output {
    let name = answer_field("What is your name?", one_field("name", "string"), "name");
    let greeting = toolhost_sdk::create_message(&[(Role::User, "Generate a greeting")], None, 50);
    Output::text(format!("elicitation: {name:?}; sampling: {:?}", greeting.map(|g| g.text)))
}

/// `confirm_delete`: which file.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct ConfirmDeleteArgs {
    /// The file to delete.
    filename: String,
}

/// Tasks (SEP-2663): asks the user to confirm; as a task it waits in `input_required`.
fn confirm_delete(_: &Context, a: ConfirmDeleteArgs) -> Output {
    let message = format!("Delete {}?", a.filename);
    match answer_field(&message, one_field("confirm", "boolean"), "confirm") {
        Ok(yes) if yes == "true" => Output::text(format!("Deleted {}.", a.filename)),
        Ok(_) => Output::text(format!("Kept {}.", a.filename)),
        Err(e) => Output::error(format!("Elicitation failed: {e}")),
    }
}

/// Tasks (SEP-2663): two questions at once, so two are open together.
fn multi_input(_: &Context, _: NoArgs) -> Output {
    let first = answer_field("First value?", one_field("value", "string"), "value");
    let second = answer_field("Second value?", one_field("value", "string"), "value");
    match (first, second) {
        (Ok(a), Ok(b)) => Output::text(format!("Got {a} and {b}.")),
        (Err(e), _) | (_, Err(e)) => Output::error(format!("Elicitation failed: {e}")),
    }
}

/// 0/100, 50/100, 100/100, about 50 ms apart, through `host.progress`.
fn tool_with_progress(_: &Context, _: NoArgs) -> Output {
    for (i, step) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        toolhost_sdk::progress(step, Some(100.0), None);
    }
    Output::text("Progress test completed: reported 0, 50 and 100 of 100.")
}

/// Three log lines, about 50 ms apart, through `host.log`: the client gets them as
/// `notifications/message` while the call runs.
fn tool_with_logging(_: &Context, _: NoArgs) -> Output {
    for (i, line) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        toolhost_sdk::log_info(line);
    }
    Output::text("Logging test completed: wrote three log lines.")
}

/// `greet`: the tasks scenarios' sync-only tool.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

fn greet(_: &Context, a: GreetArgs) -> Output {
    Output::text(format!("Hello, {}!", a.name))
}

/// `slow_compute`: works for `seconds`, then says so.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct SlowArgs {
    /// How long to work, in seconds (0: answer at once).
    #[serde(default)]
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: String,
}

/// Sleep for `d` in 20 ms steps: between steps the guest runs, so a cancelled or timed-out
/// call is stopped within one epoch tick rather than after the whole sleep.
fn sleep_in_steps(d: std::time::Duration) {
    let end = std::time::Instant::now() + d;
    while let Some(left) = end.checked_duration_since(std::time::Instant::now()) {
        std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
    }
}

fn slow_compute(_: &Context, a: SlowArgs) -> Output {
    let seconds = a.seconds.clamp(0.0, 600.0);
    sleep_in_steps(std::time::Duration::from_secs_f64(seconds));
    Output::text(format!("slow_compute '{}' finished after {seconds} s", a.label))
}

/// `test_reconnection`: answers after 1.5 s, between one and two of the test config's
/// `sse_poll_after_s` (1): the server ends the call's SSE stream first, and the result comes on
/// the client's first poll (the suite polls once; a poll is itself ended after a second).
fn reconnection(_: &Context, _: NoArgs) -> Output {
    sleep_in_steps(std::time::Duration::from_millis(1500));
    Output::text("Reconnection test completed: the result came after the stream was ended.")
}

/// `failing_job`: a tool execution error after about a second.
fn failing_job(_: &Context, _: NoArgs) -> Output {
    sleep_in_steps(std::time::Duration::from_secs(1));
    Output::error("failing_job failed on purpose")
}

/// `protocol_error_job`: crashes (a panic traps the component), which is not a tool result.
fn protocol_error_job(_: &Context, _: NoArgs) -> Output {
    panic!("protocol_error_job crashes on purpose")
}

fn error_handling(_: &Context, _: NoArgs) -> Output {
    Output::error("This tool intentionally returns an error for testing")
}

/// The suite's JSON Schema 2020-12 tool: the schema must reach `tools/list` unchanged.
fn json_schema_2020_12_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}}
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn json_schema_2020_12(_: &Context, args: Value) -> Output {
    let name = args.get("name").and_then(Value::as_str).unwrap_or("(no name)");
    Output::text(format!("JSON Schema 2020-12 tool called for {name}"))
}

/// `test_param_header`'s schema: `region` is also sent as the HTTP header `Mcp-Param-Region`
/// (SEP-2243), which the server checks against the body.
fn param_header_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "A region name; clients send it as the Mcp-Param-Region header too.",
                "x-mcp-header": "Region"
            }
        },
        "required": ["region"]
    })
}

fn param_header(_: &Context, args: Value) -> Output {
    match args.get("region").and_then(Value::as_str) {
        Some(region) => Output::text(format!("region: {region}")),
        None => Output::error("region must be a string"),
    }
}

toolhost_sdk::export_tools!(
    tool("test_simple_text", "Returns one text block.", simple_text),
    tool("test_image_content", "Returns a 1x1 red PNG image.", image_content),
    tool("test_audio_content", "Returns a short silent WAV clip.", audio_content),
    tool("test_multiple_content_types", "Returns text, an image and an embedded resource.", multiple_content_types),
    tool("test_embedded_resource", "Returns an embedded text resource.", embedded_resource),
    tool("test_elicitation", "Asks the client's user for a username and an email.", elicitation),
    tool("test_elicitation_sep1034_defaults", "Asks with a default for every primitive type.", elicitation_defaults),
    tool("test_elicitation_sep1330_enums", "Asks with the five enum forms.", elicitation_enums),
    tool("test_sampling", "Asks the client's model to answer the prompt.", sampling),
    tool("test_input_required_result_elicitation", "Asks the user's name, then greets.", input_required_elicitation),
    tool("test_input_required_result_sampling", "Asks the model for the capital of France.", input_required_sampling),
    tool("test_input_required_result_request_state", "Asks for a confirmation.", input_required_confirm),
    tool("test_input_required_result_tampered_state", "Asks for a confirmation.", input_required_confirm),
    tool("test_input_required_result_multiple_inputs", "Asks the user and the model at once.", input_required_multiple),
    tool("test_input_required_result_multi_round", "Asks a name, then a colour.", input_required_multi_round),
    tool("test_input_required_result_list_roots", "Asks the client for its roots.", input_required_list_roots),
    tool("test_input_required_result_capabilities", "Asks the user and the model.", input_required_capabilities),
    tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100, 50 ms apart.", tool_with_progress),
    tool("test_tool_with_logging", "Writes three log lines, 50 ms apart.", tool_with_logging),
    tool("test_error_handling", "Always fails with an error result.", error_handling),
    tool("greet", "Says hello to name.", greet),
    tool("slow_compute", "Works for `seconds` seconds, then answers.", slow_compute),
    tool("test_reconnection", "Answers after 1.5 s (SSE polling, SEP-1699).", reconnection),
    tool("failing_job", "Fails with a tool error after about a second.", failing_job),
    tool("confirm_delete", "Asks the user to confirm deleting filename.", confirm_delete),
    tool("multi_input", "Asks the user two questions at once.", multi_input),
    tool("protocol_error_job", "Crashes (the component traps).", protocol_error_job),
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json_schema_2020_12)
        .with_parameters(json_schema_2020_12_schema()),
    tool("test_param_header", "Echoes region, which clients also send as Mcp-Param-Region.", param_header)
        .with_parameters(param_header_schema()),
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wav_header_matches_its_data() {
        let w = silent_wav(800);
        assert_eq!(w.len(), 844);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(w[4..8].try_into().unwrap()), 836);
        assert_eq!(u32::from_le_bytes(w[40..44].try_into().unwrap()), 800);
    }

    #[test]
    fn the_schema_keeps_its_2020_12_keywords() {
        let s = json_schema_2020_12_schema();
        for key in ["$schema", "$defs", "allOf", "if", "then", "else", "additionalProperties"] {
            assert!(s.get(key).is_some(), "{key}");
        }
    }
}
