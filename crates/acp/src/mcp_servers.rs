//! DeerFlow's `_build_acp_mcp_servers`: the host's enabled MCP servers in ACP's `session/new`
//! wire form. One invalid entry invalidates the list (the caller then sends none, with a warning).

use agent_client_protocol::v1::schema::{
    EnvVariable, HttpHeader, McpServer, McpServerHttp, McpServerSse, McpServerStdio,
};
use indexmap::IndexMap;

/// One enabled MCP server of the host's `extensions_config.json`, as the host maps it. Only the
/// fields its transport needs must be set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcpMcpServerConfig {
    pub name: String,
    /// `stdio` (also when `None`), `http` or `sse`.
    pub transport: Option<String>,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: IndexMap<String, String>,
    pub url: Option<String>,
    pub headers: IndexMap<String, String>,
}

/// Why an MCP server entry cannot be forwarded; the texts are DeerFlow's `ValueError`s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpServerError {
    #[error("MCP server '{0}' with stdio transport requires 'command' field")]
    MissingCommand(String),
    #[error("MCP server '{name}' with {transport} transport requires 'url' field")]
    MissingUrl { name: String, transport: String },
    #[error("MCP server '{name}' has unsupported transport type: {transport}")]
    UnsupportedTransport { name: String, transport: String },
}

/// Convert every entry, or fail on the first invalid one.
pub fn to_acp(servers: &[AcpMcpServerConfig]) -> Result<Vec<McpServer>, McpServerError> {
    servers.iter().map(one).collect()
}

fn one(s: &AcpMcpServerConfig) -> Result<McpServer, McpServerError> {
    let transport = s.transport.clone().unwrap_or_else(|| "stdio".to_string());
    let headers = || s.headers.iter().map(|(k, v)| HttpHeader::new(k.clone(), v.clone())).collect::<Vec<_>>();
    let url = || {
        s.url
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| McpServerError::MissingUrl { name: s.name.clone(), transport: transport.clone() })
    };
    match transport.as_str() {
        "stdio" => {
            let command = s
                .command
                .clone()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| McpServerError::MissingCommand(s.name.clone()))?;
            let env = s.env.iter().map(|(k, v)| EnvVariable::new(k.clone(), v.clone())).collect();
            Ok(McpServer::Stdio(McpServerStdio::new(s.name.clone(), command).args(s.args.clone()).env(env)))
        }
        "http" => Ok(McpServer::Http(McpServerHttp::new(s.name.clone(), url()?).headers(headers()))),
        "sse" => Ok(McpServer::Sse(McpServerSse::new(s.name.clone(), url()?).headers(headers()))),
        _ => Err(McpServerError::UnsupportedTransport { name: s.name.clone(), transport }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_each_transport_to_deerflows_wire_form() {
        let mut env = IndexMap::new();
        env.insert("K".to_string(), "v".to_string());
        let servers = vec![
            AcpMcpServerConfig {
                name: "fs".into(),
                command: Some("npx".into()),
                args: vec!["-y".into()],
                env,
                ..Default::default()
            },
            AcpMcpServerConfig {
                name: "web".into(),
                transport: Some("http".into()),
                url: Some("http://127.0.0.1:1/mcp".into()),
                ..Default::default()
            },
        ];
        let wire = serde_json::to_value(to_acp(&servers).unwrap()).unwrap();
        assert_eq!(wire[0]["name"], "fs");
        assert_eq!(wire[0]["command"], "npx");
        assert_eq!(wire[0]["env"], serde_json::json!([{"name": "K", "value": "v"}]));
        assert_eq!(wire[1]["type"], "http");
        assert_eq!(wire[1]["url"], "http://127.0.0.1:1/mcp");
    }

    #[test]
    fn invalid_entries_name_the_server() {
        let bad = |transport: Option<&str>| AcpMcpServerConfig {
            name: "x".into(),
            transport: transport.map(String::from),
            ..Default::default()
        };
        assert_eq!(
            to_acp(&[bad(None)]).unwrap_err().to_string(),
            "MCP server 'x' with stdio transport requires 'command' field"
        );
        assert_eq!(
            to_acp(&[bad(Some("sse"))]).unwrap_err().to_string(),
            "MCP server 'x' with sse transport requires 'url' field"
        );
        assert_eq!(
            to_acp(&[bad(Some("ws"))]).unwrap_err().to_string(),
            "MCP server 'x' has unsupported transport type: ws"
        );
    }
}
