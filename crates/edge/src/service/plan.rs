//! The deadline step: the client's own deadline (its protocol's header) capped by
//! `upstream_timeout` for calls with one answer.

use super::*;

impl Edge {
    /// The plan's deadline, read once the formats are known (a malformed deadline header is
    /// answered in them). One answer: the client's deadline capped by `upstream_timeout`. A
    /// response stream lasts as long as it lasts: only the client's own.
    pub(super) fn deadline(
        &self,
        protocol: Protocol,
        head: &http::request::Parts,
        plan: Plan,
    ) -> Result<Option<Duration>, EdgeError> {
        let client = protocol.client_deadline(&head.headers)?;
        if plan.out_framing.is_some() {
            return Ok(client);
        }
        let cap = self.config.upstream_timeout;
        Ok(Some(client.map_or(cap, |t| t.min(cap))))
    }
}
