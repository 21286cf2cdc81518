//! The `toolhost` binary: parses arguments and wires library calls; nothing else.

#[path = "mod.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
