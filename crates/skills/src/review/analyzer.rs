//! `analyze_skill_package` (`H/skills/review/analyzer.py`, `resource_graph.py`,
//! `eval_schema.py`, `package_paths.py`): review-facts.v1 from a snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{json, Map, Value};
use toolhost_py::yaml11::{safe_load, PyValue};

use super::models::{
    compute_package_digest, normalize_relative_path, sort_findings, summarize_findings, Finding, FACTS_SCHEMA_VERSION,
};
use super::skillscan;
use super::snapshot::{FileEntry, FileKind, Snapshot};
use crate::frontmatter::{split_frontmatter, ALLOWED_FRONTMATTER_PROPERTIES};

/// `is_eval_fixture_path`: below `evals/fixtures/<case>/`.
pub fn is_eval_fixture_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        return false;
    }
    for (i, part) in parts[..parts.len() - 1].iter().enumerate() {
        if *part == "evals" && parts.len() > i + 2 {
            return parts[i + 1] == "fixtures";
        }
    }
    false
}

/// `is_eval_fixture_skill_md`.
pub fn is_eval_fixture_skill_md(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    match parts.split_last() {
        Some((last, dir)) => *last == "SKILL.md" && is_eval_fixture_path(&dir.join("/")),
        None => false,
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// What the analysis produced, besides the facts JSON.
pub struct Facts {
    pub json: Value,
    pub display_ref: String,
    pub package_digest: String,
}

/// `analyze_skill_package(snapshot, profile=…)`. `Err` carries the text of a `ValueError`
/// DeerFlow would raise (a snapshot path that does not normalize).
pub fn analyze_skill_package(snapshot: &Snapshot, profile: &str) -> Result<Facts, String> {
    let mut findings: Vec<Finding> = Vec::new();
    let mut analyzer_errors: Vec<Value> = Vec::new();
    let mut not_assessed: BTreeSet<String> = BTreeSet::new();
    // `{path: entry}`: sorted like the snapshot's list; a repeated path keeps its last entry.
    let files: BTreeMap<&str, &FileEntry> = snapshot.files.iter().map(|f| (f.path.as_str(), f)).collect();

    let root_skill = files.get("SKILL.md");
    let mut declared_name = None;
    match root_skill {
        None => findings.push(Finding::new(
            "structure.missing-skill-md",
            "blocker",
            "Package root does not contain SKILL.md.",
            "Add exactly one SKILL.md at the package root.",
        )),
        Some(e) if e.kind != FileKind::Text => findings.push(
            Finding::new(
                "structure.skill-md-not-text",
                "blocker",
                "Root SKILL.md is not readable UTF-8 text.",
                "Store SKILL.md as UTF-8 Markdown with YAML frontmatter.",
            )
            .path("SKILL.md"),
        ),
        Some(e) => declared_name = analyze_skill_md(e.content.as_deref().unwrap_or(""), profile, &mut findings),
    }

    for path in files.keys().filter(|p| name_of(p) == "SKILL.md" && **p != "SKILL.md" && !is_eval_fixture_skill_md(p)) {
        findings.push(
            Finding::new(
                "structure.nested-skill-md",
                "blocker",
                "Nested SKILL.md files are not allowed in a single skill package.",
                "Keep exactly one SKILL.md at the package root.",
            )
            .path(*path),
        );
    }

    for (path, entry) in &files {
        if entry.kind == FileKind::Symlink {
            findings.push(
                Finding::new(
                    "package.symlink",
                    "warning",
                    "Package contains a symlink entry.",
                    "Replace symlinks with ordinary files inside the skill package.",
                )
                .path(*path)
                .evidence(json!(entry.target)),
            );
        }
        let lowered = path.to_lowercase();
        if [".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".7z", ".rar", ".whl"]
            .iter()
            .any(|s| lowered.ends_with(s))
        {
            findings.push(
                Finding::new(
                    "package.nested-archive",
                    "warning",
                    "Package contains a nested archive.",
                    "Unpack and review nested archives before packaging the skill.",
                )
                .path(*path),
            );
        }
        if path.split('/').any(|p| [".env", ".npmrc", ".pypirc", ".netrc"].contains(&p)) {
            findings.push(
                Finding::new(
                    "package.hidden-sensitive-file",
                    "warning",
                    "Package contains a hidden sensitive file.",
                    "Remove hidden credential or package-manager config files.",
                )
                .path(*path),
            );
        }
    }

    let (resources, resource_findings) = build_resource_graph(&files);
    findings.extend(resource_findings);

    let (evals, eval_findings) = analyze_eval_manifests(&files);
    findings.extend(eval_findings);

    let text_files: Vec<(&str, &str)> = snapshot
        .files
        .iter()
        .filter(|f| f.kind == FileKind::Text && !is_eval_fixture_path(&f.path))
        .map(|f| (f.path.as_str(), f.content.as_deref().unwrap_or("")))
        .collect();
    let paths: Vec<&str> = text_files.iter().map(|(p, _)| *p).collect();
    if !text_files.is_empty() && skillscan::write_conflict(&paths) {
        analyzer_errors.push(json!({"code": "skillscan_failed", "path": null, "message": "FileExistsError"}));
        not_assessed.insert("skillscan".into());
    } else if !text_files.is_empty() {
        // A repeated path is written twice by DeerFlow; the scan sees the last content.
        let mut unique: BTreeMap<&str, &str> = BTreeMap::new();
        for (p, c) in &text_files {
            unique.insert(p, c);
        }
        let unique: Vec<(&str, &str)> = unique.into_iter().collect();
        let scan = skillscan::scan_text_files(&unique);
        for f in scan.findings {
            let severity = match f.severity {
                "CRITICAL" => "blocker",
                "HIGH" => "error",
                "MEDIUM" => "warning",
                "LOW" => "info",
                _ => "warning",
            };
            findings.push(Finding {
                rule_id: f.rule_id.to_string(),
                source: "skillscan",
                profile: "deerflow",
                severity,
                path: f.file,
                line: f.line,
                message: f.message.to_string(),
                remediation: f.remediation.to_string(),
                evidence: json!(f.evidence),
                skillscan_severity: Some(f.severity),
            });
        }
        // toolhost difference: SkillScan's Python AST rules are not run (no Python parser).
        for path in scan.python_files {
            analyzer_errors.push(json!({
                "code": "python_analysis_unavailable",
                "path": path,
                "message": "toolhost does not parse Python; SkillScan's Python rules were not run on this file",
            }));
            not_assessed.insert("skillscan.python".into());
        }
    }

    if snapshot.truncated {
        not_assessed.insert("full_package".into());
    }

    sort_findings(&mut findings);
    let package_digest = compute_package_digest(&snapshot.files).map_err(str::to_string)?;
    let reader_errors: Vec<Value> = snapshot.reader_errors.iter().map(|e| e.to_json()).collect();
    let facts = json!({
        "schema_version": FACTS_SCHEMA_VERSION,
        "subject": {
            "display_ref": snapshot.display_ref,
            "source": snapshot.source,
            "category": snapshot.category,
            "declared_name": declared_name,
            "package_digest": package_digest,
        },
        "profile": profile,
        "completeness": {
            "package_enumerated": !snapshot.reader_errors.iter().any(|e| e.code == "root_not_found"),
            "text_content_complete": !snapshot.truncated,
            "truncated": snapshot.truncated,
            "not_assessed": not_assessed.into_iter().collect::<Vec<_>>(),
        },
        "summary": summarize_findings(&findings),
        "findings": findings.iter().map(Finding::to_json).collect::<Vec<_>>(),
        "resources": resources,
        "evals": evals,
        "reader_errors": reader_errors,
        "analyzer_errors": analyzer_errors,
    });
    Ok(Facts { json: facts, display_ref: snapshot.display_ref.clone(), package_digest })
}

fn valid_skill_name(name: &str) -> bool {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\A[a-z0-9]+(?:-[a-z0-9]+)*\z").expect("static regex")).is_match(name)
        && name.chars().count() <= 64
}

/// Python's `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

fn analyze_skill_md(content: &str, profile: &str, findings: &mut Vec<Finding>) -> Option<String> {
    let invalid = |message: String| {
        Finding::new(
            "structure.invalid-frontmatter",
            "blocker",
            message,
            "Use YAML frontmatter bounded by --- fences with name and description fields.",
        )
        .path("SKILL.md")
    };
    let Some((fm, body)) = split_frontmatter(content) else {
        findings.push(invalid("No YAML frontmatter found".into()));
        return None;
    };
    let items = match safe_load(fm) {
        Err(e) => {
            findings.push(invalid(format!("Invalid YAML in frontmatter: {e}")));
            return None;
        }
        Ok(PyValue::Dict(items)) => items,
        Ok(_) => {
            findings.push(invalid("Frontmatter must be a YAML dictionary".into()));
            return None;
        }
    };
    // `{str(key): value}`: a later key of the same text wins, at its first position.
    let mut metadata: Vec<(String, PyValue)> = Vec::new();
    for (k, v) in items {
        let key = k.py_str();
        match metadata.iter_mut().find(|(mk, _)| *mk == key) {
            Some(slot) => slot.1 = v,
            None => metadata.push((key, v)),
        }
    }
    let get = |key: &str| metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v);

    let unexpected: BTreeSet<&str> =
        metadata.iter().map(|(k, _)| k.as_str()).filter(|k| !ALLOWED_FRONTMATTER_PROPERTIES.contains(k)).collect();
    if !unexpected.is_empty() {
        let list: Vec<&str> = unexpected.into_iter().collect();
        findings.push(
            Finding::new(
                "structure.unknown-frontmatter-field",
                "warning",
                format!("Unknown frontmatter field(s): {}", list.join(", ")),
                "Remove unsupported fields or add them to the shared DeerFlow frontmatter schema.",
            )
            .path("SKILL.md")
            .evidence(json!(list)),
        );
    }

    let declared_name = match get("name") {
        Some(PyValue::Str(s)) => Some(py_strip(s).to_string()),
        _ => None,
    };
    match declared_name.as_deref() {
        None | Some("") => findings.push(
            Finding::new(
                "structure.missing-name",
                "blocker",
                "Frontmatter is missing a non-empty name.",
                "Add a hyphen-case skill name.",
            )
            .path("SKILL.md"),
        ),
        Some(name) if !valid_skill_name(name) => findings.push(
            Finding::new(
                "structure.invalid-name",
                "error",
                "Skill name must be hyphen-case using lowercase letters, digits, and hyphens.",
                "Rename the skill using lowercase hyphen-case.",
            )
            .path("SKILL.md")
            .evidence(json!(name)),
        ),
        Some(_) => {}
    }

    let description = match get("description") {
        Some(PyValue::Str(s)) => Some(py_strip(s)),
        _ => None,
    };
    match description {
        None | Some("") => findings.push(
            Finding::new(
                "structure.missing-description",
                "blocker",
                "Frontmatter is missing a non-empty description.",
                "Add a concise description that states what the skill does and when to invoke it.",
            )
            .path("SKILL.md"),
        ),
        Some(d) if d.chars().count() > 1024 => findings.push(
            Finding::new(
                "structure.description-too-long",
                "error",
                "Description exceeds DeerFlow's 1024 character limit.",
                "Shorten the description and move detailed guidance into the body.",
            )
            .path("SKILL.md"),
        ),
        Some(_) => {}
    }

    if py_strip(body).is_empty() {
        findings.push(
            Finding::new(
                "structure.empty-body",
                "error",
                "SKILL.md has no instruction body after frontmatter.",
                "Add executable workflow instructions after the frontmatter.",
            )
            .path("SKILL.md"),
        );
    }

    let allowed_tools_error = match get("allowed-tools") {
        None | Some(PyValue::None) => None,
        Some(PyValue::List(items)) => items.iter().find_map(|item| match item {
            PyValue::Str(s) if py_strip(s).is_empty() => {
                Some("allowed-tools in SKILL.md cannot contain empty tool names")
            }
            PyValue::Str(_) => None,
            _ => Some("allowed-tools in SKILL.md must contain only strings"),
        }),
        Some(_) => Some("allowed-tools in SKILL.md must be a list of strings"),
    };
    if let Some(message) = allowed_tools_error {
        findings.push(
            Finding::new(
                "structure.invalid-allowed-tools",
                "error",
                message,
                "Declare allowed-tools as a YAML list of non-empty strings.",
            )
            .path("SKILL.md"),
        );
    }

    if !matches!(get("required-secrets"), None | Some(PyValue::None) | Some(PyValue::List(_))) {
        findings.push(
            Finding::new(
                "structure.invalid-required-secrets",
                "error",
                "required-secrets in SKILL.md must be a list",
                "Declare required-secrets as a YAML list.",
            )
            .path("SKILL.md"),
        );
    }

    if let Some(v) = get("secrets-autonomous") {
        if !matches!(v, PyValue::Bool(_)) {
            findings.push(
                Finding::new(
                    "structure.invalid-secrets-autonomous",
                    "error",
                    "secrets-autonomous must be a boolean.",
                    "Use true or false for secrets-autonomous.",
                )
                .path("SKILL.md"),
            );
        }
    }

    if profile == "agentskills" {
        if let Some(PyValue::Str(d)) = get("description") {
            if py_strip(d).chars().count() > 200 {
                let mut f = Finding::new(
                    "agentskills.description-length",
                    "warning",
                    "Description is longer than the Agent Skills recommended display length.",
                    "Keep the description concise and move detail into the body.",
                )
                .path("SKILL.md");
                f.profile = "agentskills";
                findings.push(f);
            }
        }
        if let Some(name) = declared_name.as_deref().filter(|n| !n.is_empty()) {
            if name.chars().count() > 64 {
                let mut f = Finding::new(
                    "agentskills.name-length",
                    "warning",
                    "Skill name is longer than the portability profile recommends.",
                    "Use a shorter package name for cross-client portability.",
                )
                .path("SKILL.md");
                f.profile = "agentskills";
                findings.push(f);
            }
        }
    }

    declared_name
}

// ---- resource graph ----------------------------------------------------------------------

const RESOURCE_DIRS: [&str; 5] = ["references", "scripts", "templates", "assets", "evals"];

fn extract_references(content: &str) -> BTreeSet<String> {
    static LINK: OnceLock<Regex> = OnceLock::new();
    static CODE: OnceLock<Regex> = OnceLock::new();
    let link = LINK.get_or_init(|| Regex::new(r#"!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)"#).expect("static regex"));
    let code = CODE.get_or_init(|| Regex::new(r"`([^`]+)`").expect("static regex"));
    let mut refs = BTreeSet::new();
    for c in link.captures_iter(content) {
        let target = c.get(1).map_or("", |m| m.as_str());
        refs.insert(target.split('#').next().unwrap_or("").to_string());
    }
    for c in code.captures_iter(content) {
        let token = py_strip(c.get(1).map_or("", |m| m.as_str()));
        if token.contains('/') {
            refs.insert(token.to_string());
        }
    }
    for m in skillscan::path_token_re().find_iter(content).flatten() {
        refs.insert(m.as_str().to_string());
    }
    refs
}

enum Resolved {
    Skip,
    Escapes,
    Path(String),
}

/// `PurePosixPath(parent) / ref` as text: empty and `.` segments dropped.
fn posix_join(parent: &str, reference: &str) -> String {
    let parts: Vec<&str> =
        parent.split('/').chain(reference.split('/')).filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

fn resolve_reference(source: &str, raw: &str) -> Resolved {
    static SCHEME: OnceLock<Regex> = OnceLock::new();
    let scheme = SCHEME.get_or_init(|| Regex::new(r"\A[A-Za-z][A-Za-z0-9+.-]*:").expect("static regex"));
    let reference = py_strip(raw).trim_matches(|c| c == '"' || c == '\'');
    if reference.is_empty() || reference.starts_with('#') || scheme.is_match(reference) {
        return Resolved::Skip;
    }
    if reference.starts_with('/') {
        return Resolved::Escapes;
    }
    let parent = match source.rfind('/') {
        Some(i) => &source[..i],
        None => "",
    };
    if reference.contains("://") {
        return Resolved::Skip;
    }
    match normalize_relative_path(&posix_join(parent, reference)) {
        Ok(p) => Resolved::Path(p),
        Err(_) => Resolved::Escapes,
    }
}

fn build_resource_graph(files: &BTreeMap<&str, &FileEntry>) -> (Value, Vec<Finding>) {
    let nodes: Vec<Value> = files.iter().map(|(p, e)| json!({"path": p, "kind": e.kind.as_str()})).collect();
    let mut edges: BTreeSet<(String, String)> = BTreeSet::new();
    let mut missing: BTreeSet<(String, String)> = BTreeSet::new();
    let mut escaping: BTreeSet<(String, String)> = BTreeSet::new();
    for (path, entry) in files {
        if is_eval_fixture_path(path) || entry.kind != FileKind::Text {
            continue;
        }
        for raw in extract_references(entry.content.as_deref().unwrap_or("")) {
            match resolve_reference(path, &raw) {
                Resolved::Skip => {}
                Resolved::Escapes => {
                    escaping.insert((path.to_string(), raw));
                }
                Resolved::Path(p) if files.contains_key(p.as_str()) => {
                    edges.insert((path.to_string(), p));
                }
                Resolved::Path(p) => {
                    missing.insert((path.to_string(), p));
                }
            }
        }
    }
    let referenced: BTreeSet<&str> = edges.iter().map(|(_, t)| t.as_str()).collect();
    let orphans: Vec<&str> = files
        .keys()
        .copied()
        .filter(|p| RESOURCE_DIRS.contains(&p.split('/').next().unwrap_or("")))
        .filter(|p| !referenced.contains(p))
        .filter(|p| *p != "evals/evals.json" && *p != "evals/trigger_eval_set.json")
        .filter(|p| !is_eval_fixture_path(p))
        .collect();

    let mut findings = Vec::new();
    for (source, target) in &missing {
        findings.push(
            Finding::new(
                "resource.missing",
                "warning",
                format!("Referenced resource does not exist: {target}"),
                "Add the referenced file, correct the path, or remove the stale reference.",
            )
            .path(source.clone())
            .evidence(json!(target)),
        );
    }
    for (source, raw) in &escaping {
        findings.push(
            Finding::new(
                "resource.escaping-link",
                "warning",
                format!("Reference escapes the package boundary: {raw}"),
                "Keep skill references package-relative and inside the skill directory.",
            )
            .path(source.clone())
            .evidence(json!(raw)),
        );
    }
    for orphan in &orphans {
        findings.push(
            Finding::new(
                "resource.unreferenced",
                "warning",
                "Resource is not reachable from SKILL.md or another referenced resource.",
                "Reference the file with read-when guidance or remove it from the package.",
            )
            .path(*orphan),
        );
    }
    let graph = json!({
        "nodes": nodes,
        "edges": edges.iter().map(|(s, t)| json!({"source": s, "target": t})).collect::<Vec<_>>(),
        "orphans": orphans,
    });
    (graph, findings)
}

// ---- eval manifests ------------------------------------------------------------------------

fn case_stats(schema: &str, cases: &[Value]) -> Map<String, Value> {
    let positive = cases.iter().filter(|c| c.get("should_trigger") == Some(&Value::Bool(true))).count();
    let negative = cases.iter().filter(|c| c.get("should_trigger") == Some(&Value::Bool(false))).count();
    let v = json!({
        "schema": schema,
        "valid": true,
        "case_count": cases.len(),
        "positive_trigger_cases": positive,
        "negative_trigger_cases": negative,
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn classify_manifest(payload: &Value) -> Map<String, Value> {
    if let Some(obj) = payload.as_object() {
        if obj.get("schema_version").is_some_and(Value::is_string) {
            return match obj.get("cases") {
                Some(Value::Array(cases)) => case_stats("versioned", cases),
                _ => case_stats("versioned", &[]),
            };
        }
        if let Some(Value::Array(evals)) = obj.get("evals") {
            return case_stats("skill-creator-evals", evals);
        }
    }
    if let Value::Array(cases) = payload {
        return case_stats("trigger-eval-list", cases);
    }
    case_stats("unknown", &[])
}

/// A `JSONDecodeError`'s `msg` and `lineno` from the text `json.loads` raised.
fn decode_error_parts(message: &str) -> (String, u64) {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"\A(?s)(.*): line (\d+) column \d+ \(char \d+\)\z").expect("static regex"));
    match re.captures(message) {
        Some(c) => (c[1].to_string(), c[2].parse().unwrap_or(1)),
        None => (message.to_string(), 1),
    }
}

fn analyze_eval_manifests(files: &BTreeMap<&str, &FileEntry>) -> (Value, Vec<Finding>) {
    let eval_files: Vec<&str> =
        files.keys().copied().filter(|p| p.starts_with("evals/") && p.ends_with(".json")).collect();
    let mut findings = Vec::new();
    let mut manifests = Vec::new();
    let (mut cases, mut positive, mut negative) = (0u64, 0u64, 0u64);
    if eval_files.is_empty() {
        let aggregate = json!({
            "schema": null, "valid": null, "case_count": 0, "positive_trigger_cases": 0,
            "negative_trigger_cases": 0, "manifests": [],
        });
        return (aggregate, findings);
    }
    let mut schemas: BTreeSet<String> = BTreeSet::new();
    let mut valid = true;
    for path in eval_files {
        let entry = files[path];
        if entry.kind != FileKind::Text {
            findings.push(
                Finding::new(
                    "eval.binary-manifest",
                    "warning",
                    "Eval manifest is not UTF-8 JSON text.",
                    "Store eval manifests as UTF-8 JSON.",
                )
                .path(path),
            );
            valid = false;
            continue;
        }
        let payload = match toolhost_py::json::loads(entry.content.as_deref().unwrap_or("")) {
            Ok(v) => v,
            Err(message) => {
                let (msg, lineno) = decode_error_parts(&message);
                let mut f = Finding::new(
                    "eval.invalid-json",
                    "warning",
                    "Eval manifest is not valid JSON.",
                    "Fix the JSON syntax or remove the manifest.",
                )
                .path(path)
                .evidence(json!(msg));
                f.line = Some(lineno);
                findings.push(f);
                valid = false;
                continue;
            }
        };
        let mut manifest = classify_manifest(&payload);
        manifest.insert("path".into(), json!(path));
        schemas.insert(manifest["schema"].as_str().unwrap_or("").to_string());
        cases += manifest["case_count"].as_u64().unwrap_or(0);
        positive += manifest["positive_trigger_cases"].as_u64().unwrap_or(0);
        negative += manifest["negative_trigger_cases"].as_u64().unwrap_or(0);
        manifests.push(Value::Object(manifest));
    }
    let schema = match schemas.len() {
        0 => Value::Null,
        1 => json!(schemas.into_iter().next()),
        _ => json!("mixed"),
    };
    let aggregate = json!({
        "schema": schema,
        "valid": valid,
        "case_count": cases,
        "positive_trigger_cases": positive,
        "negative_trigger_cases": negative,
        "manifests": manifests,
    });
    (aggregate, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_fixture_paths() {
        assert!(is_eval_fixture_path("evals/fixtures/a/SKILL.md"));
        assert!(!is_eval_fixture_path("evals/fixtures"));
        assert!(!is_eval_fixture_path("evals/x/y"));
        assert!(is_eval_fixture_skill_md("evals/fixtures/a/SKILL.md"));
        assert!(!is_eval_fixture_skill_md("evals/fixtures/SKILL.md"));
    }

    #[test]
    fn references_resolve_like_pathlib() {
        assert!(
            matches!(resolve_reference("SKILL.md", "references/a.md"), Resolved::Path(p) if p == "references/a.md")
        );
        assert!(matches!(resolve_reference("a/b.md", "../c.md"), Resolved::Path(p) if p == "c.md"));
        assert!(matches!(resolve_reference("SKILL.md", "../c.md"), Resolved::Escapes));
        assert!(matches!(resolve_reference("SKILL.md", "/etc/hosts"), Resolved::Escapes));
        assert!(matches!(resolve_reference("SKILL.md", "https://x.y/z"), Resolved::Skip));
        assert!(matches!(resolve_reference("SKILL.md", "."), Resolved::Escapes));
    }

    #[test]
    fn decode_errors_split() {
        assert_eq!(
            decode_error_parts("Expecting value: line 1 column 17 (char 16)"),
            ("Expecting value".to_string(), 1)
        );
    }
}
