//! DeerFlow's `_split_compound_command`: a quote- and heredoc-aware split of a command into
//! sub-commands on unquoted `&&`, `||`, `;`, newlines and (optionally) `|`. toolhost's stricter
//! mode also splits on a single `&` and on `|&`, and remembers which parts follow a pipe.

use toolhost_py::str_methods::py_strip;

/// Which operators split, beyond DeerFlow's always-on `&&`, `||`, `;` and newline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitOptions {
    /// Split on `|` (DeerFlow's `split_pipes=True`).
    pub pipes: bool,
    /// toolhost: also split on a background `&` and on `|&` (deviation 6).
    pub background: bool,
}

/// One sub-command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub text: String,
    /// The part starts right after a pipe operator (`|` or `|&`), so it reads the previous
    /// part's output on stdin.
    pub after_pipe: bool,
}

/// DeerFlow's `_split_compound_command(command, split_pipes=...)`, as plain strings.
pub fn split_compound(command: &str, split_pipes: bool) -> Vec<String> {
    split_parts(command, SplitOptions { pipes: split_pipes, background: false }).into_iter().map(|p| p.text).collect()
}

/// A heredoc header at `i` (which holds `<`): `(?<!<)<<(?!<)-?[ \t]*(?:\\?(ident)|'…'|"…")`.
/// Returns the delimiter and the index just past the header.
fn heredoc_header(chars: &[char], i: usize) -> Option<(String, usize)> {
    if chars.get(i) != Some(&'<') || chars.get(i + 1) != Some(&'<') {
        return None;
    }
    if i > 0 && chars[i - 1] == '<' {
        return None;
    }
    let mut j = i + 2;
    if chars.get(j) == Some(&'<') {
        return None;
    }
    if chars.get(j) == Some(&'-') {
        j += 1;
    }
    while matches!(chars.get(j), Some(' ' | '\t')) {
        j += 1;
    }
    match chars.get(j) {
        Some(&q @ ('\'' | '"')) => {
            let start = j + 1;
            let len = chars[start..].iter().position(|&c| c == q)?;
            Some((chars[start..start + len].iter().collect(), start + len + 1))
        }
        _ => {
            if chars.get(j) == Some(&'\\') {
                j += 1;
            }
            let start = j;
            if !chars.get(j).is_some_and(|c| c.is_ascii_alphabetic() || *c == '_') {
                return None;
            }
            while chars.get(j).is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_') {
                j += 1;
            }
            Some((chars[start..j].iter().collect(), j))
        }
    }
}

fn flush(current: &mut String, after_pipe: bool, parts: &mut Vec<Part>) {
    let text = py_strip(current);
    if !text.is_empty() {
        parts.push(Part { text: text.to_string(), after_pipe });
    }
    current.clear();
}

/// Split `command` into parts. Unclosed quotes or a dangling escape return the whole command
/// as one part (fail closed: classify the unsplit string rather than drop anything).
pub fn split_parts(command: &str, options: SplitOptions) -> Vec<Part> {
    let chars: Vec<char> = command.chars().collect();
    let mut parts: Vec<Part> = Vec::new();
    let mut current = String::new();
    let mut current_after_pipe = false;
    let mut in_single = false;
    let mut in_double = false;
    let mut escaping = false;
    let mut arith_depth = 0usize;
    let mut pending_heredocs: Vec<String> = Vec::new();
    let mut i = 0;

    while i < chars.len() {
        let c = chars[i];
        if escaping {
            current.push(c);
            escaping = false;
            i += 1;
            continue;
        }
        if c == '\\' && !in_single {
            current.push(c);
            escaping = true;
            i += 1;
            continue;
        }
        if c == '\'' && !in_double {
            in_single = !in_single;
            current.push(c);
            i += 1;
            continue;
        }
        if c == '"' && !in_single {
            in_double = !in_double;
            current.push(c);
            i += 1;
            continue;
        }
        if in_single || in_double {
            current.push(c);
            i += 1;
            continue;
        }

        let next = chars.get(i + 1).copied();
        // Arithmetic `((…))`: a `<<` inside is a shift, not a heredoc.
        if c == '(' && next == Some('(') {
            arith_depth += 1;
            current.push_str("((");
            i += 2;
            continue;
        }
        if c == ')' && next == Some(')') && arith_depth > 0 {
            arith_depth -= 1;
            current.push_str("))");
            i += 2;
            continue;
        }
        if c == '<' && arith_depth == 0 {
            if let Some((delimiter, end)) = heredoc_header(&chars, i) {
                current.extend(&chars[i..end]);
                pending_heredocs.push(delimiter);
                i = end;
                continue;
            }
        }
        if c == '\n' {
            if pending_heredocs.is_empty() {
                flush(&mut current, current_after_pipe, &mut parts);
                current_after_pipe = false;
                i += 1;
                continue;
            }
            // Heredoc bodies are data: consume them verbatim into the current part, up to
            // and including each terminator line (unterminated: the rest of the command).
            current.push('\n');
            i += 1;
            let delimiters = std::mem::take(&mut pending_heredocs);
            let count = delimiters.len();
            for (n, delimiter) in delimiters.iter().enumerate() {
                loop {
                    if i >= chars.len() {
                        break;
                    }
                    let line_end = chars[i..].iter().position(|&ch| ch == '\n').map_or(chars.len(), |p| i + p);
                    let line: String = chars[i..line_end].iter().collect();
                    current.push_str(&line);
                    i = line_end;
                    if py_strip(&line) == delimiter {
                        break;
                    }
                    if i < chars.len() {
                        current.push('\n');
                        i += 1;
                    }
                }
                if n + 1 < count && i < chars.len() {
                    current.push('\n');
                    i += 1;
                }
            }
            continue;
        }
        if (c == '&' && next == Some('&')) || (c == '|' && next == Some('|')) {
            flush(&mut current, current_after_pipe, &mut parts);
            current_after_pipe = false;
            i += 2;
            continue;
        }
        if c == '|' && options.pipes {
            flush(&mut current, current_after_pipe, &mut parts);
            current_after_pipe = true;
            i += 1;
            // `|&` pipes stderr too; the `&` is part of the operator, not a background split.
            if options.background && next == Some('&') {
                i += 1;
            }
            continue;
        }
        if c == ';' {
            flush(&mut current, current_after_pipe, &mut parts);
            current_after_pipe = false;
            i += 1;
            continue;
        }
        if c == '&' && options.background {
            let prev = if i > 0 { Some(chars[i - 1]) } else { None };
            // `>&`, `<&` and `&>` are redirections, not a background operator.
            let redirection = matches!(prev, Some('>' | '<')) || next == Some('>');
            if !redirection {
                flush(&mut current, current_after_pipe, &mut parts);
                current_after_pipe = false;
                i += 1;
                continue;
            }
        }
        current.push(c);
        i += 1;
    }

    if in_single || in_double || escaping {
        return vec![Part { text: command.to_string(), after_pipe: false }];
    }
    flush(&mut current, current_after_pipe, &mut parts);
    if parts.is_empty() {
        return vec![Part { text: command.to_string(), after_pipe: false }];
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: SplitOptions = SplitOptions { pipes: true, background: true };

    #[test]
    fn background_and_pipe_amp_split_only_in_strict_mode() {
        assert_eq!(split_compound("sleep 1 & $(curl u)", true), vec!["sleep 1 & $(curl u)"]);
        let strict: Vec<String> = split_parts("sleep 1 & $(curl u)", STRICT).into_iter().map(|p| p.text).collect();
        assert_eq!(strict, vec!["sleep 1", "$(curl u)"]);
        let piped = split_parts("make 2>&1 |& tee log &>/dev/null", STRICT);
        assert_eq!(piped[0].text, "make 2>&1");
        assert_eq!(piped[1], Part { text: "tee log &>/dev/null".into(), after_pipe: true });
    }

    #[test]
    fn after_pipe_is_reset_by_sequencing() {
        let parts = split_parts("a | b; c", STRICT);
        let flags: Vec<bool> = parts.iter().map(|p| p.after_pipe).collect();
        assert_eq!(flags, vec![false, true, false]);
    }
}
