//! The process's own figures for the edge's `/metrics` (`EdgeConfig::process`) (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_start_time_seconds`), the names and meanings every Prometheus client library
//! uses, read from Linux's `/proc` when scraped. Elsewhere there is no `/proc` and no series.
//!
//! Read as the Prometheus Go client's procfs does: CPU ticks in `/proc/self/stat` are in
//! USER_HZ, which Linux fixes at 100 for user space on every architecture (so no `sysconf`
//! call, and no `unsafe`); the resident set from `/proc/self/status`'s `VmRSS` (in KiB, so no
//! page size); the start from the boot time in `/proc/stat` plus the process's start in
//! ticks after boot.

use edge::metrics::Process;

/// Linux's USER_HZ: `/proc`'s clock ticks per second.
const USER_HZ: f64 = 100.0;

/// The process now, or `None` where `/proc` cannot say.
pub fn read() -> Option<Process> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    parse(&stat, &status, &boot, &limits, open_fds)
}

fn parse(stat: &str, status: &str, boot: &str, limits: &str, open_fds: u64) -> Option<Process> {
    // After the command, which is in parentheses and may hold spaces and parentheses.
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    // Fields from the third (state): utime is the 14th, stime the 15th, starttime the 22nd.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ticks = field(14)? + field(15)?;
    let start_ticks = field(22)?;
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let boot_time: u64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let max_fds = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?;
    Some(Process {
        cpu_seconds: ticks as f64 / USER_HZ,
        resident_bytes: rss_kib * 1024,
        open_fds,
        max_fds: max_fds.parse().ok(),
        start_time_seconds: boot_time as f64 + start_ticks as f64 / USER_HZ,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_read_as_the_prometheus_clients_read_them() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 6 0 0 0 150 25 0 0 20 0 9 0 \
                    123400 987654 2345 18446744073709551615";
        let status = "Name:\tprotogate\nVmPeak:\t  100 kB\nVmRSS:\t    9216 kB\nThreads:\t9\n";
        let boot = "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n";
        let p = parse(stat, status, boot, limits, 12).unwrap();
        assert_eq!(p.cpu_seconds, 1.75);
        assert_eq!(p.resident_bytes, 9 * 1024 * 1024);
        assert_eq!(p.open_fds, 12);
        assert_eq!(p.max_fds, Some(1024));
        assert_eq!(p.start_time_seconds, 1_700_001_234.0);
        let unlimited = limits.replace("1024  ", "unlimited");
        assert_eq!(
            parse(stat, status, boot, &unlimited, 1).unwrap().max_fds,
            None
        );
        assert_eq!(parse("garbage", status, boot, limits, 1), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reads() {
        let p = read().expect("/proc on Linux");
        assert!(p.resident_bytes > 0 && p.open_fds > 0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0);
    }
}
