//! The grep vectors of guest-tools/sandbox-fs/tests/grep_vectors.json (DeerFlow's answers), shared
//! by the native test (guest-tools/sandbox-fs/tests/grep_vectors.rs) and the host's end-to-end test
//! (tests/file_tools.rs): building the files from their recipes and comparing every answer.

use std::path::Path;

use serde_json::Value;

fn b64(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            _ => 0,
        }
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
    }
    out
}

/// Write every file of the vectors into `dir` (created): `fill` repeated to `len` bytes, then each
/// `[offset, base64]` patch written at its offset.
pub fn write_files(v: &Value, dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    for (name, spec) in v["files"].as_object().expect("files") {
        let len = spec["len"].as_u64().expect("len") as usize;
        let fill = spec["fill"].as_str().expect("fill").as_bytes();
        let mut data: Vec<u8> =
            if fill.is_empty() { vec![0; len] } else { fill.iter().copied().cycle().take(len).collect() };
        for p in spec["patches"].as_array().expect("patches") {
            let at = p[0].as_u64().expect("offset") as usize;
            let bytes = b64(p[1].as_str().expect("patch"));
            data[at..at + bytes.len()].copy_from_slice(&bytes);
        }
        std::fs::write(dir.join(name), data).expect("write");
    }
}

/// Run every case through `grep(args)` and compare with DeerFlow's text (exactly for a file, by
/// header and sorted lines for a directory, which DeerFlow walked in the filesystem's order).
pub fn check_all(v: &Value, mut grep: impl FnMut(&Value) -> String) {
    let mut failures = Vec::new();
    for c in v["cases"].as_array().expect("cases") {
        let got = grep(&c["args"]);
        let ok = match c.get("expected") {
            Some(expected) => got == expected.as_str().expect("expected"),
            None => {
                let mut lines: Vec<&str> = got.split('\n').collect();
                let header = lines.remove(0);
                lines.sort_unstable();
                let want: Vec<&str> =
                    c["expected_sorted"].as_array().expect("sorted").iter().filter_map(Value::as_str).collect();
                header == c["expected_header"].as_str().expect("header") && lines == want
            }
        };
        if !ok {
            failures.push(format!("{}\n  got:      {:?}\n  expected: {:?}", c["args"], got, c.get("expected")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        v["cases"].as_array().map_or(0, Vec::len),
        failures.join("\n")
    );
}
