//! `yaml.safe_load` as PyYAML does it, for SKILL.md frontmatter: YAML 1.1 implicit typing of
//! plain scalars (`yes`/`on` are booleans, `1_000` and `0o17`-style `017` are integers, `1e3` is
//! a string, dates are dates), last-wins duplicate keys, `<<` merge keys, anchors and aliases.
//! Which values count as strings decides whether DeerFlow accepts a skill, so the YAML 1.2
//! typing of serde_yaml would accept and reject different skills.

use std::sync::OnceLock;

use regex::Regex;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A Python value as `yaml.safe_load` returns it.
#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    /// Kept as Python would print it (`str(int)`), since only its type and text matter here.
    Int(String),
    Float(f64),
    Str(String),
    /// `datetime.date` / `datetime.datetime`, kept as written.
    Timestamp {
        text: String,
        has_time: bool,
    },
    List(Vec<PyValue>),
    /// Insertion order as in a Python dict; a repeated key keeps its first position.
    Dict(Vec<(PyValue, PyValue)>),
}

impl PyValue {
    /// `type(v).__name__`
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::Timestamp { has_time: false, .. } => "date",
            PyValue::Timestamp { has_time: true, .. } => "datetime",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(s) => s.trim_start_matches('-') != "0",
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::Timestamp { .. } => true,
            PyValue::List(l) => !l.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
        }
    }

    /// `str(v)` for scalars (containers are rendered loosely; no caller depends on them).
    pub fn py_str(&self) -> String {
        match self {
            PyValue::None => "None".into(),
            PyValue::Bool(true) => "True".into(),
            PyValue::Bool(false) => "False".into(),
            PyValue::Int(s) => s.clone(),
            PyValue::Float(f) if f.is_nan() => "nan".into(),
            PyValue::Float(f) if f.is_infinite() => if *f > 0.0 { "inf" } else { "-inf" }.into(),
            PyValue::Float(f) if f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
            PyValue::Float(f) => f.to_string(),
            PyValue::Str(s) => s.clone(),
            PyValue::Timestamp { text, .. } => text.clone(),
            PyValue::List(items) => format!("[{}]", items.iter().map(PyValue::py_str).collect::<Vec<_>>().join(", ")),
            PyValue::Dict(items) => format!(
                "{{{}}}",
                items.iter().map(|(k, v)| format!("{}: {}", k.py_str(), v.py_str())).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, PyValue::None)
    }

    /// `d.get(key)` on a dict with string keys.
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(items) => items.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v),
            _ => None,
        }
    }
}

struct Collector {
    events: Vec<(Event, Marker)>,
}

impl MarkedEventReceiver for Collector {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        self.events.push((ev, mark));
    }
}

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

/// PyYAML's implicit resolvers (`yaml/resolver.py`), in their precedence.
fn resolve_plain(text: &str) -> Result<PyValue, String> {
    static BOOL: OnceLock<Regex> = OnceLock::new();
    static FLOAT: OnceLock<Regex> = OnceLock::new();
    static INT: OnceLock<Regex> = OnceLock::new();
    static NULL: OnceLock<Regex> = OnceLock::new();
    static TIMESTAMP: OnceLock<Regex> = OnceLock::new();
    if re(&BOOL, r"\A(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)\z").is_match(text) {
        return Ok(PyValue::Bool(matches!(
            text,
            "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON"
        )));
    }
    let float = r"\A(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\z";
    if re(&FLOAT, float).is_match(text) {
        return Ok(PyValue::Float(construct_float(text)));
    }
    let int = r"\A(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)\z";
    if re(&INT, int).is_match(text) {
        return Ok(PyValue::Int(construct_int(text)));
    }
    if text == "<<" {
        // The merge key is only meaningful as a mapping key, which the builder handles.
        return Err("could not determine a constructor for the tag 'tag:yaml.org,2002:merge'".into());
    }
    if re(&NULL, r"\A(?:~|null|Null|NULL|)\z").is_match(text) {
        return Ok(PyValue::None);
    }
    let ts = r"\A(?:[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)\z";
    if re(&TIMESTAMP, ts).is_match(text) {
        if !valid_date(text) {
            return Err(format!("invalid date: {text}"));
        }
        return Ok(PyValue::Timestamp { text: text.into(), has_time: text.len() > 10 });
    }
    if text == "=" {
        return Err("could not determine a constructor for the tag 'tag:yaml.org,2002:value'".into());
    }
    Ok(PyValue::Str(text.into()))
}

/// `datetime.date(y, m, d)` accepts only real calendar days.
fn valid_date(text: &str) -> bool {
    let mut parts = text.splitn(3, '-');
    let year: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let month: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let day: u32 = parts
        .next()
        .map(|p| p.chars().take_while(char::is_ascii_digit).collect::<String>())
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let leap = (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    year >= 1 && (1..=days).contains(&day)
}

/// `construct_yaml_int`, rendered as Python prints the result.
fn construct_int(text: &str) -> String {
    let cleaned = text.replace('_', "");
    let (neg, digits) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest.to_string()),
        None => (false, cleaned.trim_start_matches('+').to_string()),
    };
    let value: Option<i128> = if digits == "0" {
        Some(0)
    } else if let Some(b) = digits.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else if let Some(h) = digits.strip_prefix("0x") {
        i128::from_str_radix(h, 16).ok()
    } else if digits.starts_with('0') {
        i128::from_str_radix(&digits, 8).ok()
    } else if digits.contains(':') {
        digits.split(':').try_fold(0i128, |acc, part| part.parse::<i128>().ok().map(|p| acc * 60 + p))
    } else {
        digits.parse().ok()
    };
    match value {
        Some(v) => (if neg { -v } else { v }).to_string(),
        // Beyond i128 only the digits matter to callers; keep them.
        None => format!("{}{digits}", if neg { "-" } else { "" }),
    }
}

fn construct_float(text: &str) -> f64 {
    let cleaned = text.replace('_', "").to_lowercase();
    let (sign, body) = match cleaned.strip_prefix('-') {
        Some(rest) => (-1.0, rest.to_string()),
        None => (1.0, cleaned.trim_start_matches('+').to_string()),
    };
    if body == ".inf" {
        return sign * f64::INFINITY;
    }
    if body == ".nan" {
        return f64::NAN;
    }
    if body.contains(':') {
        let mut value = 0.0;
        for part in body.split(':') {
            value = value * 60.0 + part.parse::<f64>().unwrap_or(0.0);
        }
        return sign * value;
    }
    sign * body.parse::<f64>().unwrap_or(0.0)
}

/// An explicit `!!type` tag on a scalar.
fn construct_tagged(tag: &Tag, text: &str) -> Result<PyValue, String> {
    let name = if tag.handle == "tag:yaml.org,2002:" { tag.suffix.as_str() } else { "" };
    let resolved = resolve_plain(text);
    match (name, resolved) {
        ("str", _) => Ok(PyValue::Str(text.into())),
        ("null", _) => Ok(PyValue::None),
        ("bool", Ok(v @ PyValue::Bool(_))) | ("int", Ok(v @ PyValue::Int(_))) => Ok(v),
        ("float", Ok(PyValue::Float(f))) => Ok(PyValue::Float(f)),
        ("float", Ok(PyValue::Int(i))) => Ok(PyValue::Float(i.parse().unwrap_or(0.0))),
        ("timestamp", Ok(v @ PyValue::Timestamp { .. })) => Ok(v),
        _ => Err(format!("could not determine a constructor for the tag '{}{}'", tag.handle, tag.suffix)),
    }
}

struct Builder<'a> {
    events: &'a [(Event, Marker)],
    pos: usize,
    anchors: Vec<(usize, PyValue)>,
}

impl Builder<'_> {
    fn err(&self, msg: &str) -> String {
        match self.events.get(self.pos) {
            Some((_, m)) => format!("{msg} at line {} column {}", m.line(), m.col() + 1),
            None => msg.to_string(),
        }
    }

    fn remember(&mut self, anchor: usize, value: &PyValue) {
        if anchor > 0 {
            self.anchors.retain(|(a, _)| *a != anchor);
            self.anchors.push((anchor, value.clone()));
        }
    }

    fn node(&mut self) -> Result<PyValue, String> {
        let Some((event, _)) = self.events.get(self.pos) else { return Err("unexpected end of stream".into()) };
        self.pos += 1;
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let value = match (tag, style) {
                    (Some(tag), _) => construct_tagged(tag, text)?,
                    (None, TScalarStyle::Plain) => resolve_plain(text)?,
                    (None, _) => PyValue::Str(text.clone()),
                };
                self.remember(*anchor, &value);
                Ok(value)
            }
            Event::Alias(anchor) => self
                .anchors
                .iter()
                .find(|(a, _)| a == anchor)
                .map(|(_, v)| v.clone())
                .ok_or_else(|| self.err("found undefined alias")),
            Event::SequenceStart(anchor, _) => {
                let anchor = *anchor;
                let mut items = Vec::new();
                while !matches!(self.events.get(self.pos), Some((Event::SequenceEnd, _))) {
                    items.push(self.node()?);
                }
                self.pos += 1;
                let value = PyValue::List(items);
                self.remember(anchor, &value);
                Ok(value)
            }
            Event::MappingStart(anchor, _) => {
                let anchor = *anchor;
                let mut explicit: Vec<(PyValue, PyValue)> = Vec::new();
                let mut merged: Vec<(PyValue, PyValue)> = Vec::new();
                while !matches!(self.events.get(self.pos), Some((Event::MappingEnd, _))) {
                    let is_merge = matches!(
                        self.events.get(self.pos),
                        Some((Event::Scalar(t, TScalarStyle::Plain, _, None), _)) if t == "<<"
                    );
                    let key = if is_merge {
                        self.pos += 1;
                        PyValue::None
                    } else {
                        self.node()?
                    };
                    let value = self.node()?;
                    if is_merge {
                        // `flatten_mapping`: merged entries come first, explicit keys win.
                        let sources = match value {
                            PyValue::Dict(d) => vec![d],
                            PyValue::List(l) => l
                                .into_iter()
                                .rev()
                                .map(|v| match v {
                                    PyValue::Dict(d) => Ok(d),
                                    _ => Err(self.err("expected a mapping for merging")),
                                })
                                .collect::<Result<_, _>>()?,
                            _ => return Err(self.err("expected a mapping or list of mappings for merging")),
                        };
                        for source in sources {
                            for (k, v) in source {
                                insert(&mut merged, k, v);
                            }
                        }
                        continue;
                    }
                    if matches!(key, PyValue::List(_) | PyValue::Dict(_)) {
                        return Err(self.err("found unhashable key"));
                    }
                    insert(&mut explicit, key, value);
                }
                self.pos += 1;
                for (k, v) in explicit {
                    insert(&mut merged, k, v);
                }
                let value = PyValue::Dict(merged);
                self.remember(anchor, &value);
                Ok(value)
            }
            _ => Err(self.err("unexpected event")),
        }
    }
}

/// Python dict assignment: a repeated key keeps its slot and takes the new value.
fn insert(items: &mut Vec<(PyValue, PyValue)>, key: PyValue, value: PyValue) {
    let same = |k: &PyValue| match (k, &key) {
        // 1 == 1.0 == True in a Python dict; frontmatter keys are strings in practice.
        (PyValue::Float(a), PyValue::Float(b)) => a == b || (a.is_nan() && b.is_nan()),
        (a, b) => a == b,
    };
    match items.iter_mut().find(|(k, _)| same(k)) {
        Some(slot) => slot.1 = value,
        None => items.push((key, value)),
    }
}

/// `yaml.safe_load(text)`.
pub fn safe_load(text: &str) -> Result<PyValue, String> {
    let mut collector = Collector { events: Vec::new() };
    Parser::new_from_str(text).load(&mut collector, true).map_err(|e| e.to_string())?;
    let events = collector.events;
    let docs = events.iter().filter(|(e, _)| matches!(e, Event::DocumentStart)).count();
    if docs > 1 {
        return Err("expected a single document in the stream".into());
    }
    let Some(start) = events.iter().position(|(e, _)| matches!(e, Event::DocumentStart)) else {
        return Ok(PyValue::None);
    };
    let mut builder = Builder { events: &events, pos: start + 1, anchors: Vec::new() };
    if matches!(events.get(start + 1), Some((Event::DocumentEnd, _)) | None) {
        return Ok(PyValue::None);
    }
    builder.node()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> PyValue {
        safe_load(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn scalar(text: &str) -> PyValue {
        match load(&format!("k: {text}\n")) {
            PyValue::Dict(items) => items[0].1.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn yaml_1_1_scalars() {
        assert_eq!(scalar("yes"), PyValue::Bool(true));
        assert_eq!(scalar("Off"), PyValue::Bool(false));
        assert_eq!(scalar("'yes'"), PyValue::Str("yes".into()));
        assert_eq!(scalar("y"), PyValue::Str("y".into()));
        assert_eq!(scalar("1_000"), PyValue::Int("1000".into()));
        assert_eq!(scalar("017"), PyValue::Int("15".into()));
        assert_eq!(scalar("0x1F"), PyValue::Int("31".into()));
        assert_eq!(scalar("1:30"), PyValue::Int("90".into()));
        assert_eq!(scalar("1e3"), PyValue::Str("1e3".into()));
        assert_eq!(scalar("1.5e+3"), PyValue::Float(1500.0));
        assert_eq!(scalar("~"), PyValue::None);
        assert_eq!(scalar(""), PyValue::None);
        assert_eq!(scalar("2024-01-02").type_name(), "date");
        assert_eq!(scalar("2024-01-02 10:00:00").type_name(), "datetime");
        assert_eq!(scalar("!!str 12"), PyValue::Str("12".into()));
        assert_eq!(scalar("|\n  a\n  b"), PyValue::Str("a\nb\n".into()));
        assert_eq!(scalar("1.0").py_str(), "1.0");
    }

    #[test]
    fn mappings() {
        let v = load("a: 1\nb: 2\na: 3\n");
        assert_eq!(
            v,
            PyValue::Dict(vec![
                (PyValue::Str("a".into()), PyValue::Int("3".into())),
                (PyValue::Str("b".into()), PyValue::Int("2".into()))
            ])
        );
        let v = load("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n");
        assert_eq!(v.get("d").unwrap().get("x"), Some(&PyValue::Int("1".into())));
        assert_eq!(v.get("d").unwrap().get("y"), Some(&PyValue::Int("3".into())));
        assert_eq!(load(""), PyValue::None);
        assert_eq!(load("# only a comment\n"), PyValue::None);
        for bad in [
            "a: <<\n",
            "a: 2024-13-45\n",
            "a: [1\n",
            "a: b: c\n",
            "? [1]\n: x\n",
            "a: !custom x\n",
            "a: 1\n---\nb: 2\n",
            "a: *nope\n",
        ] {
            assert!(safe_load(bad).is_err(), "{bad:?}");
        }
    }
}
