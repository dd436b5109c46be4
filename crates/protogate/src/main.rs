//! The `protogate` binary: parses the command line and hands over to the library.

fn main() -> std::process::ExitCode {
    protogate::main()
}
