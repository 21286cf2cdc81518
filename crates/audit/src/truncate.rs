//! DeerFlow's `_truncate_bash_output`: keep the head and the tail of long bash output around a
//! `[middle truncated: N chars skipped]` marker, never exceeding the limit.

/// Middle-truncate `output` to at most `max_chars` characters (Python `len`, i.e. code
/// points), 50/50 head and tail. `0` disables truncation. When the marker alone does not fit,
/// the head is hard-cut to `max_chars`.
pub fn truncate_middle(output: &str, max_chars: usize) -> String {
    if max_chars == 0 {
        return output.to_string();
    }
    let total = output.chars().count();
    if total <= max_chars {
        return output.to_string();
    }
    // The marker's widest form (the skip count is at most `total`) sizes the budget.
    let marker_max_len = marker(total).chars().count();
    let kept = max_chars.saturating_sub(marker_max_len);
    if kept == 0 {
        return output.chars().take(max_chars).collect();
    }
    let head_len = kept / 2;
    let tail_len = kept - head_len;
    let head: String = output.chars().take(head_len).collect();
    let tail: String = output.chars().skip(total - tail_len).collect();
    format!("{head}{}{tail}", marker(total - kept))
}

fn marker(skipped: usize) -> String {
    format!("\n... [middle truncated: {skipped} chars skipped] ...\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Spec §13 item 24: length never above max, the skip count right, 0 disables.
    #[test]
    fn never_exceeds_max_and_counts_skipped() {
        let output: String = (0..5000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        for max in [1, 10, 44, 45, 46, 47, 60, 100, 999, 4999, 5000, 6000] {
            let out = truncate_middle(&output, max);
            assert!(out.chars().count() <= max, "max {max}: {}", out.chars().count());
            if max < 5000 && out.contains("middle truncated") {
                let skipped: usize = out
                    .split("[middle truncated: ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|n| n.parse().ok())
                    .expect("marker has a count");
                let kept = out.chars().count() - marker(skipped).chars().count();
                assert_eq!(skipped + kept, 5000, "max {max}");
                assert!(out.starts_with(&output[..kept / 2]));
                assert!(out.ends_with(&output[5000 - (kept - kept / 2)..]));
            }
        }
        assert_eq!(truncate_middle(&output, 0), output);
        assert_eq!(truncate_middle("short", 5), "short");
        assert_eq!(truncate_middle(&output, 10), output[..10]);
    }

    #[test]
    fn counts_characters_not_bytes() {
        let output = "é".repeat(200);
        let out = truncate_middle(&output, 100);
        assert!(out.chars().count() <= 100);
        assert!(out.starts_with('é') && out.ends_with('é'));
    }
}
