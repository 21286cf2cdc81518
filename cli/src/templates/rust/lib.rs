//! The `__TOOL__` tool: greets someone. Build with `toolhost build`, try it with
//! `toolhost call __TOOL__ '{"name": "Ada"}'`.

use toolhost_sdk::{tool, Context, Output};

/// Arguments of `__TOOL__`: the JSON Schema the model sees is derived from this type.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Who to greet.
    name: String,
    /// Greet loudly.
    #[serde(default)]
    excited: bool,
}

fn __TOOL__(ctx: &Context, args: Args) -> Output {
    if args.name.trim().is_empty() {
        // Reported as DeerFlow reports a raised exception: `ValueError: name must not be empty`.
        return Output::raised("ValueError", "name must not be empty");
    }
    let greeting = ctx.config_value::<String>("greeting").unwrap_or_else(|| "Hello".to_string());
    let end = if args.excited { "!" } else { "." };
    Output::text(format!("{greeting}, {}{end}", args.name))
}

toolhost_sdk::export_tools!(tool("__TOOL__", "Greet someone by name.", __TOOL__));
