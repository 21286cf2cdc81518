//! `json.loads` with CPython's `JSONDecodeError` messages (`Expecting value: line 1 column 1
//! (char 0)`), which DeerFlow's tools print when a provider answers with something that is not
//! JSON.

use serde_json::Value;

/// `json.loads(text)`: the value, or Python's `JSONDecodeError` message
/// (`Expecting value: line 1 column 1 (char 0)`).
pub fn loads(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(e) => Err(decode_error(text).unwrap_or_else(|| e.to_string())),
    }
}

/// The message CPython's json decoder raises for `text`, or `None` when it would accept it.
fn decode_error(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = JsonScan { s: &chars };
    let start = p.ws(0);
    let result = match p.value(start) {
        Ok(end) => {
            let end = p.ws(end);
            if end != chars.len() {
                Err(("Extra data", end))
            } else {
                Ok(())
            }
        }
        Err(Stop::Expecting(at)) => Err(("Expecting value", at)),
        Err(Stop::Error(msg, at)) => Err((msg, at)),
    };
    let (msg, pos) = result.err()?;
    let before = &chars[..pos.min(chars.len())];
    let line = before.iter().filter(|c| **c == '\n').count() + 1;
    let col = match before.iter().rposition(|c| *c == '\n') {
        Some(i) => pos - i,
        None => pos + 1,
    };
    Some(format!("{msg}: line {line} column {col} (char {pos})"))
}

enum Stop {
    /// `StopIteration`: no value starts here.
    Expecting(usize),
    Error(&'static str, usize),
}

struct JsonScan<'a> {
    s: &'a [char],
}

impl JsonScan<'_> {
    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    fn ws(&self, mut i: usize) -> usize {
        while matches!(self.at(i), Some(' ' | '\t' | '\n' | '\r')) {
            i += 1;
        }
        i
    }

    fn starts(&self, i: usize, word: &str) -> bool {
        word.chars().enumerate().all(|(k, c)| self.at(i + k) == Some(c))
    }

    fn value(&mut self, i: usize) -> Result<usize, Stop> {
        match self.at(i) {
            None => Err(Stop::Expecting(i)),
            Some('"') => self.string(i + 1),
            Some('{') => self.object(i + 1),
            Some('[') => self.array(i + 1),
            Some('n') if self.starts(i, "null") => Ok(i + 4),
            Some('t') if self.starts(i, "true") => Ok(i + 4),
            Some('f') if self.starts(i, "false") => Ok(i + 5),
            Some('N') if self.starts(i, "NaN") => Ok(i + 3),
            Some('I') if self.starts(i, "Infinity") => Ok(i + 8),
            Some('-') if self.starts(i, "-Infinity") => Ok(i + 9),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(i),
            Some(_) => Err(Stop::Expecting(i)),
        }
    }

    fn number(&self, i: usize) -> Result<usize, Stop> {
        let mut j = i;
        if self.at(j) == Some('-') {
            j += 1;
        }
        match self.at(j) {
            Some('0') => j += 1,
            Some(c) if c.is_ascii_digit() => {
                while self.at(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
            }
            _ => return Err(Stop::Expecting(i)),
        }
        if self.at(j) == Some('.') && self.at(j + 1).is_some_and(|c| c.is_ascii_digit()) {
            j += 1;
            while self.at(j).is_some_and(|c| c.is_ascii_digit()) {
                j += 1;
            }
        }
        if matches!(self.at(j), Some('e' | 'E')) {
            let mut k = j + 1;
            if matches!(self.at(k), Some('+' | '-')) {
                k += 1;
            }
            if self.at(k).is_some_and(|c| c.is_ascii_digit()) {
                while self.at(k).is_some_and(|c| c.is_ascii_digit()) {
                    k += 1;
                }
                j = k;
            }
        }
        Ok(j)
    }

    /// `i` is just past the opening quote.
    fn string(&self, i: usize) -> Result<usize, Stop> {
        let begin = i - 1;
        let mut j = i;
        loop {
            match self.at(j) {
                None => return Err(Stop::Error("Unterminated string starting at", begin)),
                Some('"') => return Ok(j + 1),
                Some('\\') => match self.at(j + 1) {
                    None => return Err(Stop::Error("Unterminated string starting at", begin)),
                    Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't') => j += 2,
                    Some('u') => {
                        let hex = (j + 2..j + 6).all(|k| self.at(k).is_some_and(|c| c.is_ascii_hexdigit()));
                        if !hex {
                            return Err(Stop::Error("Invalid \\uXXXX escape", j + 1));
                        }
                        j += 6;
                    }
                    Some(_) => return Err(Stop::Error("Invalid \\escape", j)),
                },
                Some(c) if (c as u32) < 0x20 => return Err(Stop::Error("Invalid control character at", j)),
                Some(_) => j += 1,
            }
        }
    }

    fn object(&mut self, i: usize) -> Result<usize, Stop> {
        let mut end = self.ws(i);
        match self.at(end) {
            Some('}') => return Ok(end + 1),
            Some('"') => {}
            _ => return Err(Stop::Error("Expecting property name enclosed in double quotes", end)),
        }
        end += 1;
        loop {
            end = self.string(end)?;
            end = self.ws(end);
            if self.at(end) != Some(':') {
                return Err(Stop::Error("Expecting ':' delimiter", end));
            }
            end = self.ws(end + 1);
            end = self.value(end).map_err(|e| match e {
                Stop::Expecting(at) => Stop::Error("Expecting value", at),
                other => other,
            })?;
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            match next {
                Some('}') => return Ok(end),
                Some(',') => {}
                _ => return Err(Stop::Error("Expecting ',' delimiter", end - 1)),
            }
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            if next != Some('"') {
                return Err(Stop::Error("Expecting property name enclosed in double quotes", end - 1));
            }
        }
    }

    fn array(&mut self, i: usize) -> Result<usize, Stop> {
        let mut end = self.ws(i);
        if self.at(end) == Some(']') {
            return Ok(end + 1);
        }
        loop {
            end = self.value(end).map_err(|e| match e {
                Stop::Expecting(at) => Stop::Error("Expecting value", at),
                other => other,
            })?;
            end = self.ws(end);
            let next = self.at(end);
            end += 1;
            match next {
                Some(']') => return Ok(end),
                Some(',') => {}
                _ => return Err(Stop::Error("Expecting ',' delimiter", end - 1)),
            }
            end = self.ws(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decode_errors_read_like_python() {
        for (text, want) in [
            ("", "Expecting value: line 1 column 1 (char 0)"),
            ("<html>", "Expecting value: line 1 column 1 (char 0)"),
            ("{\"a\": 1", "Expecting ',' delimiter: line 1 column 8 (char 7)"),
            ("{\"a\" 1}", "Expecting ':' delimiter: line 1 column 6 (char 5)"),
            ("{a: 1}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
            ("[1, 2", "Expecting ',' delimiter: line 1 column 6 (char 5)"),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            ("{\"a\": \"b", "Unterminated string starting at: line 1 column 7 (char 6)"),
            ("{} x", "Extra data: line 1 column 4 (char 3)"),
            ("\n\n  {\"é\": tru}", "Expecting value: line 3 column 9 (char 10)"),
            ("{\"a\": 1,}", "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)"),
        ] {
            assert_eq!(loads(text).unwrap_err(), want, "{text:?}");
        }
        assert_eq!(loads("[1]").unwrap(), json!([1]));
    }
}
