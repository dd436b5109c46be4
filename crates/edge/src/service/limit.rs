//! The rate-limit step (`[rate_limit]`): one request spent from the caller's budget for the
//! method, a verified caller's by its name, any other's by its address.

use super::*;
use crate::rate_limit::Who;

impl Edge {
    pub(super) async fn rate_limit(
        &self,
        ctx: &RequestCtx<'_>,
        head: &http::request::Parts,
        method: &Method,
    ) -> Result<(), EdgeError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let who = if ctx.caller.id.is_verified() {
            Who::Client(Arc::from(ctx.caller.id.name()))
        } else {
            match head.extensions.get::<crate::server::PeerAddr>() {
                Some(peer) => Who::Peer(peer.0.ip()),
                None => Who::Peer(std::net::Ipv6Addr::UNSPECIFIED.into()),
            }
        };
        let (decision, failure) = limiter.check(&method.full_name, who).await;
        if let Some(failure) = failure {
            self.metrics.rate_limit_backend_errors.inc();
            if limiter.should_warn() {
                tracing::warn!(error = %failure, "the rate limit's Redis did not decide; this replica's own budgets do until it does (said at most every 10 s)");
            }
        }
        if decision.allowed {
            return Ok(());
        }
        self.metrics
            .rate_limited
            .get_or_create(&crate::metrics::MethodLabels {
                method: MethodName(method.full_name.clone()),
            })
            .inc();
        Err(EdgeError::RateLimited(decision))
    }
}
