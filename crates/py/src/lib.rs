//! Python compatibility: the pieces of CPython whose exact behaviour DeerFlow's observable
//! strings depend on, re-implemented once for every toolhost crate (and the guest components).
//! Each module is named after the Python module or type it mirrors.
//!
//! | module | mirrors | used by |
//! |---|---|---|
//! | [`builtins`] | `bool()`, `int()`, `float()`, `str()`, `repr()` of JSON values | community tools |
//! | [`json`] | `json.dumps` / `json.loads` (exact big integers, `float.__repr__`, decode errors) | catalog_hash, tool_search, builtins, community tools |
//! | [`re`] | `re` patterns: tool_search's catalog regex, grep's pattern translation | deferred, sandbox-fs |
//! | [`str_methods`] | `str.strip`, `str.split`, `str.lower`, `str.casefold`, `str.isspace` | deferred, audit |
//! | [`yaml11`] | PyYAML's `yaml.safe_load` (YAML 1.1 typing) | skills (SKILL.md frontmatter) |
//! | [`shlex`] | `shlex.split`, `shlex.shlex(punctuation_chars=True)` | audit |
//! | [`datetime`] | `datetime.isoformat()` | skills, audit log |

pub mod builtins;
pub mod datetime;
pub mod json;
pub mod re;
pub mod shlex;
pub mod str_methods;
pub mod yaml11;
