//! SKILL.md frontmatter: DeerFlow's runtime parser (`H/skills/parser.py`, lenient, a bad skill
//! is skipped) and its write-time validator (`H/skills/validation.py`, strict, used by
//! `skill_manage`), with their exact messages.

use std::sync::OnceLock;

use regex::Regex;

use toolhost_py::yaml11::{safe_load, PyValue};

/// Keys `validate_skill_frontmatter_content` accepts (spec §9).
pub const ALLOWED_FRONTMATTER_PROPERTIES: [&str; 10] = [
    "name",
    "description",
    "license",
    "allowed-tools",
    "required-secrets",
    "secrets-autonomous",
    "metadata",
    "compatibility",
    "version",
    "author",
];

/// A secret a skill declares (`required-secrets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRequirement {
    pub name: String,
    pub optional: bool,
}

/// What the runtime parser keeps of a SKILL.md.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    pub license: Option<String>,
    /// `None`: the field is absent (legacy allow-all); `Some([])`: an explicit no-tool skill.
    pub allowed_tools: Option<Vec<String>>,
    pub required_secrets: Vec<SecretRequirement>,
    pub secrets_autonomous: bool,
}

/// Why the runtime parser skipped a SKILL.md. DeerFlow only logs these; the registry does too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("no YAML frontmatter found")]
    NoFrontmatter,
    #[error("invalid YAML front-matter: {0}")]
    Yaml(String),
    #[error("front-matter is not a YAML mapping")]
    NotMapping,
    #[error("'name' must be a non-empty string")]
    Name,
    #[error("'description' must be a non-empty string")]
    Description,
    #[error("allowed-tools must be a list of strings")]
    AllowedToolsNotList,
    #[error("allowed-tools must contain only strings")]
    AllowedToolsNotString,
    #[error("allowed-tools cannot contain empty tool names")]
    AllowedToolsEmptyName,
    #[error("required-secrets must be a list")]
    RequiredSecretsNotList,
}

fn runtime_frontmatter_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // `^---\s*\n(.*?)\n---\s*\n?` with re.DOTALL, anchored at the start like `re.match`.
    RE.get_or_init(|| Regex::new(r"(?s)\A---\s*\n(.*?)\n---\s*\n?").expect("static regex"))
}

fn validation_frontmatter_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"(?s)\A---\n(.*?)\n---").expect("static regex"))
}

fn env_var_name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\A[A-Za-z_][A-Za-z0-9_]*\z").expect("static regex"))
}

fn skill_name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\A[a-z0-9-]+\z").expect("static regex"))
}

/// The frontmatter text and the body after it, by the runtime parser's fence rule.
pub fn split_frontmatter(content: &str) -> Option<(&str, &str)> {
    let caps = runtime_frontmatter_re().captures(content)?;
    let fm = caps.get(1)?.as_str();
    let end = caps.get(0)?.end();
    Some((fm, &content[end..]))
}

/// A key of the frontmatter mapping; YAML `~`/empty is Python `None`, which the optional
/// fields treat as absent.
fn non_null<'a>(map: &'a PyValue, key: &str) -> Option<&'a PyValue> {
    map.get(key).filter(|v| !v.is_none())
}

/// `yaml.safe_load`, keeping only a mapping (`Ok(None)` for any other document).
fn load_mapping(text: &str) -> Result<Option<PyValue>, String> {
    match safe_load(text)? {
        v @ PyValue::Dict(_) => Ok(Some(v)),
        _ => Ok(None),
    }
}

/// `parse_allowed_tools`: absent/null → `None`; a list of non-blank strings (stripped) → the
/// list, duplicates kept; anything else rejects the skill.
pub fn parse_allowed_tools(raw: Option<&PyValue>) -> Result<Option<Vec<String>>, ParseError> {
    let Some(raw) = raw.filter(|v| !v.is_none()) else { return Ok(None) };
    let PyValue::List(items) = raw else { return Err(ParseError::AllowedToolsNotList) };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let PyValue::Str(s) = item else { return Err(ParseError::AllowedToolsNotString) };
        let name = s.trim();
        if name.is_empty() {
            return Err(ParseError::AllowedToolsEmptyName);
        }
        out.push(name.to_string());
    }
    Ok(Some(out))
}

/// `parse_required_secrets`: entries are `NAME` or `{name, optional}`; malformed entries and
/// invalid env names are dropped (with a log), duplicates keep the first.
pub fn parse_required_secrets(raw: Option<&PyValue>) -> Result<Vec<SecretRequirement>, ParseError> {
    let Some(raw) = raw.filter(|v| !v.is_none()) else { return Ok(Vec::new()) };
    let PyValue::List(items) = raw else { return Err(ParseError::RequiredSecretsNotList) };
    let mut out: Vec<SecretRequirement> = Vec::new();
    for item in items {
        let (name, optional) = match item {
            PyValue::Str(s) => (s.trim().to_string(), false),
            m @ PyValue::Dict(_) => {
                let name = m.get("name").filter(|v| v.truthy()).map(PyValue::py_str).unwrap_or_default();
                (name.trim().to_string(), m.get("optional").is_some_and(PyValue::truthy))
            }
            _ => {
                tracing::warn!("ignoring malformed required-secrets entry: {item:?}");
                continue;
            }
        };
        if !env_var_name_re().is_match(&name) {
            tracing::warn!("ignoring required-secrets entry with invalid env var name: {name:?}");
            continue;
        }
        if out.iter().any(|s| s.name == name) {
            continue;
        }
        out.push(SecretRequirement { name, optional });
    }
    Ok(out)
}

/// The runtime parser (`parse_skill_file` on the file's text). `Err` means DeerFlow would skip
/// the skill.
pub fn parse_skill_md(content: &str) -> Result<SkillMeta, ParseError> {
    let (fm, _body) = split_frontmatter(content).ok_or(ParseError::NoFrontmatter)?;
    let map = load_mapping(fm).map_err(ParseError::Yaml)?.ok_or(ParseError::NotMapping)?;
    let name = match map.get("name") {
        Some(PyValue::Str(s)) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return Err(ParseError::Name),
    };
    let description = match map.get("description") {
        Some(PyValue::Str(s)) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return Err(ParseError::Description),
    };
    let license = non_null(&map, "license").map(|v| v.py_str().trim().to_string()).filter(|s| !s.is_empty());
    let allowed_tools = parse_allowed_tools(map.get("allowed-tools"))?;
    let required_secrets = parse_required_secrets(map.get("required-secrets"))?;
    // Absent means true; anything but a real boolean fails closed to false.
    let secrets_autonomous = match non_null(&map, "secrets-autonomous") {
        None => true,
        Some(PyValue::Bool(b)) => *b,
        Some(_) => false,
    };
    Ok(SkillMeta { name, description, license, allowed_tools, required_secrets, secrets_autonomous })
}

/// `validate_skill_frontmatter_content`: the strict check `skill_manage` runs before a write.
/// Returns the (stripped) skill name, or DeerFlow's message.
pub fn validate_skill_frontmatter(content: &str) -> Result<String, String> {
    // DeerFlow validates the text after a write/read round trip, which turns CRLF into LF.
    let content = content.replace("\r\n", "\n").replace('\r', "\n");
    if !content.starts_with("---") {
        return Err("No YAML frontmatter found".to_string());
    }
    let Some(caps) = validation_frontmatter_re().captures(&content) else {
        return Err("Invalid frontmatter format".to_string());
    };
    let fm = caps.get(1).map(|m| m.as_str()).unwrap_or_default();
    let map = match load_mapping(fm) {
        Ok(Some(m)) => m,
        Ok(None) => return Err("Frontmatter must be a YAML dictionary".to_string()),
        Err(e) => return Err(format!("Invalid YAML in frontmatter: {e}")),
    };
    let PyValue::Dict(entries) = &map else { return Err("Frontmatter must be a YAML dictionary".to_string()) };
    let mut unexpected: Vec<String> = entries
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !k.as_str().is_some_and(|s| ALLOWED_FRONTMATTER_PROPERTIES.contains(&s)))
        .map(PyValue::py_str)
        .collect();
    if !unexpected.is_empty() {
        unexpected.sort();
        unexpected.dedup();
        return Err(format!("Unexpected key(s) in SKILL.md frontmatter: {}", unexpected.join(", ")));
    }
    let (Some(name), Some(description)) = (map.get("name"), map.get("description")) else {
        let missing = if map.get("name").is_none() { "name" } else { "description" };
        return Err(format!("Missing '{missing}' in frontmatter"));
    };
    let PyValue::Str(name) = name else {
        return Err(format!("Name must be a string, got {}", name.type_name()));
    };
    let name = name.trim();
    if name.is_empty() {
        return Err("Name cannot be empty".to_string());
    }
    if !skill_name_re().is_match(name) {
        return Err(format!("Name '{name}' should be hyphen-case (lowercase letters, digits, and hyphens only)"));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Err(format!("Name '{name}' cannot start/end with hyphen or contain consecutive hyphens"));
    }
    let len = name.chars().count();
    if len > 64 {
        return Err(format!("Name is too long ({len} characters). Maximum is 64 characters."));
    }
    let PyValue::Str(description) = description else {
        return Err(format!("Description must be a string, got {}", description.type_name()));
    };
    let description = description.trim();
    if description.contains('<') || description.contains('>') {
        return Err("Description cannot contain angle brackets (< or >)".to_string());
    }
    let len = description.chars().count();
    if len > 1024 {
        return Err(format!("Description is too long ({len} characters). Maximum is 1024 characters."));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/conformance/skill_policy.json");

    #[test]
    fn conformance_parse_cases() {
        let text = std::fs::read_to_string(VECTORS).expect("read skill_policy.json");
        let doc: Value = serde_json::from_str(&text).expect("parse skill_policy.json");
        let cases = doc["parse_cases"].as_array().expect("parse_cases");
        assert!(!cases.is_empty());
        for case in cases {
            let id = case["id"].as_str().unwrap_or("?");
            let md = case["skill_md"].as_str().expect("skill_md");
            let parsed = parse_skill_md(md);
            assert_eq!(parsed.is_ok(), case["parsed"].as_bool().expect("parsed"), "{id}: {parsed:?}");
            let expected: Option<Vec<String>> = serde_json::from_value(case["allowed_tools"].clone()).expect("tools");
            assert_eq!(parsed.ok().and_then(|m| m.allowed_tools), expected, "{id}");
        }
    }

    #[test]
    fn runtime_parser_fields() {
        let md = "---\nname: '  demo  '\ndescription: d\nlicense: 3\nrequired-secrets:\n  - API_KEY\n  - {name: TOKEN, optional: true}\n  - 'bad name'\n  - API_KEY\n  - 7\nsecrets-autonomous: 'no'\n---\nbody";
        let meta = parse_skill_md(md).unwrap();
        assert_eq!(meta.name, "demo");
        assert_eq!(meta.license.as_deref(), Some("3"));
        assert_eq!(
            meta.required_secrets,
            vec![
                SecretRequirement { name: "API_KEY".into(), optional: false },
                SecretRequirement { name: "TOKEN".into(), optional: true },
            ]
        );
        assert!(!meta.secrets_autonomous, "a non-bool secrets-autonomous fails closed");
        let meta = parse_skill_md("---\nname: a\ndescription: d\n---").unwrap();
        assert!(meta.secrets_autonomous);
        assert_eq!(parse_skill_md("---\n- a\n---\n"), Err(ParseError::NotMapping));
        assert_eq!(parse_skill_md("---\nname: a\ndescription: '  '\n---\n"), Err(ParseError::Description));
        assert_eq!(
            parse_skill_md("---\nname: a\ndescription: d\nrequired-secrets: X\n---\n"),
            Err(ParseError::RequiredSecretsNotList)
        );
        assert!(matches!(parse_skill_md("---\nname: [a\n---\n"), Err(ParseError::Yaml(_))));
        // YAML 1.1 typing, as PyYAML: `on`/`yes` are booleans, so not names or tool names.
        assert_eq!(parse_skill_md("---\nname: on\ndescription: d\n---\n"), Err(ParseError::Name));
        assert_eq!(
            parse_skill_md("---\nname: s\ndescription: d\nallowed-tools: [yes]\n---\n"),
            Err(ParseError::AllowedToolsNotString)
        );
        let meta = parse_skill_md("---\nname: s\ndescription: d\nallowed-tools: ['yes', 1e3]\n---\n").unwrap();
        assert_eq!(meta.allowed_tools, Some(vec!["yes".to_string(), "1e3".to_string()]));
        let meta = parse_skill_md("---\nname: a\ndescription: d\nname: b\n---\n").unwrap();
        assert_eq!(meta.name, "b", "a repeated key keeps the last value");
        assert_eq!(parse_skill_md("---\nname: s\ndescription: 2024-01-01\n---\n"), Err(ParseError::Description));
    }

    #[test]
    fn validator_messages() {
        let ok = "---\nname: my-skill\ndescription: Does things\n---\n# Body\n";
        assert_eq!(validate_skill_frontmatter(ok), Ok("my-skill".to_string()));
        assert_eq!(validate_skill_frontmatter(&ok.replace('\n', "\r\n")), Ok("my-skill".to_string()));
        let cases: &[(&str, &str)] = &[
            ("# no", "No YAML frontmatter found"),
            ("---name: a", "Invalid frontmatter format"),
            ("---\n- a\n---\n", "Frontmatter must be a YAML dictionary"),
            (
                "---\nname: a\ndescription: d\nzeta: 1\nalpha: 2\n---\n",
                "Unexpected key(s) in SKILL.md frontmatter: alpha, zeta",
            ),
            ("---\ndescription: d\n---\n", "Missing 'name' in frontmatter"),
            ("---\nname: a\n---\n", "Missing 'description' in frontmatter"),
            ("---\nname: 12\ndescription: d\n---\n", "Name must be a string, got int"),
            ("---\nname:\ndescription: d\n---\n", "Name must be a string, got NoneType"),
            ("---\nname: ' '\ndescription: d\n---\n", "Name cannot be empty"),
            (
                "---\nname: My_Skill\ndescription: d\n---\n",
                "Name 'My_Skill' should be hyphen-case (lowercase letters, digits, and hyphens only)",
            ),
            (
                "---\nname: a--b\ndescription: d\n---\n",
                "Name 'a--b' cannot start/end with hyphen or contain consecutive hyphens",
            ),
            ("---\nname: a\ndescription: [x]\n---\n", "Description must be a string, got list"),
            ("---\nname: a\ndescription: use <b>\n---\n", "Description cannot contain angle brackets (< or >)"),
        ];
        for (input, msg) in cases {
            assert_eq!(validate_skill_frontmatter(input), Err(msg.to_string()), "{input:?}");
        }
        let long = format!("---\nname: {}\ndescription: d\n---\n", "a".repeat(65));
        assert_eq!(
            validate_skill_frontmatter(&long),
            Err("Name is too long (65 characters). Maximum is 64 characters.".into())
        );
        let long = format!("---\nname: a\ndescription: {}\n---\n", "d".repeat(1025));
        assert_eq!(
            validate_skill_frontmatter(&long),
            Err("Description is too long (1025 characters). Maximum is 1024 characters.".into())
        );
        assert!(validate_skill_frontmatter("---\nname: a\ndescription: d: e\n---\n")
            .unwrap_err()
            .starts_with("Invalid YAML in frontmatter: "));
    }
}
