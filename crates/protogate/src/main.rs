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
/// recycled as before.
///
/// A fixed mmap threshold also stops glibc raising its trim threshold with it, which then
/// stays at 128 KiB: the few hundred KB a large request's buffers free at the heap's top were
/// given back to the kernel after every request and faulted in again by the next (EchoLogs_1000,
/// 256 KB bodies: 13-24 page faults a request, a fifth of the pass-through's CPU). The trim
/// threshold is set to 4 MiB, at most that much free memory kept at the heap's top
/// (BENCHMARKS.md, history of 2026-12-04). `MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` in the
/// environment are left to rule.
fn give_large_buffers_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    for (variable, parameter, value) in [
        ("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 1 << 20),
        ("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, 4 << 20),
    ] {
        if std::env::var_os(variable).is_none() {
            // SAFETY: mallopt only sets a parameter of the allocator (under its own lock); it
            // is called before any thread but this one exists.
            #[allow(unsafe_code)]
            unsafe {
                libc::mallopt(parameter, value);
            }
        }
    }
}
