//! Report finalization and Markdown rendering (`H/skills/review/renderer.py`).

use serde_json::{json, Value};

use super::models::REPORT_SCHEMA_VERSION;

fn int(v: Option<&Value>) -> i64 {
    v.and_then(Value::as_i64).unwrap_or(0)
}

/// `readiness_from_facts`.
pub fn readiness_from_facts(facts: &Value, scope: &[String]) -> &'static str {
    let summary = &facts["summary"];
    if int(summary.get("blockers")) > 0 {
        return "blocked";
    }
    if int(summary.get("errors")) > 0 {
        return "revise";
    }
    let not_assessed = facts["completeness"]["not_assessed"].as_array().is_some_and(|a| !a.is_empty());
    if scope.iter().any(|s| s == "all") && not_assessed {
        return "revise";
    }
    "publish_candidate"
}

fn semantic_severity(s: &Value) -> &'static str {
    match s.as_str() {
        Some("blocker") => "blocker",
        Some("error") => "major",
        _ => "minor",
    }
}

/// Python's `str(value)` of a JSON scalar as these f-strings print it.
fn py_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `build_static_report(facts, scope=…)` with `completed_at` given (DeerFlow: now, UTC,
/// `2026-01-02T03:04:05Z`).
pub fn build_static_report(facts: &Value, scope: &[String], completed_at: &str) -> Value {
    let readiness = readiness_from_facts(facts, scope);
    let findings = facts["findings"].as_array().cloned().unwrap_or_default();
    let issues: Vec<Value> = findings
        .iter()
        .enumerate()
        .filter(|(_, f)| matches!(f["severity"].as_str(), Some("blocker" | "error" | "warning")))
        .map(|(idx, f)| {
            json!({
                "id": format!("deterministic.{}.{}", idx + 1, f["rule_id"].as_str().unwrap_or("")),
                "severity": semantic_severity(&f["severity"]),
                "confidence": "high",
                "path": f["path"],
                "line": f["line"],
                "problem": f["message"],
                "impact": "Deterministic review finding affects package readiness or maintainability.",
                "remediation": f["remediation"],
                "suggested_replacement": null,
            })
        })
        .collect();
    let summary = &facts["summary"];
    let (b, e, w) = (int(summary.get("blockers")), int(summary.get("errors")), int(summary.get("warnings")));
    let status = if b > 0 {
        "blocker"
    } else if e > 0 || w > 0 {
        "concern"
    } else {
        "pass"
    };
    let case_count = int(facts["evals"].get("case_count"));
    let dimensions = json!([
        {"id": "structure", "status": status, "summary": format!("{b} blocker(s), {e} error(s), {w} warning(s)")},
        {
            "id": "evidence_quality",
            "status": if case_count == 0 { "concern" } else { "pass" },
            "summary": format!("{case_count} eval case(s) detected"),
        },
    ]);
    let truncated = facts["completeness"]["truncated"].as_bool().unwrap_or(false);
    let mut limitations = Vec::new();
    if truncated {
        limitations.push("Package content was truncated; omitted content was not assessed.".to_string());
    }
    for err in facts["reader_errors"].as_array().into_iter().flatten() {
        limitations.push(format!("Reader error {}: {}", py_str(&err["code"]), py_str(&err["message"])));
    }
    for err in facts["analyzer_errors"].as_array().into_iter().flatten() {
        limitations.push(format!("Analyzer error {}: {}", py_str(&err["code"]), py_str(&err["message"])));
    }
    let actions: Vec<String> = if readiness == "publish_candidate" {
        Vec::new()
    } else {
        findings.iter().take(5).map(|f| format!("{}: {}", py_str(&f["rule_id"]), py_str(&f["remediation"]))).collect()
    };
    json!({
        "schema_version": REPORT_SCHEMA_VERSION,
        "subject": {
            "display_ref": facts["subject"]["display_ref"],
            "package_digest": facts["subject"]["package_digest"],
        },
        "review": {
            "scope": scope,
            "profile": facts["profile"],
            "facts_schema_version": facts["schema_version"],
            "reviewer_model": "deterministic-review-core",
            "completed_at": completed_at,
        },
        "readiness": readiness,
        "assurance": "static_only",
        "dimensions": dimensions,
        "issues": issues,
        "evidence": {
            "facts_complete": !truncated,
            "runtime_runs": [],
            "baseline": null,
            "retained_artifacts": [],
            "limitations": limitations,
        },
        "recommended_actions": actions,
    })
}

fn readiness_label(zh: bool, readiness: &str) -> String {
    match (zh, readiness) {
        (false, "blocked") => "Not ready",
        (false, "revise") => "Needs revision",
        (false, "publish_candidate") => "Publish candidate",
        (true, "blocked") => "不可发布",
        (true, "revise") => "需修订",
        (true, "publish_candidate") => "可作为发布候选",
        (_, other) => other,
    }
    .to_string()
}

fn assurance_label(zh: bool, assurance: &str) -> String {
    match (zh, assurance) {
        (false, "static_only") => "Static review only",
        (false, "trigger_checked") => "Trigger checked",
        (false, "behavior_verified") => "Behavior verified",
        (false, "regression_verified") => "Regression verified",
        (true, "static_only") => "仅静态审查",
        (true, "trigger_checked") => "触发已检查",
        (true, "behavior_verified") => "行为已验证",
        (true, "regression_verified") => "回归已验证",
        (_, other) => other,
    }
    .to_string()
}

fn join_strs(v: &Value) -> String {
    v.as_array().map(|a| a.iter().map(py_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

/// `render_report_markdown(report, facts, locale=…)`.
pub fn render_report_markdown(report: &Value, facts: &Value, locale: &str) -> String {
    let zh = locale == "zh";
    let pick = |en: &str, cn: &str| if zh { cn.to_string() } else { en.to_string() };
    let readiness = report["readiness"].as_str().unwrap_or("");
    let assurance = report["assurance"].as_str().unwrap_or("");
    let mut lines = vec![
        pick("# Skill Review Report", "# 技能审查报告"),
        String::new(),
        pick("## Executive Summary", "## 摘要"),
        format!("- Subject: {}", py_str(&report["subject"]["display_ref"])),
        format!("- Digest: {}", py_str(&report["subject"]["package_digest"])),
        format!("- Readiness: {readiness} ({})", readiness_label(zh, readiness)),
        format!("- Assurance: {assurance} ({})", assurance_label(zh, assurance)),
        String::new(),
        pick("## Scope and Completeness", "## 范围与完整性"),
        format!("- Scope: {}", join_strs(&report["review"]["scope"])),
        format!("- Profile: {}", py_str(&report["review"]["profile"])),
    ];
    let completeness = &facts["completeness"];
    lines.push(format!("- Truncated: {}", py_str(&completeness["truncated"])));
    let not_assessed = join_strs(&completeness["not_assessed"]);
    lines.push(format!("- Not assessed: {}", if not_assessed.is_empty() { "(none)".into() } else { not_assessed }));
    lines.push(String::new());
    lines.push(pick("## Findings", "## 问题"));
    let issues = report["issues"].as_array().cloned().unwrap_or_default();
    if issues.is_empty() {
        lines.push("- No deterministic or semantic issues were reported.".into());
    }
    for issue in &issues {
        let mut location = match &issue["path"] {
            Value::String(s) if !s.is_empty() => s.clone(),
            _ => "<package>".into(),
        };
        if !issue["line"].is_null() {
            location = format!("{location}:{}", py_str(&issue["line"]));
        }
        lines.push(format!(
            "- {} {} at {location}: {}",
            py_str(&issue["severity"]),
            py_str(&issue["id"]),
            py_str(&issue["problem"])
        ));
    }
    lines.push(String::new());
    lines.push(pick("## Dimension Review", "## 维度审查"));
    for d in report["dimensions"].as_array().into_iter().flatten() {
        lines.push(format!("- {}: {} - {}", py_str(&d["id"]), py_str(&d["status"]), py_str(&d["summary"])));
    }
    lines.push(String::new());
    lines.push(pick("## Evidence", "## 证据"));
    lines.push(format!("- Facts complete: {}", py_str(&report["evidence"]["facts_complete"])));
    for l in report["evidence"]["limitations"].as_array().into_iter().flatten() {
        lines.push(format!("- Limitation: {}", py_str(l)));
    }
    lines.push(String::new());
    lines.push(pick("## Recommended Actions", "## 建议动作"));
    let actions = report["recommended_actions"].as_array().cloned().unwrap_or_default();
    if actions.is_empty() {
        lines.push("- No required action within the assessed scope.".into());
    }
    for a in &actions {
        lines.push(format!("- {}", py_str(a)));
    }
    let text = lines.join("\n");
    let trimmed = text.trim_end_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c));
    format!("{trimmed}\n")
}
