//! The `kernel-builder` binary: a thin shell over [`kernel_builder::cli::main`].

fn main() -> std::process::ExitCode {
    // Die quietly of SIGPIPE, as Unix tools do, when the reader of stdout goes away
    // (`kernel-builder list-variants … | head -1`); Rust ignores the signal by default, and
    // printing then panics.
    // SAFETY: called first in main, before any thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    kernel_builder::cli::main()
}
