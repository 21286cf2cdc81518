//! `read_file` with a line range, as Python iterates a text file: lines split at `\n`, `\r\n` and
//! a lone `\r` (universal newlines), decoding failing only when an undecodable byte lies in the
//! chunks Python would have decoded. A range with an end reads only a prefix of the file, and
//! line breaks are found with `memchr` (SIMD) rather than byte by byte.

use std::io;

use crate::wasifs::OpenFile;

/// Python's `TextIOWrapper` chunk size: decoding errors past the chunks a ranged read consumed
/// are never seen.
pub const PY_CHUNK: usize = 8192;

/// Bytes read per step by [`read_for_range`]: one host read covers the first few hundred lines
/// of a typical file (lines 100-200 of 70-byte lines need 24 KiB).
pub const RANGE_READ_STEP: usize = 32 * 1024;

/// The part of a file [`ranged_read`]`(…, Some(end))` looks at: everything up to one Python read
/// chunk past the end of line `end + 1`, or the whole file when it is shorter. `ranged_read` gives
/// the same answer on this prefix as on the whole file (tested), so a range near the top of a
/// large file does not copy all of it into guest memory.
pub fn read_for_range(file: &OpenFile, end: usize) -> io::Result<Vec<u8>> {
    read_for_range_by(file, end, RANGE_READ_STEP)
}

fn read_for_range_by(file: &OpenFile, end: usize, step: usize) -> io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::new();
    // Line breaks seen before `i`, the next byte to look at.
    let (mut line, mut i) = (0usize, 0usize);
    let mut need: Option<usize> = None;
    loop {
        if need.is_some_and(|n| buf.len() >= n) {
            return Ok(buf);
        }
        let chunk = file.read(step, buf.len() as u64)?;
        if chunk.is_empty() {
            return Ok(buf);
        }
        if buf.is_empty() {
            buf = chunk;
        } else {
            buf.extend_from_slice(&chunk);
        }
        if need.is_some() {
            continue;
        }
        loop {
            let Some(off) = memchr::memchr2(b'\n', b'\r', &buf[i..]) else {
                i = buf.len();
                break;
            };
            let mut at = i + off;
            if buf[at] == b'\r' {
                // Whether a '\n' follows is only known once the next byte is read.
                if at + 1 == buf.len() {
                    i = at;
                    break;
                }
                if buf[at + 1] == b'\n' {
                    at += 1;
                }
            }
            line += 1;
            i = at + 1;
            if line > end {
                need = Some(i.div_ceil(PY_CHUNK).saturating_mul(PY_CHUNK).saturating_add(PY_CHUNK));
                break;
            }
        }
    }
}

/// Lines `start..=end` (1-based; `end` `None` for the rest of the file) of `bytes`, each without
/// its line break, joined with `\n`. `None` means "not UTF-8 text": an undecodable byte within
/// the Python read chunks that cover the lines read (through line `end + 1`, which Python reads
/// to see the range is over).
pub fn ranged_read(bytes: &[u8], start: usize, end: Option<usize>) -> Option<String> {
    // One pass over the line breaks: where line `start` begins, where line `end` ends (before its
    // break), and where line `end + 1` ends (after its break).
    let mut from: Option<usize> = (start == 1 && !bytes.is_empty()).then_some(0);
    let mut to: Option<usize> = None;
    let mut stop = bytes.len();
    let mut line = 1usize; // the line that begins at `next`
    let mut next = 0usize;
    while let Some(off) = memchr::memchr2(b'\n', b'\r', &bytes[next..]) {
        let at = next + off;
        let after = if bytes[at] == b'\r' && bytes.get(at + 1) == Some(&b'\n') { at + 2 } else { at + 1 };
        if Some(line) == end {
            to = Some(at);
        }
        if end.is_some_and(|e| line > e) {
            stop = after;
            break;
        }
        line += 1;
        next = after;
        // A line exists only where a byte is: no empty last line after a final break.
        if line == start && next < bytes.len() {
            from = Some(next);
        }
        if end.is_none() && from.is_some() {
            break; // the rest of the file is taken whole
        }
    }
    let check_upto = match end {
        None => bytes.len(),
        Some(_) => stop.div_ceil(PY_CHUNK).saturating_mul(PY_CHUNK).min(bytes.len()),
    };
    if !decodes_like_python(bytes, check_upto) {
        return None;
    }
    let Some(from) = from else { return Some(String::new()) };
    // Without line `end`'s break, the selection runs to the end, less a final break.
    let to = to.unwrap_or_else(|| {
        let n = bytes.len();
        if bytes.ends_with(b"\r\n") {
            n - 2
        } else if bytes.ends_with(b"\n") || bytes.ends_with(b"\r") {
            n - 1
        } else {
            n
        }
    });
    let region = &bytes[from..to.max(from)];
    let joined = crate::text::universal_newlines(region);
    Some(match std::str::from_utf8(&joined) {
        Ok(s) => s.to_string(),
        Err(_) => String::from_utf8_lossy(&joined).into_owned(),
    })
}

/// Whether Python decodes `bytes` up to `check_upto` without error: no undecodable byte before
/// it, an incomplete character at the very end of `bytes` excepted when more of the file lies
/// past `check_upto` (the read stopped inside it).
fn decodes_like_python(bytes: &[u8], check_upto: usize) -> bool {
    let err = match std::str::from_utf8(&bytes[..check_upto]) {
        Ok(_) => return true,
        // An invalid sequence inside the checked part is invalid in the whole too.
        Err(e) if e.error_len().is_some() => return false,
        // Cut at `check_upto`: only the whole prefix says whether the character completes.
        Err(_) => match std::str::from_utf8(bytes) {
            Ok(_) => return true,
            Err(e) => e,
        },
    };
    let at_eof_incomplete = err.error_len().is_none();
    !(err.valid_up_to() < check_upto && !(at_eof_incomplete && check_upto < bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The implementation this module replaced, byte by byte: the oracle every answer is compared
    /// with.
    fn reference(bytes: &[u8], start: usize, end: Option<usize>) -> Option<String> {
        let check_upto = match end {
            None => bytes.len(),
            Some(e) => {
                let mut line = 0usize;
                let mut i = 0usize;
                let mut stop = bytes.len();
                while i < bytes.len() {
                    let b = bytes[i];
                    if b == b'\n' || b == b'\r' {
                        if b == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                            i += 1;
                        }
                        line += 1;
                        if line > e {
                            stop = i + 1;
                            break;
                        }
                    }
                    i += 1;
                }
                stop.div_ceil(PY_CHUNK).saturating_mul(PY_CHUNK).min(bytes.len())
            }
        };
        if let Err(e) = std::str::from_utf8(bytes) {
            let at_eof_incomplete = e.error_len().is_none();
            if e.valid_up_to() < check_upto && !(at_eof_incomplete && check_upto < bytes.len()) {
                return None;
            }
        }
        let norm = crate::text::universal_newlines(bytes);
        let mut selected: Vec<&[u8]> = Vec::new();
        for (idx, line) in norm.split_inclusive(|&b| b == b'\n').enumerate() {
            let n = idx + 1;
            if n < start {
                continue;
            }
            if end.is_some_and(|e| n > e) {
                break;
            }
            let mut l = line;
            while let Some((last, rest)) = l.split_last() {
                if *last == b'\n' || *last == b'\r' {
                    l = rest;
                } else {
                    break;
                }
            }
            selected.push(l);
        }
        let joined = selected.join(&b'\n');
        Some(String::from_utf8_lossy(&joined).into_owned())
    }

    /// Files that stress line breaks and decoding: CRLF and lone CR at chunk boundaries, invalid
    /// UTF-8 and a split multi-byte character at and around the bytes a range consumes, no final
    /// newline, empty lines.
    fn stress_files() -> Vec<Vec<u8>> {
        let mut cases: Vec<Vec<u8>> = Vec::new();
        let mut lines = Vec::new();
        for n in 0..30_000u32 {
            let sep: &[u8] = match n % 5 {
                0 => b"\r\n",
                1 => b"\r",
                _ => b"\n",
            };
            lines.extend_from_slice(format!("line {n} {}", "x".repeat((n % 97) as usize)).as_bytes());
            lines.extend_from_slice(sep);
        }
        cases.push(lines.clone());
        for bad_at in [100usize, PY_CHUNK - 1, PY_CHUNK, 3 * PY_CHUNK + 5, 70_000, 200_000, lines.len() - 3] {
            let mut c = lines.clone();
            c[bad_at] = 0xff;
            cases.push(c);
            let mut c = lines.clone();
            c.insert(bad_at, 0xe2); // the first byte of a three-byte character, alone
            cases.push(c);
        }
        let mut cr_at_step = lines.clone();
        cr_at_step[RANGE_READ_STEP - 1] = b'\r';
        cr_at_step[RANGE_READ_STEP] = b'\n';
        cases.push(cr_at_step);
        cases.push(b"no newline at all".to_vec());
        cases.push(Vec::new());
        cases
    }

    #[test]
    fn a_range_read_from_a_prefix_matches_one_from_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        let open = || crate::wasifs::open(&path).unwrap();
        for (ci, bytes) in stress_files().iter().enumerate() {
            std::fs::write(&path, bytes).unwrap();
            for (start, end) in [
                (1, 1),
                (1, 5),
                (100, 200),
                (2000, 2100),
                (5000, 5001),
                (29_990, 30_010),
                (40_000, 40_001),
                (1, 29_999),
            ] {
                let whole = ranged_read(bytes, start, Some(end));
                assert_eq!(whole, reference(bytes, start, Some(end)), "case {ci}, lines {start}-{end}, whole file");
                for step in [7, 4093, 16 * 1024, RANGE_READ_STEP] {
                    if step == 7 && end > 2100 {
                        continue; // byte-sized steps through a megabyte are slow in a debug build
                    }
                    let prefix = read_for_range_by(&open(), end, step).unwrap();
                    assert!(prefix.len() <= bytes.len() && bytes.starts_with(&prefix));
                    assert_eq!(
                        ranged_read(&prefix, start, Some(end)),
                        whole,
                        "case {ci}, lines {start}-{end}, step {step}, prefix {} of {} bytes",
                        prefix.len(),
                        bytes.len()
                    );
                }
            }
            for start in [1, 2, 29_999, 30_000, 30_001] {
                assert_eq!(ranged_read(bytes, start, None), reference(bytes, start, None), "case {ci}, {start}-");
            }
        }
        // A range near the top of a large file reads a small prefix.
        std::fs::write(&path, &stress_files()[0]).unwrap();
        assert!(read_for_range(&open(), 200).unwrap().len() <= 2 * RANGE_READ_STEP);
    }

    /// Every range of small files made of every kind of line break, empty lines and undecodable
    /// bytes gives the answer of the implementation this one replaced.
    #[test]
    fn every_range_of_small_files_matches_the_previous_implementation() {
        let pieces: [&[u8]; 8] = [b"a", b"\n", b"\r", b"\r\n", b"\xff", b"\xe2\x82", b"\xc3\xa9", b""];
        let mut files: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let mut next = Vec::new();
            for f in &files {
                for p in pieces {
                    let mut g = f.clone();
                    g.extend_from_slice(p);
                    next.push(g);
                }
            }
            next.sort();
            next.dedup();
            files = next;
        }
        for bytes in &files {
            for start in 1..6 {
                assert_eq!(ranged_read(bytes, start, None), reference(bytes, start, None), "{bytes:?} {start}-");
                for end in start..7 {
                    assert_eq!(
                        ranged_read(bytes, start, Some(end)),
                        reference(bytes, start, Some(end)),
                        "{bytes:?} {start}-{end}"
                    );
                }
            }
        }
    }

    #[test]
    fn ranges() {
        assert_eq!(ranged_read(b"a\r\nb\rc", 2, Some(3)).unwrap(), "b\nc");
        assert_eq!(ranged_read(b"", 1, Some(5)).unwrap(), "");
        // An undecodable byte far past the range is never decoded by Python.
        let mut big = b"ok\nb\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', 20000));
        big.push(0xff);
        assert_eq!(ranged_read(&big, 1, Some(1)).unwrap(), "ok");
        assert!(ranged_read(&big, 1, None).is_none());
    }
}
