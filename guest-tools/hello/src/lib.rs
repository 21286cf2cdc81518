//! The example tool component: one tool, `hello`, written as a plain function over typed
//! arguments. Build with `cargo build --target wasm32-wasip2 --release`.

use toolhost_sdk::{tool, Context, Output};

/// Arguments of `hello`.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct HelloArgs {
    /// Who to greet.
    name: String,
    /// Greet loudly.
    #[serde(default)]
    excited: bool,
}

fn hello(ctx: &Context, args: HelloArgs) -> Output {
    if args.name.trim().is_empty() {
        return Output::error("Error: name must not be empty");
    }
    let greeting = ctx.config_value::<String>("greeting").unwrap_or_else(|| "Hello".to_string());
    let end = if args.excited { "!" } else { "." };
    Output::text(format!("{greeting}, {}{end}", args.name))
}

toolhost_sdk::export_tools!(tool("hello", "Greet someone by name.", hello));
