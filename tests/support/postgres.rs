//! A throwaway PostgreSQL server for the state-store tests: Debian's binaries
//! (`/usr/lib/postgresql/*/bin`, installed by scripts/install-postgres.sh), a cluster made by
//! `initdb` in a temp dir, listening on 127.0.0.1 at a free port with its socket in the temp
//! dir and trust authentication. Run as the `postgres` user when the tests run as root (the
//! server refuses root). Stopped (fast shutdown, then killed) on drop.
#![allow(dead_code)]

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The newest `/usr/lib/postgresql/N/bin` that has `initdb` and `postgres`.
pub fn bin_dir() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .expect("no PostgreSQL under /usr/lib/postgresql/*/bin: run scripts/install-postgres.sh first")
}

/// The uid and gid to run the server as: `postgres` when this process is root, else ourselves.
fn run_as() -> Option<(u32, u32)> {
    if rustix::process::geteuid().as_raw() != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("no postgres user (Debian's postgresql package creates it): run scripts/install-postgres.sh");
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

/// `program` run as `owner`, in `cwd`: the test's own directory may be one the `postgres` user
/// cannot enter (a checkout under /root), and initdb refuses to start there.
fn command(program: &Path, owner: Option<(u32, u32)>, cwd: &Path) -> Command {
    let mut c = Command::new(program);
    if let Some((uid, gid)) = owner {
        // std drops supplementary groups when root sets a uid.
        c.uid(uid).gid(gid);
    }
    c.current_dir(cwd).env_remove("PGDATA").env("LC_ALL", "C");
    c
}

/// A running server; stopped on drop.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    pub port: u16,
    child: Option<Child>,
}

impl Postgres {
    /// `initdb` and start. Takes about a second.
    pub fn start() -> Self {
        let started = Instant::now();
        let bin = bin_dir();
        let owner = run_as();
        let dir = tempfile::tempdir().unwrap();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let out = command(&bin.join("initdb"), owner, dir.path())
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut pg = Postgres { dir, bin, owner, port, child: None };
        pg.resume();
        eprintln!("postgres: initdb and start on port {port} in {:?}", started.elapsed());
        pg
    }

    /// The URL toolhost is given (`trust` auth: no password is checked).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Start the server (again) on the same data dir and port, and wait until it accepts
    /// connections.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "already running");
        let child = command(&self.bin.join("postgres"), self.owner, self.dir.path())
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-k"])
            .arg(self.dir.path())
            // A test database: durability is not the point, start-up and commits should be quick.
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"])
            .args(["-c", "max_connections=50", "-c", "shared_buffers=16MB"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = command(&self.bin.join("pg_isready"), None, self.dir.path())
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("postgres exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "postgres did not accept connections within 30 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the server (fast shutdown: connections are closed) and wait for it to exit.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SIGINT is PostgreSQL's fast shutdown.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::INT,
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.wait();
    }

    /// Run SQL with `psql` (as the superuser), returning its output (unaligned, tuples only).
    pub fn psql(&self, sql: &str) -> String {
        let out = command(&self.bin.join("psql"), None, self.dir.path())
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "postgres", "-d", "postgres"])
            .args(["-v", "ON_ERROR_STOP=1", "-A", "-t", "-q", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
