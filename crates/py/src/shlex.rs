//! Python's `shlex` lexer in the two modes DeerFlow uses: `shlex.split` (POSIX, whitespace
//! split) for the audit's second look at a command, and `shlex.shlex(posix=True,
//! punctuation_chars=True)` for the local-bash path validator's token pass. Both must split
//! exactly like CPython's, because the verdicts depend on the tokens.

use std::collections::VecDeque;

/// Why CPython's shlex would raise `ValueError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShlexError {
    NoClosingQuotation,
    NoEscapedCharacter,
}

const PUNCTUATION: &str = "();<>|&";

/// shlex's whitespace set (not Python's `str.isspace`).
fn is_shlex_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Space,
    Word,
    Punct,
    Quote(char),
    Escape,
}

struct Lexer<'a> {
    chars: std::str::Chars<'a>,
    pushback: VecDeque<char>,
    punctuation: bool,
}

impl Lexer<'_> {
    fn next_char(&mut self) -> Option<char> {
        self.pushback.pop_back().or_else(|| self.chars.next())
    }

    fn is_punct(&self, c: char) -> bool {
        self.punctuation && PUNCTUATION.contains(c)
    }

    /// One token, or `None` at the end (CPython's `read_token` in POSIX mode with
    /// `whitespace_split=True` and no commenters).
    fn read_token(&mut self) -> Result<Option<String>, ShlexError> {
        let mut token = String::new();
        let mut quoted = false;
        let mut state = State::Space;
        let mut escaped_state = State::Word;
        loop {
            let next = self.next_char();
            match state {
                State::Space => match next {
                    None => break,
                    Some(c) if is_shlex_space(c) => {
                        if !token.is_empty() || quoted {
                            break;
                        }
                    }
                    Some('\\') => {
                        escaped_state = State::Word;
                        state = State::Escape;
                    }
                    Some(c) if self.is_punct(c) => {
                        token.push(c);
                        state = State::Punct;
                    }
                    Some(c @ ('\'' | '"')) => state = State::Quote(c),
                    Some(c) => {
                        token.push(c);
                        state = State::Word;
                    }
                },
                State::Quote(q) => {
                    quoted = true;
                    match next {
                        None => return Err(ShlexError::NoClosingQuotation),
                        Some(c) if c == q => state = State::Word,
                        Some('\\') if q == '"' => {
                            escaped_state = state;
                            state = State::Escape;
                        }
                        Some(c) => token.push(c),
                    }
                }
                State::Escape => match next {
                    None => return Err(ShlexError::NoEscapedCharacter),
                    Some(c) => {
                        // Inside double quotes a backslash only escapes `"` and `\`.
                        if let State::Quote(q) = escaped_state {
                            if c != q && c != '\\' {
                                token.push('\\');
                            }
                        }
                        token.push(c);
                        state = escaped_state;
                    }
                },
                State::Word | State::Punct => match next {
                    None => break,
                    Some(c) if is_shlex_space(c) => {
                        state = State::Space;
                        if !token.is_empty() || quoted {
                            break;
                        }
                    }
                    Some(c) if state == State::Punct => {
                        if self.is_punct(c) {
                            token.push(c);
                        } else {
                            self.pushback.push_back(c);
                            break;
                        }
                    }
                    Some(c @ ('\'' | '"')) => state = State::Quote(c),
                    Some('\\') => {
                        escaped_state = State::Word;
                        state = State::Escape;
                    }
                    Some(c) if self.is_punct(c) => {
                        self.pushback.push_back(c);
                        if !token.is_empty() || quoted {
                            break;
                        }
                        state = State::Space;
                    }
                    Some(c) => token.push(c),
                },
            }
        }
        if token.is_empty() && !quoted {
            return Ok(None);
        }
        Ok(Some(token))
    }
}

fn tokens(text: &str, punctuation: bool) -> Result<Vec<String>, ShlexError> {
    let mut lexer = Lexer { chars: text.chars(), pushback: VecDeque::new(), punctuation };
    let mut out = Vec::new();
    while let Some(token) = lexer.read_token()? {
        out.push(token);
    }
    Ok(out)
}

/// `shlex.split(text)`.
pub fn split(text: &str) -> Result<Vec<String>, ShlexError> {
    tokens(text, false)
}

/// `list(shlex.shlex(text, posix=True, punctuation_chars=True))` with `whitespace_split=True`
/// and no commenters: runs of `();<>|&` become their own tokens.
pub fn split_punctuation(text: &str) -> Result<Vec<String>, ShlexError> {
    tokens(text, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn split_matches_python() {
        assert_eq!(split("a 'b c' \"d e\"").unwrap(), s(&["a", "b c", "d e"]));
        assert_eq!(split("a\"b c\"d").unwrap(), s(&["ab cd"]));
        assert_eq!(split("''").unwrap(), s(&[""]));
        assert_eq!(split(r#""a\"b" "a\nb" "x\y""#).unwrap(), s(&["a\"b", "a\\nb", "x\\y"]));
        assert_eq!(split(r"a\ b").unwrap(), s(&["a b"]));
        assert_eq!(split("echo 'x").unwrap_err(), ShlexError::NoClosingQuotation);
        assert_eq!(split("echo x\\").unwrap_err(), ShlexError::NoEscapedCharacter);
        assert_eq!(split("a;b|c").unwrap(), s(&["a;b|c"]));
    }

    #[test]
    fn punctuation_mode_matches_python() {
        assert_eq!(split_punctuation("cd /;ls").unwrap(), s(&["cd", "/", ";", "ls"]));
        assert_eq!(split_punctuation("a&&b || c").unwrap(), s(&["a", "&&", "b", "||", "c"]));
        assert_eq!(split_punctuation("x 2>&1").unwrap(), s(&["x", "2", ">&", "1"]));
        assert_eq!(split_punctuation("$(cd /); ls").unwrap(), s(&["$", "(", "cd", "/", ");", "ls"]));
        assert_eq!(split_punctuation("echo \"a;b\"").unwrap(), s(&["echo", "a;b"]));
        assert_eq!(split_punctuation("a'b'(c").unwrap(), s(&["ab", "(", "c"]));
    }
}
