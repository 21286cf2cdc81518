//! Python `re` patterns for `grep`: a small translator into the `regex` dialect (look-around and
//! back-references go to `fancy-regex`), reporting the common syntax errors with Python's own
//! messages ("unterminated character set at position 0", …) so `Error: Invalid regex pattern: …`
//! reads as DeerFlow's.

use thiserror::Error;

/// A pattern Python's `re` would reject, with its message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct PyReError(pub String);

/// How anchors are rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchors {
    /// Exactly Python's meaning on one line that may end in `\n`.
    Line,
    /// Line-aware anchors over a whole buffer: a superset used to find candidate lines.
    Buffer,
}

/// A translated pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    pub pattern: String,
    /// Needs `fancy-regex` (look-around, back-references, atomic groups, conditionals).
    pub fancy: bool,
}

struct Parser<'a> {
    c: &'a [char],
    i: usize,
    out: String,
    fancy: bool,
    anchors: Anchors,
    multiline: bool,
}

/// What the previous item was, for Python's "nothing to repeat" / "multiple repeat" checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prev {
    Nothing,
    Anchor,
    Atom,
    Repeat,
}

fn err(msg: &str, pos: usize) -> PyReError {
    PyReError(format!("{msg} at position {pos}"))
}

/// Translate a Python pattern. `Err` carries Python's message for the common errors.
pub fn translate(pattern: &str, anchors: Anchors) -> Result<Translated, PyReError> {
    let chars: Vec<char> = pattern.chars().collect();
    let multiline = leading_flags(&chars).contains('m');
    let mut p = Parser { c: &chars, i: 0, out: String::new(), fancy: false, anchors, multiline };
    p.sequence(None)?;
    Ok(Translated { pattern: p.out, fancy: p.fancy })
}

/// Letters of global flag groups at the start, e.g. `(?im)`.
fn leading_flags(c: &[char]) -> String {
    let mut flags = String::new();
    let mut i = 0;
    while c.len() >= i + 3 && c[i] == '(' && c[i + 1] == '?' {
        let mut j = i + 2;
        let mut f = String::new();
        while j < c.len() && c[j].is_ascii_alphabetic() {
            f.push(c[j]);
            j += 1;
        }
        if j < c.len() && c[j] == ')' && !f.is_empty() {
            flags.push_str(&f);
            i = j + 1;
        } else {
            break;
        }
    }
    flags
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.c.get(self.i).copied()
    }

    /// Parse until the end or the `)` closing the group opened at `open`.
    fn sequence(&mut self, open: Option<usize>) -> Result<(), PyReError> {
        let mut prev = Prev::Nothing;
        while let Some(ch) = self.peek() {
            let pos = self.i;
            match ch {
                ')' => {
                    if open.is_none() {
                        return Err(err("unbalanced parenthesis", pos));
                    }
                    return Ok(());
                }
                '|' => {
                    self.i += 1;
                    self.out.push('|');
                    prev = Prev::Nothing;
                }
                '(' => {
                    self.group()?;
                    prev = Prev::Atom;
                }
                '[' => {
                    self.class()?;
                    prev = Prev::Atom;
                }
                '*' | '+' | '?' => {
                    self.check_repeat(prev, pos)?;
                    self.i += 1;
                    self.out.push(ch);
                    self.repeat_suffix();
                    prev = Prev::Repeat;
                }
                '{' => {
                    if let Some((text, len)) = self.brace_quantifier() {
                        self.check_repeat(prev, pos)?;
                        self.i += len;
                        self.out.push_str(&text);
                        self.repeat_suffix();
                        prev = Prev::Repeat;
                    } else {
                        self.i += 1;
                        self.out.push_str("\\{");
                        prev = Prev::Atom;
                    }
                }
                '^' => {
                    self.i += 1;
                    self.out.push_str(match (self.anchors, self.multiline) {
                        (Anchors::Buffer, _) | (_, true) => "(?m:^)",
                        _ => "\\A",
                    });
                    prev = Prev::Anchor;
                }
                '$' => {
                    self.i += 1;
                    self.out.push_str(match (self.anchors, self.multiline) {
                        (Anchors::Buffer, _) | (_, true) => "(?m:$)",
                        _ => "(?:\\n?\\z)",
                    });
                    prev = Prev::Anchor;
                }
                '\\' => {
                    prev = self.escape(false)?;
                }
                '.' => {
                    self.i += 1;
                    self.out.push('.');
                    prev = Prev::Atom;
                }
                c => {
                    self.i += 1;
                    self.out.push_str(&regex::escape(&c.to_string()));
                    prev = Prev::Atom;
                }
            }
        }
        if let Some(o) = open {
            return Err(err("missing ), unterminated subpattern", o));
        }
        Ok(())
    }

    fn check_repeat(&self, prev: Prev, pos: usize) -> Result<(), PyReError> {
        match prev {
            Prev::Nothing | Prev::Anchor => Err(err("nothing to repeat", pos)),
            Prev::Repeat => Err(err("multiple repeat", pos)),
            Prev::Atom => Ok(()),
        }
    }

    /// A lazy `?` or possessive `+` right after a quantifier.
    fn repeat_suffix(&mut self) {
        match self.peek() {
            Some('?') => {
                self.i += 1;
                self.out.push('?');
            }
            Some('+') => {
                // Possessive: only fancy-regex knows it.
                self.i += 1;
                self.out.push('+');
                self.fancy = true;
            }
            _ => {}
        }
    }

    /// `{m}`, `{m,}`, `{,n}`, `{m,n}` at the cursor, rendered for `regex`, and its length.
    fn brace_quantifier(&self) -> Option<(String, usize)> {
        let rest = &self.c[self.i..];
        let close = rest.iter().position(|&c| c == '}')?;
        let inner: String = rest[1..close].iter().collect();
        let (lo, hi) = match inner.split_once(',') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (inner.clone(), None),
        };
        let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if !digits(&lo) || hi.as_deref().is_some_and(|h| !digits(h)) {
            return None;
        }
        if lo.is_empty() && hi.as_deref().is_none_or(str::is_empty) && hi.is_none() {
            return None;
        }
        let lo = if lo.is_empty() { "0".to_string() } else { lo };
        let text = match hi {
            None => format!("{{{lo}}}"),
            Some(h) if h.is_empty() => format!("{{{lo},}}"),
            Some(h) => format!("{{{lo},{h}}}"),
        };
        Some((text, close + 1))
    }

    fn group(&mut self) -> Result<(), PyReError> {
        let open = self.i;
        self.i += 1;
        if self.peek() != Some('?') {
            self.out.push('(');
            self.sequence(Some(open))?;
            self.i += 1;
            self.out.push(')');
            return Ok(());
        }
        self.i += 1;
        let rest: String = self.c[self.i..].iter().take(3).collect();
        if rest.starts_with('#') {
            // Comment group: dropped.
            while let Some(c) = self.peek() {
                self.i += 1;
                if c == ')' {
                    return Ok(());
                }
            }
            return Err(PyReError("missing ), unterminated comment at position ".to_string() + &open.to_string()));
        }
        let (prefix, len, fancy) = if rest.starts_with(':') {
            ("(?:", 1, false)
        } else if rest.starts_with("P<") {
            let close = self.c[self.i..].iter().position(|&c| c == '>');
            let Some(close) = close else { return Err(err("missing >, unterminated name", self.i + 2)) };
            let name: String = self.c[self.i + 2..self.i + close].iter().collect();
            self.out.push_str(&format!("(?P<{name}>"));
            self.i += close + 1;
            self.sequence(Some(open))?;
            self.i += 1;
            self.out.push(')');
            return Ok(());
        } else if rest.starts_with("P=") {
            let close = self.c[self.i..].iter().position(|&c| c == ')');
            let Some(close) = close else { return Err(err("missing ), unterminated name", self.i + 2)) };
            let name: String = self.c[self.i + 2..self.i + close].iter().collect();
            self.out.push_str(&format!("(?P={name})"));
            self.i += close + 1;
            self.fancy = true;
            return Ok(());
        } else if rest.starts_with("<=") {
            ("(?<=", 2, true)
        } else if rest.starts_with("<!") {
            ("(?<!", 2, true)
        } else if rest.starts_with('=') {
            ("(?=", 1, true)
        } else if rest.starts_with('!') {
            ("(?!", 1, true)
        } else if rest.starts_with('>') {
            ("(?>", 1, true)
        } else if rest.starts_with('(') {
            self.fancy = true;
            self.out.push_str("(?");
            // Conditional: copy `(name)` verbatim, then the branches.
            let close = self.c[self.i..].iter().position(|&c| c == ')').map(|p| p + 1).unwrap_or(1);
            let cond: String = self.c[self.i..self.i + close].iter().collect();
            self.out.push_str(&cond);
            self.i += close;
            self.sequence(Some(open))?;
            self.i += 1;
            self.out.push(')');
            return Ok(());
        } else {
            // Inline flags: `(?aiLmsux)` or scoped `(?i:...)`, `(?-i:...)`.
            let mut flags = String::new();
            let start = self.i;
            while let Some(c) = self.peek() {
                if c.is_ascii_alphabetic() || c == '-' {
                    if "imsx-".contains(c) {
                        flags.push(c);
                    } else if !"aLu".contains(c) {
                        return Err(err("unknown flag", self.i));
                    }
                    self.i += 1;
                } else {
                    break;
                }
            }
            match self.peek() {
                Some(')') => {
                    // Python 3.11+ only accepts global flags at the very start.
                    if self.c[..open].iter().collect::<String>() != leading_prefix(self.c, open) {
                        return Err(err("global flags not at the start of the expression", open));
                    }
                    self.i += 1;
                    if !flags.is_empty() && flags != "-" {
                        self.out.push_str(&format!("(?{flags})"));
                    }
                    return Ok(());
                }
                Some(':') => {
                    self.i += 1;
                    self.out.push_str(&format!("(?{flags}:"));
                    self.sequence(Some(open))?;
                    self.i += 1;
                    self.out.push(')');
                    return Ok(());
                }
                _ => {
                    let shown: String = self.c.get(start).map(|c| c.to_string()).unwrap_or_default();
                    return Err(err(&format!("unknown extension ?{shown}"), open + 1));
                }
            }
        };
        self.i += len;
        self.fancy |= fancy;
        self.out.push_str(prefix);
        self.sequence(Some(open))?;
        self.i += 1;
        self.out.push(')');
        Ok(())
    }

    fn class(&mut self) -> Result<(), PyReError> {
        let open = self.i;
        self.i += 1;
        let mut s = String::from("[");
        if self.peek() == Some('^') {
            self.i += 1;
            s.push('^');
        }
        let mut first = true;
        let mut last_dash = false;
        loop {
            let Some(c) = self.peek() else { return Err(err("unterminated character set", open)) };
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            match c {
                '\\' => {
                    let saved = std::mem::take(&mut self.out);
                    self.escape(true)?;
                    let piece = std::mem::replace(&mut self.out, saved);
                    s.push_str(&piece);
                    last_dash = false;
                }
                '-' => {
                    self.i += 1;
                    s.push_str(if last_dash { "\\-" } else { "-" });
                    last_dash = true;
                }
                '[' | ']' | '&' | '~' => {
                    self.i += 1;
                    s.push('\\');
                    s.push(c);
                    last_dash = false;
                }
                c => {
                    self.i += 1;
                    s.push(c);
                    last_dash = false;
                }
            }
        }
        s.push(']');
        self.out.push_str(&s);
        Ok(())
    }

    /// An escape at the cursor; `in_class` changes `\b` to a backspace.
    fn escape(&mut self, in_class: bool) -> Result<Prev, PyReError> {
        let pos = self.i;
        self.i += 1;
        let Some(c) = self.peek() else {
            return Err(PyReError(format!("bad escape (end of pattern) at position {pos}")));
        };
        self.i += 1;
        let prev = match c {
            'd' | 'D' | 'w' | 'W' | 's' | 'S' => {
                self.out.push('\\');
                self.out.push(c);
                Prev::Atom
            }
            'b' if in_class => {
                self.out.push_str("\\x08");
                Prev::Atom
            }
            'b' | 'B' => {
                self.out.push('\\');
                self.out.push(c);
                Prev::Anchor
            }
            'A' | 'Z' if in_class => return Err(err(&format!("bad escape \\{c}"), pos)),
            'A' => {
                self.out.push_str(if self.anchors == Anchors::Buffer { "(?m:^)" } else { "\\A" });
                Prev::Anchor
            }
            'Z' => {
                self.out.push_str(if self.anchors == Anchors::Buffer { "(?m:$)" } else { "\\z" });
                Prev::Anchor
            }
            'n' | 't' | 'r' | 'f' | 'v' => {
                self.out.push('\\');
                self.out.push(c);
                Prev::Atom
            }
            'a' => {
                self.out.push_str("\\x07");
                Prev::Atom
            }
            'x' | 'u' | 'U' => {
                let want = match c {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = self.c[self.i..].iter().take(want).collect();
                if hex.chars().count() != want || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                    return Err(err(&format!("incomplete escape \\{c}{hex}"), pos));
                }
                self.i += want;
                let v = u32::from_str_radix(&hex, 16).map_err(|_| err("bad escape", pos))?;
                let Some(ch) = char::from_u32(v) else { return Err(err(&format!("bad escape \\{c}{hex}"), pos)) };
                self.out.push_str(&format!("\\x{{{:X}}}", ch as u32));
                Prev::Atom
            }
            '0' => {
                // Octal: up to two more digits.
                let mut v = 0u32;
                let mut n = 0;
                while n < 2 {
                    match self.peek() {
                        Some(d @ '0'..='7') => {
                            v = v * 8 + (d as u32 - '0' as u32);
                            self.i += 1;
                            n += 1;
                        }
                        _ => break,
                    }
                }
                self.out.push_str(&format!("\\x{{{v:X}}}"));
                Prev::Atom
            }
            '1'..='9' if !in_class => {
                let mut num = String::from(c);
                if let Some(d @ '0'..='9') = self.peek() {
                    num.push(d);
                    self.i += 1;
                }
                self.fancy = true;
                self.out.push('\\');
                self.out.push_str(&num);
                Prev::Atom
            }
            c if c.is_ascii_alphanumeric() => return Err(err(&format!("bad escape \\{c}"), pos)),
            c => {
                self.out.push_str(&regex::escape(&c.to_string()));
                Prev::Atom
            }
        };
        Ok(prev)
    }
}

/// The run of global flag groups at the start of the pattern, up to `upto`.
fn leading_prefix(c: &[char], upto: usize) -> String {
    let flags_len = {
        let mut i = 0;
        while c.len() >= i + 3 && c[i] == '(' && c[i + 1] == '?' {
            let mut j = i + 2;
            while j < c.len() && c[j].is_ascii_alphabetic() {
                j += 1;
            }
            if j < c.len() && c[j] == ')' && j > i + 2 {
                i = j + 1;
            } else {
                break;
            }
        }
        i
    };
    c[..upto.min(flags_len)].iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(p: &str) -> String {
        translate(p, Anchors::Line).unwrap().pattern
    }

    fn e(p: &str) -> String {
        translate(p, Anchors::Line).unwrap_err().0
    }

    #[test]
    fn python_error_messages() {
        assert_eq!(e("[invalid"), "unterminated character set at position 0");
        assert_eq!(e("(abc"), "missing ), unterminated subpattern at position 0");
        assert_eq!(e("abc)"), "unbalanced parenthesis at position 3");
        assert_eq!(e("*a"), "nothing to repeat at position 0");
        assert_eq!(e("a**"), "multiple repeat at position 2");
        assert_eq!(e("\\q"), "bad escape \\q at position 0");
        assert_eq!(e("ab\\"), "bad escape (end of pattern) at position 2");
        assert_eq!(e("a(?i)b"), "global flags not at the start of the expression at position 1");
    }

    #[test]
    fn translations() {
        assert_eq!(t("a{,3}"), "a{0,3}");
        assert_eq!(t("a{b"), "a\\{b");
        assert_eq!(t("x$"), "x(?:\\n?\\z)");
        assert_eq!(t("[[]"), "[\\[]");
        assert!(translate("TODO(?=:)", Anchors::Line).unwrap().fancy);
        assert!(!translate("\\balpha\\b", Anchors::Line).unwrap().fancy);
        assert_eq!(t("(?i)a"), "(?i)a");
        assert_eq!(t("a*?b"), "a*?b");
        assert!(regex::Regex::new(&t("[a-z]+[^\\]x]\\d{2,}")).is_ok());
    }
}
