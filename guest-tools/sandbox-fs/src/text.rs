//! Text helpers with DeerFlow's exact semantics: character (code point) counts as Python's
//! `len`, head truncation with its marker, universal newlines, Python's UTF-8 decode error text
//! and the middle truncation of `write_file` errors.

use std::borrow::Cow;

/// Python's `len(str)`: code points.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// The first `n` code points of `s`.
pub fn char_prefix(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Head-truncate like DeerFlow's `_truncate_read_file_output` / `_truncate_ls_output`: the result
/// (marker included) never exceeds `max_chars`; 0 disables truncation. `hint` is the sentence
/// inside the marker after "chars.".
pub fn truncate_head(output: &str, max_chars: usize, hint: &str) -> String {
    if max_chars == 0 {
        return output.to_string();
    }
    let total = char_len(output);
    if total <= max_chars {
        return output.to_string();
    }
    let marker = |kept: usize| format!("\n... [truncated: showing first {kept} of {total} chars. {hint}] ...");
    let marker_max_len = char_len(&marker(total));
    let kept = max_chars.saturating_sub(marker_max_len);
    if kept == 0 {
        return char_prefix(output, max_chars).to_string();
    }
    format!("{}{}", char_prefix(output, kept), marker(kept))
}

pub const READ_FILE_HINT: &str = "Use start_line/end_line to read a specific range";
pub const LS_HINT: &str = "Use a more specific path to see fewer results";

/// DeerFlow's `_truncate_write_file_error_detail`: middle truncation keeping head and tail.
pub fn truncate_middle_write_error(detail: &str, max_chars: usize) -> String {
    let total = char_len(detail);
    if max_chars == 0 || total <= max_chars {
        return detail.to_string();
    }
    let marker_max_len = char_len(&format!("\n... [write_file error truncated: {total} chars skipped] ...\n"));
    let kept = max_chars.saturating_sub(marker_max_len);
    if kept == 0 {
        return char_prefix(detail, max_chars).to_string();
    }
    let head_len = kept / 2;
    let tail_len = kept - head_len;
    let skipped = total - kept;
    let head = char_prefix(detail, head_len);
    let tail_start = detail.char_indices().nth(total - tail_len).map(|(i, _)| i).unwrap_or(detail.len());
    format!("{head}\n... [write_file error truncated: {skipped} chars skipped] ...\n{}", &detail[tail_start..])
}

/// DeerFlow's `_format_write_file_error` with its 2000-character budget.
pub fn format_write_file_error(requested_path: &str, detail: &str) -> String {
    const MAX: usize = 2000;
    let header = format!("Error: Failed to write file '{requested_path}'");
    let budget = MAX as isize - char_len(&header) as isize - 2;
    if budget <= 0 {
        return truncate_middle_write_error(&format!("{header}: {detail}"), MAX);
    }
    format!("{header}: {}", truncate_middle_write_error(detail, budget as usize))
}

/// Python's universal newlines on read: `\r\n` and lone `\r` become `\n`.
pub fn universal_newlines(bytes: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr(b'\r', bytes).is_none() {
        return Cow::Borrowed(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\r' {
            out.push(b'\n');
            if bytes.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
        } else {
            out.push(b);
        }
        i += 1;
    }
    Cow::Owned(out)
}

/// The text of Python's `UnicodeDecodeError` for strict UTF-8 decoding of `bytes` failing at `err`.
pub fn python_decode_error(bytes: &[u8], err: &std::str::Utf8Error) -> String {
    let pos = err.valid_up_to();
    let byte = bytes.get(pos).copied().unwrap_or(0);
    match err.error_len() {
        None => {
            let end = bytes.len() - 1;
            if end > pos {
                format!("'utf-8' codec can't decode bytes in position {pos}-{end}: unexpected end of data")
            } else {
                format!("'utf-8' codec can't decode byte 0x{byte:02x} in position {pos}: unexpected end of data")
            }
        }
        Some(_) => {
            let reason = if (0xc2..=0xf4).contains(&byte) { "invalid continuation byte" } else { "invalid start byte" };
            format!("'utf-8' codec can't decode byte 0x{byte:02x} in position {pos}: {reason}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_truncation_never_exceeds_max() {
        for max in [1usize, 5, 50, 120, 200, 1000] {
            for len in [0usize, 10, 199, 200, 201, 5000] {
                let s: String = "é".repeat(len);
                let out = truncate_head(&s, max, READ_FILE_HINT);
                assert!(char_len(&out) <= max.max(char_len(&s).min(max)), "max {max} len {len}");
                if len <= max {
                    assert_eq!(out, s);
                }
            }
        }
        assert_eq!(truncate_head("abc", 0, LS_HINT), "abc");
    }

    #[test]
    fn universal() {
        assert_eq!(&*universal_newlines(b"a\r\nb\rc\n"), b"a\nb\nc\n");
    }

    #[test]
    fn decode_errors() {
        let b: Vec<u8> = vec![0, 1, 0xff];
        let e = std::str::from_utf8(&b).unwrap_err();
        assert_eq!(
            python_decode_error(&b, &e),
            "'utf-8' codec can't decode byte 0xff in position 2: invalid start byte"
        );
    }

    #[test]
    fn write_error_budget() {
        let long = "x".repeat(5000);
        let out = format_write_file_error("/p", &long);
        assert!(char_len(&out) <= 2000);
        assert!(out.starts_with("Error: Failed to write file '/p': xxx"));
    }
}
