//! Typed errors of the deferred layer: bad JSON text, schemas langchain's conversion rejects,
//! and the fail-closed refusal of `assemble_deferred_tools`.

pub use toolhost_py::json::JsonError;

/// Why a tool's schema cannot be converted the way langchain's `convert_to_openai_function`
/// converts it (DeerFlow raises in these cases when it hashes the catalog).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("input schema of tool '{tool}' is not a JSON object")]
    SchemaNotObject { tool: String },
    #[error("input schema of tool '{tool}' resolves to something other than a JSON object")]
    ResolvedNotObject { tool: String },
    #[error("input schema of tool '{tool}': $ref must be a string, got {found}")]
    RefNotString { tool: String, found: String },
    /// langchain's `ValueError` for a `$ref` that does not start with `#`.
    #[error("input schema of tool '{tool}': ref paths are expected to be URI fragments, meaning they should start with #. (got '{path}')")]
    RefNotFragment { tool: String, path: String },
    /// langchain's `KeyError("Reference '…' not found.")`.
    #[error("input schema of tool '{tool}': Reference '{path}' not found.")]
    RefNotFound { tool: String, path: String },
    #[error("input schema of tool '{tool}' is nested too deeply or expands too much through $ref")]
    TooLarge { tool: String },
    #[error("input schema of tool '{tool}': {source}")]
    Json {
        tool: String,
        #[source]
        source: JsonError,
    },
}

/// Errors of building the deferred setup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeferredError {
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// DeerFlow's fail-closed `RuntimeError`: MCP tools would be bound with their schemas.
    #[error("tool_search enabled and MCP candidates exist, but no deferred set was recovered - refusing to bind MCP schemas (fail-closed).")]
    FailClosed,
}
