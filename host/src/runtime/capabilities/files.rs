//! The files capability: which of the thread's directories a component sees at DeerFlow's virtual
//! paths, and how. The directories come from the thread filesystem layer as open handles, so a
//! preopen is exactly the directory that was checked, whatever happens to its name afterwards.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use toolhost_core::{ThreadDir, ThreadFs, VIRTUAL_ACP};

/// `capabilities.filesystem`: what a component may see of the thread's files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilesGrant {
    /// No files at all (the default).
    #[default]
    None,
    /// The thread's directories, the skills directory, the ACP workspace and the mounts, all
    /// read-only.
    ReadOnly,
    /// The thread's user data read-write; skills, the ACP workspace and read-only mounts
    /// read-only; writable mounts read-write.
    UserData,
    /// Only the thread's outputs directory, read-write: where a tool writes what it presents.
    Outputs,
}

impl FilesGrant {
    /// How `--explain` names it.
    pub fn describe(self) -> &'static str {
        match self {
            FilesGrant::None => "none",
            FilesGrant::ReadOnly => "read-only",
            FilesGrant::UserData => "user-data",
            FilesGrant::Outputs => "outputs",
        }
    }
}

/// A host directory made visible to the component at a guest path.
#[derive(Debug, Clone)]
pub struct Preopen {
    pub host: PreopenDir,
    pub guest: String,
    pub read_only: bool,
}

/// Which host directory a preopen gives.
#[derive(Debug, Clone)]
pub enum PreopenDir {
    /// An already open directory handle (the thread filesystem layer's): the preopen is exactly
    /// that directory, whatever happens to its name.
    Open(Arc<std::os::fd::OwnedFd>),
    /// A path opened when the call starts (benchmarks, embedders' own directories).
    Path(PathBuf),
}

impl PreopenDir {
    /// What to hand `WasiCtxBuilder::preopened_dir`, which only takes paths: for an open handle,
    /// the `/proc/self/fd/N` magic link, which opens that very directory.
    pub(crate) fn path(&self) -> PathBuf {
        match self {
            PreopenDir::Open(fd) => toolhost_core::threadfs::fd_path(std::os::fd::AsFd::as_fd(&**fd)),
            PreopenDir::Path(p) => p.clone(),
        }
    }
}

/// The preopens a grant gives a call in the thread of `fs`: the thread's own directories (created
/// on first use; one replaced by a link is refused there, never followed), then the shared skills
/// directory and mounts. `ReadOnly` is applied when the WASI context is built.
pub fn thread_preopens(grant: FilesGrant, fs: &ThreadFs) -> Result<Vec<Preopen>, String> {
    let open = |dir: ThreadDir, guest: &str, read_only: bool| -> Result<Preopen, String> {
        let fd = fs.dir(dir).map_err(|e| e.to_string())?;
        Ok(Preopen { host: PreopenDir::Open(fd), guest: guest.into(), read_only })
    };
    match grant {
        FilesGrant::None => Ok(Vec::new()),
        FilesGrant::Outputs => Ok(vec![open(ThreadDir::Outputs, "/mnt/user-data/outputs", false)?]),
        FilesGrant::ReadOnly | FilesGrant::UserData => {
            let mut out = vec![
                open(ThreadDir::Workspace, "/mnt/user-data/workspace", false)?,
                open(ThreadDir::Uploads, "/mnt/user-data/uploads", false)?,
                open(ThreadDir::Outputs, "/mnt/user-data/outputs", false)?,
                open(ThreadDir::Acp, VIRTUAL_ACP, true)?,
            ];
            let shared = fs.shared();
            for dir in shared.skills().into_iter().chain(shared.mounts()) {
                out.push(Preopen {
                    host: PreopenDir::Open(dir.handle()),
                    guest: dir.vpath.clone(),
                    read_only: dir.read_only,
                });
            }
            Ok(out)
        }
    }
}
