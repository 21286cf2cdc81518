//! DeerFlow's deferred-tool machinery (spec §8): the deferred catalog and its byte-exact
//! `catalog_hash`, the `tool_search` tool, the `<available-deferred-tools>` prompt section, the
//! deferred filter that hides and gates unpromoted MCP tools, and MCP routing auto-promotion.

pub mod catalog;
mod chunks;
pub mod config;
pub mod convert;
pub mod error;
pub mod filter;
pub mod routing;
pub mod tool;

pub use catalog::{CatalogFunction, CatalogSource, CatalogTool, DeferredCatalog, DeferredToolInput, MAX_RESULTS};
pub use config::ToolSearchConfig;
pub use convert::{convert_to_openai_function, OpenAiFunction};
pub use error::{ConvertError, DeferredError, JsonError};
pub use filter::{
    assemble_deferred_tools, build_deferred_tool_setup, deferred_tools_prompt_section, finish_assembly,
    DeferredToolFilter, DeferredToolSetup,
};
pub use routing::{
    build_routing_index, clamp_top_k, ChatMessage, HumanMessage, McpRouting, RoutingEntry, RoutingMeta,
    DEFAULT_AUTO_PROMOTE_TOP_K,
};
pub use tool::{tool_search_spec, SearchResult, ToolSearchTool, TOOL_SEARCH_DESCRIPTION, TOOL_SEARCH_NAME};
pub use toolhost_py::json::{PyDict, PyValue};
