//! The rate-limit step (`[rate_limit]`): one request spent from the caller's budget for the
//! method, a verified caller's by its name, any other's by its address.

use super::*;
use crate::rate_limit::Who;

impl Edge {
    pub(super) async fn rate_limit(
        &self,
        ctx: &RequestCtx<'_>,
        method: &Method,
    ) -> Result<(), EdgeError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let who = match &ctx.verified {
            _ if !ctx.caller.id.is_verified() => {
                Who::Peer(ctx.peer.unwrap_or(std::net::Ipv6Addr::UNSPECIFIED.into()))
            }
            Some(v) if ctx.caller.id.source() != crate::migration::Source::Certificate => {
                Who::Client(Arc::clone(&v.client))
            }
            _ => Who::Client(Arc::from(ctx.caller.id.name())),
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
