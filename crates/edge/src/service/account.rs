//! Account: the facts about a request that everything counting it reads, each decided here
//! and only here.
//! - Who is calling ([`Caller`], by [`Edge::identify`] then [`Edge::authenticate`]): the
//!   verified client certificate, else a verified bearer token's client claim, else an API
//!   key's client (`[auth]`); only without any of them the client's own word: `x-client-id`,
//!   else the configured `client_id_header`, else the User-Agent's product token. The
//!   migration report, the sunset policy's exemptions, the rate limit, the downgrade log, the
//!   access log and the upstream (`x-protogate-client`, verified identities only) all name the
//!   client by it.
//! - What is a downgrade ([`reasons`]): of one rendering (counted in
//!   `protogate_downgrades_total` and logged, rate-limited, by [`Edge::note_downgrades`]), and
//!   of the whole request (the migration tracker's and the access log's, [`Edge::account`]).
//! - What the JSON sunset policy says of the request ([`Edge::json_sunset`]).

use std::fmt;

use super::*;
use crate::migration::Source;

/// Who is calling: the request's [`ClientId`] (the migration report's name and version, the
/// name the sunset policy exempts) and the same identity owned, for logs and streams.
pub(super) struct Caller<'a> {
    pub(super) id: ClientId<'a>,
    pub(super) client: Client,
}

/// A request's share of the migration report: the sunset policy's verdict (and its headers
/// for the answer), the unknown fields its answer dropped, the conversions and their costs.
#[derive(Default)]
pub(super) struct Noted<'a> {
    pub(super) verdict: Verdict,
    pub(super) sunset_headers: Option<&'a DeprecationHeaders>,
    pub(super) dropped: Vec<transcode::UnknownField>,
    pub(super) request_conversion: Option<Conversion>,
    pub(super) answer_conversion: Option<Conversion>,
}

/// Whose rendering a downgrade is: the method, the client, and whether JSON was a fallback
/// (Accept named nothing we serve) rather than asked for.
pub(super) struct Rendering<'a> {
    pub(super) method: &'a Method,
    pub(super) client: &'a Client,
    pub(super) fallback: bool,
}

/// The downgrades of protobuf rendered as `to`: JSON asked for (or fallen back to, when
/// Accept named nothing we serve), and fields the rendering `dropped`. The one rule, for one
/// rendering and for a whole request.
pub(super) fn reasons(to: Format, fallback: bool, dropped: bool) -> DowngradeSet {
    let mut set = DowngradeSet::default();
    if to == Format::Json {
        set.insert(if fallback {
            Reason::AcceptFallback
        } else {
            Reason::JsonRequested
        });
    }
    if dropped {
        set.insert(Reason::UnknownFields);
    }
    set
}

/// A set of downgrades as the access log writes it: reason names joined by `,`, empty for
/// none.
pub(super) struct Names(pub(super) DowngradeSet);

impl fmt::Display for Names {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for reason in self.0.iter() {
            if !first {
                f.write_str(",")?;
            }
            f.write_str(reason.as_str())?;
            first = false;
        }
        Ok(())
    }
}

impl Edge {
    /// Who is calling ([`Caller`]); runs once per request, before anything names the client.
    pub(super) fn identify<'a>(&self, head: &'a http::request::Parts) -> Caller<'a> {
        let id = ClientId::from_request(
            &head.headers,
            self.config.migration.client_id_header.as_ref(),
            peer_identity(head),
        );
        let client = Client::new(header_str(&head.headers, header::USER_AGENT), id.declared());
        Caller { id, client }
    }

    /// The `[auth]` step, once the method is known: the request's credentials verified (a
    /// bad one refused whatever the method), the caller named by them unless a client
    /// certificate already did, and a request without any refused where the method
    /// requires them.
    pub(super) async fn authenticate<'s>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &'s http::request::Parts,
        method: &Method,
    ) -> Result<(), EdgeError> {
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        let refuse = |failure: crate::auth::Failure| {
            tracing::debug!(method = &*method.full_name, reason = failure.reason.as_str(), detail = %failure.detail, "credentials refused");
            self.metrics
                .auth_failures
                .get_or_create(&crate::metrics::ReasonLabels {
                    reason: failure.reason.as_str(),
                })
                .inc();
            EdgeError::Unauthenticated(failure)
        };
        let verified = auth.verify(&head.headers).await.map_err(refuse)?;
        if let Some(verified) = &verified
            && ctx.caller.id.source() != Source::Certificate
        {
            let source = match verified.proof {
                crate::auth::Proof::Token => Source::Token,
                crate::auth::Proof::ApiKey => Source::ApiKey,
            };
            let client = Client {
                user_agent: Arc::clone(&ctx.caller.client.user_agent),
                client_id: Some(Arc::clone(&verified.client)),
            };
            let id = ClientId::verified(&verified.client, source, &head.headers);
            ctx.caller = Caller { id, client };
        }
        if !ctx.caller.id.is_verified() && auth.required(&method.full_name) {
            return Err(refuse(crate::auth::Failure::new(
                crate::auth::Reason::Missing,
                "no credentials".into(),
            )));
        }
        ctx.verified = verified;
        Ok(())
    }

    /// The caller as the upstream hears of it: the header naming a verified identity
    /// (`x-protogate-client`) and the forwarded claims, set here only: whatever the client
    /// sent under those names is removed first. The credentials stay at the gateway: an API
    /// key always, a verified bearer token unless `forward_token` (without `[auth]` the
    /// client's `authorization` goes on as it always has).
    pub(super) fn put_identity(&self, ctx: &RequestCtx<'_>, metadata: &mut HeaderMap) {
        metadata.remove(&self.client_header);
        let Some(auth) = &self.auth else {
            return;
        };
        let config = auth.config();
        if !config.api_keys.is_empty() {
            metadata.remove(&config.api_key_header);
        }
        if let Some(jwt) = &config.jwt {
            for (_, name) in &jwt.forward_claims {
                metadata.remove(name);
            }
        }
        let name = match &ctx.verified {
            Some(verified) => {
                if verified.proof == crate::auth::Proof::Token && !config.forward_token {
                    metadata.remove(header::AUTHORIZATION);
                }
                for (name, value) in &verified.forwarded {
                    metadata.insert(name.clone(), value.clone());
                }
                // A certificate names the caller before a token or key does.
                (ctx.caller.id.source() != Source::Certificate).then(|| verified.header.clone())
            }
            None => None,
        };
        let name = name.or_else(|| {
            ctx.caller
                .id
                .is_verified()
                .then(|| HeaderValue::from_str(ctx.caller.id.name()).ok())
                .flatten()
        });
        if let Some(name) = name {
            metadata.insert(self.client_header.clone(), name);
        }
    }

    /// Counts the downgrades of one rendering of a protobuf message as `to`, and logs them
    /// (rate-limited) when `log` (a stream logs its first message's only).
    pub(super) fn note_downgrades(
        &self,
        of: &Rendering<'_>,
        to: Format,
        findings: &Findings,
        log: bool,
    ) {
        for reason in reasons(to, of.fallback, findings.dropped_data()).iter() {
            self.metrics
                .downgrades
                .get_or_create(&DowngradeLabels {
                    method: MethodName(of.method.full_name.clone()),
                    reason: reason.as_str(),
                })
                .inc();
            if log {
                self.downgrades.record(&Downgrade {
                    method: &of.method.full_name,
                    reason,
                    format: to,
                    client: of.client,
                    findings: (reason == Reason::UnknownFields).then_some(findings),
                });
            }
        }
    }

    /// The JSON sunset policy for a request with JSON on either side: nothing before a
    /// rule's deprecation; the deprecation headers (and a `json_deprecated` downgrade) until
    /// its sunset; a refusal in a brownout and after the sunset (an exempt client is served
    /// with the headers).
    pub(super) fn json_sunset<'s>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        method: &Method,
        plan: Plan,
    ) -> Result<(), EdgeError> {
        let json_body = plan.body_type == Some(Format::Json);
        if self.sunset.is_empty() || !(plan.response == Format::Json || json_body) {
            return Ok(());
        }
        let decision = self.sunset.decide(
            &method.full_name,
            std::time::SystemTime::now(),
            ctx.caller.id.name(),
            ctx.caller.id.is_verified(),
        );
        ctx.noted.verdict = decision.verdict();
        match decision {
            JsonDecision::Allowed => Ok(()),
            JsonDecision::Deprecated { headers } => {
                ctx.noted.sunset_headers = Some(headers);
                self.metrics
                    .downgrades
                    .get_or_create(&DowngradeLabels {
                        method: MethodName(method.full_name.clone()),
                        reason: Reason::JsonDeprecated.as_str(),
                    })
                    .inc();
                Ok(())
            }
            JsonDecision::Exempt { headers, .. } => {
                ctx.noted.sunset_headers = Some(headers);
                Ok(())
            }
            JsonDecision::Refused { reason, message } => {
                self.metrics
                    .json_refused
                    .get_or_create(&crate::metrics::RefusedLabels {
                        method: MethodName(method.full_name.clone()),
                        reason: reason.as_str(),
                    })
                    .inc();
                Err(EdgeError::JsonRefused { message, json_body })
            }
        }
    }

    /// The request's row in the migration report, once its answer is known (when it had a
    /// method and a plan; errors included: who sends what matters whatever the answer was).
    pub(super) fn account(&self, ctx: &RequestCtx<'_>) {
        let (Some(plan), Some(method)) = (ctx.plan, ctx.method) else {
            return;
        };
        let noted = &ctx.noted;
        let refused = matches!(noted.verdict, Verdict::Refused(_));
        {
            self.migration.record(
                &method.full_name,
                &ctx.caller.id,
                &Finished {
                    protocol: ctx.protocol,
                    request: plan.request,
                    response: if refused { Format::Json } else { plan.response },
                    downgrades: request_downgrades(ctx),
                    dropped: &noted.dropped,
                    verdict: noted.verdict,
                    request_conversion: noted.request_conversion,
                    answer_conversion: noted.answer_conversion,
                },
                self.epoch.1 + ctx.start.saturating_duration_since(self.epoch.0),
            );
        }
    }
}

/// The downgrades of a whole request: its answer's format (JSON asked for or fallen back to)
/// and what its rendering dropped, and the sunset policy's verdict — a refusal is a JSON
/// answer (the one such a client reads), a deprecation its own reason. Empty before the
/// request had a plan. The migration report's and the access log's (a request whose client
/// left included).
pub(super) fn request_downgrades(ctx: &RequestCtx<'_>) -> DowngradeSet {
    let Some(plan) = ctx.plan else {
        return DowngradeSet::default();
    };
    let mut downgrades = reasons(plan.response, plan.fallback, !ctx.noted.dropped.is_empty());
    match ctx.noted.verdict {
        Verdict::Refused(_) => downgrades.insert(Reason::JsonRequested),
        Verdict::Deprecated => downgrades.insert(Reason::JsonDeprecated),
        _ => {}
    }
    downgrades
}

/// The verified identity of the client certificate the request came with (TLS listeners
/// with client certificates).
fn peer_identity(head: &http::request::Parts) -> Option<&str> {
    head.extensions
        .get::<crate::server::PeerIdentity>()
        .map(|identity| &*identity.0)
}
