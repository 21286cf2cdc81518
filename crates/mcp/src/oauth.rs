//! OAuth token injection for http/sse servers (DeerFlow's `OAuthTokenManager`): fetch a token
//! from `token_url` with the client-credentials or refresh-token grant, cache it until its expiry
//! minus `refresh_skew_seconds`, and hand out the `Authorization` header value.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;

use crate::config::OAuthConfig;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("oauth config: {0}")]
    Config(String),
    #[error("token request to {url} failed: {message}")]
    Request { url: String, message: String },
    #[error("token response from {url}: {message}")]
    Response { url: String, message: String },
}

#[derive(Debug, Clone)]
struct Cached {
    header: String,
    refresh_at: Instant,
}

/// One server's token source. Cheap to share behind an `Arc`; concurrent callers wait for a
/// single fetch.
#[derive(Debug)]
pub struct TokenSource {
    config: OAuthConfig,
    client: reqwest::Client,
    cached: Mutex<Option<Cached>>,
    /// A refresh-token grant may rotate the refresh token; the newest one is used next time.
    refresh_token: Mutex<Option<String>>,
}

impl TokenSource {
    /// Checks the grant's required fields up front so a bad entry fails with a clear message.
    pub fn new(config: OAuthConfig) -> Result<Self, OAuthError> {
        if config.token_url.trim().is_empty() {
            return Err(OAuthError::Config("token_url is empty".into()));
        }
        match config.grant_type.as_str() {
            "client_credentials" => {
                if config.client_id.as_deref().unwrap_or("").is_empty()
                    || config.client_secret.as_deref().unwrap_or("").is_empty()
                {
                    return Err(OAuthError::Config("client_credentials needs client_id and client_secret".into()));
                }
            }
            "refresh_token" => {
                if config.refresh_token.as_deref().unwrap_or("").is_empty() {
                    return Err(OAuthError::Config("refresh_token grant needs refresh_token".into()));
                }
            }
            other => {
                return Err(OAuthError::Config(format!(
                    "unsupported grant_type {other:?} (expected client_credentials or refresh_token)"
                )))
            }
        }
        let refresh_token = Mutex::new(config.refresh_token.clone());
        Ok(Self { config, client: reqwest::Client::new(), cached: Mutex::new(None), refresh_token })
    }

    /// The `Authorization` header value (`"{token_type} {token}"`) and the instant after which it
    /// should no longer be used; fetched only when the cached one is due for refresh.
    pub async fn header(&self) -> Result<(String, Instant), OAuthError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref() {
            if Instant::now() < c.refresh_at {
                return Ok((c.header.clone(), c.refresh_at));
            }
        }
        let fresh = self.fetch().await?;
        let out = (fresh.header.clone(), fresh.refresh_at);
        *cached = Some(fresh);
        Ok(out)
    }

    async fn fetch(&self) -> Result<Cached, OAuthError> {
        let c = &self.config;
        let url = c.token_url.clone();
        let mut form: Vec<(String, String)> = vec![("grant_type".into(), c.grant_type.clone())];
        let mut push = |k: &str, v: &Option<String>| {
            if let Some(v) = v.as_ref().filter(|v| !v.is_empty()) {
                form.push((k.to_string(), v.clone()));
            }
        };
        push("client_id", &c.client_id);
        push("client_secret", &c.client_secret);
        if c.grant_type == "refresh_token" {
            push("refresh_token", &self.refresh_token.lock().await.clone());
        }
        push("scope", &c.scope);
        push("audience", &c.audience);
        for (k, v) in &c.extra_token_params {
            form.push((k.clone(), v.clone()));
        }
        let resp = self
            .client
            .post(&url)
            .form(&form)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| OAuthError::Request { url: url.clone(), message: e.to_string() })?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| OAuthError::Request { url: url.clone(), message: e.to_string() })?;
        if !status.is_success() {
            let snippet: String = body.chars().take(200).collect();
            return Err(OAuthError::Response { url, message: format!("HTTP {status}: {snippet}") });
        }
        let json: Value = serde_json::from_str(&body)
            .map_err(|e| OAuthError::Response { url: url.clone(), message: format!("not JSON: {e}") })?;
        let token = json.get(&c.token_field).and_then(Value::as_str).filter(|t| !t.is_empty()).ok_or_else(|| {
            OAuthError::Response { url: url.clone(), message: format!("no {:?} string", c.token_field) }
        })?;
        let token_type = json
            .get(&c.token_type_field)
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .unwrap_or(&c.default_token_type);
        let expires_in = match json.get(&c.expires_in_field) {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(3600.0),
            Some(Value::String(s)) => s.parse().unwrap_or(3600.0),
            _ => 3600.0,
        }
        .max(0.0);
        if let Some(rotated) = json.get("refresh_token").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            *self.refresh_token.lock().await = Some(rotated.to_string());
        }
        let lifetime = Duration::from_secs_f64(expires_in).saturating_sub(Duration::from_secs(c.refresh_skew_seconds));
        tracing::debug!(token_url = %url, expires_in, "fetched oauth token");
        Ok(Cached { header: format!("{token_type} {token}"), refresh_at: Instant::now() + lifetime })
    }
}
