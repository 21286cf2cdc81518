//! ToolErrorHandlingMiddleware: a tool that failed the way a Python tool raises (a trap, a
//! crash, a panic in a native tool) becomes DeerFlow's error text, status error.

use std::panic::AssertUnwindSafe;

use async_trait::async_trait;
use toolhost_core::ToolOutcome;

use super::{Middleware, Next, ToolRequest};

pub struct ToolErrorHandlingMiddleware;

/// DeerFlow's text: `Error: Tool '{name}' failed with {class}: {detail}. Continue with available
/// context, or choose an alternative tool.`; the detail is cut to 497 chars plus `...` when
/// longer than 500.
pub fn format_exception(name: &str, class: &str, detail: &str) -> String {
    let detail = detail.trim();
    let detail = if detail.is_empty() { class.to_string() } else { detail.to_string() };
    let detail = if detail.chars().count() > 500 {
        let cut: String = detail.chars().take(497).collect();
        format!("{cut}...")
    } else {
        detail
    };
    format!("Error: Tool '{name}' failed with {class}: {detail}. Continue with available context, or choose an alternative tool.")
}

#[async_trait]
impl Middleware for ToolErrorHandlingMiddleware {
    fn name(&self) -> &'static str {
        "tool_error_handling"
    }

    async fn wrap_call(&self, req: &ToolRequest<'_>, next: Next<'_>) -> ToolOutcome {
        // A panicking native tool must not take the host down: catch it here.
        let fut = AssertUnwindSafe(next.run(req));
        let outcome = match futures_catch_unwind(fut).await {
            Ok(o) => o,
            Err(msg) => ToolOutcome {
                kind: Some(toolhost_core::ErrorKind::Crashed),
                ..ToolOutcome::raised("RuntimeError", format!("tool panicked: {msg}"))
            },
        };
        match &outcome.exception {
            Some(ex) => {
                let text = format_exception(req.name, &ex.class, &ex.detail);
                let mut o = ToolOutcome::error(text);
                o.exception = outcome.exception.clone();
                o.kind = outcome.kind;
                o
            }
            None => outcome,
        }
    }
}

/// `catch_unwind` for a future, without pulling in the futures crate.
async fn futures_catch_unwind<F: std::future::Future>(fut: AssertUnwindSafe<F>) -> Result<F::Output, String> {
    struct CatchUnwind<F>(F);
    impl<F: std::future::Future> std::future::Future for CatchUnwind<AssertUnwindSafe<F>> {
        type Output = Result<F::Output, String>;
        fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
            // SAFETY: structural pinning of the only field; it is never moved out.
            let inner = unsafe { self.map_unchecked_mut(|s| &mut s.0 .0) };
            match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
                Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
                Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
                Err(payload) => {
                    let msg = payload
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".to_string());
                    std::task::Poll::Ready(Err(msg))
                }
            }
        }
    }
    CatchUnwind(fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_deerflow() {
        assert_eq!(
            format_exception("web_fetch", "TimeoutError", " slow "),
            "Error: Tool 'web_fetch' failed with TimeoutError: slow. Continue with available context, or choose an alternative tool."
        );
        assert!(format_exception("t", "ValueError", "").contains("failed with ValueError: ValueError."));
        let long = "x".repeat(501);
        let text = format_exception("t", "E", &long);
        assert!(text.contains(&format!("{}...", "x".repeat(497))));
        assert!(!text.contains(&"x".repeat(498)));
        let exact = "y".repeat(500);
        assert!(format_exception("t", "E", &exact).contains(&format!("{exact}.")));
    }
}
