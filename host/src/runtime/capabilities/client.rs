//! `capabilities.client`: which requests a component may send back to the MCP client during a
//! call (WIT `toolhost:tool/client`, 0.3.0; roots from 0.4.0). Deny by default: a tool nobody reviewed must not
//! put questions to the user (a phishing prompt) or spend the client's model tokens unless its
//! config says so.

use serde::Deserialize;

/// One request kind a component may send (`client: [elicitation, sampling]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientRequest {
    /// `elicit`: a question to the client's user (MCP `elicitation/create`).
    Elicitation,
    /// `create-message`: a completion from the client's model (MCP `sampling/createMessage`).
    Sampling,
    /// `list-roots`: the client's roots (MCP `roots/list`, WIT 0.4.0).
    Roots,
}

impl ClientRequest {
    /// The name in config and in errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// The granted request kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientGrant {
    /// `client.elicit` may ask the user.
    pub elicitation: bool,
    /// `client.create-message` may ask the model.
    pub sampling: bool,
    /// `client.list-roots` may ask for the client's roots.
    pub roots: bool,
}

impl ClientGrant {
    /// The grant a `client:` list gives.
    pub fn from_list(list: &[ClientRequest]) -> Self {
        Self {
            elicitation: list.contains(&ClientRequest::Elicitation),
            sampling: list.contains(&ClientRequest::Sampling),
            roots: list.contains(&ClientRequest::Roots),
        }
    }

    /// Whether `kind` is granted.
    pub fn allows(self, kind: ClientRequest) -> bool {
        match kind {
            ClientRequest::Elicitation => self.elicitation,
            ClientRequest::Sampling => self.sampling,
            ClientRequest::Roots => self.roots,
        }
    }

    /// For `tools --explain`.
    pub fn describe(self) -> String {
        let names: Vec<&str> = [(self.elicitation, "elicitation"), (self.sampling, "sampling"), (self.roots, "roots")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_what_is_granted() {
        let g: Vec<ClientRequest> = serde_yaml::from_str("[sampling]").unwrap();
        let g = ClientGrant::from_list(&g);
        assert!(g.allows(ClientRequest::Sampling) && !g.allows(ClientRequest::Elicitation));
        assert_eq!(g.describe(), "sampling");
        assert_eq!(ClientGrant::default().describe(), "none");
        let all: Vec<ClientRequest> = serde_yaml::from_str("[elicitation, sampling, roots]").unwrap();
        assert_eq!(ClientGrant::from_list(&all).describe(), "elicitation, sampling, roots");
        let e = serde_yaml::from_str::<Vec<ClientRequest>>("[files]").unwrap_err().to_string();
        assert!(e.contains("files") && e.contains("elicitation") && e.contains("roots"), "{e}");
    }
}
