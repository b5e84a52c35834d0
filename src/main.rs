//! The `kernel-builder` binary: a thin shell over [`kernel_builder::cli::main`].

fn main() -> std::process::ExitCode {
    kernel_builder::cli::main()
}
