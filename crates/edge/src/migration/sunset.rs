//! The JSON sunset policy: per method, service or package glob, a deprecation
//! date (JSON answers carry `Deprecation`, RFC 9745, and `Sunset`, RFC 8594), a sunset date
//! (JSON refused from then on), brownout windows (JSON refused inside them) and clients exempt
//! from all of it.
//!
//! [`SunsetPolicy::new`] validates the rules once; [`SunsetPolicy::decide`] (or
//! [`SunsetPolicy::rule_for`] then [`Rule::decide`]) answers, per request that would be
//! answered in JSON, what to do. Everything here is pure: the time is a parameter.
//!
//! # Selectors
//! Rules name their methods by selectors ([`crate::selector`]: a full name or a glob; the
//! most specific matching one wins). Two globs equally specific
//! that match the same method are ambiguous: [`SunsetPolicy::effective`], given the schema's
//! methods, refuses them naming both (call it at start-up and in `check`);
//! [`SunsetPolicy::rule_for`] alone falls back to the earlier rule in the configuration.
//!
//! # Phases
//! Before `deprecation` (or, with no deprecation date, before `sunset`): nothing changes.
//! From `deprecation` to `sunset`: JSON is served with the headers, except inside a brownout
//! window, where it is refused. From `sunset` on: JSON is refused. A client named in
//! `exempt_clients` is served wherever it would be deprecated or refused ([`JsonDecision::Exempt`],
//! counted apart) and its answers carry the same headers.

use std::fmt;
use std::time::SystemTime;

use http::header::{HeaderMap, HeaderName, HeaderValue, LINK};

use super::dates::{Brownout, http_date, rfc3339, unix_secs};
use crate::selector::{Selector, most_specific};
pub use crate::selector::{dotted, glob_match};

/// One `[[json_sunset]]` rule as configured (times already parsed with
/// [`parse_time`](super::parse_time) and [`parse_brownout`](super::parse_brownout)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SunsetRule {
    pub selector: String,
    pub deprecation: Option<SystemTime>,
    pub sunset: Option<SystemTime>,
    /// An absolute http(s) URL explaining the migration.
    pub link: Option<String>,
    pub brownouts: Vec<Brownout>,
    /// Client names ([`ClientId::name`](super::ClientId::name)) served JSON regardless:
    /// verified identities only (a certificate, a token, an API key)…
    pub exempt_clients: Vec<String>,
    /// …or self-declared ones too (`x-client-id`, the User-Agent) when true.
    pub exempt_unverified: bool,
}

/// A rule that cannot be used: which one and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyError {
    /// The rule's selector (or both, `"a.*" and "*.b"`, for an ambiguity).
    pub selector: String,
    pub message: String,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "json_sunset {}: {}", self.selector, self.message)
    }
}

impl std::error::Error for PolicyError {}

/// The validated policy. Cheap to query: a lookup is a glob match per rule (rules are few;
/// with many, resolve each schema method once with [`SunsetPolicy::effective`]).
#[derive(Debug, Clone, Default)]
pub struct SunsetPolicy {
    rules: Vec<Rule>,
}

/// A validated rule with its precomputed headers.
#[derive(Debug, Clone)]
pub struct Rule {
    spec: SunsetRule,
    selector: Selector,
    headers: DeprecationHeaders,
}

/// The headers a deprecated JSON answer carries, built once per rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeprecationHeaders {
    /// `Deprecation: @1798761600` (RFC 9745, a structured-field date).
    pub deprecation: Option<HeaderValue>,
    /// `Sunset: Wed, 30 Jun 2027 00:00:00 GMT` (RFC 8594).
    pub sunset: Option<HeaderValue>,
    /// `Link: <url>; rel="deprecation", <url>; rel="sunset"` (each relation when its date is set).
    pub link: Option<HeaderValue>,
}

/// `deprecation` (RFC 9745).
pub const DEPRECATION: HeaderName = HeaderName::from_static("deprecation");
/// `sunset` (RFC 8594).
pub const SUNSET: HeaderName = HeaderName::from_static("sunset");

impl DeprecationHeaders {
    /// Writes the headers into an answer's (`Link` appended beside any other).
    pub fn apply(&self, headers: &mut HeaderMap) {
        for (name, value) in self.iter() {
            if name == LINK {
                headers.append(name, value.clone());
            } else {
                headers.insert(name, value.clone());
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (HeaderName, &HeaderValue)> {
        [
            (DEPRECATION, self.deprecation.as_ref()),
            (SUNSET, self.sunset.as_ref()),
            (LINK, self.link.as_ref()),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
    }
}

/// Why JSON was refused: `protogate_json_refused_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalReason {
    Sunset,
    Brownout,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 2] = [RefusalReason::Sunset, RefusalReason::Brownout];

    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Sunset => "sunset",
            RefusalReason::Brownout => "brownout",
        }
    }
}

/// What to do with one request that would be answered in JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonDecision<'a> {
    /// No rule, or before its dates: serve as always.
    Allowed,
    /// Serve, with these headers on the answer, and count `json_deprecated`.
    Deprecated { headers: &'a DeprecationHeaders },
    /// Refuse: 406 (415 when the request body was JSON) with a google.rpc.Status, rendered in
    /// JSON, carrying `message` (it names the method, the dates and the link).
    Refused {
        reason: RefusalReason,
        message: String,
    },
    /// An exempt client where the answer would otherwise be `instead`: serve, with the
    /// headers, and count it apart.
    Exempt {
        headers: &'a DeprecationHeaders,
        instead: Verdict,
    },
}

/// A [`JsonDecision`] without its data: what the tracker counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Verdict {
    /// Allowed, or not a JSON answer.
    #[default]
    Allowed,
    Deprecated,
    Exempt,
    Refused(RefusalReason),
}

impl JsonDecision<'_> {
    pub fn verdict(&self) -> Verdict {
        match self {
            JsonDecision::Allowed => Verdict::Allowed,
            JsonDecision::Deprecated { .. } => Verdict::Deprecated,
            JsonDecision::Refused { reason, .. } => Verdict::Refused(*reason),
            JsonDecision::Exempt { .. } => Verdict::Exempt,
        }
    }

    /// The headers to put on the answer, if any.
    pub fn headers(&self) -> Option<&DeprecationHeaders> {
        match self {
            JsonDecision::Deprecated { headers } | JsonDecision::Exempt { headers, .. } => {
                Some(headers)
            }
            _ => None,
        }
    }
}

/// Where a rule stands at a time, whoever the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before the deprecation (or, with none, before the sunset): nothing changes.
    Before,
    Deprecated,
    /// Inside a brownout window ending at `until`.
    Brownout {
        until: SystemTime,
    },
    Sunset,
}

impl Phase {
    /// `before`, `deprecated`, `brownout`, `sunset`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Before => "before",
            Phase::Deprecated => "deprecated",
            Phase::Brownout { .. } => "brownout",
            Phase::Sunset => "sunset",
        }
    }
}

// === impl SunsetPolicy ===

impl SunsetPolicy {
    /// Validates every rule: the selector's characters, no two equal selectors, at least one
    /// date, deprecation not after sunset, an absolute http(s) link, brownouts inside the
    /// deprecation period (so clients were warned by headers first), exempt names that a
    /// client name can equal.
    pub fn new(rules: Vec<SunsetRule>) -> Result<SunsetPolicy, PolicyError> {
        let mut built: Vec<Rule> = Vec::with_capacity(rules.len());
        for spec in rules {
            let rule = Rule::new(spec)?;
            if let Some(same) = built
                .iter()
                .find(|r| r.selector.pattern() == rule.selector.pattern())
            {
                return Err(PolicyError {
                    selector: format!("{:?} and {:?}", same.spec.selector, rule.spec.selector),
                    message: "two rules with the same selector".into(),
                });
            }
            built.push(rule);
        }
        Ok(SunsetPolicy { rules: built })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules in configuration order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The rule that governs a method (`pkg.Service.Method` or `pkg.Service/Method`): the
    /// most specific matching selector; among equals, the earlier rule.
    pub fn rule_for(&self, method: &str) -> Option<&Rule> {
        most_specific(&self.rules, |r| &r.selector, method)
    }

    /// What to do with a request to `method` by `client` that would be answered in JSON.
    /// `verified`: whether the gateway verified the client's name (see
    /// [`ClientId::is_verified`](super::ClientId::is_verified)).
    pub fn decide(
        &self,
        method: &str,
        now: SystemTime,
        client: &str,
        verified: bool,
    ) -> JsonDecision<'_> {
        match self.rule_for(method) {
            Some(rule) => rule.decide(method, now, client, verified),
            None => JsonDecision::Allowed,
        }
    }

    /// The effective rule of each of `methods` that has one (for start-up and `check`), or
    /// an error naming two equally specific selectors that both match a method.
    pub fn effective<'m>(
        &self,
        methods: impl IntoIterator<Item = &'m str>,
    ) -> Result<Vec<(String, &Rule)>, PolicyError> {
        let mut out = Vec::new();
        for method in methods {
            let Some(best) = self.rule_for(method) else {
                continue;
            };
            if let Some(tie) = self.rules.iter().find(|r| {
                !std::ptr::eq(*r, best)
                    && r.selector.specificity() == best.selector.specificity()
                    && r.selector.matches(method)
            }) {
                return Err(PolicyError {
                    selector: format!("{:?} and {:?}", best.spec.selector, tie.spec.selector),
                    message: format!(
                        "both match {} and neither is more specific; make one of them more specific",
                        dotted(method)
                    ),
                });
            }
            out.push((dotted(method).into_owned(), best));
        }
        Ok(out)
    }
}

// === impl Rule ===

impl Rule {
    fn new(mut spec: SunsetRule) -> Result<Rule, PolicyError> {
        let fail = |message: String| PolicyError {
            selector: format!("{:?}", spec.selector),
            message,
        };
        let selector = Selector::parse(&spec.selector).map_err(fail)?;
        if spec.deprecation.is_none() && spec.sunset.is_none() {
            return Err(fail(
                "neither deprecation nor sunset is set: the rule would do nothing".into(),
            ));
        }
        if let (Some(d), Some(s)) = (spec.deprecation, spec.sunset)
            && d > s
        {
            return Err(fail(format!(
                "the deprecation ({}) is after the sunset ({})",
                rfc3339(d),
                rfc3339(s)
            )));
        }
        if let Some(link) = &spec.link {
            check_link(link).map_err(|m| fail(format!("link {link:?}: {m}")))?;
        }
        spec.brownouts.sort_by_key(|b| b.start);
        for b in &spec.brownouts {
            let window = format!("{}/{}", rfc3339(b.start), rfc3339(b.end()));
            let Some(d) = spec.deprecation else {
                return Err(fail(format!(
                    "brownout {window} needs a deprecation date: clients are warned by the Deprecation header before JSON is switched off"
                )));
            };
            if b.start < d {
                return Err(fail(format!(
                    "brownout {window} starts before the deprecation ({})",
                    rfc3339(d)
                )));
            }
            if let Some(s) = spec.sunset
                && b.end() > s
            {
                return Err(fail(format!(
                    "brownout {window} ends after the sunset ({}), when JSON is refused anyway",
                    rfc3339(s)
                )));
            }
            if b.length.is_zero() {
                return Err(fail(format!("brownout {window} is empty")));
            }
        }
        for name in &spec.exempt_clients {
            if name.is_empty() || name.trim() != name {
                return Err(fail(format!(
                    "exempt client {name:?} is empty or has spaces around it"
                )));
            }
            if name.len() > super::client::MAX_NAME_BYTES
                || !name.bytes().all(|b| (b' '..=b'~').contains(&b))
            {
                return Err(fail(format!(
                    "exempt client {name:?} can never match: client names are at most {} printable ASCII characters",
                    super::client::MAX_NAME_BYTES
                )));
            }
        }
        let headers = headers_of(&spec).map_err(fail)?;
        Ok(Rule {
            spec,
            selector,
            headers,
        })
    }

    /// The rule as configured (brownouts sorted by start).
    pub fn spec(&self) -> &SunsetRule {
        &self.spec
    }

    pub fn selector(&self) -> &str {
        &self.spec.selector
    }

    pub fn headers(&self) -> &DeprecationHeaders {
        &self.headers
    }

    pub fn is_exempt(&self, client: &str) -> bool {
        self.spec.exempt_clients.iter().any(|c| c == client)
    }

    /// The brownout in progress at `now` or the next one to come.
    pub fn next_brownout(&self, now: SystemTime) -> Option<&Brownout> {
        self.spec.brownouts.iter().find(|b| b.end() > now)
    }

    /// Where the rule stands at `now`.
    pub fn phase(&self, now: SystemTime) -> Phase {
        if self.spec.sunset.is_some_and(|s| now >= s) {
            return Phase::Sunset;
        }
        if self.spec.deprecation.is_none_or(|d| now < d) {
            return Phase::Before;
        }
        match self.spec.brownouts.iter().find(|b| b.contains(now)) {
            Some(b) => Phase::Brownout { until: b.end() },
            None => Phase::Deprecated,
        }
    }

    /// What to do with a request to `method` (named in the refusal message) by `client`
    /// that would be answered in JSON.
    pub fn decide(
        &self,
        method: &str,
        now: SystemTime,
        client: &str,
        verified: bool,
    ) -> JsonDecision<'_> {
        let verdict = match self.phase(now) {
            Phase::Before => return JsonDecision::Allowed,
            Phase::Deprecated => Verdict::Deprecated,
            Phase::Brownout { .. } => Verdict::Refused(RefusalReason::Brownout),
            Phase::Sunset => Verdict::Refused(RefusalReason::Sunset),
        };
        if (verified || self.spec.exempt_unverified) && self.is_exempt(client) {
            return JsonDecision::Exempt {
                headers: &self.headers,
                instead: verdict,
            };
        }
        match verdict {
            Verdict::Refused(reason) => JsonDecision::Refused {
                reason,
                message: self.refusal_message(method, now),
            },
            _ => JsonDecision::Deprecated {
                headers: &self.headers,
            },
        }
    }

    /// `JSON on demo.shop.v1.Shop.GetOrder ended on 2027-06-30T00:00:00Z; use
    /// application/x-protobuf: see https://…`, or, in a brownout, `JSON on … is switched off
    /// until … for a brownout (it ends on …); use …`.
    pub fn refusal_message(&self, method: &str, now: SystemTime) -> String {
        let method = dotted(method);
        let mut m = match self.phase(now) {
            Phase::Brownout { until } => {
                let mut m = format!(
                    "JSON on {method} is switched off until {} for a brownout",
                    rfc3339(until)
                );
                if let Some(s) = self.spec.sunset {
                    m.push_str(&format!(" (it ends on {})", rfc3339(s)));
                }
                m
            }
            _ => match self.spec.sunset {
                Some(s) => format!("JSON on {method} ended on {}", rfc3339(s)),
                None => format!("JSON on {method} is switched off"),
            },
        };
        m.push_str("; use application/x-protobuf");
        if let Some(link) = &self.spec.link {
            m.push_str(": see ");
            m.push_str(link);
        }
        m
    }
}

fn headers_of(spec: &SunsetRule) -> Result<DeprecationHeaders, String> {
    let value = |s: String| {
        HeaderValue::try_from(s).map_err(|_| "cannot be sent as a header value".to_string())
    };
    let mut h = DeprecationHeaders::default();
    if let Some(d) = spec.deprecation {
        h.deprecation = Some(value(format!("@{}", unix_secs(d)))?);
    }
    if let Some(s) = spec.sunset {
        h.sunset = Some(value(http_date(s))?);
    }
    if let Some(link) = &spec.link {
        let mut rels = Vec::new();
        if spec.deprecation.is_some() {
            rels.push(format!("<{link}>; rel=\"deprecation\""));
        }
        if spec.sunset.is_some() {
            rels.push(format!("<{link}>; rel=\"sunset\""));
        }
        h.link = Some(value(rels.join(", "))?);
    }
    Ok(h)
}

/// An absolute http(s) URL with a host, printable ASCII without `<`, `>`, `"` (it goes
/// between angle brackets in `Link`).
fn check_link(link: &str) -> Result<(), String> {
    let lower = link.get(..8).unwrap_or(link).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &link[8..]
    } else if lower.starts_with("http://") {
        &link[7..]
    } else {
        return Err("not an absolute http:// or https:// URL".into());
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() {
        return Err("no host".into());
    }
    if link.len() > 2000 {
        return Err("longer than 2,000 characters".into());
    }
    if let Some(c) = link
        .chars()
        .find(|c| !c.is_ascii_graphic() || matches!(c, '<' | '>' | '"'))
    {
        return Err(format!(
            "{c:?} is not allowed (percent-encode it: the link goes into a header)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::dates::{parse_brownout, parse_time};
    use super::*;

    const GET: &str = "demo.shop.v1.Shop/GetOrder";

    fn t(s: &str) -> SystemTime {
        parse_time(s).unwrap()
    }

    fn shop_rule() -> SunsetRule {
        SunsetRule {
            selector: "demo.shop.v1.Shop.*".into(),
            deprecation: Some(t("2027-01-01T00:00:00Z")),
            sunset: Some(t("2027-06-30T00:00:00Z")),
            link: Some("https://wiki.example/protobuf-migration".into()),
            brownouts: vec![parse_brownout("2027-05-01T10:00:00Z/PT1H").unwrap()],
            exempt_clients: vec!["legacy-billing".into()],
            exempt_unverified: false,
        }
    }

    #[test]
    fn globs_match_names_and_dots() {
        for (pattern, name, want) in [
            ("*", "a.B/C", true),
            ("demo.*", "demo.shop.v1.Shop/GetOrder", true),
            ("demo.shop.v1.Shop.*", "demo.shop.v1.Shop/GetOrder", true),
            (
                "demo.shop.v1.Shop.*",
                "demo.shop.v1.Shopping/GetOrder",
                false,
            ),
            (
                "demo.shop.v1.Shop.GetOrder",
                "demo.shop.v1.Shop/GetOrder",
                true,
            ),
            (
                "demo.shop.v1.Shop.GetOrder",
                "demo.shop.v1.Shop.GetOrder",
                true,
            ),
            (
                "demo.shop.v1.Shop.GetOrder",
                "demo.shop.v1.Shop/GetOrders",
                false,
            ),
            ("*.GetOrder", "demo.shop.v1.Shop/GetOrder", true),
            ("demo.*.Get*", "demo.shop.v1.Shop/GetOrder", true),
            ("demo.*.Put*", "demo.shop.v1.Shop/GetOrder", false),
            ("a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ] {
            assert_eq!(
                glob_match(pattern.as_bytes(), name.as_bytes()),
                want,
                "{pattern} {name}"
            );
        }
    }

    #[test]
    fn decisions_follow_the_dates_and_brownouts() {
        let policy = SunsetPolicy::new(vec![shop_rule()]).unwrap();
        let at = |s: &str| policy.decide(GET, t(s), "okhttp", true);
        assert_eq!(at("2026-12-31T23:59:59Z"), JsonDecision::Allowed);
        let JsonDecision::Deprecated { headers } = at("2027-01-01T00:00:00Z") else {
            panic!("deprecated from the deprecation date on");
        };
        assert_eq!(headers.deprecation.as_ref().unwrap(), "@1798761600");
        assert_eq!(
            headers.sunset.as_ref().unwrap(),
            "Wed, 30 Jun 2027 00:00:00 GMT"
        );
        assert_eq!(
            headers.link.as_ref().unwrap(),
            "<https://wiki.example/protobuf-migration>; rel=\"deprecation\", \
             <https://wiki.example/protobuf-migration>; rel=\"sunset\""
        );
        let mut map = HeaderMap::new();
        map.append(LINK, HeaderValue::from_static("</other>; rel=\"help\""));
        headers.apply(&mut map);
        assert_eq!(map.get_all(LINK).iter().count(), 2);
        assert_eq!(map["deprecation"], "@1798761600");
        assert_eq!(
            at("2027-05-01T09:59:59Z").verdict(),
            Verdict::Deprecated,
            "before the brownout"
        );
        let JsonDecision::Refused { reason, message } = at("2027-05-01T10:00:00Z") else {
            panic!("refused in the brownout");
        };
        assert_eq!(reason, RefusalReason::Brownout);
        assert_eq!(
            message,
            "JSON on demo.shop.v1.Shop.GetOrder is switched off until 2027-05-01T11:00:00Z for a \
             brownout (it ends on 2027-06-30T00:00:00Z); use application/x-protobuf: see \
             https://wiki.example/protobuf-migration"
        );
        assert_eq!(
            at("2027-05-01T11:00:00Z").verdict(),
            Verdict::Deprecated,
            "the window's end is excluded"
        );
        let JsonDecision::Refused { reason, message } = at("2027-06-30T00:00:00Z") else {
            panic!("refused from the sunset on");
        };
        assert_eq!(reason, RefusalReason::Sunset);
        assert_eq!(
            message,
            "JSON on demo.shop.v1.Shop.GetOrder ended on 2027-06-30T00:00:00Z; use \
             application/x-protobuf: see https://wiki.example/protobuf-migration"
        );
        assert_eq!(
            policy.decide(
                "demo.other.v1.Other/Get",
                t("2030-01-01T00:00:00Z"),
                "x",
                true
            ),
            JsonDecision::Allowed,
            "no rule"
        );
    }

    #[test]
    fn exempt_clients_are_served_with_the_headers() {
        let policy = SunsetPolicy::new(vec![shop_rule()]).unwrap();
        let d = policy.decide(GET, t("2026-06-01T00:00:00Z"), "legacy-billing", true);
        assert_eq!(d, JsonDecision::Allowed, "nothing to be exempt from yet");
        for (when, instead) in [
            ("2027-02-01T00:00:00Z", Verdict::Deprecated),
            (
                "2027-05-01T10:30:00Z",
                Verdict::Refused(RefusalReason::Brownout),
            ),
            (
                "2028-01-01T00:00:00Z",
                Verdict::Refused(RefusalReason::Sunset),
            ),
        ] {
            let d = policy.decide(GET, t(when), "legacy-billing", true);
            assert_eq!(d.verdict(), Verdict::Exempt, "{when}");
            let JsonDecision::Exempt {
                headers,
                instead: i,
            } = d
            else {
                unreachable!()
            };
            assert_eq!(i, instead);
            assert!(headers.sunset.is_some());
            // Names are compared exactly.
            assert_ne!(
                policy
                    .decide(GET, t(when), "Legacy-Billing", true)
                    .verdict(),
                Verdict::Exempt
            );
            // A name the client gave itself is not enough…
            assert_eq!(
                policy
                    .decide(GET, t(when), "legacy-billing", false)
                    .verdict(),
                instead
            );
        }
        // …unless the rule says so.
        let trusting = SunsetPolicy::new(vec![SunsetRule {
            exempt_unverified: true,
            ..shop_rule()
        }])
        .unwrap();
        let d = trusting.decide(GET, t("2028-01-01T00:00:00Z"), "legacy-billing", false);
        assert_eq!(d.verdict(), Verdict::Exempt);
    }

    #[test]
    fn a_sunset_without_deprecation_or_link() {
        let policy = SunsetPolicy::new(vec![SunsetRule {
            selector: "demo.*".into(),
            sunset: Some(t("2027-06-30T00:00:00Z")),
            ..SunsetRule::default()
        }])
        .unwrap();
        assert_eq!(
            policy.decide(GET, t("2027-06-29T00:00:00Z"), "c", true),
            JsonDecision::Allowed
        );
        let JsonDecision::Refused { message, .. } =
            policy.decide(GET, t("2027-06-30T00:00:00Z"), "c", true)
        else {
            panic!()
        };
        assert!(message.ends_with("2027-06-30T00:00:00Z; use application/x-protobuf"));
        let rule = policy.rule_for(GET).unwrap();
        assert!(rule.headers().deprecation.is_none() && rule.headers().link.is_none());
        // A deprecation without a sunset deprecates for ever.
        let policy = SunsetPolicy::new(vec![SunsetRule {
            selector: "*".into(),
            deprecation: Some(t("2027-01-01T00:00:00Z")),
            link: Some("http://x.example".into()),
            ..SunsetRule::default()
        }])
        .unwrap();
        let d = policy.decide(GET, t("2099-01-01T00:00:00Z"), "c", true);
        assert_eq!(
            d.headers().unwrap().link.as_ref().unwrap(),
            "<http://x.example>; rel=\"deprecation\""
        );
    }

    #[test]
    fn the_most_specific_selector_wins() {
        let rule = |selector: &str, year: &str| SunsetRule {
            selector: selector.into(),
            sunset: Some(t(&format!("{year}-01-01T00:00:00Z"))),
            ..SunsetRule::default()
        };
        let policy = SunsetPolicy::new(vec![
            rule("*", "2030"),
            rule("demo.*", "2031"),
            rule("demo.shop.v1.Shop.*", "2032"),
            rule("demo.shop.v1.Shop/GetOrder", "2033"),
            rule("*.v1.Shop.ListOrders", "2034"),
            rule("demo.shop.*", "2035"),
        ])
        .unwrap();
        let sel = |m: &str| policy.rule_for(m).unwrap().selector().to_string();
        assert_eq!(
            sel("demo.shop.v1.Shop/GetOrder"),
            "demo.shop.v1.Shop/GetOrder"
        );
        assert_eq!(
            sel("demo.shop.v1.Shop.GetOrder"),
            "demo.shop.v1.Shop/GetOrder"
        );
        assert_eq!(sel("demo.shop.v1.Shop/PutOrder"), "demo.shop.v1.Shop.*");
        // 19 literal characters against demo.shop.v1.Shop.*'s 18.
        assert_eq!(sel("demo.shop.v1.Shop/ListOrders"), "*.v1.Shop.ListOrders");
        assert_eq!(sel("demo.shop.v2.Shop/GetOrder"), "demo.shop.*");
        assert_eq!(sel("demo.pay.v1.Pay/Charge"), "demo.*");
        assert_eq!(sel("other.Svc/M"), "*");
        let eff = policy
            .effective(["demo.shop.v1.Shop/GetOrder", "other.Svc/M"])
            .unwrap();
        assert_eq!(eff[0].0, "demo.shop.v1.Shop.GetOrder");
        assert_eq!(eff[1].1.selector(), "*");
    }

    #[test]
    fn equally_specific_globs_on_one_method_are_ambiguous() {
        let rule = |selector: &str| SunsetRule {
            selector: selector.into(),
            sunset: Some(t("2030-01-01T00:00:00Z")),
            ..SunsetRule::default()
        };
        // Five literal characters each, the first `*` third in both.
        let policy = SunsetPolicy::new(vec![rule("a.*b.c"), rule("a.*b.b*")]).unwrap();
        assert_eq!(policy.rule_for("a.b.b.c").unwrap().selector(), "a.*b.c");
        let e = policy.effective(["x.y", "a.b.b.c"]).unwrap_err();
        assert_eq!(e.selector, "\"a.*b.c\" and \"a.*b.b*\"");
        assert!(e.message.contains("both match a.b.b.c"), "{e}");
        // The prefix breaks a tie in literals.
        let policy = SunsetPolicy::new(vec![rule("*.b.c"), rule("a.b.*")]).unwrap();
        assert_eq!(policy.rule_for("a.b.c").unwrap().selector(), "a.b.*");
        assert!(policy.effective(["a.b.c"]).is_ok());
    }

    #[test]
    fn invalid_rules_are_named() {
        let ok = shop_rule;
        let cases: Vec<(SunsetRule, &str)> = vec![
            (
                SunsetRule {
                    selector: "".into(),
                    ..ok()
                },
                "the selector is empty",
            ),
            (
                SunsetRule {
                    selector: "demo shop".into(),
                    ..ok()
                },
                "' ' cannot appear in a selector",
            ),
            (
                SunsetRule {
                    deprecation: None,
                    sunset: None,
                    brownouts: vec![],
                    ..ok()
                },
                "neither deprecation nor sunset",
            ),
            (
                SunsetRule {
                    deprecation: Some(t("2028-01-01T00:00:00Z")),
                    brownouts: vec![],
                    ..ok()
                },
                "the deprecation (2028-01-01T00:00:00Z) is after the sunset (2027-06-30T00:00:00Z)",
            ),
            (
                SunsetRule {
                    link: Some("wiki.example/x".into()),
                    ..ok()
                },
                "not an absolute http:// or https:// URL",
            ),
            (
                SunsetRule {
                    link: Some("https:///x".into()),
                    ..ok()
                },
                "no host",
            ),
            (
                SunsetRule {
                    link: Some("https://x.example/a b".into()),
                    ..ok()
                },
                "' ' is not allowed",
            ),
            (
                SunsetRule {
                    link: Some("https://x.example/>; rel=evil".into()),
                    ..ok()
                },
                "'>' is not allowed",
            ),
            (
                SunsetRule {
                    brownouts: vec![parse_brownout("2026-12-31T23:30:00Z/PT1H").unwrap()],
                    ..ok()
                },
                "brownout 2026-12-31T23:30:00Z/2027-01-01T00:30:00Z starts before the deprecation",
            ),
            (
                SunsetRule {
                    brownouts: vec![parse_brownout("2027-06-29T23:30:00Z/PT1H").unwrap()],
                    ..ok()
                },
                "ends after the sunset",
            ),
            (
                SunsetRule {
                    deprecation: None,
                    ..ok()
                },
                "needs a deprecation date",
            ),
            (
                SunsetRule {
                    exempt_clients: vec!["".into()],
                    ..ok()
                },
                "exempt client \"\" is empty",
            ),
            (
                SunsetRule {
                    exempt_clients: vec!["x".repeat(200)],
                    ..ok()
                },
                "can never match",
            ),
        ];
        for (rule, want) in cases {
            let selector = rule.selector.clone();
            let e = SunsetPolicy::new(vec![rule]).unwrap_err();
            assert!(e.message.contains(want), "{e}");
            assert_eq!(e.selector, format!("{selector:?}"));
            assert!(e.to_string().starts_with("json_sunset \""), "{e}");
        }
        let e = SunsetPolicy::new(vec![
            ok(),
            SunsetRule {
                selector: "demo.shop.v1.Shop/*".into(),
                ..ok()
            },
        ])
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "json_sunset \"demo.shop.v1.Shop.*\" and \"demo.shop.v1.Shop/*\": two rules with the same selector"
        );
    }

    #[test]
    fn phases_and_next_brownout() {
        let policy = SunsetPolicy::new(vec![shop_rule()]).unwrap();
        let rule = policy.rule_for(GET).unwrap();
        assert_eq!(rule.phase(t("2026-01-01T00:00:00Z")), Phase::Before);
        assert_eq!(rule.phase(t("2027-03-01T00:00:00Z")), Phase::Deprecated);
        assert_eq!(
            rule.phase(t("2027-05-01T10:10:00Z")),
            Phase::Brownout {
                until: t("2027-05-01T11:00:00Z")
            }
        );
        assert_eq!(rule.phase(t("2027-07-01T00:00:00Z")), Phase::Sunset);
        assert!(rule.next_brownout(t("2027-03-01T00:00:00Z")).is_some());
        assert!(rule.next_brownout(t("2027-05-01T10:10:00Z")).is_some());
        assert!(rule.next_brownout(t("2027-05-01T11:00:00Z")).is_none());
    }
}
