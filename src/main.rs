//! The `fsgate` binary: everything lives in the library; see `fsgate --help`.

fn main() -> std::process::ExitCode {
    bound_allocator_retention();
    fsgate::cli::main()
}

/// glibc raises its mmap threshold each time a large block is freed, after which blocks
/// of file size come from per-thread arenas and are kept by the process after use, and
/// it gives each of up to 8 threads per core an arena of its own that keeps what it
/// once held: with many requests on many threads, the memory high-water mark then grows
/// far beyond what is ever in use at once. A fixed threshold keeps every block of 1 MiB
/// or more in its own mapping, given back when freed, and two arenas are shared by all
/// threads, so the gateway's memory follows its byte budgets. The heap's free top is
/// given back only past 4 MiB (glibc's default is 128 KiB): a batch of 32 answers frees
/// about that much, and giving it back each time made the next batch fault every page
/// in again (4% of a pipelined read's samples, about 15% of its throughput).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn bound_allocator_retention() {
    // SAFETY: mallopt only sets an allocator parameter; it is called once, first thing
    // in main, before any other thread exists. A failure (0) leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn bound_allocator_retention() {}
