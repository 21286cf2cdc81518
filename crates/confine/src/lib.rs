//! One confinement for every process toolhost starts: host-bash commands, MCP stdio servers and
//! ACP agents all run under the same boundary, built here.
//!
//! - **Files**: Landlock ([`ruleset`]) — the system read-only (`/etc` only as far as an
//!   unprivileged user could read it), the process's own writable directories, granted paths,
//!   nothing else; for uid 0 a read-only view of the whole host besides ([`mountns`]), since
//!   Landlock does not govern `chmod`/`chown`.
//! - **Identity** ([`privs`]): every capability dropped with `SECBIT_NOROOT` (uid 0) or a
//!   configured unprivileged user, `no_new_privs`, resource limits.
//! - **Syscalls** ([`seccomp`]): other processes' memory, mounts, namespaces, modules, BPF,
//!   io_uring refused; sockets as the network mode allows.
//! - **Processes** ([`tree`], [`reaper`]): a cgroup per tree with process and memory caps, a
//!   supervisor that kills the tree when toolhost dies, a private pid namespace and `/proc`, so
//!   other processes' command lines and environments are not there to read.
//! - **Network** ([`proxy`]): none, or HTTPS through the host's allow-list proxy in a network
//!   namespace of its own, with the rules of a component's `capabilities.network`.
//! - **Long-lived processes** ([`process`]): the grants vocabulary of MCP servers and ACP
//!   agents, and a [`process::Confiner`] that prepares a `Command` under them.

pub mod child;
pub mod mountns;
pub mod paths;
pub mod privs;
pub mod process;
pub mod proxy;
pub mod reaper;
pub mod ruleset;
pub mod seccomp;
mod sni;
pub mod tree;

pub use privs::{harden_process, BashUser, CapSets};
pub use ruleset::{confinement_status, ConfinementStatus};
pub use tree::TreeLimits;

/// `CAP_SYS_ADMIN`: toolhost can make namespaces and mounts for its children.
pub const CAP_SYS_ADMIN: u32 = 21;

/// Whether this process may build namespaces and mounts for its children (a private pid
/// namespace and `/proc`, the read-only view, the proxy's network namespace).
pub fn can_make_namespaces() -> bool {
    CapSets::current().is_some_and(|c| c.has(CAP_SYS_ADMIN)) && mountns::supported()
}
