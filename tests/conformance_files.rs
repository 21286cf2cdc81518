//! The conformance vectors in `tests/conformance/` are the ones their README records: every file
//! there has a row in the README's table with its sha256, every row names a file that is there,
//! and the bytes match. A vector edited without its provenance, or a test that starts reading a
//! file nobody copied in, fails here rather than in a user's fresh clone.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

#[path = "support/paths.rs"]
mod paths;

/// `(file, sha256)` from the README rows of the form ``| `FILE` | `SHA256` | … |``.
fn recorded(readme: &str) -> BTreeMap<String, String> {
    let mut rows = BTreeMap::new();
    for line in readme.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", "`file`", "`sha256`", what, read by, ""]
        let [_, file, hash, ..] = cells.as_slice() else { continue };
        let (Some(file), Some(hash)) = (unquote(file), unquote(hash)) else { continue };
        if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            assert!(rows.insert(file.to_string(), hash.to_string()).is_none(), "{file} has two rows");
        }
    }
    rows
}

fn unquote(cell: &str) -> Option<&str> {
    cell.strip_prefix('`')?.strip_suffix('`')
}

/// Every file below `dir`, relative to `base`, with `/` separators.
fn files(base: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            files(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("below base").to_string_lossy().replace('\\', "/");
            out.push(rel);
        }
    }
}

#[test]
fn every_vector_file_matches_the_sha256_its_readme_records() {
    let dir = paths::conformance();
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("tests/conformance/README.md");
    let rows = recorded(&readme);
    // The eleven files copied from DeerFlow's conformance set, and review_skill_package.json,
    // tool_schemas.json, subagent_turns.json and deerflow_door.json (generated here; see the
    // README).
    assert_eq!(rows.len(), 15, "{rows:?}");

    let mut present = Vec::new();
    files(&dir, &dir, &mut present);
    present.retain(|f| f != "README.md");
    present.sort();
    let listed: Vec<String> = rows.keys().cloned().collect();
    assert_eq!(present, listed, "files in tests/conformance/ and rows of its README differ");

    for (file, want) in &rows {
        let bytes = std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let got = hex::encode(Sha256::digest(&bytes));
        assert_eq!(&got, want, "{file}: its bytes are not the ones the README records");
    }
}
