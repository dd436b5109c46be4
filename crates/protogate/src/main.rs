//! The `protogate` binary: parses the command line and hands over to the library.

fn main() -> std::process::ExitCode {
    give_large_buffers_back();
    protogate::main()
}

/// glibc's malloc serves a freed large buffer's successors from its heaps: once a 4 MB body
/// has been freed, its threshold for mapping a buffer on its own rises to that size, and a
/// burst of large bodies leaves its memory in the heaps for good (200 × 4 MB: 117 MiB resident
/// 30 s later). With the threshold fixed at 1 MiB, buffers that large are mapped on their own
/// and unmapped when freed: after the same burst the gateway is back at 12-15 MiB within a
/// second, and its peak is lower (BENCHMARKS.md, "Memory under a burst"); smaller buffers are
/// recycled as before. A `MALLOC_MMAP_THRESHOLD_` in the environment is left to rule.
fn give_large_buffers_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        // SAFETY: mallopt only sets a parameter of the allocator (under its own lock); it is
        // called once, before any thread but this one exists.
        #[allow(unsafe_code)]
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        }
    }
}
