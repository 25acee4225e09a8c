//! The `fsgate` binary: everything lives in the library; see `fsgate --help`.

fn main() -> std::process::ExitCode {
    fsgate::cli::main()
}
