//! A method's JSON share over the last 24 hours: a ring of 1,440 one-minute buckets of
//! (requests, JSON answers). Each bucket remembers its minute, so one older than the window
//! reads as empty and is reset when its slot comes round again; nothing ever sweeps the ring.
//! 12 bytes a bucket, 17 KiB a method, allocated on the method's first request.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Buckets in the ring: 24 h of minutes.
pub const MINUTES: usize = 24 * 60;

#[derive(Debug, Clone)]
pub(super) struct Series {
    buckets: Box<[Bucket]>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Minutes since 1970 of the requests counted here.
    minute: u32,
    requests: u32,
    json: u32,
}

/// Minutes since 1970.
fn minute_of(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 60)
}

impl Series {
    pub(super) fn new() -> Series {
        Series {
            buckets: vec![Bucket::default(); MINUTES].into_boxed_slice(),
        }
    }

    /// Counts one request at `now`, a JSON answer or not. A time older than what its slot
    /// holds (the clock stepped back a day) is not counted.
    pub(super) fn add(&mut self, now: SystemTime, json: bool) {
        let minute = minute_of(now);
        let b = &mut self.buckets[(minute % MINUTES as u64) as usize];
        let m = minute as u32;
        if b.minute != m {
            if b.minute > m {
                return;
            }
            *b = Bucket {
                minute: m,
                requests: 0,
                json: 0,
            };
        }
        b.requests = b.requests.saturating_add(1);
        if json {
            b.json = b.json.saturating_add(1);
        }
    }

    /// The 1,440 minutes ending with `now`'s, oldest first: (start of the first minute,
    /// (requests, JSON answers) per minute).
    pub(super) fn window(&self, now: SystemTime) -> (SystemTime, Vec<(u32, u32)>) {
        let last = minute_of(now);
        let first = last.saturating_sub(MINUTES as u64 - 1);
        let points = (first..=last)
            .map(|m| {
                let b = self.buckets[(m % MINUTES as u64) as usize];
                if u64::from(b.minute) == m {
                    (b.requests, b.json)
                } else {
                    (0, 0)
                }
            })
            .collect();
        (UNIX_EPOCH + Duration::from_secs(first * 60), points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY0: u64 = 1_800_000_000; // some time in 2027

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(DAY0 + secs)
    }

    #[test]
    fn buckets_count_by_minute_and_expire_after_a_day() {
        let mut s = Series::new();
        s.add(at(0), true);
        s.add(at(10), false);
        s.add(at(59), true);
        s.add(at(3600), false);
        let now = at(3600);
        let (start, points) = s.window(now);
        assert_eq!(points.len(), MINUTES);
        assert_eq!(start + Duration::from_secs(60 * (MINUTES as u64 - 1)), {
            let m = (DAY0 + 3600) / 60 * 60;
            UNIX_EPOCH + Duration::from_secs(m)
        });
        let nonzero: Vec<_> = points.iter().filter(|p| p.0 > 0).collect();
        assert_eq!(nonzero.len(), 2);
        assert_eq!(points[MINUTES - 1], (1, 0));
        assert_eq!(points[MINUTES - 61], (3, 2), "the minute an hour ago");
        // 23 h 59 min after the first request it is still in the window; at 24 h it is not.
        let (_, points) = s.window(at(24 * 3600 - 60));
        assert_eq!(points[0], (3, 2));
        let (_, points) = s.window(at(24 * 3600));
        assert!(points.iter().all(|p| *p != (3, 2)));
        // Two days on, the old bucket's slot is reused, not added to.
        s.add(at(2 * 24 * 3600 + 5), true);
        let (_, points) = s.window(at(2 * 24 * 3600 + 5));
        assert_eq!(points[MINUTES - 1], (1, 1));
        assert_eq!(points.iter().map(|p| p.0).sum::<u32>(), 1);
    }

    #[test]
    fn a_clock_stepping_back_does_not_clobber_newer_minutes() {
        let mut s = Series::new();
        s.add(at(2 * 24 * 3600), true);
        s.add(at(24 * 3600), true);
        let (_, points) = s.window(at(2 * 24 * 3600));
        assert_eq!(points[MINUTES - 1], (1, 1));
    }
}
