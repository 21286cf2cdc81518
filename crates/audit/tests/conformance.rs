//! Every vector of tests/conformance/audit.json (DeerFlow as the oracle): DeerFlow's blocks are
//! blocked with the exact message, its warnings warn with the exact suffix (or are blocked by a
//! named stricter rule), its passes pass (or are blocked by a named stricter rule), and the
//! splitter reproduces DeerFlow's parts.

use serde_json::Value;
use toolhost_audit::{audit, audit_value, classify_deerflow, split_compound, BlockReason, StrictRule, Verdict};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/audit.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).expect("audit.json parses")
}

/// Passes or warnings of DeerFlow that toolhost blocks on purpose (conformance deviation 6),
/// by vector id. Empty means no DeerFlow pass/warn vector trips a stricter rule.
const STRICTER: &[(&str, StrictRule)] = &[];

#[test]
fn every_case_matches_deerflow_or_a_named_deviation() {
    let doc = vectors();
    let cases = doc["cases"].as_array().expect("cases");
    assert!(cases.len() > 200, "expected the full vector set");
    let mut failures = Vec::new();
    for case in cases {
        let id = case["id"].as_str().unwrap_or("?");
        let command = case["command"].as_str().expect("string command");
        let expected = case["verdict"].as_str().expect("verdict");
        let got = audit(command);
        let stricter = STRICTER.iter().find(|(i, _)| *i == id).map(|(_, r)| *r);
        let ok = match (expected, &got) {
            ("block", Verdict::Block { message, .. }) => Some(message.as_str()) == case["message"].as_str(),
            ("warn", Verdict::Warn { message }) => Some(message.as_str()) == case["message"].as_str(),
            ("pass", Verdict::Pass) => stricter.is_none(),
            ("warn" | "pass", Verdict::Block { reason: BlockReason::Strict(rule), message }) => {
                stricter == Some(*rule)
                    && message
                        == "Command blocked: security violation detected. Please use a safer alternative approach."
            }
            _ => false,
        };
        if !ok {
            failures.push(format!("{id}: {command:?}: expected {expected}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn deerflow_mode_reproduces_every_classification() {
    let doc = vectors();
    let mut failures = Vec::new();
    for case in doc["cases"].as_array().expect("cases") {
        let command = case["command"].as_str().expect("string command");
        // Input-validation rejects carry what the classifier alone would have said.
        let expected = if case.get("reason").is_some() {
            match case["classify_command"].as_str() {
                Some(v) => v,
                None => continue,
            }
        } else {
            case["verdict"].as_str().expect("verdict")
        };
        let got = classify_deerflow(command);
        if got != expected {
            failures.push(format!("{}: {command:?}: DeerFlow {expected}, ours {got}", case["id"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn splitter_reproduces_deerflow_parts() {
    let doc = vectors();
    let mut checked = 0;
    for case in doc["cases"].as_array().expect("cases") {
        let Some(parts) = case.get("parts").and_then(Value::as_array) else { continue };
        let expected: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
        let command = case["command"].as_str().expect("string command");
        assert_eq!(split_compound(command, true), expected, "{}: {command:?}", case["id"]);
        checked += 1;
    }
    assert!(checked > 200);
}

#[test]
fn non_string_commands_are_empty_commands() {
    let doc = vectors();
    let cases = doc["non_string_command_cases"].as_array().expect("non_string_command_cases");
    assert!(!cases.is_empty());
    for case in cases {
        let got = audit_value(Some(&case["command"]));
        let expected = case["message"].as_str().expect("message");
        assert_eq!(
            got,
            Verdict::Block { message: expected.to_string(), reason: BlockReason::InvalidInput("empty command") },
            "{}",
            case["id"]
        );
    }
    assert_eq!(audit_value(None).as_str(), "block");
}
