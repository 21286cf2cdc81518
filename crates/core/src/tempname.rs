//! Names for temporary files that are renamed (or linked) into place. They must be unique per
//! process *and* per machine: replicas on several machines may share one directory (a network
//! mount), and containers often all run as PID 1, so a PID and a counter alone can collide.

use std::hash::{BuildHasher as _, Hasher as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// A hidden temporary name for `final_name` in the same directory:
/// `.NAME.PID.NONCE.SEQ.tmp`, where NONCE is random per process and SEQ counts calls.
///
/// ```
/// let a = toolhost_core::tempname::temp_file_name("state.json");
/// let b = toolhost_core::tempname::temp_file_name("state.json");
/// assert!(a.starts_with(".state.json.") && a.ends_with(".tmp") && a != b);
/// ```
pub fn temp_file_name(final_name: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    format!(".{final_name}.{}.{:016x}.{}.tmp", std::process::id(), process_nonce(), SEQ.fetch_add(1, Ordering::Relaxed))
}

/// 64 random bits drawn once per process. `RandomState` is keyed from the operating system's
/// random source when a process first uses it, so two processes (on one machine or several)
/// get different values; the name needs uniqueness, not secrecy (files are created with
/// `O_EXCL` anyway).
pub fn process_nonce() -> u64 {
    static NONCE: OnceLock<u64> = OnceLock::new();
    *NONCE.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        h.finish()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_per_call_and_carry_the_process_nonce() {
        let (a, b) = (temp_file_name("x"), temp_file_name("x"));
        assert_ne!(a, b);
        let nonce = format!("{:016x}", process_nonce());
        assert!(a.contains(&nonce) && b.contains(&nonce), "{a} {b}");
        assert!(a.contains(&format!(".{}.", std::process::id())), "{a}");
    }

    #[test]
    fn another_process_draws_another_nonce() {
        // The doc test binary is another process: compare with a child of this test binary.
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "tempname::tests::print_nonce", "--nocapture", "--include-ignored"])
            .env("TOOLHOST_PRINT_NONCE", "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs = text.lines().find_map(|l| l.strip_prefix("nonce=")).expect("the child printed its nonce");
        assert_ne!(theirs, format!("{:016x}", process_nonce()));
    }

    #[test]
    #[ignore = "run by another_process_draws_another_nonce in a child process"]
    fn print_nonce() {
        if std::env::var_os("TOOLHOST_PRINT_NONCE").is_some() {
            println!("nonce={:016x}", process_nonce());
        }
    }
}
