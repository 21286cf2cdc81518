//! What a confined child does between `fork` and `exec`, prepared in the parent: the steps every
//! confined process takes, in one order, whoever starts it (a host-bash command, an MCP stdio
//! server, an ACP agent). Each step is a few syscalls on values built in the parent; nothing
//! allocates on the success path.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use landlock::RulesetCreated;

use crate::mountns::{ProcView, ReadOnlyView};
use crate::privs::Identity;
use crate::reaper::{ReaperPlan, StatusPipe};
use crate::seccomp::Filter;
use crate::tree::Cgroup;
use crate::{ruleset, tree};

/// The child's steps: join the tree's cgroups, fork a supervisor (a subreaper that kills the
/// tree when toolhost dies) that starts the process as init of a private pid namespace, join
/// the proxy's network namespace, make the host read-only but for the writable directories
/// (uid 0) and mount a `/proc` that shows only the tree, change to the working directory by its
/// handle, take on the identity (limits, user, no capabilities, `no_new_privs`), enforce the
/// Landlock ruleset, install the seccomp filter.
#[derive(Default)]
pub struct ChildPlan {
    /// Fork a subreaper supervisor first.
    pub reaper: Option<ReaperPlan>,
    /// The supervisor starts the process as init of a new pid namespace (needs `reaper`).
    pub pid_namespace: bool,
    /// The working directory (`fchdir`: no path lookup), unless the view sets it.
    pub workdir: Option<OwnedFd>,
    /// `cgroup.procs` of each cgroup the tree joins (cgroup v2, or v1 controllers).
    pub cgroup_procs: Vec<OwnedFd>,
    pub netns: Option<OwnedFd>,
    /// Everything read-only but the writable directories (uid 0 without capabilities).
    pub view: Option<ReadOnlyView>,
    /// A private `/proc` without a read-only view (a configured unprivileged user).
    pub proc_view: Option<ProcView>,
    pub identity: Option<Identity>,
    pub ruleset: Option<RulesetCreated>,
    /// A second handle on `ruleset`, to grant the fresh `/proc` the view mounted.
    pub fresh_proc_rule: Option<OwnedFd>,
    pub seccomp: Option<Arc<Filter>>,
}

impl ChildPlan {
    /// Register the plan as the command's `pre_exec` hook.
    pub fn install(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let mut plan = self;
        // SAFETY: the hook runs in the forked child and makes only syscalls on values prepared
        // in the parent (no allocation on the success path; errors are OS errors).
        unsafe {
            cmd.pre_exec(move || plan.apply());
        }
    }

    fn apply(&mut self) -> io::Result<()> {
        for procs in &self.cgroup_procs {
            tree::join_in_child(procs)?;
        }
        if let Some(reaper) = &self.reaper {
            reaper.fork_in_child(self.pid_namespace)?;
        }
        if let Some(ns) = &self.netns {
            // SAFETY: setns on a namespace descriptor the parent opened.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(view) = &self.view {
            view.apply_in_child()?;
        } else {
            if let Some(proc_view) = &self.proc_view {
                proc_view.apply_in_child()?;
            }
            if let Some(dir) = &self.workdir {
                // SAFETY: fchdir on an open directory.
                if unsafe { libc::fchdir(dir.as_raw_fd()) } != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        if let Some(fd) = &self.fresh_proc_rule {
            ruleset::allow_fresh_proc_in_child(fd)?;
        }
        if let Some(identity) = &self.identity {
            identity.apply_in_child()?;
        }
        ruleset::restrict_in_child(&mut self.ruleset)?;
        if let Some(filter) = &self.seccomp {
            filter.install_in_child()?;
        }
        Ok(())
    }
}

/// How a tree is held, prepared before the spawn: its cgroup (when one could be made) and the
/// supervisor's status pipe (when there is a supervisor).
#[derive(Default)]
pub struct TreeSetup {
    pub cgroup: Option<Cgroup>,
    /// The supervisor reports the first process's status on this pipe.
    pub status: Option<StatusPipe>,
}
