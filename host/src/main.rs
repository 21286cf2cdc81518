//! The `toolhost` binary: parses arguments and wires library calls; nothing else.

fn main() -> std::process::ExitCode {
    toolhost::cli::main()
}
