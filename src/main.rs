//! The `fsgate` binary: everything lives in the library; see `fsgate --help`.

fn main() -> std::process::ExitCode {
    bound_allocator_retention();
    fsgate::cli::main()
}

/// glibc raises its mmap threshold each time a large block is freed, after which blocks
/// of file size come from per-thread arenas and are kept by the process after use: with
/// many reads of large files on many threads, the memory high-water mark then grows far
/// beyond what is ever in use at once. A fixed threshold keeps every block of 1 MiB or
/// more in its own mapping, given back to the system when freed, so the gateway's
/// memory follows its byte budgets.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn bound_allocator_retention() {
    // SAFETY: mallopt only sets an allocator parameter; it is called once, first thing
    // in main, before any other thread exists. A failure (0) leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn bound_allocator_retention() {}
