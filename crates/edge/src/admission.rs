//! Admission: the limits a request is served under — requests in flight (in all, and per
//! upstream) and request bytes held — and shedding when one is reached. Counters, not queues:
//! over a limit a request is refused at once (503 with `Retry-After`), never queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use prometheus_client::metrics::gauge::Gauge;

use crate::error::EdgeError;
use crate::shed::ShedReason;

/// A count with a ceiling (`usize::MAX`: none).
#[derive(Debug)]
pub(crate) struct Limit {
    max: usize,
    held: AtomicUsize,
}

impl Limit {
    pub(crate) fn new(max: Option<usize>) -> Limit {
        Limit {
            max: max.unwrap_or(usize::MAX),
            held: AtomicUsize::new(0),
        }
    }

    /// Takes `n` if that stays within the ceiling.
    fn try_take(&self, n: usize) -> bool {
        self.held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(n).filter(|&after| after <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::Relaxed);
    }
}

/// The gateway-wide limits: requests in flight and request bytes held.
#[derive(Debug)]
pub(crate) struct Admission {
    requests: Limit,
    bytes: Limit,
    /// `protogate_request_bytes_held`.
    bytes_gauge: Gauge,
}

impl Admission {
    pub(crate) fn new(max_requests: usize, max_bytes: usize, bytes_gauge: Gauge) -> Admission {
        Admission {
            requests: Limit::new(Some(max_requests)),
            bytes: Limit::new(Some(max_bytes)),
            bytes_gauge,
        }
    }

    /// A ticket for one more request, or its refusal.
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Ticket, EdgeError> {
        if !self.requests.try_take(1) {
            return Err(EdgeError::Shed(ShedReason::Requests));
        }
        Ok(Ticket {
            admission: Arc::clone(self),
            bytes: 0,
            request_bytes: 0,
            upstream: None,
        })
    }
}

/// One request's share of the limits, given back when it is dropped: the request itself, the
/// bytes it holds, and its upstream's slot. The answer's body keeps it until the answer is
/// sent or abandoned.
#[derive(Debug)]
pub struct Ticket {
    admission: Arc<Admission>,
    bytes: usize,
    /// Of `bytes`, those of the request body.
    request_bytes: usize,
    upstream: Option<UpstreamSlot>,
}

impl Ticket {
    /// Takes `n` more bytes of request body from the budget, or refuses (503) when the
    /// budget is spent.
    pub(crate) fn take_bytes(&mut self, n: usize) -> Result<(), EdgeError> {
        if !self.admission.bytes.try_take(n) {
            return Err(EdgeError::Shed(ShedReason::Memory));
        }
        self.bytes += n;
        self.request_bytes += n;
        self.admission.bytes_gauge.inc_by(n as i64);
        Ok(())
    }

    /// The request body bytes taken so far.
    pub(crate) fn request_bytes(&self) -> usize {
        self.request_bytes
    }

    /// Counts `n` more bytes held (an answer already made) even past the budget: refusing it
    /// would throw away a call the upstream has done; the overdraft refuses the next requests.
    pub(crate) fn hold_bytes(&mut self, n: usize) {
        self.admission.bytes.held.fetch_add(n, Ordering::Relaxed);
        self.bytes += n;
        self.admission.bytes_gauge.inc_by(n as i64);
    }

    pub(crate) fn set_upstream(&mut self, slot: UpstreamSlot) {
        self.upstream = Some(slot);
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.requests.give_back(1);
        if self.bytes > 0 {
            self.admission.bytes.give_back(self.bytes);
            self.admission.bytes_gauge.dec_by(self.bytes as i64);
        }
    }
}

/// One call's place in its upstream's limit, given back when dropped.
#[derive(Debug)]
pub(crate) struct UpstreamSlot(Arc<Limit>);

impl UpstreamSlot {
    /// A place in `limit`, or the upstream's refusal.
    pub(crate) fn take(limit: &Arc<Limit>) -> Result<UpstreamSlot, EdgeError> {
        if limit.try_take(1) {
            Ok(UpstreamSlot(Arc::clone(limit)))
        } else {
            Err(EdgeError::Shed(ShedReason::UpstreamRequests))
        }
    }
}

impl Drop for UpstreamSlot {
    fn drop(&mut self) {
        self.0.give_back(1);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An admission no test reaches the limits of.
    pub(crate) fn unlimited() -> Arc<Admission> {
        admission(usize::MAX, usize::MAX)
    }

    fn admission(requests: usize, bytes: usize) -> Arc<Admission> {
        Arc::new(Admission::new(requests, bytes, Gauge::default()))
    }

    fn shed_reason(r: Result<impl std::fmt::Debug, EdgeError>) -> ShedReason {
        match r {
            Err(EdgeError::Shed(reason)) => reason,
            other => panic!("not shed: {other:?}"),
        }
    }

    #[test]
    fn requests_past_the_limit_are_shed_until_one_ends() {
        let a = admission(2, 100);
        let one = a.admit().unwrap();
        let _two = a.admit().unwrap();
        assert_eq!(shed_reason(a.admit()), ShedReason::Requests);
        drop(one);
        assert!(a.admit().is_ok());
    }

    #[test]
    fn bytes_are_held_until_the_ticket_is_dropped() {
        let a = admission(10, 100);
        let mut one = a.admit().unwrap();
        one.take_bytes(60).unwrap();
        let mut two = a.admit().unwrap();
        assert_eq!(shed_reason(two.take_bytes(41)), ShedReason::Memory);
        two.take_bytes(40).unwrap();
        assert_eq!(a.bytes_gauge.get(), 100);
        // An answer is held past the budget; the overdraft refuses what comes next.
        one.hold_bytes(50);
        assert_eq!(a.bytes_gauge.get(), 150);
        drop(two);
        assert_eq!(
            shed_reason(a.admit().unwrap().take_bytes(1)),
            ShedReason::Memory
        );
        drop(one);
        assert_eq!(a.bytes_gauge.get(), 0);
        a.admit().unwrap().take_bytes(100).unwrap();
    }

    #[test]
    fn an_upstream_slot_is_given_back_when_dropped() {
        let limit = Arc::new(Limit::new(Some(1)));
        let slot = UpstreamSlot::take(&limit).unwrap();
        assert_eq!(
            shed_reason(UpstreamSlot::take(&limit)),
            ShedReason::UpstreamRequests
        );
        drop(slot);
        assert!(UpstreamSlot::take(&limit).is_ok());
        let unlimited = Arc::new(Limit::new(None));
        let slots: Vec<_> = (0..1000)
            .map(|_| UpstreamSlot::take(&unlimited).unwrap())
            .collect();
        assert_eq!(slots.len(), 1000);
    }
}
